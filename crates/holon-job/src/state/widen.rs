//! Widening: a new pending version that allows a drifted call, exactly or by a broader
//! rule with a preview of what it newly allows.

use serde::Serialize;

use super::store::{read_json, write_json};
use super::{Drift, DriftStatus, Job, PREVIEW_EXAMPLES_MAX, StateError};
use crate::call::{self, Aspect, Family};
use crate::mandate::{self, Checker, Evidence, JobMandate};
use crate::redact::redact;

impl Job {
    /// Compiles a new pending version that allows every failing aspect of drift `id`:
    /// the exact subject, or with `pattern` a broader rule. Never activates it.
    pub fn widen(&self, id: u64, pattern: bool) -> Result<Widened, StateError> {
        let _lock = self.lock(true)?;
        let meta = self.meta()?;
        let path = self.path("drift.json");
        let mut drift: Vec<Drift> = read_json(&path)?;
        let record = drift.iter().find(|r| r.id == id).cloned().ok_or_else(|| {
            StateError::Refused(format!("no drift #{id} for `{}`: see `holon job drift {}`", self.name, self.name))
        })?;
        let base_v = meta.pending.or(meta.active).ok_or_else(|| {
            StateError::Refused(format!(
                "`{}` has no version to widen: `holon job propose {}` first",
                self.name, self.name
            ))
        })?;
        let base_text = self.version_text(base_v)?;
        let base = mandate::from_yaml(&base_text).map_err(|e| StateError::Damaged {
            path: self.version_path(base_v).display().to_string(),
            message: e.to_string(),
        })?;
        let mut ev = mandate::evidence_of(&base_text, &base);
        let mut next = base.clone();
        let (mut added, mut added_to, mut kept_exact) = (Vec::new(), Vec::new(), Vec::new());
        for aspect in &record.subjects {
            let rule = if pattern { broader(aspect) } else { exact(aspect) };
            let (list, evl, name) = match aspect {
                Aspect::Tool(_) => (&mut next.tools, &mut ev.tools, "tools"),
                Aspect::Read(_) => (&mut next.paths.read, &mut ev.read, "paths.read"),
                Aspect::Write(_) => (&mut next.paths.write, &mut ev.write, "paths.write"),
                Aspect::Command(_) | Aspect::Opaque(_) => (&mut next.commands, &mut ev.commands, "commands"),
                Aspect::Host(_) => (&mut next.hosts, &mut ev.hosts, "hosts"),
            };
            if pattern && rule == exact(aspect) && !(pattern_free(aspect)) {
                kept_exact.push(rule.clone());
            }
            if !list.contains(&rule) {
                added_to.push(name);
                list.push(rule.clone());
                list.sort();
                let broader = (pattern && rule != exact(aspect)).then(|| format!("a pattern widened from drift #{id}"));
                evl.push(Evidence { value: rule.clone(), evidence: 1, broader });
                added.push(rule);
            }
        }
        if record.families.contains(&Family::Limits) {
            let needed = next.limits.max_writes_per_run.map(|m| m + 1);
            next.limits.max_writes_per_run = needed;
            added.push(needed.map_or("null".into(), |n| n.to_string()));
            added_to.push("limits.max_writes_per_run");
        }
        if added.is_empty() {
            // An empty pending version would only hide the version it replaces.
            return Err(StateError::Refused(format!(
                "drift #{id} is already allowed by v{base_v}: nothing to widen (`holon job show {} --pending` shows the pending version, if any)",
                self.name
            )));
        }
        let header = format!(
            "Mandate for {}: version {base_v} widened for drift #{id}.\nReview every rule. Nothing is enforced until `holon job approve {}`.",
            self.name, self.name
        );
        let text = mandate::to_yaml(&next, &ev, &header);
        let preview = if pattern { self.preview(&base, &next)? } else { Preview::default() };
        let v = self.add_pending(&text)?;
        if let Some(r) = drift.iter_mut().find(|r| r.id == id) {
            r.status = DriftStatus::Widened;
            r.widened_in = Some(v);
        }
        write_json(&path, &drift)?;
        Ok(Widened { version: v, added, added_to, kept_exact, preview, text })
    }

