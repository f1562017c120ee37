//! The one way holon reads a file: open without blocking, refuse anything that is not a
//! regular file (devices, FIFOs, sockets, directories), and read at most the limit plus
//! one byte, so that neither `/dev/zero` nor a FIFO nor a file growing while it is read
//! can make a command eat memory or wait forever.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use super::DocError;

/// Reads the whole of the regular file at `path`, refusing it when it holds more than
/// `bytes_max` bytes. Symbolic links are followed; what they lead to must be a regular
/// file too. The opened file is checked (`fstat`), not the path, so a file swapped
/// between the check and the read cannot slip through.
///
/// Errors: [`DocError::NotAFile`] (directory, device, FIFO, socket),
/// [`DocError::TooLarge`], [`DocError::Io`] (missing, permission, ...).
pub fn read_bounded(path: &Path, bytes_max: usize) -> Result<Vec<u8>, DocError> {
    let (file, meta) = open_regular(path)?;
    let declared = usize::try_from(meta.len()).unwrap_or(usize::MAX);
    if declared > bytes_max {
        return Err(DocError::TooLarge { bytes: declared, bytes_max });
    }
    // The size can change after fstat: read one byte past the limit at most.
    let cap = u64::try_from(bytes_max).unwrap_or(u64::MAX).saturating_add(1);
    let mut raw = Vec::with_capacity(declared.min(bytes_max));
    file.take(cap).read_to_end(&mut raw).map_err(|e| DocError::Io(e.to_string()))?;
    if raw.len() > bytes_max {
        return Err(DocError::TooLarge { bytes: raw.len(), bytes_max });
    }
    Ok(raw)
}

/// Opens `path` for reading if it is a regular file, without waiting (a FIFO is refused,
/// not waited on), checked on the opened file so nothing can be swapped in between. The
/// first step of [`read_bounded`]; streaming readers (`holon records build`) use it alone.
pub fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), DocError> {
    let file = match open_nonblocking(path) {
        Ok(file) => file,
        // A socket cannot be opened at all: say what it is rather than the OS's words.
        Err(e) => {
            return Err(match std::fs::metadata(path) {
                Ok(meta) if !meta.is_file() => DocError::NotAFile { what: file_type_name(&meta.file_type()) },
                _ => DocError::Io(e.to_string()),
            });
        }
    };
    let meta = file.metadata().map_err(|e| DocError::Io(e.to_string()))?;
    if !meta.is_file() {
        return Err(DocError::NotAFile { what: file_type_name(&meta.file_type()) });
    }
    Ok((file, meta))
}

/// [`read_bounded`], then UTF-8.
pub fn read_text_bounded(path: &Path, bytes_max: usize) -> Result<String, DocError> {
    let raw = read_bounded(path, bytes_max)?;
    String::from_utf8(raw).map_err(|_| DocError::Io("the file is not UTF-8 text".into()))
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It has
    // no effect on reads of regular files, the only kind read after the check.
    OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).open(path)
}

fn file_type_name(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// Most YAML files one directory walk returns.
pub const WALK_FILES_MAX: usize = 10_000;
/// Deepest directory nesting walked.
pub const WALK_DEPTH_MAX: usize = 32;

/// `path` itself if it is a file; else every `.yaml`/`.yml` file below it, sorted,
/// skipping hidden entries, bounded by [`WALK_FILES_MAX`] and [`WALK_DEPTH_MAX`].
pub fn yaml_files(path: &Path) -> Result<Vec<PathBuf>, DocError> {
    let mut out = Vec::new();
    if path.is_dir() {
        walk(path, 0, &mut out)?;
    } else if path.exists() {
        out.push(path.to_path_buf());
    } else {
        return Err(DocError::Io(format!("{}: no such file or directory", path.display())));
    }
    Ok(out)
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), DocError> {
    if depth > WALK_DEPTH_MAX {
        return Err(DocError::Io(format!("{}: directories nested deeper than {WALK_DEPTH_MAX} levels", dir.display())));
    }
    // Each entry with its own type, symbolic links not followed: a link to a directory
    // is not walked (a link to `.` would repeat the walk at every level), a link to a
    // file is read like a file (and refused there if it leads to a device or a FIFO).
    let mut entries: Vec<(PathBuf, bool)> = std::fs::read_dir(dir)
        .map_err(|e| DocError::Io(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| (e.path(), e.file_type().is_ok_and(|t| t.is_dir()))))
        .filter(|(p, _)| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    entries.sort();
    for (p, is_dir) in entries {
        if is_dir {
            walk(&p, depth + 1, out)?;
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            if out.len() >= WALK_FILES_MAX {
                return Err(DocError::Io(format!(
                    "more than {WALK_FILES_MAX} files under {}; name a smaller directory",
                    dir.display()
                )));
            }
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_directories_are_refused() {
        assert!(matches!(read_bounded(Path::new("/dev/zero"), 1 << 20), Err(DocError::NotAFile { what: "a device" })));
        assert!(matches!(read_bounded(Path::new("/"), 1 << 20), Err(DocError::NotAFile { what: "a directory" })));
    }

    #[test]
    fn a_socket_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("holon-read-socket-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.yaml");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(matches!(read_bounded(&path, 1 << 20), Err(DocError::NotAFile { what: "a socket" })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_limit_is_inclusive() {
        let dir = std::env::temp_dir().join(format!("holon-read-bounded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.yaml");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_bounded(&path, 5).unwrap(), b"12345");
        assert!(matches!(read_bounded(&path, 4), Err(DocError::TooLarge { bytes: 5, bytes_max: 4 })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
