//! The arguments of a command of the option table, read the way the program reads them
//! ([`super::options`]), then judged by what each option and operand is: flags a rule
//! names, paths read and written, hosts, words pinned as learned, or opaque.

use super::hosts::fetcher_hosts;
use super::options::{Class, Mark, Operands, Parsed, Spec};
use super::path_like;

/// What a command's arguments come to; `None` from [`judge`] when the call is opaque.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Judged {
    /// Canonical option names (the first spelling of each option used).
    pub flags: Vec<String>,
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    pub hosts: Vec<String>,
    /// Words pinned as learned, in order.
    pub pinned: Vec<String>,
}

/// `dir/**`, the subject of a recursive search of `dir` (`**` for `.`): everything below it.
pub fn recursive(dir: &str) -> String {
    let d = dir.trim_end_matches('/');
    match d {
        // `/` itself: everything, absolutely (never the relative `**`).
        "" if dir.starts_with('/') => "/**".to_owned(),
        "" | "." => "**".to_owned(),
        _ => format!("{d}/**"),
    }
}

/// A path operand, and when the command descends into it (`rm -r`, `mv`, `cp -r`)
/// everything below it too.
fn push_path(out: &mut Vec<String>, path: &str, deep: bool) {
    if deep {
        out.push(recursive(path));
    }
    out.push(path.to_owned());
}

/// The name a copy, move or link gives `source` inside a target directory.
fn base_name(source: &str) -> &str {
    let trimmed = source.trim_end_matches('/');
    trimmed.rsplit('/').next().filter(|b| !b.is_empty()).unwrap_or(trimmed)
}

/// `dir/name` (`name` alone for the current directory).
fn inside(dir: &str, name: &str) -> String {
    let d = dir.trim_end_matches('/');
    if d.is_empty() || d == "." { name.to_owned() } else { format!("{d}/{name}") }
}

/// Every directory above `path` that `mkdir -p` would create (`a`, `a/b` for `a/b/c`).
fn parents(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = path.trim_end_matches('/');
    while let Some((dir, _)) = at.rsplit_once('/') {
        if dir.is_empty() || dir == "." || dir == ".." || dir.ends_with("/..") {
            break;
        }
        out.push(dir.to_owned());
        at = dir;
    }
    out
}

/// A file named by a value of class `class` (`@FILE`, `name=<FILE`, a cookie file), if any.
fn file_of(class: Class, value: &str) -> Option<String> {
    let file = match class {
        Class::Data => value.strip_prefix('@'),
        Class::Form => value.split_once('=').and_then(|(_, v)| v.strip_prefix('@').or_else(|| v.strip_prefix('<'))),
        Class::UrlEncode => match value.split_once('=') {
            Some((name, _)) if !name.contains('@') => None,
            _ => value.split_once('@').map(|(_, f)| f),
        },
        Class::Cookie => (!value.contains('=')).then_some(value),
        _ => None,
    };
    // `;type=…` after a form file, `-` for standard input.
    let file = file.map(|f| f.split(';').next().unwrap_or(f)).filter(|f| !f.is_empty() && *f != "-")?;
    Some(file.to_owned())
}

/// The option values: pinned words, paths, hosts. `None` when one is opaque.
fn values(parsed: &Parsed<'_>, out: &mut Judged) -> Option<()> {
    for used in &parsed.used {
        if used.opt.has(Mark::Opaque) {
            return None;
        }
        for (class, value) in used.opt.values.iter().zip(&used.values) {
            match class {
                Class::Free | Class::Archive | Class::Target => {}
                Class::Pin => out.pinned.push(value.clone()),
                Class::Read => out.reads.push(value.clone()),
                Class::Write => out.writes.push(value.clone()),
                Class::Url => out.hosts.extend(fetcher_hosts(value)),
                Class::Opaque => return None,
                Class::Data | Class::Form | Class::UrlEncode | Class::Cookie => {
                    out.reads.extend(file_of(*class, value))
                }
            }
        }
    }
    Some(())
}

