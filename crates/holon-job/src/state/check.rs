//! The fail-closed check of one call: [`decide`] is a pure function of what was read
//! (the call, the job's state, the active mandate, the run's writes, the scope); `check`
//! reads, decides, then records (observations, write counts, drift).

use std::collections::BTreeMap;
use std::fs;

use super::store::{read_json, write_json};
use super::{
    DRIFT_MAX, DRIFT_SUBJECTS_MAX, DRIFT_TEXT_BYTES_MAX, Decision, Drift, DriftStatus, Job, JobMode, RUNS_MAX, Scope,
    StateError,
};
use crate::call::{self, Aspect, EXEMPT_TOOL, Family, ToolCall};
use crate::mandate::{Checker, Failure, JobMandate};
use crate::propose::Observation;
use crate::redact::redact;
use crate::time::Timestamp;

/// What a check may change: `check` records, `assess` changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effects {
    Record,
    None,
}

/// A decision, the approved version (number, mandate) it was made against, and whether the
/// job was observing (an allowed call without a version is not always observe mode: the
/// exempt tool, a person's scope on a job that does not exist).
#[derive(Debug)]
pub struct Judged {
    pub decision: Decision,
    pub active: Option<(u32, JobMandate)>,
    pub observing: bool,
}

impl Job {
    /// The fail-closed check of one call (see the module and docs/job.md).
    pub fn check(&self, call_text: &str, run: Option<&str>, scope: Scope, ask_interactive: bool) -> Decision {
        self.judge(call_text, run, scope, ask_interactive, Effects::Record).decision
    }

    /// `check`, and the approved version the decision was made against (none in observe
    /// mode): `holon job exec` confines the command with that same version.
    pub fn check_for_exec(&self, call_text: &str, run: Option<&str>, scope: Scope) -> Judged {
        self.judge(call_text, run, scope, false, Effects::Record)
    }

    /// The decision `check` would make, changing nothing: no observation, no write
    /// counted, no drift recorded (a hook that hands the call on to `holon job exec`,
    /// which checks it for real).
    pub fn assess(&self, call_text: &str, run: Option<&str>, scope: Scope) -> Decision {
        self.judge(call_text, run, scope, false, Effects::None).decision
    }

    fn judge(&self, call_text: &str, run: Option<&str>, scope: Scope, ask: bool, effects: Effects) -> Judged {
        let call = call::parse(call_text);
        if call.as_ref().is_ok_and(|c| c.tool == EXEMPT_TOOL) {
            return Judged { decision: Decision::allow(), active: None, observing: false };
        }
        let run = match &call {
            Ok(c) => c.run_id(run),
            Err(_) => run.map(str::to_owned),
        };
        let warning = run.is_none().then(|| super::NO_RUN_WARNING.to_owned());
        let run = run.unwrap_or_else(|| super::UNKNOWN_RUN.into());
        let judged = self.decide_run(call, &run, scope, ask, effects);
        Judged { decision: Decision { warning, ..judged.decision }, ..judged }
    }

    /// `check` once the run is known.
    fn decide_run(
        &self,
        call: Result<call::ToolCall, call::CallError>,
        run: &str,
        scope: Scope,
        ask_interactive: bool,
        effects: Effects,
    ) -> Judged {
        let view = match self.meta() {
            Err(e @ StateError::UnknownJob { .. }) => StateView::NoJob(e.to_string()),
            Err(e) => StateView::Unreadable(e.to_string()),
            Ok(m) if m.mode == JobMode::Observe => StateView::Observe,
            Ok(_) => return self.enforce(call, run, scope, ask_interactive, effects),
        };
        let observing = matches!(view, StateView::Observe);
        let decision = match (decide(call.as_ref(), &view, scope), call) {
            (CheckOutcome::Observe, Ok(call)) => {
                if effects == Effects::Record {
                    // Observe mode never blocks, not even on its own errors.
                    let here = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
                    let _ = self.observe(&[Observation::of(call, Some(run), &here)]);
                }
                Decision::allow()
            }
            (CheckOutcome::Block { family, reason, .. }, _) => Decision::block(family, reason),
            _ => Decision::allow(),
        };
        Judged { decision, active: None, observing }
    }

