//! `holon job <verb> <job>`: learn a scheduled agent job's tool calls, approve them by
//! hash, enforce fail-closed, and review drift (docs/job.md).

use std::io::{BufRead, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use holon::job::call::{self, CALL_BYTES_MAX};
use holon::job::propose::Observation;
use holon::job::redact::printable;
use holon::job::state::{self, Job, Which};
use serde_json::json;

use super::exit;
use super::job_env::{job, run_of, scope_of};
use super::out::{errln, out, outln};
use super::style::Style;

/// Most lines one `observe` reads.
pub(super) const OBSERVE_LINES_MAX: usize = 1_000_000;

/// Opens `path` for reading only if it is a regular file: a FIFO or a device would block
/// or never end (calls from a pipe come on standard input instead).
fn regular_file(path: &Path) -> anyhow::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("reading {}", path.display()))?;
    if !f.metadata().with_context(|| format!("reading {}", path.display()))?.is_file() {
        anyhow::bail!("{} is not a regular file: pipe the calls on standard input instead", path.display());
    }
    Ok(f)
}

/// Never fails the caller: observe mode must not block a run, even on its own errors.
fn observe(
    state_dir: Option<PathBuf>,
    name: &str,
    run: Option<String>,
    input: Option<&Path>,
    workdir: Option<String>,
) -> anyhow::Result<u8> {
    let result = (|| -> anyhow::Result<(usize, usize, usize)> {
        let job = job(state_dir, name)?;
        let reader: Box<dyn BufRead> = match input {
            // A file, not a FIFO or a device (pipe calls in on standard input instead).
            Some(p) => Box::new(std::io::BufReader::new(regular_file(p)?)),
            None => Box::new(std::io::BufReader::new(std::io::stdin())),
        };
        let run = run_of(run);
        let default_workdir =
            workdir.or_else(|| std::env::current_dir().ok().map(|d| d.display().to_string())).unwrap_or_default();
        let (mut observations, mut skipped, mut lines, mut anonymous) = (Vec::new(), 0usize, 0usize, 0usize);
        holon::job::lines::for_each_line(reader, CALL_BYTES_MAX, state::OBSERVATIONS_BYTES_MAX, |line| {
            lines += 1;
            match line.map(str::trim) {
                None => skipped += 1,
                Some("") => {}
                Some(line) => match call::parse(line) {
                    Ok(c) if c.is_exempt() => {}
                    Ok(c) => {
                        anonymous += usize::from(c.run_id(run.as_deref()).is_none());
                        observations.push(Observation::of(c, run.as_deref(), &default_workdir));
                    }
                    Err(e) => {
                        errln!("holon: skipped a call: {}", printable(&e.to_string()));
                        skipped += 1;
                    }
                },
            }
            lines < OBSERVE_LINES_MAX
        })
        .with_context(|| "reading the calls")?;
        job.observe(&observations)?;
        Ok((observations.len(), skipped, anonymous))
    })();
    match result {
        Ok((n, skipped, anonymous)) => {
            errln!(
                "observed {n} call(s) for `{name}`{}",
                if skipped > 0 { format!(", skipped {skipped}") } else { String::new() }
            );
            if anonymous > 0 {
                errln!(
                    "holon: warning: {anonymous} {}",
                    state::NO_RUN_WARNING.replacen("the call has", "call(s) had", 1)
                );
            }
        }
        Err(e) => errln!("holon: observe failed ({e:#}); the run is not blocked"),
    }
    Ok(exit::OK)
}

fn propose(state_dir: Option<PathBuf>, name: &str) -> anyhow::Result<u8> {
    let job = job(state_dir, name)?;
    let (v, text) = job.propose()?;
    out!("{text}")?;
    errln!("{}", pending_hint(&job, v));
    Ok(exit::OK)
}

/// Where a new pending version is and how to review it before approving.
fn pending_hint(job: &Job, v: u32) -> String {
    let name = &job.name;
    format!(
        "pending version v{v}, not enforced yet: {}\n  review it:    holon job show {name} --pending\n  what changes: holon job show {name} --diff\n  then:         holon job approve {name}",
        job.version_file(v).display()
    )
}

