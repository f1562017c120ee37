//! `holon job exec` (a command checked, then run under the kernel sandbox compiled from
//! the approved version) and `holon job hook` (a runtime's PreToolUse hook that hands its
//! shell calls to `exec`). docs/job.md "What the kernel enforces".

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use holon::job::call::{self, CALL_BYTES_MAX, EXEMPT_TOOL, shell_quote};
use holon::job::mandate::JobMandate;
use holon::job::redact::printable;
use holon::job::sandbox::handoff::{EXIT_NOT_STARTED, HELPER_NAME, Handoff};
use holon::job::sandbox::kernel::{self, LEVEL_FULL, LEVEL_REQUIRED};
use holon::job::sandbox::{Plan, SYSTEM_READ_DEFAULT, reap, temp};
use holon::job::state::{ExecRecord, Job, Scope, UNKNOWN_RUN};
use serde_json::{Value, json};

use super::exit;
use super::job_env::{run_of, scope_of};
use super::out::{errln, outln};

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

/// The scope as `--scope` says it; an unknown scope is judged as cron, and said so.
fn scope_word(scope: Scope) -> &'static str {
    match scope {
        Scope::Cron | Scope::Unknown => "cron",
        Scope::Interactive => "interactive",
    }
}

pub(super) fn exec(state_dir: Option<PathBuf>, a: ExecArgs) -> anyhow::Result<u8> {
    let job = Job::open(&super::job_env::state_root(state_dir), &a.job)?;
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
    let run = run_of(a.run.clone());
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
    let (holon, helper) = match programs() {
        Ok(p) => p,
        Err(why) => return refuse(why),
    };
    let plan = match Plan::compile(mandate, &job.root())
        .and_then(|p| p.refuse_writable_program(&holon).and_then(|()| p.refuse_writable_program(&helper)).map(|()| p))
    {
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
    let temp = match temp::create(&job.root()) {
        Ok(t) => t,
        Err(e) => return refuse(format!("no private temporary directory ({e})")),
    };
    // The command runs in a child that confines itself (`holon-sandbox`) and then becomes
    // the command: this process stays outside, to remove the temporary directory the
    // confined command cannot remove. The plan goes in a file in that directory, and its
    // SHA-256 on the child's command line (`handoff`).
    let (code, all_ended) = match (Handoff { plan, temp: temp.clone(), level, exec_pid: std::process::id() }).write() {
        Ok(args) => {
            let mut child: Vec<OsString> = vec![helper.into_os_string()];
            child.extend(args);
            child.extend(argv.iter().map(OsString::from));
            run_held(&child)
        }
        Err(e) => {
            remove_temp(&temp);
            return refuse(format!("the plan cannot be handed on ({e})"));
        }
    };
    let removed = if all_ended {
        remove_temp(&temp)
    } else {
        // Fail closed: a process of the command may still write in it.
        errln!(
            "holon: warning: the command's temporary directory {} was left on disk, as a process of the command may remain; remove it once none runs",
            temp.display()
        );
        false
    };
    // A command that succeeded but left what holon cannot remove does not answer success:
    // a scheduler would never read the warning.
    Ok(if removed { code } else { code.max(exit::FAILED) })
}

/// Removes the command's temporary directory, or says what was left (and answers false).
fn remove_temp(temp: &Path) -> bool {
    match temp::remove(temp) {
        Ok(()) => true,
        Err(e) => {
            errln!(
                "holon: warning: the command's temporary directory {} was left on disk ({e}); remove it by hand",
                temp.display()
            );
            false
        }
    }
}

/// Runs `argv` as [`run_command`] does, holding every process it starts (`reap`): a
/// stopped command is continued, a SIGTERM sent to `exec` is passed on to it (so that a
/// scheduler's stop ends the command and `exec` still cleans up after it), and what it
/// leaves running when it ends is killed and reaped before this answers. Also answers
/// whether every process of the command is known to have ended.
fn run_held(argv: &[OsString]) -> (u8, bool) {
    let Some((program, args)) = argv.split_first() else { return (EXIT_NOT_STARTED, true) };
    if let Err(e) = reap::become_subreaper() {
        errln!("holon: refused: the command's processes cannot be held ({e}); the command did not run");
        return (exit::BAD_INPUT, true);
    }
    // Taken before the command starts (a SIGTERM sent the moment it runs must not end
    // `exec` by its default action, which leaves the cleanup undone): a SIGTERM is passed on
    // to the command; a SIGINT or SIGHUP (a terminal sends it to the command as well) only
    // keeps `exec` alive to clean up.
    let signals = {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
    };
    let ended = match command(program, args).spawn() {
        Ok(child) => {
            // Without a handle on the command (no pidfd), a SIGTERM ends `exec` as it would
            // have, and the helper's parent-death signal ends the command.
            let target = reap::ChildPidfd::of(&child).ok();
            if let Ok(mut signals) = signals {
                std::thread::spawn(move || {
                    for sig in signals.forever() {
                        match (&target, sig == signal_hook::consts::SIGTERM) {
                            (Some(t), true) => t.terminate(),
                            (None, true) => std::process::exit(128 + signal_hook::consts::SIGTERM),
                            (_, false) => {}
                        }
                    }
                });
            }
            reap::wait_for(child)
        }
        Err(e) => return (not_started(program, &e), true),
    };
    let all_ended = match reap::end_leftovers() {
        Ok(0) => true,
        Ok(n) => {
            errln!("holon: {n} process(es) the command left behind were ended and reaped");
            true
        }
        Err(e) => {
            errln!("holon: warning: processes the command left running may remain ({e})");
            false
        }
    };
    let code = match ended {
        Ok(reap::Ended::Code(c)) => shell_code(Some(c), None),
        Ok(reap::Ended::Signal(sig)) => shell_code(None, Some(sig)),
        Err(e) => {
            errln!("holon: the command could not be waited for ({e})");
            exit::FAILED
        }
    };
    (code, all_ended)
}

/// holon's own program and the helper beside it, or why a command cannot be confined.
fn programs() -> Result<(PathBuf, PathBuf), String> {
    let holon = std::env::current_exe().map_err(|e| format!("holon's own executable cannot be found ({e})"))?;
    let helper = holon.with_file_name(HELPER_NAME);
    // The very file that was checked is the one started (a link beside holon is resolved).
    match std::fs::canonicalize(&helper).and_then(|h| std::fs::metadata(&h).map(|m| (h, m))) {
        Ok((h, m)) if m.is_file() => Ok((holon, h)),
        Ok(_) => Err(format!("{} is not a program", helper.display())),
        Err(e) => Err(format!(
            "{HELPER_NAME}, the program that confines each command, is not beside holon ({}: {e}). Install both (cargo install --locked --path . installs holon and {HELPER_NAME}), or copy {HELPER_NAME} from the same build next to holon",
            helper.display()
        )),
    }
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

/// Starts `argv`, waits for it and answers its exit code ([`shell_code`]).
fn run_command<S: AsRef<OsStr>>(argv: &[S]) -> u8 {
    let Some((program, args)) = argv.split_first() else { return EXIT_NOT_STARTED };
    match command(program.as_ref(), args).status() {
        Ok(s) => shell_code(s.code(), s.signal()),
        Err(e) => not_started(program.as_ref(), &e),
    }
}

/// `program args` as both runs start it. The option grammar is getopt's with permutation:
/// POSIXLY_CORRECT, which turns permutation off, is not passed on.
fn command<S: AsRef<OsStr>>(program: &OsStr, args: &[S]) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).env_remove("POSIXLY_CORRECT");
    cmd
}

