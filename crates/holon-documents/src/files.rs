//! Files holon replaces whole (a job's state, the trusted keys): the one way it writes a
//! file that others read while it changes. A temporary file is created beside the target
//! exclusively (never through a link, never over another file), written, and renamed over
//! the target, so a reader sees the old file or the new one, never a torn one.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Whether a replaced file must be on disk before the write returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync of the file and of its directory: what a decision rests on (a job's versions,
    /// mode, write counts and drift; the trusted keys).
    Synced,
    /// Atomic for readers (the rename), without the two fsyncs: a record only shown to a
    /// person (a job's `exec.jsonl` when it is rewritten), where a crash may lose the
    /// newest entries but never leaves a torn file. The fsyncs were about 0.8 ms of each `holon job exec`.
    Unsynced,
}

/// The permissions of the file that replaces another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// Those of a new file (0666 less the umask).
    New,
    /// Those of the file replaced (a new file's when there is none).
    KeepOld,
}

/// Names tried for the temporary file before giving up (each is created exclusively; a
/// name taken is another writer's, or a file left by a crash).
pub const TEMP_NAME_TRIES_MAX: u32 = 16;

/// Replaces `path` by `bytes` atomically (see the module).
pub fn replace(path: &Path, bytes: &[u8], durability: Durability, mode: FileMode) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let old_mode = match mode {
        FileMode::KeepOld => std::fs::metadata(path).ok().map(|m| m.permissions().mode() & 0o777),
        FileMode::New => None,
    };
    let mut tried = 0;
    let (tmp, mut file) = loop {
        tried += 1;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let tmp = dir.join(format!(".{name}.tmp-{}-{nanos}-{tried}", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true).custom_flags(libc::O_NOFOLLOW);
        if let Some(m) = old_mode {
            options.mode(m);
        }
        match options.open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tried < TEMP_NAME_TRIES_MAX => {}
            Err(e) => return Err(std::io::Error::new(e.kind(), format!("{}: {e}", tmp.display()))),
        }
    };
    let written = file.write_all(bytes).and_then(|()| match durability {
        Durability::Synced => file.sync_all(),
        Durability::Unsynced => Ok(()),
    });
    drop(file);
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if durability == Durability::Synced
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_keeping_its_mode_when_asked_and_a_link_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.yaml");
        replace(&path, b"one", Durability::Synced, FileMode::New).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        replace(&path, b"two", Durability::Unsynced, FileMode::KeepOld).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        replace(&link, b"new", Durability::Synced, FileMode::New).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep", "the link's target is untouched");
        assert_eq!(std::fs::read(&link).unwrap(), b"new");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().filter_map(Result::ok).collect();
        assert_eq!(left.len(), 3, "no temporary file left: {left:?}");
    }
}
