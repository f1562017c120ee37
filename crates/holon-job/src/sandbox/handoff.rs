//! The plan handed from `holon job exec` to `holon-sandbox`, the small program that
//! confines itself to it and becomes the command (docs/job.md "What the kernel
//! enforces"). One process of its own, because `exec` must stay outside the sandbox to
//! remove the command's temporary directory, and a process can only confine itself
//! (without `unsafe` there is no confining a child between fork and exec); a program of its
//! own, because starting the whole `holon` binary a second time cost about 3 ms a call
//! (docs/PERFORMANCE.md "holon job exec overhead").
//!
//! The plan travels in a file in the command's private temporary directory, its SHA-256 on
//! the helper's command line: the file is checked against the hash before anything is
//! granted, so a plan changed after `exec` wrote it is refused.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Plan;
use super::kernel;
use crate::redact::printable;
use crate::state::sha256_hex;

/// The helper's file name, looked for beside the `holon` program that starts it.
pub const HELPER_NAME: &str = "holon-sandbox";
/// The file, in the command's private temporary directory, the plan is handed on in
/// (removed before the command starts).
pub const HANDOFF_FILE: &str = ".holon-sandbox-plan.json";
/// Most bytes of a handed-on plan.
pub const HANDOFF_BYTES_MAX: u64 = 64 << 20;

/// Exit code of the helper when nothing ran: no plan, a changed plan, a refused ruleset.
pub const EXIT_REFUSED: u8 = 2;
/// Exit code of a command that could not be started (as a shell answers).
pub const EXIT_NOT_STARTED: u8 = 127;

/// What `holon job exec` hands the helper.
#[derive(Debug, Serialize, Deserialize)]
pub struct Handoff {
    pub plan: Plan,
    /// The command's private temporary directory (its `TMPDIR`, writable beside the plan).
    pub temp: PathBuf,
    /// The Landlock level the ruleset is built for.
    pub level: u8,
    /// The `holon job exec` process that waits for the command: the command is killed when
    /// it ends (a scheduler that kills `exec` ends the command with it).
    pub exec_pid: u32,
}

impl Handoff {
    /// Writes the handoff into `self.temp` (a file that must not exist yet: no link
    /// followed, none replaced) and answers the helper's arguments before the command:
    /// `--plan FILE --plan-sha256 HEX --`.
    pub fn write(&self) -> std::io::Result<Vec<OsString>> {
        let text = serde_json::to_string(self).map_err(std::io::Error::other)?;
        let file = self.temp.join(HANDOFF_FILE);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&file)?;
        f.write_all(text.as_bytes())?;
        Ok(vec!["--plan".into(), file.into(), "--plan-sha256".into(), sha256_hex(&text).into(), "--".into()])
    }
}

/// Why the helper ran nothing.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    #[error(
        "{HELPER_NAME} is started by holon job exec only: give --plan FILE --plan-sha256 HEX -- COMMAND [ARGS…] ({0})"
    )]
    Usage(&'static str),
    #[error("{HELPER_NAME} is started by holon job exec only ({0}: {1})")]
    Unreadable(String, std::io::Error),
    #[error("the command cannot be tied to the holon job exec that waits for it (PR_SET_PDEATHSIG: {0})")]
    DeathSignal(std::io::Error),
    #[error("the sandbox's plan was changed after holon job exec wrote it")]
    Changed,
    #[error("the sandbox's plan cannot be read ({0})")]
    Malformed(serde_json::Error),
    #[error(transparent)]
    Kernel(#[from] kernel::KernelError),
}

/// The helper's arguments: the plan file, its hash, the command.
type Parsed<'a> = (PathBuf, String, (&'a OsString, &'a [OsString]));

fn parse(args: &[OsString]) -> Result<Parsed<'_>, HandoffError> {
    let [flag_plan, plan, flag_sha, sha, dashes, program, rest @ ..] = args else {
        return Err(HandoffError::Usage("too few arguments"));
    };
    if flag_plan != "--plan" || flag_sha != "--plan-sha256" || dashes != "--" {
        return Err(HandoffError::Usage("the arguments are not in that order"));
    }
    let sha = sha.to_str().ok_or(HandoffError::Usage("the hash is not text"))?;
    Ok((PathBuf::from(plan), sha.to_owned(), (program, rest)))
}