    /// Enforce mode: everything is read and the write count updated under the lock.
    fn enforce(
        &self,
        call: Result<ToolCall, call::CallError>,
        run: &str,
        scope: Scope,
        ask_interactive: bool,
        effects: Effects,
    ) -> Judged {
        let lock = self.lock(effects == Effects::Record);
        let path = self.path("writes.json");
        let state_dir = fs::canonicalize(self.root()).ok().map(|p| p.display().to_string());
        let read = lock.as_ref().map_err(|e| Unusable::Lock(e.to_string())).and_then(|_| {
            let meta = self.meta()?;
            let active = self.active(&meta)?.map(|(v, _, m)| (v, m));
            let counts: BTreeMap<String, (u64, String)> = read_json(&path)?;
            Ok((active, counts))
        });
        let (view, mut counts, version) = match read {
            Ok((Some((v, m)), counts)) => {
                let written = counts.get(run).map_or(0, |(n, _)| *n);
                let view = StateView::Enforce {
                    mandate: Ok(Box::new(m)),
                    written_in_run: written,
                    run: run.to_owned(),
                    state_dir,
                };
                (view, counts, Some(v))
            }
            Ok((None, counts)) => (
                StateView::Enforce {
                    mandate: Err(Unusable::NoActiveVersion),
                    written_in_run: 0,
                    run: run.to_owned(),
                    state_dir: None,
                },
                counts,
                None,
            ),
            Err(e) => (
                StateView::Enforce { mandate: Err(e), written_in_run: 0, run: run.to_owned(), state_dir: None },
                BTreeMap::new(),
                None,
            ),
        };
        let outcome = decide(call.as_ref(), &view, scope);
        // The mandate the decision read, taken back out of the view (`exec` confines with it).
        let active = match (version, view) {
            (Some(v), StateView::Enforce { mandate: Ok(m), .. }) => Some((v, *m)),
            _ => None,
        };
        if effects == Effects::None {
            let decision = match outcome {
                CheckOutcome::Block { family, reason, .. } => Decision::block(family, reason),
                _ => Decision::allow(),
            };
            return Judged { decision, active, observing: false };
        }
        let decision = match outcome {
            CheckOutcome::Allow { writes } if writes > 0 => {
                let done = counts.get(run).map_or(0, |(n, _)| *n);
                counts.insert(run.to_owned(), (done + writes, Timestamp::now().to_string()));
                if counts.len() > RUNS_MAX {
                    // Drop the run written longest ago.
                    if let Some(oldest) = counts.iter().min_by(|a, b| a.1.1.cmp(&b.1.1)).map(|(k, _)| k.clone()) {
                        counts.remove(&oldest);
                    }
                }
                match write_json(&path, &counts) {
                    Ok(()) => Decision::allow(),
                    Err(e) => {
                        drop(lock);
                        let d = Decision::block(Family::Integrity, format!("evaluation failed: {e}"));
                        self.record_drift(call.as_ref().ok(), run, d, &[], scope, false)
                    }
                }
            }
            CheckOutcome::Allow { .. } | CheckOutcome::Observe => Decision::allow(),
            CheckOutcome::Block { family, reason, failures } => {
                drop(lock);
                let d = Decision::block(family, reason);
                let ask = ask_interactive && !failures.is_empty();
                self.record_drift(call.as_ref().ok(), run, d, &failures, scope, ask)
            }
        };
        Judged { decision, active, observing: false }
    }

