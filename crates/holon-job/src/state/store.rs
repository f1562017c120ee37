//! The state directory's files: bounded reads that never follow a symlink or open a
//! special file, exclusive atomic writes, the job lock, and the observation log.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{
    Drift, Job, Meta, OBSERVATION_LINE_BYTES_MAX, OBSERVATIONS_BYTES_MAX, OBSERVATIONS_MAX, STATE_BYTES_MAX,
    StateError, io,
};
use crate::propose::Observation;

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsync,
/// rename over the target, fsync of the directory.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    replace(path, bytes, Durability::Synced)
}

pub(super) use crate::files::Durability;

fn replace(path: &Path, bytes: &[u8], durability: Durability) -> Result<(), StateError> {
    crate::files::replace(path, bytes, durability, crate::files::FileMode::New).map_err(io(path))
}

/// Longest wait for the job's lock, in milliseconds.
pub(super) const LOCK_WAIT_MS_MAX: u64 = 5_000;
/// Pause between two tries of the lock, in milliseconds.
const LOCK_POLL_MS: u64 = 5;

/// `O_NOFOLLOW`: a state file that is a symlink is refused, not followed.
pub(super) fn libc_nofollow() -> i32 {
    libc::O_NOFOLLOW
}

/// Opens a state file for reading: never through a symlink, only a regular file
/// (a FIFO or a device is refused before it can block or stream forever).
pub(super) fn open_regular(path: &Path) -> Result<Option<File>, StateError> {
    let f = match OpenOptions::new().read(true).custom_flags(libc_nofollow() | libc::O_NONBLOCK).open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        other => other.map_err(io(path))?,
    };
    let meta = f.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(StateError::Damaged { path: path.display().to_string(), message: "not a regular file".into() });
    }
    Ok(Some(f))
}

pub(super) fn read_bounded(path: &Path) -> Result<Option<String>, StateError> {
    let Some(f) = open_regular(path)? else { return Ok(None) };
    let mut text = String::new();
    f.take(STATE_BYTES_MAX + 1).read_to_string(&mut text).map_err(io(path))?;
    if text.len() as u64 > STATE_BYTES_MAX {
        return Err(StateError::Damaged {
            path: path.display().to_string(),
            message: format!("more than {STATE_BYTES_MAX} bytes"),
        });
    }
    Ok(Some(text))
}

pub(super) fn read_json<T: for<'de> Deserialize<'de> + Default>(path: &Path) -> Result<T, StateError> {
    match read_bounded(path)? {
        None => Ok(T::default()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| StateError::Damaged { path: path.display().to_string(), message: e.to_string() }),
    }
}

pub(super) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StateError> {
    write_json_as(path, value, Durability::Synced)
}

pub(super) fn write_json_as<T: Serialize>(path: &Path, value: &T, durability: Durability) -> Result<(), StateError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| StateError::Damaged { path: path.display().to_string(), message: e.to_string() })?;
    replace(path, text.as_bytes(), durability)
}

pub fn sha256_hex(text: &str) -> String {
    crate::hex::sha256(text.as_bytes())
}