/// Reads the plan `file` (a regular file, no link followed, at most
/// [`HANDOFF_BYTES_MAX`]), removes it and holds it to `sha256`. Opened without blocking: a
/// FIFO named as the plan is refused, never waited on.
fn read(file: &Path, sha256: &str) -> Result<Handoff, HandoffError> {
    let mut text = String::new();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(file)
        .and_then(|f| if f.metadata()?.is_file() { Ok(f) } else { Err(std::io::Error::other("not a regular file")) })
        .and_then(|f| f.take(HANDOFF_BYTES_MAX).read_to_string(&mut text))
        .map_err(|e| HandoffError::Unreadable(file.display().to_string(), e))?;
    let _ = std::fs::remove_file(file);
    if sha256_hex(&text) != sha256 {
        return Err(HandoffError::Changed);
    }
    serde_json::from_str(&text).map_err(HandoffError::Malformed)
}

/// The helper's whole work (`args` without the program name): reads and verifies the plan,
/// confines this process to it and becomes the command. Answers only when nothing ran
/// ([`EXIT_REFUSED`], the reason on standard error) or the command could not be started
/// ([`EXIT_NOT_STARTED`]). Confinement only narrows: started by anyone else, the helper can
/// take nothing away from a sandbox it is already in.
pub fn enter(args: &[OsString]) -> u8 {
    let (handoff, (program, rest)) =
        match parse(args).and_then(|(file, sha, command)| Ok((read(&file, &sha)?, command))) {
            Ok(h) => h,
            Err(e) => return refused(&e),
        };
    let confined = kernel::restrict(&handoff.plan, &handoff.temp, handoff.level);
    if let Err(e) = confined {
        return refused(&HandoffError::Kernel(e));
    }
    if let Err(e) = die_with(handoff.exec_pid) {
        return refused(&e);
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest).env("TMPDIR", &handoff.temp);
    // exec returns only when the command could not be started.
    let e = std::os::unix::process::CommandExt::exec(&mut cmd);
    let _ = writeln!(std::io::stderr(), "holon: {}: {e}", printable(&program.to_string_lossy()));
    EXIT_NOT_STARTED
}

/// Makes this process (and the command it becomes) end when `exec_pid`, its parent,
/// ends. Set before the parent is checked: a parent that ended just before is seen.
fn die_with(exec_pid: u32) -> Result<(), HandoffError> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .map_err(|e| HandoffError::DeathSignal(e.into()))?;
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
    if parent.and_then(|p| u32::try_from(p).ok()) != Some(exec_pid) {
        return Err(HandoffError::Usage("the holon job exec that wrote the plan is not its parent"));
    }
    Ok(())
}

fn refused(e: &HandoffError) -> u8 {
    let _ = writeln!(std::io::stderr(), "holon: refused: {e}; the command did not run");
    EXIT_REFUSED
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<OsString> {
        w.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_arguments_are_taken_in_one_order_only() {
        let ok = words(&["--plan", "/p", "--plan-sha256", "ab", "--", "true", "x"]);
        let (file, sha, command) = parse(&ok).unwrap();
        assert_eq!(
            (file, sha.as_str(), command.0.to_str(), command.1.len()),
            (PathBuf::from("/p"), "ab", Some("true"), 1)
        );
        for bad in [
            &["--plan", "/p", "--plan-sha256", "ab", "--"][..],
            &["--plan-sha256", "ab", "--plan", "/p", "--", "true"],
            &["--plan", "/p", "--plan-sha256", "ab", "true", "x"],
            &["true"],
        ] {
            assert!(matches!(parse(&words(bad)), Err(HandoffError::Usage(_))), "{bad:?}");
        }
    }

    #[test]
    fn a_missing_or_changed_plan_runs_nothing() {
        let dir = std::env::temp_dir().join(format!("holon-handoff-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing =
            enter(&words(&["--plan", dir.join("none").to_str().unwrap(), "--plan-sha256", "00", "--", "true"]));
        assert_eq!(missing, EXIT_REFUSED);
        let file = dir.join("plan.json");
        std::fs::write(&file, "{}").unwrap();
        assert!(matches!(read(&file, &"0".repeat(64)), Err(HandoffError::Changed)));
        assert!(!file.exists(), "the plan file is removed once read");
        std::fs::write(&file, "{}").unwrap();
        assert!(matches!(read(&file, &sha256_hex("{}")), Err(HandoffError::Malformed(_))));
        // A FIFO is refused at once (before, the helper waited for a writer forever).
        let fifo = dir.join("fifo");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::RWXU, 0).unwrap();
        assert!(matches!(read(&fifo, &sha256_hex("{}")), Err(HandoffError::Unreadable(..))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
