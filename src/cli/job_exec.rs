//! `holon job exec` (a command checked, then run under the kernel sandbox compiled from
//! the approved version) and `holon job hook` (a runtime's PreToolUse hook that hands its
//! shell calls to `exec`). docs/job.md "What the kernel enforces".

use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use holon::job::call::{self, CALL_BYTES_MAX, EXEMPT_TOOL, shell_quote};
use holon::job::mandate::JobMandate;
use holon::job::redact::printable;
use holon::job::sandbox::kernel::{self, LEVEL_FULL, LEVEL_REQUIRED};
use holon::job::sandbox::{Plan, SYSTEM_READ_DEFAULT};
use holon::job::state::{self, ExecRecord, Job, Scope, UNKNOWN_RUN};
use serde_json::{Value, json};

use super::exit;
use super::job::scope_of;
use super::out::{errln, outln};

/// The exit code of a command that could not be started (as a shell answers).
const NOT_STARTED: u8 = 127;

#[derive(clap::Args)]
pub(super) struct ExecArgs {
    /// The job's name.
    job: String,
    /// The run this command belongs to (default: HOLON_RUN).
    #[arg(long)]
    run: Option<String>,
    /// cron or interactive (default: HOLON_SCOPE; unknown is treated as cron).
    #[arg(long)]
    scope: Option<String>,
    /// Print the ruleset the kernel would be given and what this kernel enforces of it;
    /// run nothing.
    #[arg(long)]
    explain: bool,
    /// Interactive scope only: where the kernel cannot confine the command, run it with the
    /// check alone (said on standard error). A cron run is confined or refused.
    #[arg(long)]
    allow_unconfined: bool,
    /// The tool the command is judged and recorded as (a hook passes its runtime's, `Bash`).
    #[arg(long, default_value = "terminal")]
    tool: String,
    /// A command line, run by `bash -c` inside the sandbox (instead of COMMAND after --).
    #[arg(long, conflicts_with = "command")]
    shell: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true)]
    command: Vec<String>,
}

#[derive(clap::Args)]
pub(super) struct HookArgs {
    /// The job's name.
    job: String,
    /// The run (default: HOLON_RUN, the payload's session_id).
    #[arg(long)]
    run: Option<String>,
    /// cron or interactive (default: HOLON_SCOPE; unknown is treated as cron).
    #[arg(long)]
    scope: Option<String>,
}

/// Words as a person writes them: bare when no character in a word is special to the
/// shell (so `-- sh ./s.sh` is judged as the line `sh ./s.sh`), else quoted; a first word
/// with `=` is quoted too (bare, the shell would read an assignment).
fn shell_line(words: &[String]) -> String {
    let word = |(i, w): (usize, &String)| {
        let plain = !w.is_empty()
            && w.bytes().all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b))
            && (i > 0 || !w.contains('='));
        if plain { w.clone() } else { shell_quote(w) }
    };
    words.iter().enumerate().map(word).collect::<Vec<_>>().join(" ")
}

fn scope_word(scope: Scope) -> Option<&'static str> {
    match scope {
        Scope::Cron => Some("cron"),
        Scope::Interactive => Some("interactive"),
        Scope::Unknown => None,
    }
}