    fn record_drift(
        &self,
        call: Option<&ToolCall>,
        run: &str,
        mut d: Decision,
        failures: &[Failure],
        scope: Scope,
        ask: bool,
    ) -> Decision {
        let escalate = ask && scope == Scope::Interactive;
        let families: Vec<Family> = {
            let mut f: Vec<Family> = failures.iter().map(|f| f.family).collect();
            f.extend(d.family);
            f.sort();
            f.dedup();
            f
        };
        d.families = families.clone();
        let record = |id| Drift {
            id,
            time: Timestamp::now().to_string(),
            run: clip(&redact(run)),
            family: d.family.unwrap_or(Family::Integrity),
            families: families.clone(),
            call: clip(&redact(&call.map_or_else(String::new, |c| format!("{}: {}", c.tool, c.shown)))),
            reason: clip(&redact(d.reason.as_deref().unwrap_or_default())),
            status: if escalate { DriftStatus::Escalated } else { DriftStatus::Open },
            subjects: failures
                .iter()
                .filter_map(|f| f.aspect.clone())
                .map(Aspect::redacted)
                .filter(|a| a.subject().len() <= DRIFT_TEXT_BYTES_MAX)
                .take(DRIFT_SUBJECTS_MAX)
                .collect(),
            widened_in: None,
        };
        // Recording is best effort: the call is blocked whether or not it is recorded.
        if let Ok(_lock) = self.lock(true)
            && let Ok(mut meta) = self.meta()
        {
            let path = self.path("drift.json");
            let mut drift: Vec<Drift> = match read_json(&path) {
                Ok(d) => d,
                // Damaged history is set aside for a person to read, never overwritten.
                Err(_) => {
                    let aside = self.path(&format!("drift.json.damaged-{}", Timestamp::now().unix()));
                    let _ = fs::rename(&path, aside);
                    Vec::new()
                }
            };
            let id = meta.next_drift_id.max(drift.last().map_or(1, |r| r.id + 1));
            meta.next_drift_id = id + 1;
            drift.push(record(id));
            let excess = drift.len().saturating_sub(DRIFT_MAX);
            drift.drain(..excess);
            if write_json(&self.path("meta.json"), &meta).is_ok() && write_json(&path, &drift).is_ok() {
                d.drift_id = Some(id);
            }
        }
        if escalate {
            d.decision = "ask";
        }
        d
    }
}

/// At most [`DRIFT_TEXT_BYTES_MAX`] bytes of `text`, cut at a character boundary.
fn clip(text: &str) -> String {
    if text.len() <= DRIFT_TEXT_BYTES_MAX {
        return text.to_owned();
    }
    let mut end = DRIFT_TEXT_BYTES_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", text.get(..end).unwrap_or_default())
}

fn families(failures: &[Failure]) -> Vec<&'static str> {
    let mut f: Vec<&str> = failures.iter().map(|f| f.family.as_str()).collect();
    f.sort();
    f.dedup();
    f
}

/// Why enforce mode has no mandate to check a call against (the call is then blocked).
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    #[error("enforce mode without an active version")]
    NoActiveVersion,
    /// The state lock could not be taken (its error is kept by the caller).
    #[error("{0}")]
    Lock(String),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Active(#[from] super::versions::ActiveError),
}

/// What the job's state says, as read before deciding.
#[derive(Debug)]
pub enum StateView {
    /// The job was never started (or its directory is wrong): the message says so.
    NoJob(String),
    /// The state exists but cannot be read or trusted.
    Unreadable(String),
    Observe,
    /// Enforce mode: the active mandate (or why it cannot be used: missing, tampered,
    /// damaged) and what the run already wrote.
    Enforce {
        mandate: Result<Box<super::mandate::JobMandate>, Unusable>,
        written_in_run: u64,
        run: String,
        /// The state directory, absolute: a call may not write into its own leash.
        state_dir: Option<String>,
    },
}

/// The decision, before anything is recorded.
#[derive(Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// Allowed; `writes` files are counted against the run's budget.
    Allow { writes: u64 },
    /// Observe mode: allowed, and the call is recorded.
    Observe,
    /// Blocked (or escalated, in an interactive scope that asks), with every failing
    /// aspect when the mandate could be evaluated.
    Block { family: Family, reason: String, failures: Vec<Failure> },
}

