//! The command's private temporary directory (its `TMPDIR`): made in the state
//! directory's `tmp/` before the command, removed after it by `holon job exec`, which
//! stays outside the sandbox for that (docs/job.md "What the kernel enforces").
//!
//! The confined command owns everything in the directory and may try to make it
//! unremovable. The removal is therefore bounded and cannot be crashed: no recursion (a
//! 30,000-deep tree overflowed the stack of `std::fs::remove_dir_all`), two descriptors at a
//! time (a deep tree made it run out of them), every step relative to a descriptor with
//! no link followed, and at most [`TEMP_ENTRIES_MAX`] entries. A subdirectory is first
//! moved up to the top of the tree, so depth costs nothing. Immutable files (`chattr +i`)
//! cannot be made: `holon-sandbox` drops every capability before the command
//! (`kernel::drop_capabilities`).

use std::ffi::{CStr, CString};
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags};

/// Most entries (files, links and directories, at any depth) a removal takes on; a
/// directory holding more is left, and said.
pub const TEMP_ENTRIES_MAX: usize = 1_000_000;

/// Makes a directory only this command writes in, in `root`'s `tmp/` (mode 0700), and
/// answers its resolved path. It lies in the state directory, which no confined command
/// of its jobs can write: one beneath another job's `/tmp/**` grant could be raced (a link
/// planted where `exec` writes the plan would make the unconfined `exec` overwrite its
/// target).
pub fn create(root: &Path) -> std::io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let parent = root.join("tmp");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&parent)?;
    let dir = parent.join(format!("holon-exec-{}-{nanos}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    std::fs::canonicalize(&dir)
}

/// Why a temporary directory was left on disk.
#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    #[error("it holds more than {TEMP_ENTRIES_MAX} entries")]
    TooMany,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// How every directory of a removal is opened: to read, never through a link.
const DIRECTORY: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// Removes `dir` and everything in it, bounded (see the module). An error leaves what
/// could not be removed and says why; the caller says so to the user.
pub fn remove(dir: &Path) -> Result<(), RemoveError> {
    let top = rustix::fs::openat(CWD, dir, DIRECTORY, Mode::empty()).map_err(std::io::Error::from)?;
    let mut removal = Removal { top, pending: vec![None], moved: 0, entries: 0 };
    while let Some(name) = removal.pending.pop() {
        removal.empty(name.as_deref())?;
    }
    drop(removal);
    std::fs::remove_dir(dir)?;
    Ok(())
}

/// One removal: the top directory's descriptor, the directories at the top still to be
/// emptied (`None`: the top itself), and the counts that bound it.
struct Removal {
    top: OwnedFd,
    pending: Vec<Option<CString>>,
    moved: u64,
    entries: usize,
}

impl Removal {
    /// Empties the directory `name` at the top (the top itself for `None`) and, unless it
    /// is the top, removes it: files are unlinked, subdirectories moved up to the top and
    /// emptied later.
    fn empty(&mut self, name: Option<&CStr>) -> Result<(), RemoveError> {
        let dir = rustix::fs::openat(&self.top, name.unwrap_or(c"."), DIRECTORY, Mode::empty())
            .map_err(std::io::Error::from)?;
        // Names first, then changes: a directory is not changed while it is being read.
        let mut names = Vec::new();
        for entry in Dir::read_from(&dir).map_err(std::io::Error::from)? {
            let entry = entry.map_err(std::io::Error::from)?;
            let n = entry.file_name();
            if n == c"." || n == c".." {
                continue;
            }
            self.entries += 1;
            if self.entries > TEMP_ENTRIES_MAX {
                return Err(RemoveError::TooMany);
            }
            names.push((n.to_owned(), entry.file_type()));
        }
        for (n, kind) in names {
            if is_dir(&dir, &n, kind)? {
                self.move_up(&dir, n, name.is_none())?;
            } else {
                rustix::fs::unlinkat(&dir, &n, AtFlags::empty()).map_err(std::io::Error::from)?;
            }
        }
        if let Some(n) = name {
            rustix::fs::unlinkat(&self.top, n, AtFlags::REMOVEDIR).map_err(std::io::Error::from)?;
        }
        Ok(())
    }

    /// Queues the subdirectory `n` of `dir`, moved to the top first unless `dir` is the top.
    fn move_up(&mut self, dir: &OwnedFd, n: CString, at_top: bool) -> Result<(), RemoveError> {
        if at_top {
            self.pending.push(Some(n));
            return Ok(());
        }
        loop {
            self.moved += 1;
            // Each number is tried once: a command that made every name gets no more tries
            // than entries it may hold.
            if self.moved > 2 * TEMP_ENTRIES_MAX as u64 {
                return Err(RemoveError::TooMany);
            }
            let up = CString::new(format!(".holon-removing-{}", self.moved)).map_err(std::io::Error::other)?;
            match rustix::fs::renameat_with(dir, &n, &self.top, &up, rustix::fs::RenameFlags::NOREPLACE) {
                Ok(()) => {
                    self.pending.push(Some(up));
                    return Ok(());
                }
                // A name the command made itself: the next number.
                Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(std::io::Error::from(e).into()),
            }
        }
    }
}

/// Whether the entry `n` of `dir` is a directory (not a link to one), asked of the file
/// system when the directory listing does not say.
fn is_dir(dir: &OwnedFd, n: &CStr, kind: FileType) -> std::io::Result<bool> {
    Ok(match kind {
        FileType::Directory => true,
        FileType::Unknown => {
            let st = rustix::fs::statat(dir, n, AtFlags::SYMLINK_NOFOLLOW)?;
            FileType::from_raw_mode(st.st_mode) == FileType::Directory
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("holon-temp-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_deep_tree_is_removed_without_recursion() {
        let dir = scratch("deep");
        // Deeper than a path can name (each level is reached from the one above).
        let mut here = std::fs::File::open(&dir).unwrap();
        for _ in 0..5_000 {
            let fd: &std::os::fd::OwnedFd = &here.into();
            rustix::fs::mkdirat(fd, c"dddddddd", Mode::RWXU).unwrap();
            let next = rustix::fs::openat(fd, c"dddddddd", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
            rustix::fs::openat(&next, c"f", OFlags::CREATE | OFlags::WRONLY, Mode::RUSR).unwrap();
            here = std::fs::File::from(next);
        }
        drop(here);
        remove(&dir).unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn links_are_removed_never_followed() {
        let dir = scratch("links");
        let outside = scratch("links-outside");
        std::fs::write(outside.join("keep"), "keep").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("to-outside")).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("sub/again")).unwrap();
        std::fs::write(dir.join(".holon-removing-1"), "a name the command chose").unwrap();
        std::fs::create_dir_all(dir.join("sub/x/y")).unwrap();
        remove(&dir).unwrap();
        assert!(!dir.exists());
        assert_eq!(std::fs::read_to_string(outside.join("keep")).unwrap(), "keep");
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn a_top_that_is_a_link_is_refused() {
        let dir = scratch("toplink");
        let target = scratch("toplink-target");
        std::fs::write(target.join("keep"), "keep").unwrap();
        let link = dir.join("tmp");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(remove(&link).is_err());
        assert!(target.join("keep").exists());
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&target).unwrap();
    }
}