pub(super) fn exec(state_dir: Option<PathBuf>, a: ExecArgs) -> anyhow::Result<u8> {
    let job = Job::open(&state::root(state_dir), &a.job)?;
    let scope = scope_of(a.scope.clone());
    if a.explain {
        return explain(&job);
    }
    if a.allow_unconfined && scope != Scope::Interactive {
        anyhow::bail!(
            "--allow-unconfined is for an interactive scope (--scope interactive): a cron run is confined by the kernel or refused"
        );
    }
    let (line, argv) = match (&a.shell, a.command.is_empty()) {
        (Some(l), true) => (l.clone(), vec!["bash".to_owned(), "-c".to_owned(), l.clone()]),
        (None, false) => (shell_line(&a.command), a.command.clone()),
        _ => anyhow::bail!(
            "give the command after `--` (holon job exec {0} -- ls -l) or a command line (holon job exec {0} --shell 'ls -l | head')",
            a.job
        ),
    };
    // Only a call whose command is judged may run: another tool's name (the exempt status
    // tool, a file tool) would be allowed without its command being read.
    if a.tool == EXEMPT_TOOL || !call::judged_as_command(&a.tool, true) {
        anyhow::bail!(
            "--tool {} is not a shell tool: holon job exec runs only calls whose command is judged (terminal, Bash, shell, …)",
            printable(&a.tool)
        );
    }
    let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
    let call = json!({"tool": a.tool, "args": {"command": line}, "cwd": cwd}).to_string();
    let run = a.run.clone().or_else(|| std::env::var("HOLON_RUN").ok().filter(|r| !r.is_empty()));
    let judged = job.check_for_exec(&call, run.as_deref(), scope);
    if let Some(w) = &judged.decision.warning {
        errln!("holon: warning: {w}");
    }
    if judged.decision.blocks() {
        let id = judged.decision.drift_id.map(|i| format!(" (drift #{i})")).unwrap_or_default();
        let reason = printable(judged.decision.reason.as_deref().unwrap_or("outside the mandate"));
        errln!("holon: blocked{id}: {reason}; the command did not run");
        return Ok(exit::BAD_INPUT);
    }
    let run = run.unwrap_or_else(|| UNKNOWN_RUN.to_owned());
    let Some((version, mandate)) = judged.active else {
        if !judged.observing {
            // Allowed without a version to confine with, outside observe mode (an interactive
            // scope on a job never observed): nothing to hold the command to.
            errln!(
                "holon: refused: `{}` is not observing and has no approved version to confine the command with; the command did not run",
                a.job
            );
            return Ok(exit::BAD_INPUT);
        }
        errln!("holon: `{}` has no approved version (observe mode): the command runs unconfined", a.job);
        let _ = job.record_exec(ExecRecord::new(&run, None, 0, "unconfined: observe mode", &line));
        return Ok(run_command(&argv));
    };
    confined(&job, &a, (version, &mandate), &run, (&line, &argv), scope)
}

/// Runs an allowed command under the sandbox of `version`, or refuses it.
fn confined(
    job: &Job,
    a: &ExecArgs,
    (version, mandate): (u32, &JobMandate),
    run: &str,
    (line, argv): (&str, &[String]),
    scope: Scope,
) -> anyhow::Result<u8> {
    let refuse = |why: String| {
        errln!("holon: refused: {why}; the command did not run");
        let _ = job.record_exec(ExecRecord::new(run, Some(version), 0, &format!("refused: {why}"), line));
        Ok(exit::BAD_INPUT)
    };
    let holon = match std::env::current_exe() {
        Ok(h) => h,
        Err(e) => return refuse(format!("holon's own executable cannot be found ({e})")),
    };
    let plan = match Plan::compile(mandate, &job.root()).and_then(|p| p.refuse_writable_program(&holon).map(|()| p)) {
        Ok(p) => p,
        Err(e) => return refuse(e.to_string()),
    };
    let level = kernel::kernel_level();
    if level < LEVEL_REQUIRED {
        let why = missing_kernel(level);
        if a.allow_unconfined && scope == Scope::Interactive {
            errln!("holon: warning: {why}: the command runs with the check alone (--allow-unconfined)");
            let _ = job.record_exec(ExecRecord::new(run, Some(version), 0, &format!("unconfined: {why}"), line));
            return Ok(run_command(argv));
        }
        return refuse(format!(
            "{why}. Run on a kernel with Landlock (Linux 6.7 or later, `landlock` in its lsm= list), or in an interactive scope pass --allow-unconfined"
        ));
    }
    let how = if level >= LEVEL_FULL {
        "full".to_owned()
    } else {
        let (_, open) = kernel::coverage(level);
        let how = format!("partial: Landlock ABI {level} does not hold {}", open.join(", "));
        errln!("holon: warning: {how}");
        how
    };
    if let Err(e) = job.record_exec(ExecRecord::new(run, Some(version), level, &how, line)) {
        errln!(
            "holon: warning: the confinement could not be recorded ({e}); `holon job status` will not show this command"
        );
    }
    let temp = match private_temp(&job.root()) {
        Ok(t) => t,
        Err(e) => return refuse(format!("no private temporary directory ({e})")),
    };
    // The ruleset is built here, every granted path opened and held to be the one the plan
    // found; then this process restricts itself and becomes the command (no second process,
    // no plan handed on). The temporary directory outlives it: the next `exec` of any job
    // of this state directory removes it (`private_temp`).
    let confined = kernel::prepare(&plan, &temp, level).and_then(kernel::Prepared::restrict_self);
    if let Err(e) = confined {
        let _ = std::fs::remove_dir_all(&temp);
        return refuse(e.to_string());
    }
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).env_remove("POSIXLY_CORRECT").env("TMPDIR", &temp);
    // exec returns only when the command could not be started.
    let e = std::os::unix::process::CommandExt::exec(&mut cmd);
    errln!("holon: {}: {e}", printable(&argv[0]));
    Ok(NOT_STARTED)
}

