//! The arguments of a command of a path kind (read, write, copy, find, grep…): clustered
//! short flags split where the command clusters them, then each word judged as a flag, a
//! path read, a path written or a pinned word.

use super::flags::{self, Value};
use super::kinds::Kind;
use super::{is_flag, path_like};

/// Options of `find` that come before its start paths.
const FIND_LEADING_OPTIONS: &[&str] = &["-H", "-L", "-P", "-O0", "-O1", "-O2", "-O3"];

/// The words of a command with clustered short flags split letter by letter where the
/// command clusters them: `-uo FILE` is `-u -o FILE`, `-ofile` is `-o file`.
fn unclustered(head: &str, kind: Kind, args: &[String]) -> Vec<String> {
    if !flags::clusters_short_flags(kind) {
        return args.to_vec();
    }
    let mut out = Vec::with_capacity(args.len());
    let mut words = args.iter();
    while let Some(w) = words.next() {
        if w == "--" {
            out.push(w.clone());
            out.extend(words.cloned());
            break;
        }
        let Some(cluster) = w.strip_prefix('-').filter(|c| {
            c.len() > 1 && !c.starts_with('-') && c.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        }) else {
            out.push(w.clone());
            continue;
        };
        for (i, c) in cluster.char_indices() {
            if !c.is_ascii_alphanumeric() {
                // Not a flag letter: the rest of the word is not a cluster; keep it whole.
                out.push(format!("-{}", cluster.get(i..).unwrap_or_default()));
                break;
            }
            let flag = format!("-{c}");
            let takes_value = flags::value_of(head, None, &flag).is_some() || (kind == Kind::Sed && c == 'i');
            out.push(flag);
            if takes_value {
                let rest = cluster.get(i + c.len_utf8()..).unwrap_or_default();
                if kind == Kind::Sed {
                    // `-i.bak`: the suffix belongs to `-i`, nothing after it is a flag.
                } else if !rest.is_empty() {
                    out.push(rest.to_owned());
                } else if let Some(v) = words.next() {
                    out.push(v.clone());
                }
                break;
            }
        }
    }
    out
}

/// Flags, paths read, paths written and pinned words of a command of a path kind.
pub(super) fn judge(
    head: &str,
    sub: Option<&str>,
    kind: Kind,
    args: &[String],
) -> (Vec<String>, Vec<String>, Vec<String>, Vec<String>) {
    let args = unclustered(head, kind, args);
    let mut pinned = Vec::new();
    let (mut flags, mut reads, mut writes, mut positionals) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut target_dir = None;
    let mut words = args.iter().peekable();
    let mut dashdash = false;
    if kind == Kind::Find {
        // `find -L / …`: options, then start paths, then the expression.
        while let Some(w) = words.next_if(|w| FIND_LEADING_OPTIONS.contains(&w.as_str()) || *w == "-D") {
            flags.push(w.clone());
            if w == "-D" {
                words.next();
            }
        }
        while let Some(w) = words.next_if(|w| !(w.starts_with('-') || *w == "(" || *w == "!" || *w == ")")) {
            positionals.push(w.clone());
        }
        for w in words.by_ref() {
            if is_flag(w) {
                flags.push(w.clone());
            }
        }
    }
    while let Some(w) = words.next() {
        if dashdash || !is_flag(w) {
            positionals.push(w.clone());
            continue;
        }
        if w == "--" {
            dashdash = true;
            continue;
        }
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (w.as_str(), None),
        };
        flags.push(name.to_owned());
        let value = match inline {
            Some(v) => Some(v.to_owned()),
            None if flags::value_of(head, sub, name).is_some() => words.next().cloned(),
            None => None,
        };
        match (flags::value_of(head, sub, name), value) {
            (Some(Value::Write), Some(v)) if matches!(kind, Kind::Copy { .. }) => target_dir = Some(v),
            (Some(Value::Write), Some(v)) => writes.push(v),
            (Some(Value::Read), Some(v)) => reads.push(v),
            (Some(Value::Other), _) => {}
            // An unknown `--name=value`: its value is judged like an argument.
            (None, Some(v)) if path_like(&v) => reads.push(v),
            (None, Some(v)) if kind == Kind::PathLike => pinned.push(format!("{name}={v}")),
            _ => {}
        }
    }
    match kind {
        Kind::Read { lead } => {
            let operands: Vec<String> = positionals.into_iter().skip(lead).collect();
            if flags::recursive_read(head, &flags) {
                // A recursive read reads every file below; without an operand, below `.`.
                if operands.is_empty() {
                    reads.push(recursive("."));
                }
                reads.extend(operands.iter().map(|p| recursive(p)));
            } else {
                reads.extend(operands);
            }
        }
        Kind::Write { lead } => {
            // `chmod -x FILE`: with no more operands than the leading mode, each is a file.
            let skip = if positionals.len() <= lead { 0 } else { lead };
            let deep = flags::recursive_write(head, &flags);
            for p in positionals.into_iter().skip(skip) {
                push_path(&mut writes, p, deep);
            }
        }
        Kind::Words => {}
        Kind::Find => {
            if positionals.is_empty() {
                reads.push(recursive("."));
            }
            reads.extend(positionals.iter().map(|p| recursive(p)));
        }
        Kind::Copy { move_ } => {
            // `mv` moves whole trees whatever its flags; `cp -r` copies them. Below a tree's
            // path is judged too (`dir/**`), so a rule for one name moves no tree.
            let deep = move_ || flags::recursive_copy(head, &flags);
            let target = target_dir.or_else(|| positionals.pop());
            if let Some(t) = target {
                push_path(&mut writes, t, deep);
            }
            let sources = if move_ { &mut writes } else { &mut reads };
            for p in positionals {
                push_path(sources, p, deep);
            }
        }
        Kind::Sed => {
            let in_place = flags.iter().any(|f| f == "-i" || f.starts_with("--in-place"));
            let mut files = positionals.into_iter();
            // The script can write files (`w`) and run commands (`e`): pinned.
            pinned.extend(files.next());
            if in_place { writes.extend(files) } else { reads.extend(files) }
        }
        Kind::Dd => {
            for p in positionals {
                match p.split_once('=') {
                    Some(("if", f)) => reads.push(f.to_owned()),
                    Some(("of", f)) => writes.push(f.to_owned()),
                    _ => {}
                }
            }
        }
        // Path-shaped words are reads; every other word is pinned (`npm audit fix`).
        _ => {
            for p in positionals {
                if path_like(&p) { reads.push(p) } else { pinned.push(p) }
            }
        }
    }
    (flags, reads, writes, pinned)
}

/// `dir/**`: everything below `dir` (`**` for `.`).
fn recursive(dir: &str) -> String {
    crate::job::call::recursive(dir)
}

/// A path operand, and when the command descends into it (`rm -r`, `mv`, `cp -r`)
/// everything below it too.
fn push_path(out: &mut Vec<String>, path: String, deep: bool) {
    if deep {
        out.push(recursive(&path));
    }
    out.push(path);
}