/// `path` (relative to `workdir` when it is not absolute), absolute when it can be told.
fn absolute(path: &str, workdir: &str) -> String {
    if path.starts_with('/') || workdir.is_empty() {
        return call::normalize_path(path, "");
    }
    call::normalize_path(&format!("{}/{path}", workdir.trim_end_matches('/')), "")
}

/// Whether `path` is `dir` or below it (both absolute and normal).
fn inside(path: &str, dir: &str) -> bool {
    dir == "/" || path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

/// `path` with every symbolic link resolved: its deepest existing ancestor canonicalised,
/// the rest appended (a file not written yet has no link of its own to follow).
fn resolved(path: &str) -> String {
    let p = std::path::Path::new(path);
    for ancestor in p.ancestors() {
        if let Ok(real) = fs::canonicalize(ancestor) {
            let rest = p.strip_prefix(ancestor).unwrap_or(std::path::Path::new(""));
            return call::normalize_path(&real.join(rest).display().to_string(), "");
        }
    }
    path.to_owned()
}

/// Whether writing `path` (relative to `workdir`) could change the job's state in
/// `state_dir`: the path or, for a recursive subject (`dir/**`), anything below it,
/// compared as written and with symbolic links resolved on both sides.
fn writes_state(path: &str, workdir: &str, state_dir: &str) -> bool {
    let (subject, below) = match path.strip_suffix("/**") {
        Some("") => ("/", true),
        Some(dir) => (dir, true),
        None if path == "**" => (".", true),
        None => (path, false),
    };
    let lexical = absolute(subject, workdir);
    let states = [state_dir.to_owned(), resolved(state_dir)];
    [resolved(&lexical), lexical].iter().any(|p| states.iter().any(|s| inside(p, s) || (below && inside(s, p))))
}

fn block(reason: String) -> CheckOutcome {
    CheckOutcome::Block { family: Family::Integrity, reason, failures: Vec::new() }
}

/// The fail-closed decision as a pure function of what was read. Whatever cannot be
/// decided blocks, except where a person is known to be present (interactive scope) and
/// there is no state to enforce, and in observe mode, which never blocks.
pub fn decide(call: Result<&ToolCall, &call::CallError>, state: &StateView, scope: Scope) -> CheckOutcome {
    let person = scope == Scope::Interactive;
    match (state, call) {
        (StateView::Observe, _) => CheckOutcome::Observe,
        (StateView::NoJob(_) | StateView::Unreadable(_), _) if person => CheckOutcome::Allow { writes: 0 },
        (StateView::NoJob(message), _) => block(message.clone()),
        (StateView::Unreadable(e), _) => block(format!("the job's mode cannot be read ({e})")),
        (StateView::Enforce { .. }, Err(e)) => block(format!("the call cannot be evaluated: {e}")),
        (StateView::Enforce { mandate: Err(e), .. }, Ok(_)) => block(format!("evaluation failed: {e}")),
        (StateView::Enforce { mandate: Ok(m), written_in_run, run, state_dir }, Ok(call)) => {
            let checker = match Checker::compile(m) {
                Ok(c) => c,
                Err(e) => return block(format!("evaluation failed: {e}")),
            };
            let call = call.clone().relative_to(&m.workdir);
            let mut failures = checker.failures(&call);
            if let Some(dir) = state_dir {
                failures.extend(call.aspects.iter().filter_map(|a| match a {
                    Aspect::Write(p) if writes_state(p, &m.workdir, dir) => Some(Failure {
                        family: Family::Integrity,
                        aspect: None,
                        reason: format!("writing `{p}` would change the job's own state ({dir})"),
                    }),
                    _ => None,
                }));
            }
            let writes = call.writes() as u64;
            if let Some(max) = checker.max_writes_per_run.filter(|_| writes > 0)
                && written_in_run.saturating_add(writes) > max
            {
                failures.push(Failure {
                    family: Family::Limits,
                    aspect: None,
                    reason: format!(
                        "this call makes {writes} write(s) and run `{run}` has made {written_in_run} of its {max} (limits.max_writes_per_run)"
                    ),
                });
            }
            match failures.first() {
                None => CheckOutcome::Allow { writes },
                Some(first) => {
                    let reason = failures.iter().map(|f| f.reason.clone()).collect::<Vec<_>>().join("; ");
                    CheckOutcome::Block {
                        family: first.family,
                        reason: format!("{reason} [{}]", families(&failures).join(", ")),
                        failures,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mandate::{JobLimits, JobMandate, PathRules};
    use crate::state::ActiveError;

    fn mandate() -> Box<JobMandate> {
        Box::new(JobMandate {
            mandate: 1,
            job: "j".into(),
            workdir: "/w".into(),
            observed_runs: 1,
            tools: vec!["terminal".into()],
            paths: PathRules { read: vec![".".into()], write: vec!["out/*.txt".into()] },
            commands: vec!["ls".into(), "echo".into()],
            hosts: vec![],
            limits: JobLimits { max_writes_per_run: Some(1) },
            sandbox: None,
        })
    }

    fn enforce(m: Result<Box<JobMandate>, Unusable>, written: u64) -> StateView {
        StateView::Enforce { mandate: m, written_in_run: written, run: "r".into(), state_dir: Some("/w/.holon".into()) }
    }

    fn blocks(o: &CheckOutcome) -> bool {
        matches!(o, CheckOutcome::Block { .. })
    }

    /// Every state × every scope × a good call, a bad call and an unparseable one.
    #[test]
    fn the_failure_matrix() {
        let ls = call::parse(r#"{"tool":"terminal","args":{"command":"ls"}}"#);
        let rm = call::parse(r#"{"tool":"terminal","args":{"command":"rm -rf /"}}"#);
        let write = call::parse(r#"{"tool":"terminal","args":{"command":"echo x > out/a.txt"}}"#);
        let garbage = call::parse("{not json");
        assert!(garbage.is_err());
        let scopes = [Scope::Cron, Scope::Unknown, Scope::Interactive];
        // (state, which calls block per scope: [cron, unknown, interactive] for ls, rm, garbage)
        type Row = (&'static str, fn() -> StateView, [[bool; 3]; 3]);
        let rows: [Row; 7] = [
            ("missing", || StateView::NoJob("no job".into()), [[true, true, false]; 3]),
            ("damaged", || StateView::Unreadable("bad json".into()), [[true, true, false]; 3]),
            ("observe", || StateView::Observe, [[false; 3]; 3]),
            ("tampered", || enforce(Err(Unusable::Active(ActiveError::NoApproval)), 0), [[true; 3]; 3]),
            ("no active version", || enforce(Err(Unusable::NoActiveVersion), 0), [[true; 3]; 3]),
            ("enforcing", || enforce(Ok(mandate()), 0), [[false; 3], [true; 3], [true; 3]]),
            ("budget spent", || enforce(Ok(mandate()), 1), [[false; 3], [true; 3], [true; 3]]),
        ];
        for (name, state, want) in rows {
            for (c, call) in [&ls, &rm, &garbage].into_iter().enumerate() {
                for (s, scope) in scopes.into_iter().enumerate() {
                    let got = decide(call.as_ref(), &state(), scope);
                    let expected = want.get(c).and_then(|w| w.get(s)).copied().unwrap_or(true);
                    assert_eq!(blocks(&got), expected, "{name} / call {c} / {scope:?}: {got:?}");
                }
            }
        }
        // The write budget: a write passes with budget left, blocks when spent.
        assert_eq!(decide(write.as_ref(), &enforce(Ok(mandate()), 0), Scope::Cron), CheckOutcome::Allow { writes: 1 });
        assert!(blocks(&decide(write.as_ref(), &enforce(Ok(mandate()), 1), Scope::Cron)));
    }
}
