//! The command's private temporary directory (its `TMPDIR`): made in the state
//! directory's `tmp/` before the command, removed after it by `holon job exec`, which
//! stays outside the sandbox for that (docs/job.md "What the kernel enforces"). By then
//! every process of the command has ended (`reap`): nothing changes the tree while it is
//! removed.
//!
//! The confined command owns everything in the directory and may try to make it
//! unremovable. The removal is therefore bounded and cannot be crashed: no recursion (a
//! 30,000-deep tree overflowed the stack of `std::fs::remove_dir_all`), a few descriptors
//! at a time (a deep tree made it run out of them), names held [`TEMP_BATCH_NAMES`] at a
//! time, every step relative to a descriptor with no link followed, and at most
//! [`TEMP_ENTRIES_MAX`] entries. A subdirectory is first moved up to the top of the tree,
//! so depth costs nothing. A directory the command took its owner's permissions from
//! (`chmod 000`) is given them back first. Immutable files (`chattr +i`) cannot be made:
//! `holon-sandbox` drops every capability before the command
//! (`kernel::drop_capabilities`).

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fd::AsFd;
use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags};

/// Most entries (files, links and directories, at any depth) a removal takes on; the
/// rest is left, and said.
pub const TEMP_ENTRIES_MAX: usize = 1_000_000;
/// Most names of one directory held in memory at a time.
pub const TEMP_BATCH_NAMES: usize = 1_024;

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
    #[error(
        "it holds more than {TEMP_ENTRIES_MAX} entries (a directory counts twice: where the command made it and at the top, where it is moved to be emptied); the rest is left"
    )]
    TooMany,
    #[error(
        "it holds a directory of another user (uid {0}), which only a process with capabilities could remove: holon does not remove what the command itself could not"
    )]
    OtherOwner(u32),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Opens a directory to read, never through a link.
const DIRECTORY: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);
/// Opens a directory without reading it (only its parent's search permission needed).
const DIRECTORY_PATH: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// Removes `dir` and everything in it, bounded (see the module). An error leaves what
/// could not be removed and says why; the caller says so to the user.
pub fn remove(dir: &Path) -> Result<(), RemoveError> {
    remove_at_most(dir, TEMP_ENTRIES_MAX)
}

fn remove_at_most(dir: &Path, entries_max: usize) -> Result<(), RemoveError> {
    // The directory is this process's (`create`); so must be every directory in it.
    let owner = rustix::process::geteuid().as_raw();
    let top = open_owned(CWD, dir, owner)?;
    let mut removal = Removal { moved: 0, entries: 0, entries_max, owner };
    // Each pass takes on what the top holds; emptying a directory moves its
    // subdirectories up to the top, which the next pass finds (a listing need not show
    // names added while it is read).
    while removal.listing(&top, &top, Removal::remove_emptied)? {}
    drop(top);
    std::fs::remove_dir(dir)?;
    Ok(())
}

/// Opens the directory `name` of `parent` to read, having given its owner read, write
/// and search permission (the command owns it and may have taken them away): through a
/// descriptor that needs none of them, changed by its `/proc/self/fd` name, which is that
/// very directory whatever its path now names. A directory not of `owner` is refused
/// before anything is changed: a command run as root without capabilities can move
/// another user's directory into its TMPDIR, and root's `exec` could then empty it.
fn open_owned<Fd: AsFd, P: rustix::path::Arg + Copy>(parent: Fd, name: P, owner: u32) -> Result<OwnedFd, RemoveError> {
    if let Ok(fd) = rustix::fs::openat(parent.as_fd(), name, DIRECTORY, Mode::empty()) {
        owned_by(&fd, owner)?;
        rustix::fs::fchmod(&fd, Mode::RWXU).map_err(std::io::Error::from)?;
        return Ok(fd);
    }
    let path = own(parent, name, owner)?;
    Ok(rustix::fs::openat(&path, c".", DIRECTORY, Mode::empty()).map_err(std::io::Error::from)?)
}

/// Gives the owner of the directory `name` of `parent` read, write and search permission
/// back (moving a directory to another parent writes its `..`), and answers a descriptor
/// of it that can only name it. Refused for a directory not of `owner`.
fn own<Fd: AsFd, P: rustix::path::Arg>(parent: Fd, name: P, owner: u32) -> Result<OwnedFd, RemoveError> {
    let path = rustix::fs::openat(parent.as_fd(), name, DIRECTORY_PATH, Mode::empty()).map_err(std::io::Error::from)?;
    owned_by(&path, owner)?;
    rustix::fs::chmod(format!("/proc/self/fd/{}", path.as_raw_fd()), Mode::RWXU).map_err(std::io::Error::from)?;
    Ok(path)
}

/// Refuses a directory whose owner is not `owner`.
fn owned_by(fd: &OwnedFd, owner: u32) -> Result<(), RemoveError> {
    let uid = rustix::fs::fstat(fd).map_err(std::io::Error::from)?.st_uid;
    if uid == owner { Ok(()) } else { Err(RemoveError::OtherOwner(uid)) }
}

/// One removal: the counts that bound it (the top directory's descriptor is handed to each
/// step).
struct Removal {
    moved: u64,
    entries: usize,
    entries_max: usize,
    /// Whose every directory in the tree must be.
    owner: u32,
}

