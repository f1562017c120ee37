//! The Leash Line: `holon job status JOB`, one track per rule family.
//!
//! ```text
//! MANDATE ▸ nightly-triage  v1 sha256:c42f9e67f970  ENFORCING
//!   tools    ▕▃▃▃▃██▃▃┃ 4 allowed
//!   paths    ▕██▅▅▅▅──┃ ▼#2 ▼#3  3 allowed · 2 blocked
//! ```
//! Bars are the allowed rules (before the first approval, the pending version's rules),
//! height from evidence (relative to the family's largest); `◆N` counts rules pending
//! approval, and nothing is called allowed until a version was approved; `▼#id` notches are blocked calls, `△#id` blocked
//! calls later widened. Truecolor on a terminal; plain text under `NO_COLOR`, `--no-color`
//! or a pipe (the same characters without escapes).

use super::call::Family;
use super::mandate::Evidence;
use super::redact::{printable, redact};
use super::state::{DriftStatus, JobMode, Overview};

/// Cells of one track.
pub const TRACK_CELLS: usize = 8;
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

struct Paint {
    color: bool,
}

impl Paint {
    fn rgb(&self, (r, g, b): (u8, u8, u8), text: &str) -> String {
        if self.color { format!("\x1b[38;2;{r};{g};{b}m{text}\x1b[0m") } else { text.to_owned() }
    }
    fn bold(&self, text: &str) -> String {
        if self.color { format!("\x1b[1m{text}\x1b[0m") } else { text.to_owned() }
    }
    fn dim(&self, text: &str) -> String {
        if self.color { format!("\x1b[2m{text}\x1b[0m") } else { text.to_owned() }
    }
}

const GREEN: (u8, u8, u8) = (94, 214, 136);
const RED: (u8, u8, u8) = (239, 83, 80);
const YELLOW: (u8, u8, u8) = (250, 204, 21);

fn level(evidence: u64, max: u64) -> char {
    if max == 0 {
        return '▁';
    }
    // 1..=8: the largest evidence is a full block, a third of it about `▃`.
    // A float-to-int `as` saturates; the value is 0..=7 here (and `min(7)` below).
    #[allow(clippy::cast_possible_truncation)]
    let idx = ((evidence as f64 / max as f64) * 7.0).round() as usize;
    LEVELS.get(idx.min(7)).copied().unwrap_or('█')
}

/// The track of one family: `cells / rules` cells per rule, the rest `─`.
pub fn track(rules: &[Evidence]) -> String {
    let max = rules.iter().map(|r| r.evidence).max().unwrap_or(0);
    let per = if rules.is_empty() { 0 } else { (TRACK_CELLS / rules.len()).max(1) };
    let mut cells: String = rules
        .iter()
        .take(TRACK_CELLS)
        .flat_map(|r| std::iter::repeat_n(level(r.evidence, max), per))
        .take(TRACK_CELLS)
        .collect();
    while cells.chars().count() < TRACK_CELLS {
        cells.push('─');
    }
    cells
}

/// The top rules by evidence (ties in byte order), `value Nx`.
fn top(rules: &[Evidence], n: usize) -> String {
    let mut sorted: Vec<&Evidence> = rules.iter().collect();
    sorted.sort_by(|a, b| b.evidence.cmp(&a.evidence).then(a.value.cmp(&b.value)));
    sorted.iter().take(n).map(|r| format!("{} {}x", printable(&r.value), r.evidence)).collect::<Vec<_>>().join(", ")
}

/// Renders the Leash Line.
pub fn render(o: &Overview, color: bool) -> String {
    let p = Paint { color };
    let mut out = String::new();
    let state = match (o.meta.mode, o.meta.pending) {
        _ if o.integrity_error.is_some() => p.rgb(RED, "BLOCKING (integrity)"),
        (JobMode::Enforce, _) => p.rgb(GREEN, "ENFORCING"),
        (JobMode::Observe, Some(_)) => p.rgb(YELLOW, "PENDING APPROVAL"),
        (JobMode::Observe, None) => p.dim("OBSERVING"),
    };
    let version = o.version.map_or("no version".to_owned(), |v| format!("v{v}"));
    let sha = o.sha256.as_deref().map(|s| format!(" sha256:{}", s.get(..12).unwrap_or(s))).unwrap_or_default();
    out.push_str(&format!("{} ▸ {}  {version}{sha}  {state}\n", p.bold("MANDATE"), p.bold(&o.job)));
    let ev = &o.evidence;
    let paths: Vec<Evidence> = ev.read.iter().chain(&ev.write).cloned().collect();
    let families: [(Family, &str, &[Evidence]); 4] = [
        (Family::Tools, "tools", &ev.tools),
        (Family::Paths, "paths", &paths),
        (Family::Commands, "commands", &ev.commands),
        (Family::Hosts, "hosts", &ev.hosts),
    ];
    for (family, name, rules) in families {
        let mut line = format!("  {name:<8} ▕{}┃", p.rgb(GREEN, &track(rules)));
        let mut blocked = 0;
        let mut notches = Vec::new();
        for d in
            o.drift.iter().filter(|d| d.family == family || (family == Family::Paths && d.family == Family::Limits))
        {
            blocked += 1;
            // Widened only once a version allowing it was approved: until then it is
            // still blocked.
            let approved = d.widened_in.is_some_and(|v| o.meta.history.contains(&v));
            notches.push(match d.status {
                DriftStatus::Widened if approved => p.rgb(YELLOW, &format!("△#{}", d.id)),
                _ => p.rgb(RED, &format!("▼#{}", d.id)),
            });
        }
        if !notches.is_empty() {
            line.push_str(&format!(" {} ", notches.join(" ")));
        }
        // Nothing is allowed before the first approval: the bars are then the pending
        // version's rules, counted as pending only.
        let mut counts = Vec::new();
        if o.meta.active.is_some() {
            counts.push(format!("{} allowed", rules.len()));
        }
        if blocked > 0 {
            counts.push(format!("{blocked} blocked"));
        }
        if let Some(n) = o.pending_rules.get(&family).filter(|n| **n > 0) {
            counts.push(p.rgb(YELLOW, &format!("◆{n} pending")));
        }
        if counts.is_empty() && o.meta.active.is_none() {
            counts.push(p.dim("nothing allowed yet"));
        }
        line.push_str(&format!(" {}", counts.join(" · ")));
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for (name, rules) in [("tools", &ev.tools[..]), ("paths", &paths[..]), ("commands", &ev.commands[..])] {
        if !rules.is_empty() {
            out.push_str(&format!("  {}\n", p.dim(&format!("{name}: {}", top(rules, 3)))));
        }
    }
    let mut tail = format!("  {} run(s) observed", o.observed_runs);
    if let Some(last) = o.drift.last() {
        // A call that could not be read has no text: say why it was blocked instead.
        let what = if last.call.is_empty() {
            format!("(the call could not be read) {}", last.reason)
        } else {
            last.call.clone()
        };
        tail.push_str(&format!(" · last block #{}: {}", last.id, printable(&redact(&what))));
    }
    if let Some(e) = &o.integrity_error {
        tail.push_str(&format!("\n  {}", p.rgb(RED, &printable(e))));
    }
    out.push_str(&tail);
    out.push('\n');
    out
}