/// `holon job show`: the active version, the pending one, or the diff between them.
fn show(state_dir: Option<PathBuf>, name: &str, pending: bool, diff: bool, style: &Style) -> anyhow::Result<u8> {
    let job = job(state_dir, name)?;
    let active = job.version(Which::Active)?;
    let waiting = if pending || diff { job.version(Which::Pending)? } else { None };
    let none_pending = || {
        anyhow::anyhow!(
            "`{name}` has no pending version: `holon job propose {name}` or `holon job widen {name} ID` writes one"
        )
    };
    if diff {
        let waiting = waiting.ok_or_else(none_pending)?;
        let (old_name, old_text) = match &active {
            Some(a) => (format!("v{} (active)", a.version), a.text.as_str()),
            None => ("nothing approved yet".to_owned(), ""),
        };
        let new_name = format!("v{} (pending)", waiting.version);
        let text = similar::TextDiff::from_lines(old_text, waiting.text.as_str())
            .unified_diff()
            .context_radius(3)
            .header(&old_name, &new_name)
            .to_string();
        if text.is_empty() {
            outln!("v{} (pending) is the same as {old_name}", waiting.version)?;
        }
        for line in text.lines() {
            let shown = printable(line);
            let painted = match line.as_bytes().first() {
                Some(b'+') if !line.starts_with("+++") => style.good(&shown),
                Some(b'-') if !line.starts_with("---") => style.bad(&shown),
                Some(b'@') => style.dim(&shown),
                _ => shown,
            };
            outln!("{painted}")?;
        }
        return Ok(exit::OK);
    }
    let shown = if pending {
        waiting.ok_or_else(none_pending)?
    } else {
        active.ok_or_else(|| {
            anyhow::anyhow!(
                "`{name}` has no approved version yet (observe mode): `holon job show {name} --pending` shows the version waiting for approval, if any"
            )
        })?
    };
    errln!("v{} {}", shown.version, style.dim(&shown.path.display().to_string()));
    if let Some(system) = super::job_exec::system_read_of(&shown.text) {
        errln!("{}", style.dim(&format!("holon job exec also lets commands read and run from {system}")));
    }
    // The file could have been edited by anyone: no control character reaches the terminal.
    for line in shown.text.lines() {
        outln!("{}", printable(line))?;
    }
    Ok(exit::OK)
}

fn approve(state_dir: Option<PathBuf>, name: &str) -> anyhow::Result<u8> {
    let (a, same_as) = job(state_dir, name)?.approve()?;
    outln!("approved v{} sha256:{}; `{name}` is enforcing", a.version, a.sha256)?;
    if let Some(old) = same_as {
        outln!(
            "v{} matches v{old}, the version it replaces, byte for byte: nothing the job may do changed",
            a.version
        )?;
    }
    Ok(exit::OK)
}

fn undo(state_dir: Option<PathBuf>, name: &str, to_observe: bool) -> anyhow::Result<u8> {
    let meta = job(state_dir, name)?.undo(to_observe)?;
    match meta.active {
        Some(v) => outln!("`{name}` is back on v{v}")?,
        None => outln!(
            "`{name}` has no approved version left: observe mode, ENFORCEMENT IS OFF (every call is allowed and recorded)"
        )?,
    }
    Ok(exit::OK)
}

