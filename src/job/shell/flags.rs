//! The flags that change how a command's arguments are judged: which take the next word
//! as a value (and whether that value is read, written or neither), which make a read or
//! a write recursive, and which commands' short flags cluster.

use super::kinds::{Kind, base};

/// Flags whose value is the next word, per command, and what that value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Value {
    /// Not a path (a count, a mode, a pattern).
    Other,
    Read,
    Write,
}

/// Commands whose short flags may be clustered (`-uo FILE`, `-vt DIR`, `-Ei`): a cluster
/// is read letter by letter, so a value flag inside it is seen.
pub(super) fn clusters_short_flags(kind: Kind) -> bool {
    matches!(kind, Kind::Read { .. } | Kind::Write { .. } | Kind::Copy { .. } | Kind::Sed)
}

/// Reads that descend into directories: their operands are read recursively (`dir/**`),
/// and without one they read the working directory.
pub(super) fn recursive_read(head: &str, flags: &[String]) -> bool {
    match base(head) {
        "rg" | "du" | "tree" => true,
        "grep" | "egrep" | "fgrep" => {
            any(flags, &["-r", "-R", "-d"], &["--recursive", "--dereference-recursive", "--directories"])
        }
        "ls" => any(flags, &["-R"], &["--recursive"]),
        _ => false,
    }
}

/// Whether `flags` holds one of `short`, or a long option of `long` written in full or
/// abbreviated as GNU getopt accepts (`--rec` is `--recursive`). Every prefix counts,
/// even one getopt would find ambiguous: counting too much only judges more strictly.
fn any(flags: &[String], short: &[&str], long: &[&str]) -> bool {
    flags.iter().any(|f| {
        short.contains(&f.as_str())
            || (f.len() >= 3 && f.starts_with("--") && long.iter().any(|l| l.starts_with(f.as_str())))
    })
}

/// Copies that descend into directories (`cp -r`, `cp -a`): sources are read below too,
/// and the target written below. `mv` always moves whole trees (see `args.rs`).
pub(super) fn recursive_copy(head: &str, flags: &[String]) -> bool {
    match base(head) {
        "cp" => any(flags, &["-r", "-R", "-a"], &["--recursive", "--archive"]),
        _ => false,
    }
}

/// Writes that descend into directories (`rm -r`, `chmod -R`): each operand is written
/// and so is everything below it, so a rule must allow `dir/**` too, not only `dir` (a
/// rule like `*` for one top-level file must not let `rm -rf src` delete a tree).
pub(super) fn recursive_write(head: &str, flags: &[String]) -> bool {
    match base(head) {
        "rm" => any(flags, &["-r", "-R"], &["--recursive"]),
        "chmod" | "chown" | "chgrp" => any(flags, &["-R"], &["--recursive"]),
        _ => false,
    }
}

/// `(command, flag, value)`: flags that take the next word. A flag not listed takes no
/// value, so the word after it is judged as a positional (the safe direction).
const VALUE_FLAGS: &[(&str, &str, Value)] = &[
    ("head", "-n", Value::Other),
    ("head", "-c", Value::Other),
    ("tail", "-n", Value::Other),
    ("tail", "-c", Value::Other),
    ("sort", "-o", Value::Write),
    ("sort", "--output", Value::Write),
    ("sort", "-k", Value::Other),
    ("sort", "-t", Value::Other),
    ("sort", "-T", Value::Write),
    ("cut", "-d", Value::Other),
    ("cut", "-f", Value::Other),
    ("cut", "-c", Value::Other),
    ("grep", "-e", Value::Other),
    ("grep", "-f", Value::Read),
    ("grep", "-m", Value::Other),
    ("grep", "-A", Value::Other),
    ("grep", "-B", Value::Other),
    ("grep", "-C", Value::Other),
    ("rg", "-e", Value::Other),
    ("rg", "-f", Value::Read),
    ("rg", "-g", Value::Other),
    ("rg", "-t", Value::Other),
    ("rg", "-m", Value::Other),
    ("jq", "--arg", Value::Other),
    ("ls", "-I", Value::Other),
    ("du", "-d", Value::Other),
    ("tree", "-L", Value::Other),
    ("tree", "-o", Value::Write),
    ("diff", "-U", Value::Other),
    ("mkdir", "-m", Value::Other),
    ("truncate", "-s", Value::Other),
    ("truncate", "--size", Value::Other),
    ("truncate", "-r", Value::Read),
    ("touch", "-d", Value::Other),
    ("touch", "-t", Value::Other),
    ("touch", "-r", Value::Read),
    ("cp", "-t", Value::Write),
    ("cp", "--target-directory", Value::Write),
    ("mv", "-t", Value::Write),
    ("mv", "--target-directory", Value::Write),
    ("ln", "-t", Value::Write),
    ("install", "-t", Value::Write),
    ("install", "-m", Value::Other),
    ("install", "-o", Value::Other),
    ("install", "-g", Value::Other),
    // git's options are per subcommand: `-n` is a count for `git log` but a switch for
    // `git grep` and `git blame`; `--pretty`/`--format` take their value only after `=`.
    ("git commit", "-m", Value::Other),
    ("git commit", "--message", Value::Other),
    ("git log", "-n", Value::Other),
    ("git log", "--max-count", Value::Other),
    ("git log", "--author", Value::Other),
    ("git log", "--since", Value::Other),
    ("git log", "--until", Value::Other),
    ("git log", "--grep", Value::Other),
    ("git log", "-S", Value::Other),
    ("git log", "-G", Value::Other),
    ("cargo", "-p", Value::Other),
    ("cargo", "--package", Value::Other),
    ("cargo", "-j", Value::Other),
    ("cargo", "--jobs", Value::Other),
    ("cargo", "-F", Value::Other),
    ("cargo", "--features", Value::Other),
    ("cargo", "--target", Value::Other),
    ("cargo", "--bin", Value::Other),
    ("cargo", "--test", Value::Other),
    ("cargo", "--example", Value::Other),
    ("cargo", "--bench", Value::Other),
    ("go", "-run", Value::Other),
    ("go", "-count", Value::Other),
    ("go", "-timeout", Value::Other),
    ("go", "-tags", Value::Other),
    ("go", "-o", Value::Write),
    ("docker", "--format", Value::Other),
    ("docker", "-n", Value::Other),
    ("docker", "--tail", Value::Other),
    ("find", "-name", Value::Other),
    ("find", "-iname", Value::Other),
    ("find", "-path", Value::Other),
    ("find", "-type", Value::Other),
    ("find", "-maxdepth", Value::Other),
    ("find", "-mindepth", Value::Other),
    ("find", "-newer", Value::Read),
    ("find", "-mtime", Value::Other),
    ("find", "-size", Value::Other),
];

/// What the word after `flag` of `head` is, if `flag` takes one.
pub(super) fn value_of(head: &str, sub: Option<&str>, flag: &str) -> Option<Value> {
    let base = head.rsplit('/').next().unwrap_or(head);
    let with_sub = sub.map(|sub| format!("{base} {sub}"));
    VALUE_FLAGS
        .iter()
        .find(|(h, f, _)| *f == flag && (*h == base || with_sub.as_deref() == Some(*h)))
        .map(|(_, _, v)| *v)
}
