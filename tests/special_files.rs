//! Every file is read through one bounded reader: devices, FIFOs, sockets and directories
//! where a file is expected are refused at once (exit 2); symbolic links to directories
//! are not walked. Each case runs the real binary under a time limit, because the holes
//! were a command that eats memory (`/dev/zero`) or waits forever (a FIFO).
#![cfg(feature = "cli")] // runs the `holon` binary

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `holon` with `args`; kills it after `limit`. (exit code, stdout, stderr, elapsed)
fn holon_within(args: &[&str], limit: Duration) -> (Option<i32>, String, String, Duration) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() && started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let elapsed = started.elapsed();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
        elapsed,
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("holon-special-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo failed");
}

/// How long a command may take before it counts as hung (generous: a loaded machine is
/// slow; a read that blocks on a FIFO never ends).
const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn a_fifo_is_refused_without_waiting() {
    let dir = scratch("fifo");
    let fifo = dir.join("mandate.yaml");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap();
    for args in [
        vec!["validate", f],
        vec!["validate", dir.to_str().unwrap()],
        vec!["mandate", "check", f, "examples/agents"],
        vec!["mandate", "simulate", "examples/mandates/alice-root.yaml", f],
        vec!["search", "--mandate", f, "--agents", "examples/agents"],
    ] {
        let (code, out, err, elapsed) = holon_within(&args, LIMIT);
        assert_eq!(code, Some(2), "{args:?} took {elapsed:?}\n{out}\n{err}");
        assert!(format!("{out}{err}").contains("a FIFO (named pipe), not a regular file"), "{args:?}\n{out}\n{err}");
        assert!(elapsed < LIMIT, "{args:?} took {elapsed:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_link_to_dev_zero_is_refused_without_reading() {
    let dir = scratch("zero");
    let link = dir.join("holon.yaml");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let l = link.to_str().unwrap();
    for args in [vec!["validate", l], vec!["validate", dir.to_str().unwrap()], vec!["validate", "/dev/zero"]] {
        let (code, out, err, elapsed) = holon_within(&args, LIMIT);
        assert_eq!(code, Some(2), "{args:?} took {elapsed:?}\n{out}\n{err}");
        assert!(out.contains("this is a device, not a regular file"), "{args:?}\n{out}\n{err}");
        assert!(elapsed < LIMIT, "{args:?} took {elapsed:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_named_as_a_document_is_refused() {
    let (code, out, err, _) = holon_within(&["mandate", "check", "examples/agents", "examples/agents"], LIMIT);
    assert_eq!(code, Some(2), "{out}\n{err}");
    assert!(err.contains("this is a directory, not a regular file"), "{err}");
}

/// Two links back to their own directory made the walk visit 2^32 paths.
#[test]
fn links_to_directories_are_not_walked() {
    let dir = scratch("loop");
    std::fs::copy("examples/mandates/alice-root.yaml", dir.join("root.yaml")).unwrap();
    std::os::unix::fs::symlink(&dir, dir.join("again")).unwrap();
    std::os::unix::fs::symlink(&dir, dir.join("and-again")).unwrap();
    let (code, out, err, elapsed) = holon_within(&["validate", dir.to_str().unwrap()], LIMIT);
    assert_eq!(code, Some(0), "took {elapsed:?}\n{out}\n{err}");
    assert!(out.contains("1 file(s), 1 valid"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