fn check(
    state_dir: Option<PathBuf>,
    name: &str,
    run: Option<String>,
    scope: Option<String>,
    ask: bool,
    json_out: bool,
) -> anyhow::Result<u8> {
    let scope = scope_of(scope);
    let run = run_of(run);
    let mut text = String::new();
    let read = std::io::stdin().take(CALL_BYTES_MAX as u64 + 1).read_to_string(&mut text);
    let decision = match (read, Job::open(&super::job_env::state_root(state_dir), name)) {
        (Ok(_), Ok(job)) => job.check(&text, run.as_deref(), scope, ask),
        // Without a readable call or a valid job there is nothing to check against.
        (Err(e), _) => blocked(&format!("the call cannot be read: {e}")),
        (_, Err(e)) => blocked(&e.to_string()),
    };
    // The answer must reach the hook runner: a check that cannot write it (a closed
    // pipe) blocks, and never panics.
    let answer = if json_out {
        Some(serde_json::to_string(&decision)?)
    } else if decision.decision == "ask" {
        let reason = decision.reason.clone().unwrap_or_default();
        Some(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": reason}}).to_string())
    } else {
        None
    };
    let written = answer.is_none_or(|a| outln!("{a}").is_ok());
    if let Some(w) = &decision.warning {
        errln!("holon: warning: {w}");
    }
    if decision.blocks() || !written {
        let id = decision.drift_id.map(|i| format!(" (drift #{i})")).unwrap_or_default();
        let reason = if written {
            printable(decision.reason.as_deref().unwrap_or("outside the mandate"))
        } else {
            "the answer could not be written (standard output is closed)".to_owned()
        };
        errln!("holon: blocked{id}: {reason}");
        return Ok(exit::BAD_INPUT);
    }
    Ok(exit::OK)
}

fn blocked(reason: &str) -> state::Decision {
    state::Decision::block(holon::job::Family::Integrity, reason.to_owned())
}

fn widen(state_dir: Option<PathBuf>, name: &str, id: &str, pattern: bool, json_out: bool) -> anyhow::Result<u8> {
    let id: u64 =
        id.trim_start_matches('#').parse().with_context(|| format!("`{id}` is not a drift id like 3 or #3"))?;
    let job = job(state_dir, name)?;
    let w = job.widen(id, pattern)?;
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&w)?)?;
        return Ok(exit::OK);
    }
    outln!("pending version v{} allows drift #{id}:", w.version)?;
    for (rule, list) in w.added.iter().zip(&w.added_to) {
        outln!("  + {list}: {}", printable(rule))?;
    }
    if pattern {
        for rule in &w.kept_exact {
            outln!("  (kept exact: no broader rule is safe for {})", printable(rule))?;
        }
        outln!("preview: {} past observed call(s) newly allowed", w.preview.newly_allowed)?;
        for e in &w.preview.examples {
            outln!("    {}", printable(e))?;
        }
    }
    errln!("{}", pending_hint(&job, w.version));
    Ok(exit::OK)
}

