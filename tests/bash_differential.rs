//! holon's reading of command lines against Bash itself. For a generated corpus of lines
//! (10,000 by default, `HOLON_BASH_LINES` for more) and every command line of the bypass
//! vectors, Bash runs the line in a throwaway directory, twice (every command succeeding,
//! then every command failing), with no command able to run: its PATH names no directory,
//! so every external command reaches `command_not_found_handle`, and every builtin but
//! `builtin` is a function of the same name; both record the words Bash passes, the files
//! the command's redirections opened and the variables it was given
//! (`tests/sandbox/recorder.bash`). Bash still opens redirections, so it runs inside
//! `tests/sandbox/confine.bash`: a mount namespace where everything but the throwaway
//! directory is read-only, with no network.
//!
//! Every command Bash runs must be one holon judged with the same words, the same files
//! opened by its redirections (written only where holon saw a write) and the same
//! variables, or lie inside an opaque segment at its place in the line. Zero differences.
#![cfg(feature = "job")]

mod common;
use common::rng::Rng;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use holon::job::shell::{self, grammar::Unit};

#[rustfmt::skip]
const HEADS: &[&str] = &[
    "ls", "cat", "rm", "echo", "printf", "grep", "env", "cd", "true", ":", "test", "[", "eval", "exec",
    "command", "builtin echo", "source", ".", "time", "time -p", "nohup", "sudo", "timeout 5", "git", "curl",
    "X=1 ls", "A=1 B=2 cat", "X='a b' rm", "X=\\# echo", "\"ls\"", "'cat'", "l\\s", "\\rm", "e\"ch\"o", "ls\\ x",
    "export", "read", "set", "alias", "unset", "shopt", "trap", "kill", "wait", "pushd", "popd", "type",
    "\"A=1\" ls",
];
#[rustfmt::skip]
const ARGS: &[&str] = &[
    "a", "src/a.txt", "-rf", "--flag=v", "-n", "x=1", "a\\ b", "\\ ", "\\\t", "\\#", "a\\#b", "a#b", "\\;", "\\|",
    "\\&", "\\<", "\\>", "\\(", "\\)", "\\'", "\\\"", "\\\\", "\\$x", "'a b'", "\"a b\"", "\"a\\\"b\"", "'#'",
    "\"#x\"", "#c", "# comment", "\\ #", "\\ #;", "a\\ #b", "'a'\"b\"c", "\"\"", "''", "-", "--", "\\-x", "é",
    "$HOME", "$(ls)", "`ls`", "{a,b}", "~", "*.txt", "\"$x\"", "'$x'", "$'\\x41'", "a\\\\ b", "\\\\#",
];
#[rustfmt::skip]
const REDIRECTS: &[&str] = &[
    "> out.txt", ">>out.txt", "< src/a.txt", "2>&1", "2> err.txt", "&> all.txt", ">| f.txt", "<> rw.txt",
    "> /dev/null", "< /etc/hostname", "3>&-", "1>&2", ">&2", "2>/dev/null", "&>>log.txt", ">out\\ x",
    "> 'o t'", "<src/b.txt", "4<src/a.txt",
];
#[rustfmt::skip]
const OPERATORS: &[&str] = &[
    " ; ", " && ", " || ", " | ", " & ", "\n", " |& ", ";", "&&", " #c\n", " # c ; x\n", "\t;\t", " ;; ", "\\\n",
];
#[rustfmt::skip]
const WHOLE: &[&str] = &[
    "(ls)", "{ ls; }", "if true; then ls; fi", "for i in a b; do echo $i; done", "f() { rm x; }; f", "x=1",
    "! ls", "[[ -f x ]] && ls", "case a in a) ls;; esac", "cat <<EOF\nrm -rf /\nEOF", "echo $(rm x)",
];

fn generate(rng: &mut Rng) -> String {
    let mut line = String::new();
    let statements = 1 + rng.next() % 4;
    for s in 0..statements {
        if s > 0 {
            line.push_str(rng.pick_str(OPERATORS));
        }
        if rng.chance(8) {
            line.push_str(rng.pick_str(WHOLE));
            continue;
        }
        line.push_str(rng.pick_str(HEADS));
        for _ in 0..rng.next() % 5 {
            line.push(if rng.chance(10) { '\t' } else { ' ' });
            line.push_str(if rng.chance(15) { rng.pick_str(REDIRECTS) } else { rng.pick_str(ARGS) });
        }
    }
    if rng.chance(10) {
        line.push_str(rng.pick_str(&[" #", "\\", " \\ #x", ";", " &"]));
    }
    line
}