    /// How many past observed calls `next` allows that `base` did not, with examples.
    fn preview(&self, base: &JobMandate, next: &JobMandate) -> Result<Preview, StateError> {
        let (Ok(before), Ok(after)) = (Checker::compile(base), Checker::compile(next)) else {
            return Ok(Preview::default());
        };
        let mut p = Preview::default();
        self.each_observation(|o| {
            let call = o.call.relative_to(&next.workdir);
            if !before.failures(&call).is_empty() && after.failures(&call).is_empty() {
                p.newly_allowed += 1;
                if p.examples.len() < PREVIEW_EXAMPLES_MAX {
                    p.examples.push(redact(&format!("{}: {}", call.tool, call.shown)));
                }
            }
        })?;
        Ok(p)
    }
}

/// Aspects `--pattern` never widens by design (a tool name, an opaque command): their exact
/// rule is the pattern, not a refusal to widen.
fn pattern_free(a: &Aspect) -> bool {
    matches!(a, Aspect::Tool(_) | Aspect::Opaque(_))
}

/// The rule that allows exactly this aspect (a recursive write, `rm -r dir`, as `dir/**`).
fn exact(a: &Aspect) -> String {
    match a {
        Aspect::Read(p) | Aspect::Write(p) if p.ends_with("/**") => exact_recursive(p),
        Aspect::Read(p) | Aspect::Write(p) => globset::escape(p),
        other => other.subject(),
    }
}

/// `dir/**` with `dir` escaped.
fn exact_recursive(p: &str) -> String {
    p.strip_suffix("/**").map_or_else(|| globset::escape(p), |dir| format!("{}/**", globset::escape(dir)))
}

/// A broader rule: the parent directory (`dir/**` for reads, `dir/*.ext` for writes), any
/// flags for a command, every subdomain of the parent domain for a host.
fn broader(a: &Aspect) -> String {
    match a {
        // At the top of the workdir there is no parent to widen to: `**` or `*` would allow
        // every file of the job (a name with an extension gets `*.ext`).
        // Nor at the filesystem's root (`/etc` would widen to everything under `/`).
        Aspect::Read(p) => match p.trim_end_matches("/**").rsplit_once('/') {
            Some((dir, _)) if !dir.is_empty() => call::recursive(dir),
            _ => exact(a),
        },
        Aspect::Write(p) if p.ends_with("/**") => exact_recursive(p),
        Aspect::Write(p) => {
            let (dir, name) = p.rsplit_once('/').map_or((None, p.as_str()), |(d, n)| (Some(d), n));
            let star = name
                .rsplit_once('.')
                .filter(|(stem, _)| !stem.is_empty())
                .map(|(_, e)| format!("*.{}", globset::escape(e)));
            match (dir.filter(|d| !d.is_empty()), star) {
                (Some(d), Some(star)) => format!("{}/{star}", globset::escape(d)),
                (Some(d), None) => format!("{}/*", globset::escape(d)),
                (None, Some(star)) if dir.is_none() => star,
                _ => exact(a),
            }
        }
        // A command of a pinned kind (`rsync`, `git clean`: arguments no path rule can
        // judge) stays exact: `-* -- **` would allow `rsync -a --delete x/ .git/`.
        Aspect::Command(c) if !c.args.is_empty() => exact(a),
        // Any plain switch (`-*` allows only options that take no value and change no
        // file, host or program); the call's other options stay named, and its paths are
        // still judged by the path rules.
        Aspect::Command(c) => {
            let spec = crate::shell::kinds::spec_of(&c.head, c.subcommand.as_deref());
            let kept: Vec<String> = c
                .flags
                .iter()
                .filter(|f| !spec.and_then(|s| s.by_spelling(f)).is_some_and(|o| o.is_plain_switch()))
                .cloned()
                .collect();
            let base = crate::shell::CommandUse { flags: kept, args: vec![], ..c.clone() }.rule();
            format!("{base} -*")
        }
        Aspect::Host(h) => match h.split_once('.') {
            Some((_, parent)) if parent.contains('.') => format!("*.{parent}"),
            _ => h.clone(),
        },
        other => other.subject(),
    }
}

/// What a `--pattern` widening newly allows among past observed calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Preview {
    pub newly_allowed: u64,
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Widened {
    pub version: u32,
    pub added: Vec<String>,
    /// The list each of `added` went to (`paths.write`, `limits.max_writes_per_run`, …).
    pub added_to: Vec<&'static str>,
    /// Rules `--pattern` left exact: no broader rule is safe (a pinned command, a path at
    /// the top of the workdir or of the filesystem).
    pub kept_exact: Vec<String>,
    pub preview: Preview,
    #[serde(skip)]
    pub text: String,
}