impl Removal {
    /// Takes on one listing of `dir` to its end, a batch at a time: files are unlinked,
    /// each directory handed to `on_dir` (with the top and `dir`). Answers whether the
    /// listing held anything. The one walk of both steps: a pass over the top
    /// ([`Removal::remove_emptied`]) and the emptying of a directory ([`Removal::move_up`]).
    fn listing(&mut self, top: &OwnedFd, dir: &OwnedFd, on_dir: OnDir) -> Result<bool, RemoveError> {
        let mut any = false;
        let mut names = Dir::read_from(dir).map_err(std::io::Error::from)?;
        loop {
            let batch = self.batch(&mut names)?;
            if batch.is_empty() {
                return Ok(any);
            }
            any = true;
            for (n, kind) in batch {
                match is_dir(dir, &n, kind) {
                    Ok(true) => on_dir(self, top, dir, &n)?,
                    Ok(false) => unlink(dir, &n, AtFlags::empty())?,
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }

    /// A directory at the top: emptied, then removed (unless it is gone already: a listing
    /// may show a name twice).
    fn remove_emptied(&mut self, top: &OwnedFd, _: &OwnedFd, name: &CStr) -> Result<(), RemoveError> {
        if self.empty(top, name)? {
            unlink(top, name, AtFlags::REMOVEDIR)?;
        }
        Ok(())
    }

    /// Empties the directory `name` at the top: files are unlinked, subdirectories moved
    /// up to the top (emptied by a later pass). Read again until a reading finds nothing.
    /// Answers false for a name that is gone.
    fn empty(&mut self, top: &OwnedFd, name: &CStr) -> Result<bool, RemoveError> {
        let dir = match open_owned(top, name, self.owner) {
            Ok(d) => d,
            Err(RemoveError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(false),
            Err(e) => return Err(e),
        };
        while self.listing(top, &dir, Removal::move_up)? {}
        Ok(true)
    }

    /// The next names of a listing (at most [`TEMP_BATCH_NAMES`]; none at its end), each
    /// counted against the bound ([`TEMP_ENTRIES_MAX`]). Names first, then changes: a directory is not
    /// changed while a batch of it is read.
    fn batch(&mut self, names: &mut Dir) -> Result<Vec<(CString, FileType)>, RemoveError> {
        let mut batch = Vec::new();
        while batch.len() < TEMP_BATCH_NAMES {
            let Some(entry) = names.read() else { break };
            let entry = entry.map_err(std::io::Error::from)?;
            let n = entry.file_name();
            if n == c"." || n == c".." {
                continue;
            }
            // At the bound, what was listed is still removed; the next listing says so.
            if self.entries == self.entries_max {
                return if batch.is_empty() { Err(RemoveError::TooMany) } else { Ok(batch) };
            }
            self.entries += 1;
            batch.push((n.to_owned(), entry.file_type()));
        }
        Ok(batch)
    }

    /// Moves the subdirectory `n` of `dir` to the top, under a name of holon's.
    fn move_up(&mut self, top: &OwnedFd, dir: &OwnedFd, n: &CStr) -> Result<(), RemoveError> {
        let mut owned = false;
        loop {
            self.moved += 1;
            // Each number is tried once: a command that made every name gets no more tries
            // than entries it may hold.
            if self.moved > 2 * self.entries_max as u64 {
                return Err(RemoveError::TooMany);
            }
            let up = CString::new(format!(".holon-removing-{}", self.moved)).map_err(std::io::Error::other)?;
            match rustix::fs::renameat_with(dir, n, top, &up, rustix::fs::RenameFlags::NOREPLACE) {
                Ok(()) => return Ok(()),
                // A name the command made itself: the next number.
                Err(rustix::io::Errno::EXIST) => {}
                Err(rustix::io::Errno::NOENT) => return Ok(()),
                // Its owner's write permission was taken away: given back, tried again.
                Err(rustix::io::Errno::ACCESS) if !owned => {
                    own(dir, n, self.owner)?;
                    owned = true;
                    self.moved -= 1;
                }
                Err(e) => return Err(std::io::Error::from(e).into()),
            }
        }
    }
}

/// What a listing does with a directory it finds: (removal, top, the listed directory, name).
type OnDir = fn(&mut Removal, &OwnedFd, &OwnedFd, &CStr) -> Result<(), RemoveError>;

/// Unlinks `n` of `dir`; one already gone is no error (a listing may show a name twice).
fn unlink(dir: &OwnedFd, n: &CStr, flags: AtFlags) -> std::io::Result<()> {
    match rustix::fs::unlinkat(dir, n, flags) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
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

    #[test]
    fn at_the_bound_what_was_counted_is_removed_and_the_rest_said() {
        let dir = scratch("bound");
        for i in 0..10 {
            std::fs::write(dir.join(format!("f{i}")), "x").unwrap();
        }
        assert!(matches!(remove_at_most(&dir, 4), Err(RemoveError::TooMany)));
        // Before, nothing was removed when the bound was passed.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 6);
        remove(&dir).unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn more_names_than_a_batch_in_one_directory_and_wide_trees_are_removed() {
        let dir = scratch("wide");
        for i in 0..(TEMP_BATCH_NAMES * 2 + 7) {
            std::fs::write(dir.join(format!("f{i}")), "x").unwrap();
        }
        for i in 0..(TEMP_BATCH_NAMES + 3) {
            std::fs::create_dir_all(dir.join(format!("d/e{i}/g"))).unwrap();
        }
        remove(&dir).unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn a_directory_of_another_user_is_left_untouched() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: another user's directory cannot be made here; CI runs this as root");
            return;
        }
        let dir = scratch("other-owner");
        let theirs = dir.join("moved-in");
        std::fs::create_dir_all(theirs.join("inner")).unwrap();
        std::fs::write(theirs.join("inner/keep"), "theirs").unwrap();
        for p in [&theirs, &theirs.join("inner")] {
            rustix::fs::chown(p, Some(rustix::fs::Uid::from_raw(65534)), None).unwrap();
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        }
        assert!(matches!(remove(&dir), Err(RemoveError::OtherOwner(65534))));
        assert_eq!(std::fs::read_to_string(theirs.join("inner/keep")).unwrap(), "theirs");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
