//! Observations compiled into a job mandate. The result depends only on the *set* of
//! observations (counts and maxima), never on their order, so the YAML is byte-identical
//! for the same runs observed in any order.
//!
//! Generalisation rules (conservative: each can only turn several observed subjects into
//! one rule that covers exactly that kind of subject):
//! 1. A recursive search of `dir` is the read rule `dir/**`; an exact read under a
//!    proposed `dir/**` is folded into it (its count added).
//! 2. A read of a path some proposed write rule matches is dropped (writes may be read).
//! 3. Per-run file names: writes in one directory with one extension, with at least two
//!    distinct names, seen in at least two runs, every name containing a digit (dates,
//!    sequence numbers) become `dir/*.ext`.
//! 4. Uses of one command (head and subcommand) merge into one rule with the union of
//!    their flags and environment names (a call may use any subset).
//! 5. Everything else stays exact; literal paths are glob-escaped, except a recursive
//!    write (`rm -r dir`), which stays `dir/**` beside `dir`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::call::{Aspect, EXEMPT_TOOL, ToolCall};
use super::mandate::{Evidence, Evidenced, JobLimits, JobMandate, PathRules};
use super::shell::CommandUse;

/// One observed call with the run it belongs to and the workdir its paths are relative to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    pub run: String,
    pub workdir: String,
    pub call: ToolCall,
}

impl Observation {
    /// An observed call: its run is `run`, else the call's own `run` or `session_id`,
    /// else `unknown`; its paths are made relative to the call's `cwd`, else `workdir`.
    pub fn of(call: ToolCall, run: Option<&str>, workdir: &str) -> Observation {
        let run = call.run_id(run);
        let workdir = call.cwd.clone().unwrap_or_else(|| workdir.to_owned());
        // Observations are what reaches disk: secrets are masked first.
        Observation {
            run: run.unwrap_or_else(|| super::call::UNKNOWN_RUN.into()),
            call: call.relative_to(&workdir).redacted(),
            workdir,
        }
    }
}

fn count<K: Ord>(map: &mut BTreeMap<K, u64>, key: K, n: u64) {
    *map.entry(key).or_insert(0) += n;
}

/// Rules with their counts, and for the rules that allow more than was observed, how
/// much more (rule text to note).
fn evidence(map: &BTreeMap<String, u64>, broader: &BTreeMap<String, String>) -> (Vec<String>, Vec<Evidence>) {
    let values: Vec<String> = map.keys().cloned().collect();
    let ev = map
        .iter()
        .map(|(v, n)| Evidence { value: v.clone(), evidence: *n, broader: broader.get(v).cloned() })
        .collect();
    (values, ev)
}

/// How much more a merged command rule allows than its observed uses: any subset of its
/// `options` flags and variable names, of which `seen` distinct subsets were observed.
fn merged_note(options: usize, seen: usize) -> Option<String> {
    // 2^options subsets; past 2^63 it is simply "more than was seen".
    let allowed = u32::try_from(options).ok().and_then(|k| 1u64.checked_shl(k)).unwrap_or(u64::MAX);
    (u64::try_from(seen).unwrap_or(u64::MAX) < allowed).then(|| {
        // Leaving a flag out can matter as much as adding one (`--dry-run`).
        if options <= 20 {
            format!("any subset of these flags and variables may be used ({allowed} combinations), {seen} seen")
        } else {
            format!("any subset of these flags and variables may be used (2^{options} combinations), {seen} seen")
        }
    })
}

/// Whether `path` lies under the recursive rule `rule` (`dir/**` or `**`).
fn under(rule: &str, path: &str) -> bool {
    match rule.strip_suffix("/**") {
        // Strictly below: `dir/**` does not match `dir` itself.
        Some(dir) => path.starts_with(&format!("{dir}/")),
        None => rule == "**" && !path.starts_with('/') && !path.starts_with("../") && path != "..",
    }
}

/// The header comment of a proposal.
pub fn header(job: &str, runs: u64) -> String {
    format!(
        "Mandate for {job}: generated from {runs} observed run(s).\nReview every rule. Nothing is enforced until `holon job approve {job}`."
    )
}

type UseKey = (String, Option<String>, Vec<String>);
/// The flags and variable names of one observed use.
type Options = (Vec<String>, Vec<String>);