fn missing_kernel(level: u8) -> String {
    match level {
        0 => format!(
            "this kernel has no Landlock (ABI 0), and holon job exec needs {LEVEL_REQUIRED} (file access came with 1, truncation with 3, TCP with 4)"
        ),
        n => format!(
            "this kernel answers Landlock ABI {n}, and holon job exec needs {LEVEL_REQUIRED} (file access came with 1, truncation with 3, TCP with 4)"
        ),
    }
}

/// A directory only this command writes in (its TMPDIR), named after the process that
/// becomes the command (`holon-exec-PID-START`, START the process's start time in clock
/// ticks since boot, from `/proc/self/stat`). Those of commands that have ended are
/// removed first: a process that became its command cannot remove its own.
/// It lies in the state directory's `tmp/`, which no confined command of its jobs can
/// write: one beneath another job's `/tmp/**` grant could be raced (a link planted where
/// this unconfined process creates it).
fn private_temp(root: &Path) -> std::io::Result<PathBuf> {
    let parent = root.join("tmp");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&parent)?;
    sweep_ended(&parent);
    let me = std::process::id();
    let start = process_start(me).ok_or_else(|| std::io::Error::other("/proc/self/stat cannot be read"))?;
    let dir = parent.join(format!("{TEMP_PREFIX}{me}-{start}"));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    std::fs::canonicalize(&dir)
}

const TEMP_PREFIX: &str = "holon-exec-";
/// Most ended commands' directories one `exec` removes (the rest wait for the next).
const SWEEP_DIRS_MAX: usize = 64;

/// Removes the temporary directories of `tmp` whose process has ended (no process of that
/// PID, or one started at another time). One whose name holon did not give is left.
fn sweep_ended(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    let ended = entries.flatten().filter(|e| {
        let name = e.file_name();
        let Some((pid, start)) =
            name.to_str().and_then(|n| n.strip_prefix(TEMP_PREFIX)).and_then(|r| r.split_once('-'))
        else {
            return false;
        };
        match (pid.parse::<u32>(), start.parse::<u64>()) {
            (Ok(pid), Ok(start)) => process_start(pid) != Some(start),
            _ => false,
        }
    });
    for e in ended.take(SWEEP_DIRS_MAX) {
        let _ = std::fs::remove_dir_all(e.path());
    }
}

/// When process `pid` started, in clock ticks since boot (field 22 of `/proc/PID/stat`),
/// or `None` when there is no such process.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (field 2) is in parentheses and may hold anything: count after the last.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Starts `argv`, waits for it and answers its exit code (128 + the signal that ended it,
/// as a shell does). The option grammar is getopt's with permutation: POSIXLY_CORRECT,
/// which turns permutation off, is not passed on.
fn run_command(argv: &[String]) -> u8 {
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]).env_remove("POSIXLY_CORRECT");
    match cmd.status() {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => u8::try_from(c).unwrap_or(1),
            (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
            (None, None) => 1,
        },
        Err(e) => {
            errln!("holon: {}: {e}", printable(&argv[0]));
            NOT_STARTED
        }
    }
}

fn explain(job: &Job) -> anyhow::Result<u8> {
    let meta = job.meta()?;
    let Some((version, _, mandate)) = job.active(&meta)? else {
        outln!("`{}` has no approved version (observe mode): `holon job exec` runs its commands unconfined", job.name)?;
        return Ok(exit::OK);
    };
    let level = kernel::kernel_level();
    outln!("`{}` v{version}: the kernel is asked to allow only", job.name)?;
    match Plan::compile(&mandate, &job.root()) {
        Ok(plan) => {
            for line in plan.describe().lines() {
                outln!("{}", printable(line))?;
            }
        }
        Err(e) => outln!("  nothing: {e}; every command is refused")?,
    }
    let (held, open) = kernel::coverage(level);
    let suffix = if level >= LEVEL_FULL { " or later" } else { "" };
    outln!("this kernel: Landlock ABI {level}{suffix}")?;
    outln!("  holds: {}", if held.is_empty() { "nothing".to_owned() } else { held.join("; ") })?;
    if !open.is_empty() {
        outln!("  does not hold: {}", open.join("; "))?;
    }
    outln!(
        "  never held by the kernel (the check judges them): host names, UDP (DNS lookups), unix sockets connected by path, changes of mode, owner, times and extended attributes"
    )?;
    let verdict = if level >= LEVEL_REQUIRED {
        "commands run confined"
    } else {
        "cron commands are refused (interactive ones with --allow-unconfined run with the check alone)"
    };
    outln!("verdict: {verdict}")?;
    Ok(exit::OK)
}

