//! The confined command's processes, held by `holon job exec` from start to end (docs/job.md
//! "What the kernel enforces"): `exec` is their child subreaper, so a process the command
//! leaves behind (`setsid sleep 600 &`, a daemon that double-forks) becomes `exec`'s child
//! when its parent ends instead of living on; when the command itself has ended, every one
//! left is killed and reaped, before its temporary directory is removed. A command that
//! stops itself (`kill -STOP $$`) is continued: nothing else would, and `exec` would wait
//! for it forever.

use std::io;
use std::process::Child;

use rustix::process::{Pid, Signal, WaitOptions};

/// Most rounds of killing the processes left behind. Each round reaps every child that has
/// ended, then kills every child alive (a scan of `/proc`); a round that finds none ends
/// the work. Reaping is not a round: a command that leaves 100,000 zombies does not use
/// up the rounds before a live process is scanned.
pub const LEFTOVER_ROUNDS_MAX: usize = 10_000;
/// Longest pause before continuing a command that stopped again, in ms (doubling from 1):
/// a command stopped by terminal job control (SIGTTIN in the background) stops at once
/// again, and continuing it without a pause would spin.
const CONTINUE_PAUSE_MS_MAX: u64 = 1_000;

/// How the command ended: its exit code, or the signal that ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Code(i32),
    Signal(i32),
}

/// Makes this process the subreaper of everything it starts from now on.
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).map_err(io::Error::from)
}

/// Waits for `child` to end, continuing it each time it stops. Reaps every other child
/// that ends meanwhile (an orphan of the command, handed to this subreaper), so that a
/// long command leaves no zombies to use up the process table.
pub fn wait_for(child: Child) -> io::Result<Ended> {
    let pid = pid_of(child.id())?;
    let mut pause_ms = 0;
    loop {
        let (who, status) = match rustix::process::wait(WaitOptions::UNTRACED) {
            Ok(Some(found)) => found,
            Ok(None) | Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if who != pid {
            continue;
        }
        if let Some(code) = status.exit_status() {
            return Ok(Ended::Code(code));
        }
        if let Some(sig) = status.terminating_signal() {
            return Ok(Ended::Signal(sig));
        }
        if status.stopped() {
            if pause_ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(pause_ms));
            }
            pause_ms = (pause_ms * 2).clamp(1, CONTINUE_PAUSE_MS_MAX);
            rustix::process::kill_process(pid, Signal::CONT)?;
        }
    }
}

/// Kills and reaps every process left behind (children of this process, which is their
/// subreaper) and answers how many there were. Only children are killed, never a process
/// found by number further down: a child's number cannot be reused before it is reaped,
/// a grandchild's can. A grandchild becomes a child when its parent is killed, and the
/// next round kills it.
pub fn end_leftovers() -> io::Result<usize> {
    let me = rustix::process::getpid();
    let mut ended = 0;
    for _ in 0..LEFTOVER_ROUNDS_MAX {
        // Every child that has ended, reaped; no child at all (the common case) is one
        // system call. Any child (`wait`, pid -1), not only those of this process group
        // (`waitpid(None)`, pid 0): a command's `setsid` leaves it.
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Err(rustix::io::Errno::CHILD) => return Ok(ended),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
                Ok(Some(_)) => ended += 1,
                Ok(None) => break,
            }
        }
        for pid in children_of(me)? {
            // Already gone (a zombie waiting to be reaped): nothing to kill.
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
        match rustix::process::wait(WaitOptions::empty()) {
            Err(rustix::io::Errno::CHILD) => return Ok(ended),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
            Ok(_) => ended += 1,
        }
    }
    Err(io::Error::other(format!(
        "processes were still being started after {LEFTOVER_ROUNDS_MAX} rounds of killing them"
    )))
}

/// A handle on the command that signals it and only it: a pidfd, taken before the command
/// can have been reaped, so a signal sent after it ended reaches nothing (a number could
/// by then be another process's).
pub struct ChildPidfd(std::os::fd::OwnedFd);

impl ChildPidfd {
    /// The handle of `child`, taken before anything waits for it.
    pub fn of(child: &Child) -> io::Result<ChildPidfd> {
        let fd = rustix::process::pidfd_open(pid_of(child.id())?, rustix::process::PidfdFlags::empty())?;
        Ok(ChildPidfd(fd))
    }

    /// Sends SIGTERM to the command; nothing when it has ended.
    pub fn terminate(&self) {
        let _ = rustix::process::pidfd_send_signal(&self.0, Signal::TERM);
    }
}

fn pid_of(id: u32) -> io::Result<Pid> {
    i32::try_from(id).ok().and_then(Pid::from_raw).ok_or_else(|| io::Error::other(format!("no process number {id}")))
}

/// The processes whose parent is `me`, read from `/proc/*/stat` (the kernel's
/// `children` lists are not built into every kernel).
fn children_of(me: Pid) -> io::Result<Vec<Pid>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()).and_then(Pid::from_raw) else { continue };
        // A process that ended since the listing has no stat left. Read as bytes: the
        // command name in it is the program's, any bytes (a name that is not UTF-8 hid
        // its process from a scan that read text).
        let Ok(stat) = std::fs::read(entry.path().join("stat")) else { continue };
        if parent_in_stat(&stat) == Some(me.as_raw_nonzero().get()) {
            found.push(pid);
        }
    }
    Ok(found)
}

/// The parent's number in a `/proc/PID/stat` line: the second field after the command
/// name, which is in parentheses and may itself hold spaces, parentheses and any byte.
fn parent_in_stat(stat: &[u8]) -> Option<i32> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let after_name = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    after_name.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_after_the_last_parenthesis() {
        assert_eq!(parent_in_stat(b"42 (sleep) S 7 42 42 0"), Some(7));
        assert_eq!(parent_in_stat(b"42 (a) b) S 9 1"), Some(9));
        assert_eq!(parent_in_stat(b"42 (x\xff\xfe) S 11 1"), Some(11), "a name that is not UTF-8");
        assert_eq!(parent_in_stat(b"42 (x"), None);
    }
}
