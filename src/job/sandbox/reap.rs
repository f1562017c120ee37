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

/// Most rounds of killing the processes left behind. Each round kills every child of
/// `exec` alive at the time and reaps one; a round that finds none ends the work.
pub const LEFTOVER_ROUNDS_MAX: usize = 100_000;

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

/// Waits for `child` to end, continuing it each time it stops.
pub fn wait_for(child: Child) -> io::Result<Ended> {
    let pid = pid_of(child.id())?;
    loop {
        let status = match rustix::process::waitpid(Some(pid), WaitOptions::UNTRACED) {
            Ok(Some((_, status))) => status,
            Ok(None) | Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if let Some(code) = status.exit_status() {
            return Ok(Ended::Code(code));
        }
        if let Some(sig) = status.terminating_signal() {
            return Ok(Ended::Signal(sig));
        }
        if status.stopped() {
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
        // No child at all (the common case): one system call. Any child (`wait`, pid -1),
        // not only those of this process group (`waitpid(None)`, pid 0): a command's
        // `setsid` leaves it.
        match rustix::process::wait(WaitOptions::NOHANG) {
            Err(rustix::io::Errno::CHILD) => return Ok(ended),
            Err(e) => return Err(e.into()),
            Ok(Some(_)) => {
                ended += 1;
                continue;
            }
            Ok(None) => {}
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
        // A process that ended since the listing has no stat left.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if parent_in_stat(&stat) == Some(me.as_raw_nonzero().get()) {
            found.push(pid);
        }
    }
    Ok(found)
}

/// The parent's number in a `/proc/PID/stat` line: the second field after the command
/// name, which is in parentheses and may itself hold spaces and parentheses.
fn parent_in_stat(stat: &str) -> Option<i32> {
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_after_the_last_parenthesis() {
        assert_eq!(parent_in_stat("42 (sleep) S 7 42 42 0"), Some(7));
        assert_eq!(parent_in_stat("42 (a) b) S 9 1"), Some(9));
        assert_eq!(parent_in_stat("42 (x"), None);
    }
}