/// The system list a mandate's sandbox reads (`job show`).
pub(super) fn system_read_of(text: &str) -> Option<String> {
    let m = holon::job::mandate::from_yaml(text).ok()?;
    Some(match m.sandbox {
        Some(s) => format!("{} (sandbox.system_read)", s.system_read.join(" ")),
        None => format!("{} (the default; set sandbox.system_read to change it)", SYSTEM_READ_DEFAULT.join(" ")),
    })
}

/// The PreToolUse hook: a shell call is handed on to `holon job exec` (updatedInput), any
/// other call is checked as `holon job check` does.
pub(super) fn hook(state_dir: Option<PathBuf>, a: HookArgs) -> anyhow::Result<u8> {
    let root = state::root(state_dir);
    let scope = scope_of(a.scope.clone());
    let run = a.run.clone().or_else(|| std::env::var("HOLON_RUN").ok().filter(|r| !r.is_empty()));
    let mut text = String::new();
    let read = std::io::stdin().take(CALL_BYTES_MAX as u64 + 1).read_to_string(&mut text);
    let job = match (read, Job::open(&root, &a.job)) {
        (Ok(_), Ok(job)) => job,
        (Err(e), _) => return blocked(&format!("the call cannot be read: {e}")),
        (_, Err(e)) => return blocked(&e.to_string()),
    };
    let payload: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let command = payload.get("tool_input").and_then(|i| i.get("command")).and_then(Value::as_str);
    let is_shell = payload.get("tool_name").and_then(Value::as_str) == Some("Bash");
    let (Some(command), true) = (command, is_shell) else {
        let d = job.check(&text, run.as_deref(), scope, false);
        return if d.blocks() { blocked(d.reason.as_deref().unwrap_or("outside the mandate")) } else { Ok(exit::OK) };
    };
    if job.assess(&text, run.as_deref(), scope).blocks() {
        // Checked for real: the drift record and the reason.
        let d = job.check(&text, run.as_deref(), scope, false);
        let id = d.drift_id.map(|i| format!(" (drift #{i})")).unwrap_or_default();
        return blocked(&format!("{}{id}", d.reason.as_deref().unwrap_or("outside the mandate")));
    }
    let run = run.or_else(|| payload.get("session_id").and_then(Value::as_str).map(str::to_owned));
    let tool = payload.get("tool_name").and_then(Value::as_str).unwrap_or("Bash");
    let wrapped = wrap(&job, &root, (tool, command), run.as_deref(), scope)?;
    let mut input = payload.get("tool_input").cloned().unwrap_or_else(|| json!({}));
    input["command"] = Value::String(wrapped);
    let answer = json!({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "permissionDecisionReason": format!("holon: runs confined by `holon job exec {}`", job.name),
        "updatedInput": input,
    }});
    if outln!("{answer}").is_err() {
        return blocked("the answer could not be written (standard output is closed)");
    }
    Ok(exit::OK)
}

/// `command` as the `holon job exec` line that runs it, every word quoted.
fn wrap(
    job: &Job,
    root: &Path,
    (tool, command): (&str, &str),
    run: Option<&str>,
    scope: Scope,
) -> anyhow::Result<String> {
    let holon = std::env::current_exe()?;
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut words = vec![holon.display().to_string(), "job".into(), "exec".into(), job.name.clone()];
    // Every value attached with `=`: a run id or a command that starts with `-` stays the
    // option's value, never another option.
    words.extend([format!("--state={}", root.display()), format!("--tool={tool}")]);
    if let Some(s) = scope_word(scope) {
        words.push(format!("--scope={s}"));
    }
    if let Some(r) = run {
        words.push(format!("--run={r}"));
    }
    words.push(format!("--shell={command}"));
    Ok(words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" "))
}

fn blocked(reason: &str) -> anyhow::Result<u8> {
    errln!("holon: blocked: {}", printable(reason));
    Ok(exit::BAD_INPUT)
}