/// Observations aggregated one at a time (the log is streamed, never held whole).
#[derive(Debug, Default)]
pub struct Proposal {
    runs: BTreeSet<String>,
    workdirs: BTreeMap<String, u64>,
    tools: BTreeMap<String, u64>,
    reads: BTreeMap<String, u64>,
    writes: BTreeMap<String, (u64, BTreeSet<String>)>,
    /// Per use (head, subcommand, pinned arguments): the merged rule, its count and the
    /// distinct option sets observed (to say when the merge allows more).
    commands: BTreeMap<UseKey, (CommandUse, u64, BTreeSet<Options>)>,
    opaque: BTreeMap<String, u64>,
    hosts: BTreeMap<String, u64>,
    writes_per_run: BTreeMap<String, u64>,
}

impl Proposal {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    pub fn add(&mut self, o: &Observation) {
        if o.call.tool == EXEMPT_TOOL {
            return;
        }
        self.runs.insert(o.run.clone());
        count(&mut self.workdirs, o.workdir.clone(), 1);
        // Counted as `check` counts them against the budget.
        let writes = o.call.writes() as u64;
        if writes > 0 {
            count(&mut self.writes_per_run, o.run.clone(), writes);
        }
        for a in &o.call.aspects {
            match a {
                Aspect::Tool(t) => count(&mut self.tools, t.clone(), 1),
                Aspect::Read(p) => count(&mut self.reads, p.clone(), 1),
                Aspect::Write(p) => {
                    let e = self.writes.entry(p.clone()).or_insert((0, BTreeSet::new()));
                    e.0 += 1;
                    e.1.insert(o.run.clone());
                }
                // Pinned arguments are part of what a use is: one rule per argument list.
                Aspect::Command(c) => {
                    let e = self.commands.entry((c.head.clone(), c.subcommand.clone(), c.args.clone())).or_insert_with(
                        || (CommandUse { flags: vec![], env: vec![], ..c.clone() }, 0, BTreeSet::new()),
                    );
                    e.0.flags.extend(c.flags.iter().cloned());
                    e.0.env.extend(c.env.iter().cloned());
                    e.1 += 1;
                    // A use's flags and names come sorted and unique (`shell::segment`).
                    e.2.insert((c.flags.clone(), c.env.clone()));
                }
                Aspect::Opaque(t) => count(&mut self.opaque, format!("={t}"), 1),
                Aspect::Host(h) => count(&mut self.hosts, h.clone(), 1),
            }
        }
    }

    /// The mandate and its evidence.
    pub fn finish(self, job: &str) -> (JobMandate, Evidenced) {
        // The most common workdir; ties go to the smallest, so order does not matter.
        let workdir = self.workdirs.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(w, _)| w.to_string());
        let (write_rules, write_broader) = generalise_writes(&self.writes);
        let write_globs: Vec<globset::GlobMatcher> = write_rules
            .keys()
            .filter_map(|r| globset::GlobBuilder::new(r).literal_separator(true).build().ok())
            .map(|g| g.compile_matcher())
            .collect();
        let recursive: Vec<String> = self.reads.keys().filter(|p| p.ends_with("**")).cloned().collect();
        let mut read_rules: BTreeMap<String, u64> = BTreeMap::new();
        for (path, n) in &self.reads {
            // The widest recursive read containing this one (`**` holds `src/**` and `.git/**`).
            let outer = recursive.iter().filter(|r| *r != path && under(r, path)).min_by_key(|r| r.len());
            if let Some(r) = outer {
                count(&mut read_rules, r.clone(), *n);
            } else if path.ends_with("**") {
                count(&mut read_rules, path.clone(), *n);
            } else if let Some(r) =
                recursive.iter().find(|r| under(r, path) || r.strip_suffix("/**") == Some(path.as_str()))
            {
                // A listing of `dir` is allowed by `dir/**` (its every entry is).
                count(&mut read_rules, r.clone(), *n);
            } else if write_globs.iter().any(|g| g.is_match(path)) {
                // Rule 2: already readable through a write rule.
            } else {
                count(&mut read_rules, globset::escape(path), *n);
            }
        }
        let mut command_rules: BTreeMap<String, u64> = self.opaque;
        let mut command_broader = BTreeMap::new();
        for (mut rule, n, seen) in self.commands.into_values() {
            rule.flags.sort();
            rule.flags.dedup();
            rule.env.sort();
            rule.env.dedup();
            let text = rule.rule();
            if let Some(note) = merged_note(rule.flags.len() + rule.env.len(), seen.len()) {
                command_broader.insert(text.clone(), note);
            }
            count(&mut command_rules, text, n);
        }
        let none = BTreeMap::new();
        let (tools_v, tools_e) = evidence(&self.tools, &none);
        let (read_v, read_e) = evidence(&read_rules, &none);
        let (write_v, write_e) = evidence(&write_rules, &write_broader);
        let (cmd_v, cmd_e) = evidence(&command_rules, &command_broader);
        let (host_v, host_e) = evidence(&self.hosts, &none);
        let mandate = JobMandate {
            mandate: 1,
            job: job.to_owned(),
            workdir: workdir.unwrap_or_default(),
            observed_runs: self.runs.len() as u64,
            tools: tools_v,
            paths: PathRules { read: read_v, write: write_v },
            commands: cmd_v,
            hosts: host_v,
            limits: JobLimits { max_writes_per_run: Some(self.writes_per_run.values().copied().max().unwrap_or(0)) },
            sandbox: None,
        };
        let ev = Evidenced { tools: tools_e, read: read_e, write: write_e, commands: cmd_e, hosts: host_e };
        (mandate, ev)
    }
}