/// A held lock on a job; released when dropped.
pub struct Locked(#[allow(dead_code)] File);

impl Job {
    /// Takes the job's lock. Only `observe` may create the job (`create`); every other
    /// verb on a job that was never started is refused.
    pub(super) fn lock_for(&self, exclusive: bool, create: bool) -> Result<Locked, StateError> {
        if create {
            fs::create_dir_all(self.dir.join("versions")).map_err(io(&self.dir))?;
        } else if !self.dir.is_dir() {
            return Err(self.unknown());
        }
        let path = self.path("lock");
        // Never through a symlink, and never blocking on a FIFO planted as the lock.
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc_nofollow() | libc::O_NONBLOCK)
            .open(&path)
            .map_err(io(&path))?;
        if !f.metadata().map_err(io(&path))?.is_file() {
            return Err(StateError::Damaged { path: path.display().to_string(), message: "not a regular file".into() });
        }
        // A lock held too long (a stuck or hostile process) is an error, not a wait
        // without end: a hook that times out may be taken as "allow".
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(LOCK_WAIT_MS_MAX);
        loop {
            let tried = if exclusive { f.try_lock() } else { f.try_lock_shared() };
            match tried {
                Ok(()) => return Ok(Locked(f)),
                Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(LOCK_POLL_MS));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(StateError::Refused(format!(
                        "{} is held by another process for more than {LOCK_WAIT_MS_MAX} ms",
                        path.display()
                    )));
                }
                Err(fs::TryLockError::Error(e)) => return Err(io(&path)(e)),
            }
        }
    }

    pub(super) fn lock(&self, exclusive: bool) -> Result<Locked, StateError> {
        self.lock_for(exclusive, false)
    }

    /// `meta.json`. A job without one was never started, or lost it: either way there is
    /// no mode to trust.
    pub fn meta(&self) -> Result<Meta, StateError> {
        let path = self.path("meta.json");
        match read_bounded(&path)? {
            None if self.dir.join("versions").read_dir().is_ok_and(|mut d| d.next().is_some()) => {
                Err(StateError::Damaged { path: path.display().to_string(), message: "the file is missing".into() })
            }
            None => Err(self.unknown()),
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| StateError::Damaged { path: path.display().to_string(), message: e.to_string() }),
        }
    }

    pub fn version_text(&self, v: u32) -> Result<String, StateError> {
        let path = self.version_path(v);
        read_bounded(&path)?.ok_or_else(|| StateError::Damaged {
            path: path.display().to_string(),
            message: "the version's file is missing".into(),
        })
    }

    pub fn drift(&self) -> Result<Vec<Drift>, StateError> {
        self.meta()?;
        read_json(&self.path("drift.json"))
    }

    /// Appends observed calls (made relative to their workdir) to the log.
    /// The only verb that starts a job.
    pub fn observe(&self, observations: &[Observation]) -> Result<(), StateError> {
        let _lock = self.lock_for(true, true)?;
        if !self.exists() {
            write_json(&self.path("meta.json"), &Meta::default())?;
        }
        let path = self.path("observations.jsonl");
        let mut text = String::new();
        for o in observations {
            if let Ok(line) = serde_json::to_string(o) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        // Never blocking on a FIFO planted as the log (the lock is held), and never
        // appending beneath a second link to a file the job may not write.
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(libc_nofollow() | libc::O_NONBLOCK)
            .open(&path)
            .map_err(io(&path))?;
        let size = f.metadata().map_err(io(&path))?;
        if !size.is_file() {
            return Err(StateError::Damaged { path: path.display().to_string(), message: "not a regular file".into() });
        }
        if std::os::unix::fs::MetadataExt::nlink(&size) != 1 {
            return Err(StateError::Damaged {
                path: path.display().to_string(),
                message:
                    "it has a second hard link, so an append would also write where the link is: remove the other link"
                        .into(),
            });
        }
        if size.len().saturating_add(text.len() as u64) > OBSERVATIONS_BYTES_MAX {
            return Err(StateError::Refused(format!(
                "{} would pass {OBSERVATIONS_BYTES_MAX} bytes: propose and approve from what was observed, or start a new job",
                path.display()
            )));
        }
        f.write_all(text.as_bytes()).map_err(io(&path))?;
        f.sync_all().map_err(io(&path))
    }

    /// Calls `each` on every readable observation, streaming: a torn, over-long or
    /// damaged line (bad UTF-8 included) is skipped, never the lines after it.
    pub fn each_observation(&self, mut each: impl FnMut(Observation)) -> Result<(), StateError> {
        let path = self.path("observations.jsonl");
        let Some(f) = open_regular(&path)? else { return Ok(()) };
        let mut seen = 0usize;
        crate::lines::for_each_line(BufReader::new(f), OBSERVATION_LINE_BYTES_MAX, OBSERVATIONS_BYTES_MAX, |line| {
            if let Some(o) = line.and_then(|l| serde_json::from_str::<Observation>(l).ok()) {
                seen += 1;
                each(o);
            }
            seen < OBSERVATIONS_MAX
        })
        .map_err(io(&path))
    }

    /// Every readable observation (see [`Job::each_observation`]).
    pub fn observations(&self) -> Result<Vec<Observation>, StateError> {
        let mut out = Vec::new();
        self.each_observation(|o| out.push(o))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::propose::Observation;
    use crate::state::{Job, StateError};

    fn observation() -> Observation {
        let call = crate::call::parse(r#"{"tool":"terminal","args":{"command":"ls"}}"#).unwrap();
        Observation::of(call, Some("r1"), "/w")
    }

    /// A FIFO planted as the observation log is refused at once (the job lock is held
    /// meanwhile), and a second hard link is refused with the file it shares untouched.
    #[test]
    fn the_observation_log_is_a_regular_file_of_its_own() {
        let root = tempfile::tempdir().unwrap();
        let job = Job::open(root.path(), "j").unwrap();
        job.observe(&[observation()]).unwrap();
        let log = root.path().join("jobs/j/observations.jsonl");
        std::fs::remove_file(&log).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(&log).status().unwrap().success());
        let (tx, rx) = std::sync::mpsc::channel();
        let observing = job.clone();
        std::thread::spawn(move || tx.send(observing.observe(&[observation()]).is_err()).unwrap());
        let refused = rx.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(refused, Ok(true), "a FIFO as the log must be refused, not waited on");
        std::fs::remove_file(&log).unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, "untouched\n").unwrap();
        std::fs::hard_link(&victim, &log).unwrap();
        assert!(matches!(job.observe(&[observation()]), Err(StateError::Damaged { .. })));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    }
}