/// One command as Bash ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ran {
    argv: Vec<String>,
    /// Files its redirections opened: (path, written).
    files: Vec<(String, bool)>,
    env: BTreeSet<String>,
}

fn records(path: &Path, baseline: &[String]) -> Vec<Ran> {
    let Ok(bytes) = std::fs::read(path) else { return Vec::new() };
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    for record in text.split('\u{1e}').filter(|r| !r.is_empty()) {
        let mut ran = Ran { argv: Vec::new(), files: Vec::new(), env: BTreeSet::new() };
        for field in record.split('\u{1f}').filter(|f| !f.is_empty()) {
            let (kind, rest) = field.split_at(1);
            match kind {
                "A" => ran.argv.push(rest.to_owned()),
                "D" => {
                    let mut parts = rest.splitn(3, '=');
                    let (_fd, flags, file) = (parts.next(), parts.next().unwrap_or("0"), parts.next().unwrap_or(""));
                    if file.starts_with("pipe:") || file.starts_with("socket:") || file.starts_with("anon_inode:") {
                        continue;
                    }
                    let flags = u32::from_str_radix(flags, 8).unwrap_or(0);
                    // A command in the background reads /dev/null unless redirected: Bash's
                    // own doing, no redirection of the line's.
                    if file == "/dev/null" && flags & 3 == 0 {
                        continue;
                    }
                    // `>&2`: a copy of the line's own standard error, no file it opened.
                    if baseline.iter().any(|b| b == file) {
                        continue;
                    }
                    ran.files.push((file.to_owned(), flags & 3 != 0));
                }
                "E" => {
                    ran.env.insert(rest.to_owned());
                }
                _ => {}
            }
        }
        out.push(ran);
    }
    out
}

/// What holon says one unit of the line is.
#[derive(Debug)]
enum Item {
    /// A plain command holon judges: what Bash must run for it.
    Judged(Ran),
    /// An opaque segment: anything may run here.
    Opaque,
    /// Pipeline members, or everything after a command put in the background: they run
    /// in any order.
    Unordered(Vec<Item>),
}

fn normal(path: &str) -> String {
    holon::job::call::normalize_path(path, "")
}

fn judged(unit: &Unit, run_dir: &Path, segments: &[shell::Segment]) -> Item {
    match unit {
        Unit::Plain { text, env, words, redirects } => {
            // After an opaque statement later ones are opaque too (holon judges them so).
            if !segments.iter().any(|s| s.text == *text && s.command.is_some()) {
                return Item::Opaque;
            }
            let files = redirects
                .iter()
                .filter_map(|r| {
                    let t = r.target.as_ref()?;
                    let at = if t.starts_with('/') { t.clone() } else { format!("{}/{t}", run_dir.display()) };
                    Some((normal(&at), r.write))
                })
                .collect();
            // Bash's `time` is a reserved word, not a command: holon judges what it times
            // as a segment of its own (`time -p` is the keyword's one option).
            // After it, assignments are the timed command's, as before any command.
            let mut argv = words.as_slice();
            let mut env: BTreeSet<String> = env.iter().cloned().collect();
            if argv.first().is_some_and(|w| w == "time") {
                argv = &argv[1..];
                if argv.first().is_some_and(|w| w == "-p") {
                    argv = &argv[1..];
                }
                while let Some(name) = argv.first().and_then(|w| w.split_once('=')).map(|(n, _)| n).filter(|n| {
                    !n.is_empty()
                        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        && !n.as_bytes()[0].is_ascii_digit()
                }) {
                    env.insert(name.to_owned());
                    argv = &argv[1..];
                }
            }
            Item::Judged(Ran { argv: argv.to_vec(), files, env })
        }
        Unit::Opaque { .. } => Item::Opaque,
        Unit::Pipeline { units, .. } => Item::Unordered(units.iter().map(|u| judged(u, run_dir, segments)).collect()),
    }
}