/// Judges `args` of a command of the table; `None` when the call is opaque.
pub(super) fn judge(spec: &Spec, args: &[String]) -> Option<Judged> {
    let words = if spec.operands == Operands::Tar { tar_words(spec, args)? } else { args.to_vec() };
    let parsed = spec.parse(&words).ok()?;
    let mut out = Judged::default();
    values(&parsed, &mut out)?;
    out.flags = parsed.used.iter().map(|u| u.opt.name().to_owned()).collect();
    out.flags.sort();
    out.flags.dedup();
    out.reads.extend(spec.implicit_reads.iter().cloned());
    out.writes.extend(spec.implicit_writes.iter().cloned());
    match spec.operands {
        Operands::Words | Operands::Wrapper => {}
        Operands::Read => read(spec, &parsed, &mut out),
        Operands::Write => write(spec, &parsed, &mut out),
        Operands::Copy | Operands::Move | Operands::Link => copy(spec, &parsed, &mut out)?,
        Operands::Sed => sed(&parsed, &mut out)?,
        Operands::Tar => tar(&parsed, &mut out)?,
        Operands::PathLike => {
            for p in parsed.operands {
                if path_like(&p) { out.reads.push(p) } else { out.pinned.push(p) }
            }
        }
        Operands::Pinned => {
            out.pinned = args.to_vec();
            out.flags.clear();
            if spec.needs_output && !parsed.used.iter().any(|u| u.opt.has(Mark::Output)) {
                return None;
            }
            for url in &parsed.operands {
                out.hosts.extend(fetcher_hosts(url));
            }
        }
    }
    Some(out)
}

/// The operands after the leading ones (grep's pattern: pinned, or left free), which go
/// away when an option gave them (`grep -e PATTERN`, `chmod -x`, `chmod --reference`).
fn files<'p>(spec: &Spec, parsed: &'p Parsed<'_>, given: Mark, out: &mut Judged) -> &'p [String] {
    let lead = if parsed.any(given) { 0 } else { spec.lead.min(parsed.operands.len()) };
    let (first, rest) = parsed.operands.split_at(lead);
    if spec.lead_pinned {
        out.pinned.extend(first.iter().cloned());
    }
    rest
}

fn read(spec: &Spec, parsed: &Parsed<'_>, out: &mut Judged) {
    let deep = spec.always_recursive || parsed.any(Mark::Recurse);
    let operands = files(spec, parsed, Mark::Pattern, out);
    if operands.is_empty() {
        // A recursive read without an operand reads the working directory; `ls` lists it.
        if deep {
            out.reads.push(recursive("."));
        } else if let Some(d) = &spec.default {
            out.reads.push(d.clone());
        }
    }
    // Below a directory read recursively (a listing of it is allowed by the rules below it).
    out.reads.extend(operands.iter().map(|p| if deep { recursive(p) } else { p.clone() }));
}

fn write(spec: &Spec, parsed: &Parsed<'_>, out: &mut Judged) {
    let deep = parsed.any(Mark::Recurse);
    // `chmod MODE FILE`: with the mode given by an option every operand is a file.
    let operands = files(spec, parsed, Mark::Mode, out);
    for p in operands {
        push_path(&mut out.writes, p, deep);
        if parsed.any(Mark::Parents) {
            out.writes.extend(parents(p));
        }
    }
}

/// `cp`, `install`, `mv`, `ln`, `link`: where each source goes, and what is read or
/// written on the way. A target that may be a directory receives `target/<name>` too,
/// since whether it is one is not known from the text (and may change before it runs).
fn copy(spec: &Spec, parsed: &Parsed<'_>, out: &mut Judged) -> Option<()> {
    let moves = spec.operands == Operands::Move;
    let link = spec.operands == Operands::Link;
    // A hard link shares its source's contents: writing the link rewrites the source.
    let hard = parsed.any(Mark::HardLink) || (link && !parsed.any(Mark::SymLink));
    let deep = moves || parsed.any(Mark::Recurse);
    let mut operands = parsed.operands.clone();
    if parsed.any(Mark::Dirs) {
        for d in &operands {
            out.writes.push(d.clone());
            if parsed.any(Mark::Parents) {
                out.writes.extend(parents(d));
            }
        }
        return Some(());
    }
    let target_dir = parsed.values_of(Class::Target).last().cloned();
    let (sources, into, target) = match target_dir {
        Some(dir) => (operands, Some(dir), None),
        // `ln -s TARGET` alone links into the current directory.
        None if link && operands.len() == 1 => (operands, Some(".".to_owned()), None),
        None => {
            let target = operands.pop()?;
            let into = (!parsed.any(Mark::NoTargetDir)).then(|| target.clone());
            // With several sources the target must be a directory.
            let own = (operands.len() <= 1).then_some(target);
            (operands, into, own)
        }
    };
    if sources.is_empty() {
        return None;
    }
    if let Some(t) = &target {
        push_path(&mut out.writes, t, deep);
        if parsed.any(Mark::Parents) {
            out.writes.extend(parents(t));
        }
    }
    for s in &sources {
        if let Some(dir) = &into {
            push_path(&mut out.writes, &inside(dir, base_name(s)), deep);
        }
        let list = if moves || hard { &mut out.writes } else { &mut out.reads };
        push_path(list, s, deep);
    }
    Some(())
}

