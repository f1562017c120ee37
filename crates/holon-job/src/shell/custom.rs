//! Commands whose arguments are no options in getopt's sense, judged by parsers of their
//! own: `find` (start points, then an expression), `dd` (`key=value` operands) and
//! `test`/`[` (an expression of probes). Anything these do not know is opaque.

use super::args::{Judged, recursive};
use super::path_like;

/// `find`'s options before its start points.
const FIND_LEADING: &[&str] = &["-H", "-L", "-P", "-O0", "-O1", "-O2", "-O3"];
/// Expression words that take no argument.
#[rustfmt::skip]
const FIND_NULLARY: &[&str] = &[
    "-a", "-and", "-o", "-or", "-not", "!", "(", ")", ",", "-true", "-false", "-print", "-print0", "-ls",
    "-prune", "-quit", "-depth", "-d", "-mount", "-xdev", "-noleaf", "-daystart", "-empty", "-executable",
    "-readable", "-writable", "-nogroup", "-nouser", "-ignore_readdir_race", "-noignore_readdir_race", "-help",
    "--help", "-version", "--version",
];
/// Expression words that take one argument naming no file, host or program (`-newer
/// FILE` only looks at FILE's times).
#[rustfmt::skip]
const FIND_UNARY: &[&str] = &[
    "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-lname", "-ilname",
    "-type", "-xtype", "-maxdepth", "-mindepth", "-mtime", "-atime", "-ctime", "-mmin", "-amin", "-cmin", "-size",
    "-perm", "-user", "-group", "-uid", "-gid", "-links", "-inum", "-samefile", "-newer", "-anewer", "-cnewer",
    "-used", "-fstype", "-printf", "-regextype", "-context",
];
/// Expression words that follow symbolic links (the walk leaves the judged tree).
const FIND_FOLLOWS: &[&str] = &["-L", "-follow"];

/// `-newerXY` (`-newermt`, `-newerBa`, …): one argument.
fn newer_xy(w: &str) -> bool {
    w.strip_prefix("-newer").is_some_and(|xy| match xy.as_bytes() {
        [x, y] => b"aBcm".contains(x) && b"aBcmt".contains(y),
        _ => false,
    })
}

/// `find`: start points read recursively (the working directory without one); every
/// expression word known, or the call is opaque (`-exec`, `-delete`, `-fprint`,
/// `-files0-from` and anything unknown).
pub(super) fn find(args: &[String]) -> Option<Judged> {
    let mut out = Judged::default();
    let mut words = args.iter().peekable();
    while let Some(w) = words.next_if(|w| FIND_LEADING.contains(&w.as_str()) || *w == "-D") {
        out.flags.push(w.clone());
        if w == "-D" {
            out.pinned.push(words.next()?.clone());
        }
    }
    let mut starts = Vec::new();
    while let Some(w) = words.next_if(|w| !(w.starts_with('-') || matches!(w.as_str(), "(" | "!" | ")" | ","))) {
        starts.push(w.clone());
    }
    while let Some(w) = words.next() {
        if FIND_NULLARY.contains(&w.as_str()) || FIND_FOLLOWS.contains(&w.as_str()) {
        } else if FIND_UNARY.contains(&w.as_str()) || newer_xy(w) {
            words.next()?;
        } else {
            return None;
        }
        if w.starts_with('-') {
            out.flags.push(w.clone());
        }
    }
    if starts.is_empty() {
        starts.push(".".to_owned());
    }
    for s in &starts {
        out.reads.push(recursive(s));
    }
    out.flags.sort();
    out.flags.dedup();
    Some(out)
}

/// `dd`'s operands that name no file.
const DD_FREE: &[&str] =
    &["bs", "ibs", "obs", "cbs", "count", "skip", "seek", "iseek", "oseek", "conv", "iflag", "oflag", "status"];

/// `dd`: `if=` read, `of=` written, the other known operands free; anything else opaque.
pub(super) fn dd(args: &[String]) -> Option<Judged> {
    let mut out = Judged::default();
    for a in args {
        match a.split_once('=') {
            Some(("if", f)) => out.reads.push(f.to_owned()),
            Some(("of", f)) => out.writes.push(f.to_owned()),
            Some((k, _)) if DD_FREE.contains(&k) => {}
            _ if a == "--help" || a == "--version" => out.flags.push(a.clone()),
            _ => return None,
        }
    }
    Some(out)
}

/// `test`/`[`: its operators are flags of the rule, path-shaped operands are probed
/// (judged as reads), every other word is pinned.
pub(super) fn test(args: &[String]) -> Judged {
    let mut out = Judged::default();
    for a in args {
        if a.starts_with('-') && a.len() > 1 {
            out.flags.push(a.clone());
        } else if path_like(a) {
            out.reads.push(a.clone());
        } else {
            out.pinned.push(a.clone());
        }
    }
    out.flags.sort();
    out.flags.dedup();
    out
}