/// holon's items for `line`, or `None` when it reads the whole line as opaque.
fn items(line: &str, run_dir: &Path) -> Option<Vec<Item>> {
    let units = shell::grammar::units(line.trim())?;
    let segments = shell::parse(line);
    let trimmed = line.trim();
    let mut out: Vec<Item> = Vec::new();
    let mut background: Option<Vec<Item>> = None;
    let mut list_start = 0;
    let mut at = 0;
    for unit in &units {
        let text = match unit {
            Unit::Plain { text, .. } | Unit::Opaque { text } | Unit::Pipeline { text, .. } => text,
        };
        let start = trimmed.get(at..).and_then(|r| r.find(text.as_str())).map_or(at, |i| at + i);
        let gap = trimmed.get(at..start).unwrap_or_default();
        // A lone `&` before this unit: the one before it runs in the background.
        let lone_amp = gap
            .char_indices()
            .any(|(i, c)| c == '&' && !gap[..i].ends_with(['&', '|', '>']) && !gap[i + 1..].starts_with(['&', '>']));
        // The background job is the whole and-or list before the `&` (`a || b & c` runs
        // `a || b` in the background), back to the last `;` or newline.
        if lone_amp && background.is_none() {
            background = Some(out.drain(list_start.min(out.len())..).collect());
        } else if background.is_none() && gap.contains([';', '\n']) {
            list_start = out.len();
        }
        let item = judged(unit, run_dir, &segments);
        match &mut background {
            Some(group) => group.push(item),
            None => out.push(item),
        }
        at = start + text.len();
    }
    if let Some(group) = background {
        out.push(Item::Unordered(group));
    } else if trimmed.ends_with('&') && !trimmed.ends_with("&&") {
        // The last command in the background: nothing after it to reorder.
    }
    Some(out)
}

/// Whether `ran` is what holon judged as `want`.
fn same(want: &Ran, ran: &Ran) -> bool {
    want.argv == ran.argv
        && want.env == ran.env
        && ran.files.iter().all(|(path, written)| want.files.iter().any(|(p, w)| p == path && (*w || !written)))
}

/// Every end position the items can reach from `start` in `ran` (`reach[k]`: the records
/// before `k` are accounted for).
fn ends(items: &[Item], ran: &[Ran], start: usize) -> Vec<bool> {
    let mut at = vec![false; ran.len() + 1];
    at[start] = true;
    for item in items {
        let mut next = vec![false; ran.len() + 1];
        match item {
            Item::Judged(want) => {
                for s in (0..=ran.len()).filter(|s| at[*s]) {
                    next[s] = true;
                    if ran.get(s).is_some_and(|r| same(want, r)) {
                        next[s + 1] = true;
                    }
                }
            }
            // Anything may run here: every position from the first one reached.
            Item::Opaque => {
                if let Some(first) = at.iter().position(|a| *a) {
                    next[first..].iter_mut().for_each(|n| *n = true);
                }
            }
            Item::Unordered(group) => {
                for s in (0..=ran.len()).filter(|s| at[*s]) {
                    for e in unordered(group, ran, s) {
                        next[e] = true;
                    }
                }
            }
        }
        at = next;
    }
    at
}

/// The ends an unordered group reaches: each record matches a distinct judged member, or
/// is absorbed by an opaque member when there is one.
fn unordered(group: &[Item], ran: &[Ran], start: usize) -> BTreeSet<usize> {
    let mut flat = Vec::new();
    fn flatten<'a>(items: &'a [Item], out: &mut Vec<&'a Item>) {
        for i in items {
            match i {
                Item::Unordered(g) => flatten(g, out),
                other => out.push(other),
            }
        }
    }
    flatten(group, &mut flat);
    let opaque = flat.iter().any(|i| matches!(i, Item::Opaque));
    let mut free: Vec<&Ran> =
        flat.iter().filter_map(|i| if let Item::Judged(r) = i { Some(r) } else { None }).collect();
    let mut out: BTreeSet<usize> = [start].into();
    for (k, r) in ran.iter().enumerate().skip(start) {
        match free.iter().position(|w| same(w, r)) {
            Some(i) => {
                free.swap_remove(i);
            }
            None if opaque => {}
            None => break,
        }
        out.insert(k + 1);
    }
    out
}