/// The exit code a shell answers for a command that exited with `code` or was ended by
/// `signal` (128 + the signal).
fn shell_code(code: Option<i32>, signal: Option<i32>) -> u8 {
    match (code, signal) {
        (Some(c), _) => u8::try_from(c).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
        (None, None) => 1,
    }
}

/// Says that `program` could not be started, and answers [`EXIT_NOT_STARTED`].
fn not_started(program: &OsStr, e: &std::io::Error) -> u8 {
    errln!("holon: {}: {e}", printable(&program.to_string_lossy()));
    EXIT_NOT_STARTED
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
    let root = super::job_env::state_root(state_dir);
    let scope = scope_of(a.scope.clone());
    let run = run_of(a.run.clone());
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

/// `command` as the `holon job exec` line that runs it (`holon-job exec` from `holon-job`),
/// every word quoted.
fn wrap(
    job: &Job,
    root: &Path,
    (tool, command): (&str, &str),
    run: Option<&str>,
    scope: Scope,
) -> anyhow::Result<String> {
    let holon = std::env::current_exe()?;
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut words = vec![holon.display().to_string()];
    words.extend(super::JOB_WORDS.iter().map(|w| (*w).to_owned()));
    words.extend(["exec".to_owned(), job.name.clone()]);
    // Every value attached with `=`: a run id or a command that starts with `-` stays the
    // option's value, never another option.
    words.extend([format!("--state={}", root.display()), format!("--tool={tool}")]);
    // An unknown scope is judged as cron: said in the line, so that a `HOLON_SCOPE` in the
    // environment the runtime runs it in cannot make it interactive.
    words.push(format!("--scope={}", scope_word(scope)));
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