fn sed(parsed: &Parsed<'_>, out: &mut Judged) -> Option<()> {
    let mut files = parsed.operands.iter();
    // The script can write files (`w`) and run commands (`e`): pinned, like `-e SCRIPT`.
    if !parsed.any(Mark::Pattern) {
        out.pinned.push(files.next()?.clone());
    }
    let in_place = parsed.used.iter().find(|u| u.opt.has(Mark::InPlace));
    let Some(in_place) = in_place else {
        out.reads.extend(files.cloned());
        return Some(());
    };
    // `-i.bak` keeps a copy of each file beside it; a suffix with `*` or `/` names it
    // by a template this does not follow.
    let suffix = in_place.values.first().map(String::as_str).unwrap_or_default();
    if suffix.contains(['*', '/']) {
        return None;
    }
    for f in files {
        out.writes.push(f.clone());
        if !suffix.is_empty() {
            out.writes.push(format!("{f}{suffix}"));
        }
    }
    Some(())
}

/// tar's words with an old-style first word (`czf a.tgz src`) turned into options: each
/// letter an option, the values of those that take one the next words in order.
fn tar_words(spec: &Spec, args: &[String]) -> Option<Vec<String>> {
    let Some((first, rest)) = args.split_first() else { return Some(Vec::new()) };
    if first.starts_with('-') {
        return Some(args.to_vec());
    }
    let mut out = Vec::new();
    let mut rest = rest.iter();
    for c in first.chars() {
        let opt = spec.by_spelling(&format!("-{c}"))?;
        out.push(format!("-{c}"));
        if !opt.values.is_empty() {
            out.push(rest.next()?.clone());
        }
    }
    out.extend(rest.cloned());
    Some(out)
}

fn tar(parsed: &Parsed<'_>, out: &mut Judged) -> Option<()> {
    let modes = [Mark::Create, Mark::Extract, Mark::List, Mark::Append];
    let mut used = modes.iter().filter(|m| parsed.any(**m));
    let (Some(mode), None) = (used.next(), used.next()) else { return None };
    let archive = parsed.values_of(Class::Archive).last()?;
    let local = archive.split_once(':').is_none_or(|(host, _)| host.contains('/'))
        || parsed.used.iter().any(|u| u.opt.name() == "--force-local");
    if !local {
        return None;
    }
    let stdio = archive == "-";
    let no_recursion = parsed.used.iter().any(|u| u.opt.name() == "--no-recursion");
    match mode {
        Mark::Create | Mark::Append => {
            if !stdio {
                out.writes.push(archive.clone());
            }
            for p in &parsed.operands {
                push_path(&mut out.reads, p, !no_recursion);
            }
        }
        // What an archive holds decides where extraction writes: anywhere below here.
        Mark::Extract => {
            if !stdio {
                out.reads.push(archive.clone());
            }
            out.writes.push(recursive("."));
        }
        _ => {
            if !stdio {
                out.reads.push(archive.clone());
            }
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parents_and_files_of_values() {
        assert_eq!(base_name("a/b/"), "b");
        assert_eq!(inside(".", "x"), "x");
        assert_eq!(inside("out/", "x"), "out/x");
        assert_eq!(parents("a/b/c"), ["a/b", "a"]);
        assert_eq!(parents("/a/b"), ["/a"]);
        assert!(parents("../x").is_empty());
        assert_eq!(file_of(Class::Data, "@secret.txt"), Some("secret.txt".into()));
        assert_eq!(file_of(Class::Data, "a=b"), None);
        assert_eq!(file_of(Class::Data, "@-"), None);
        assert_eq!(file_of(Class::Form, "f=@a.png;type=image/png"), Some("a.png".into()));
        assert_eq!(file_of(Class::Form, "f=<a.txt"), Some("a.txt".into()));
        assert_eq!(file_of(Class::UrlEncode, "q@list.txt"), Some("list.txt".into()));
        assert_eq!(file_of(Class::UrlEncode, "q=a@b"), None);
        assert_eq!(file_of(Class::Cookie, "jar.txt"), Some("jar.txt".into()));
        assert_eq!(file_of(Class::Cookie, "a=b"), None);
    }
}