/// The command lines of the bypass vectors.
fn vector_lines() -> Vec<String> {
    let vectors: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("testdata/job/bypasses.json").unwrap()).unwrap();
    let mut out = Vec::new();
    for v in vectors.as_array().unwrap() {
        for list in ["learned", "learned_run2", "attacks"] {
            for call in v.get(list).and_then(|l| l.as_array()).into_iter().flatten() {
                if let Some(c) = call.pointer("/args/command").and_then(|c| c.as_str()) {
                    out.push(c.to_owned());
                }
            }
        }
    }
    out
}

fn seed(dir: &Path) {
    for d in ["src", "out", "data"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    for f in ["src/a.txt", "src/b.txt", "in.txt", "rw.txt"] {
        std::fs::write(dir.join(f), "seed\n").unwrap();
    }
}

fn sandbox_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("holon-bash-diff-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn every_command_bash_runs_is_judged_with_its_words_or_opaque() {
    let count: usize = std::env::var("HOLON_BASH_LINES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut lines: Vec<String> = vector_lines();
    lines.extend((0..count).map(|_| generate(&mut rng)));
    // Two sandboxes, one per core.
    let halves: Vec<(PathBuf, Vec<(usize, &String)>)> = (0..2)
        .map(|h| (sandbox_dir(&format!("{h}")), lines.iter().enumerate().filter(|(i, _)| i % 2 == h).collect()))
        .collect();
    let here = std::env::current_dir().unwrap();
    std::thread::scope(|s| {
        for (dir, cases) in &halves {
            let here = &here;
            s.spawn(move || {
                std::fs::create_dir_all(dir.join("cases")).unwrap();
                std::fs::create_dir_all(dir.join("records")).unwrap();
                seed(&dir.join("seed"));
                for (i, line) in cases {
                    std::fs::write(dir.join("cases").join(format!("{i:06}")), line).unwrap();
                }
                let out = Command::new("bash")
                    .arg(here.join("tests/sandbox/confine.bash"))
                    .arg("bash")
                    .arg(here.join("tests/sandbox/bash-driver.bash"))
                    .env("WRITABLE", dir)
                    .env("CASES", dir.join("cases"))
                    .env("RECORDS", dir.join("records"))
                    .env("SEED", dir.join("seed"))
                    .output()
                    .unwrap();
                assert!(out.status.success(), "the sandboxed driver failed: {}", String::from_utf8_lossy(&out.stderr));
            });
        }
    });
    let (mut whole_opaque, mut commands, mut matched_judged, mut differences) = (0, 0, 0, Vec::new());
    for (dir, cases) in &halves {
        let run_dir = dir.join("run");
        for (i, line) in cases {
            let Some(items) = items(line, &run_dir) else {
                whole_opaque += 1;
                continue;
            };
            for status in [0, 1] {
                let base = dir.join("records").join(format!("{i:06}.{status}"));
                assert!(base.with_extension(format!("{status}.done")).exists(), "case {i} did not run: {line:?}");
                let baseline: Vec<String> =
                    ["base.in", "base.out", "base.err"].iter().map(|b| dir.join(b).display().to_string()).collect();
                let ran = records(&base, &baseline);
                commands += ran.len();
                matched_judged +=
                    ran.iter().filter(|r| items.iter().any(|it| matches!(it, Item::Judged(w) if same(w, r)))).count();
                if !ends(&items, &ran, 0)[ran.len()] {
                    differences.push(format!(
                        "{line:?} (every command {}): bash ran {ran:?}\n  holon: {items:?}",
                        if status == 0 { "succeeding" } else { "failing" }
                    ));
                }
            }
        }
    }
    for (dir, _) in &halves {
        let _ = std::fs::remove_dir_all(dir);
    }
    eprintln!(
        "{} lines ({} opaque as a whole), {commands} commands run by bash, {matched_judged} of them judged by holon word for word",
        lines.len(),
        whole_opaque
    );
    // The corpus must exercise both outcomes, or the test proves nothing.
    assert!(commands > count && matched_judged > count / 4, "{commands} commands, {matched_judged} judged");
    assert!(
        differences.is_empty(),
        "{} difference(s) between bash and holon:\n{}",
        differences.len(),
        differences.iter().take(15).cloned().collect::<Vec<_>>().join("\n")
    );
}