#[derive(clap::Subcommand)]
pub(super) enum JobCommand {
    /// Record tool calls (JSON lines on stdin or --input). Never blocks.
    #[command(
        after_help = "EXIT CODES: 0 recorded (observe never blocks), 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon job observe nightly-report < calls.jsonl\n  holon job observe nightly-report --run run-42 --input calls.jsonl"
    )]
    Observe {
        /// The job's name (letters, digits, `-`, `_`, `.`); `observe` creates the job.
        job: String,
        /// The run these calls belong to (default: HOLON_RUN, the hook's session_id).
        #[arg(long)]
        run: Option<String>,
        /// Read the calls from this file instead of standard input (JSON lines).
        #[arg(long)]
        input: Option<PathBuf>,
        /// Paths are made relative to this (default: the hook's cwd, else the current directory).
        #[arg(long)]
        workdir: Option<String>,
    },
    /// Compile the observations into a pending mandate version and print it.
    #[command(
        after_help = "EXIT CODES: 0 proposed, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon job propose nightly-report"
    )]
    Propose {
        /// The job's name.
        job: String,
    },
    /// Activate the pending version; its SHA-256 is stored with the approval.
    #[command(
        after_help = "EXIT CODES: 0 approved, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon job approve nightly-report"
    )]
    Approve {
        /// The job's name.
        job: String,
    },
    /// Check one call (JSON on stdin): exit 0 allow, 2 block (reason on stderr).
    #[command(
        after_help = "EXIT CODES: 0 allow, 2 block (the reason on standard error), and 2 whenever the call or the job cannot be read: fail closed.\n\nEXAMPLES:\n  holon job check nightly-report --run run-42 < call.json\n  (call.json: {\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"ls\"}})"
    )]
    Check {
        /// The job's name.
        job: String,
        /// The run this call belongs to (default: HOLON_RUN, the hook's session_id; without
        /// one, every such call shares one run and its write budget).
        #[arg(long)]
        run: Option<String>,
        /// cron or interactive (default: HOLON_SCOPE; unknown is treated as cron).
        #[arg(long)]
        scope: Option<String>,
        /// An interactive scope asks its person instead of blocking (never a cron run).
        #[arg(long)]
        ask: bool,
        /// Print the decision as JSON on standard output (the exit code is the same).
        #[arg(long)]
        json: bool,
    },
    /// Check a command, then run it confined by the kernel to the approved version
    /// (Landlock): exit 2 when blocked or refused, else the command's own exit code.
    #[command(
        after_help = "EXIT CODES: the command's own exit code when it ran; 2 when the check blocks it or the kernel cannot confine it (nothing ran; the reason on standard error); 127 when it could not be started.\n\nEXAMPLES:\n  holon job exec nightly-report --run run-42 -- git log --oneline -n 5\n  holon job exec nightly-report --shell 'grep -rn TODO src | head'\n  holon job exec nightly-report --explain"
    )]
    Exec(super::job_exec::ExecArgs),
    /// A PreToolUse hook (Claude Code's format): shell calls are handed on to `holon job
    /// exec` (updatedInput), other calls checked as `holon job check` does.
    #[command(
        after_help = "EXIT CODES: 0 allow (for a shell call, the wrapped command on standard output), 2 block (the reason on standard error), and 2 whenever the call or the job cannot be read: fail closed.\n\nEXAMPLES:\n  holon job hook nightly-report --scope cron < payload.json\n  (in .claude/settings.json: see docs/job.md \"Hooks\")"
    )]
    Hook(super::job_exec::HookArgs),
    /// Print the active version, the pending one, or the diff between them.
    #[command(
        after_help = "EXIT CODES: 0 printed, 2 bad input (no such version, an unreadable or invalid file, a bad flag, a closed output pipe).\n\nThe version's number and file go to standard error, its text to standard output.\n\nEXAMPLES:\n  holon job show nightly-report\n  holon job show nightly-report --pending\n  holon job show nightly-report --diff"
    )]
    Show {
        /// The job's name.
        job: String,
        /// The version waiting for approval instead of the active one.
        #[arg(long, conflicts_with = "diff")]
        pending: bool,
        /// A unified diff from the active version (or from nothing) to the pending one.
        #[arg(long)]
        diff: bool,
    },
    /// The Leash Line: one track per rule family (tools, paths, commands, hosts) with its
    /// rules' evidence, blocked calls (▼#id), widened ones (△#id) and pending rules (◆N).
    #[command(
        after_help = "EXIT CODES: 0 printed, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon job status nightly-report"
    )]
    Status {
        /// The job's name.
        job: String,
    },
    /// Blocked and escalated calls, newest first.
    #[command(
        after_help = "EXIT CODES: 0 printed, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon job drift nightly-report\n  holon job drift nightly-report --json"
    )]
    Drift {
        /// The job's name.
        job: String,
        /// Print the drift records as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A new pending version allowing every failing aspect of a drifted call.
    #[command(
        after_help = "EXIT CODES: 0 a pending version written, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon job widen nightly-report 3\n  holon job widen nightly-report '#3' --pattern"
    )]
    Widen {
        /// The job's name.
        job: String,
        /// The drifted call to allow, by the id `holon job drift` shows.
        drift_id: String,
        /// A broader rule instead of the exact subject, with a preview.
        #[arg(long)]
        pattern: bool,
        /// Print the new pending version and its preview as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reactivate the previously approved version.
    #[command(
        after_help = "EXIT CODES: 0 undone, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon job undo nightly-report"
    )]
    Undo {
        /// The job's name.
        job: String,
        /// Allow undoing the first approved version: the job returns to observe mode and
        /// nothing is enforced any more.
        #[arg(long)]
        to_observe: bool,
    },
    /// Rules with their evidence, as JSON (the only format).
    #[command(
        after_help = "EXIT CODES: 0 printed, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon job export nightly-report > rules.json"
    )]
    Export {
        /// The job's name.
        job: String,
        /// Accepted for compatibility: the output is always JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `holon job …` (and `holon-job …`): each verb over the state directory `state` (default:
/// HOLON_STATE, else `.holon`).
pub(super) fn run(state: Option<PathBuf>, command: JobCommand, style: &Style) -> anyhow::Result<u8> {
    match command {
        JobCommand::Observe { job: j, run, input, workdir } => observe(state, &j, run, input.as_deref(), workdir),
        JobCommand::Propose { job: j } => propose(state, &j),
        JobCommand::Approve { job: j } => approve(state, &j),
        JobCommand::Check { job: j, run, scope, ask, json } => check(state, &j, run, scope, ask, json),
        JobCommand::Status { job: j } => super::job_review::status(state, &j, style),
        JobCommand::Exec(args) => super::job_exec::exec(state, args),
        JobCommand::Hook(args) => super::job_exec::hook(state, args),
        JobCommand::Show { job: j, pending, diff } => show(state, &j, pending, diff, style),
        JobCommand::Drift { job: j, json } => super::job_review::drift(state, &j, json, style),
        JobCommand::Widen { job: j, drift_id, pattern, json } => widen(state, &j, &drift_id, pattern, json),
        JobCommand::Undo { job: j, to_observe } => undo(state, &j, to_observe),
        JobCommand::Export { job: j, json: _ } => super::job_review::export(state, &j),
    }
}