/// Compiles observations into a mandate and its evidence.
pub fn propose(job: &str, observations: &[Observation]) -> (JobMandate, Evidenced) {
    let mut p = Proposal::default();
    for o in observations {
        p.add(o);
    }
    p.finish(job)
}

/// Rule 3 (per-run file names) and rule 5 (exact, escaped) for writes: the rules with
/// their counts, and a note for each `*` rule (it allows names never written).
fn generalise_writes(
    writes: &BTreeMap<String, (u64, BTreeSet<String>)>,
) -> (BTreeMap<String, u64>, BTreeMap<String, String>) {
    // (dir, ext) -> names with their counts and runs
    type Group<'a> = BTreeMap<&'a str, (u64, BTreeSet<&'a str>)>;
    // `dir` is `None` for a bare file name, `Some("")` for a file in `/`.
    let mut groups: BTreeMap<(Option<&str>, Option<&str>), Group> = BTreeMap::new();
    let (mut out, mut broader) = (BTreeMap::new(), BTreeMap::new());
    // Recursive writes (`rm -r dir`, `mv dir x`): `dir/**`, decided once `dir` is.
    let mut below: Vec<(&str, u64)> = Vec::new();
    // Per-run names in a directory: the `dir/*.ext` rule each became.
    let mut generalised: BTreeMap<String, String> = BTreeMap::new();
    for (path, (n, runs)) in writes {
        if let Some(dir) = path.strip_suffix("/**") {
            below.push((dir, *n));
            continue;
        }
        if path == "**" {
            count(&mut out, path.clone(), *n);
            continue;
        }
        let (dir, name) = match path.rsplit_once('/') {
            Some((d, n)) => (Some(d), n),
            None => (None, path.as_str()),
        };
        let ext = name.rsplit_once('.').map(|(_, e)| e).filter(|e| !e.is_empty());
        groups.entry((dir, ext)).or_default().insert(name, (*n, runs.iter().map(String::as_str).collect()));
    }
    for ((dir, ext), names) in groups {
        let runs: BTreeSet<&str> = names.values().flat_map(|(_, r)| r.iter().copied()).collect();
        let per_run =
            names.len() >= 2 && runs.len() >= 2 && names.keys().all(|n| n.bytes().any(|b| b.is_ascii_digit()));
        if per_run {
            let star = match ext {
                Some(e) => format!("*.{}", globset::escape(e)),
                None => "*".to_owned(),
            };
            let rule = match dir {
                Some(d) => format!("{}/{star}", globset::escape(d)),
                None => star,
            };
            let note =
                format!("`*` stands for any file name; {} names were written in {} runs", names.len(), runs.len());
            broader.insert(rule.clone(), note);
            // Below per-run names in a directory, per-run trees (`out/run-*/**`); never at
            // the top of the workdir, where `*/**` would be every tree of the job.
            if let Some(d) = dir {
                for name in names.keys() {
                    generalised.insert(format!("{d}/{name}"), rule.clone());
                }
            }
            count(&mut out, rule, names.values().map(|(n, _)| n).sum());
        } else {
            for (name, (n, _)) in names {
                let path = match dir {
                    Some(d) => format!("{d}/{name}"),
                    None => name.to_owned(),
                };
                count(&mut out, globset::escape(&path), n);
            }
        }
    }
    for (dir, n) in below {
        let rule = match generalised.get(dir) {
            // As broad as the rule of the names it lies below, and marked the same way.
            Some(names_rule) => {
                let rule = format!("{names_rule}/**");
                if let Some(note) = broader.get(names_rule).cloned() {
                    broader.insert(rule.clone(), note);
                }
                rule
            }
            None => format!("{}/**", globset::escape(dir)),
        };
        count(&mut out, rule, n);
    }
    (out, broader)
}
