//! The option table (`crates/holon-job/src/shell/commands.txt`) against the programs themselves: for
//! every command the table reads with GNU `getopt_long` (parsers `gnu` and `gnu+`), the
//! installed program is asked which options it has and which take a value, through the
//! messages its own parser prints (`unrecognized option`, `is ambiguous; possibilities:`,
//! `requires an argument`, `doesn't allow an argument`, `invalid option`). Every long
//! option the program has must be in the table with the same kind of value, every long
//! spelling of the table must be one the program accepts in full with that kind of value,
//! and every short option the program has must be in the table. Abbreviations are only
//! resolved right when the table knows every long option: this is what keeps it so.
//!
//! The programs run with no operand, standard input empty, in an empty directory, for at
//! most a few seconds each: they parse their options and stop on a missing operand.
#![cfg(feature = "job")]

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use holon::job::shell::options::{self, Mark, Parser};

/// How an option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Arity {
    None,
    Required,
    /// Attached only (`--color=always`, `-i.bak`).
    Optional,
}

/// Runs `program args` the way the probes do; its standard error.
fn stderr_of(program: &str, args: &[&str], dir: &std::path::Path) -> String {
    run(program, args, dir).1
}

/// Runs `program args`: whether it printed to standard output, and its standard error.
fn run(program: &str, args: &[&str], dir: &std::path::Path) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("2")
        .arg(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("LC_ALL", "C")
        .env_remove("POSIXLY_CORRECT")
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    (!out.stdout.is_empty(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn unknown(err: &str) -> bool {
    err.contains("unrecognized option") || err.contains("invalid option") || err.contains("unknown option")
}

/// The full name in `option '--NAME' …` (glibc names the option it resolved).
fn named(err: &str, suffix: &str) -> Option<String> {
    let line = err.lines().find(|l| l.contains(suffix))?;
    let start = line.find("'--")? + 3;
    let rest = line.get(start..)?;
    Some(rest.get(..rest.find('\'')?)?.to_owned())
}

/// Every long option the program's parser reports, with how it takes a value. `known` are
/// the table's long names: an option with an optional value is named by no message, so a
/// unique prefix of one is taken for the table's only name starting with it once the
/// program accepts that name in full and nothing longer (else it is spelt out letter by
/// letter).
fn probe_longs(program: &str, dir: &std::path::Path, known: &BTreeSet<String>) -> BTreeMap<String, Arity> {
    let alphabet: Vec<char> = ('a'..='z').chain('0'..='9').chain(['-']).collect();
    let mut found = BTreeMap::new();
    let mut stack: Vec<String> = alphabet.iter().map(|c| c.to_string()).collect();
    let mut seen = BTreeSet::new();
    while let Some(prefix) = stack.pop() {
        if prefix.len() > 64 || !seen.insert(prefix.clone()) {
            continue;
        }
        let bare = stderr_of(program, &[&format!("--{prefix}")], dir);
        if unknown(&bare) {
            continue;
        }
        if let Some(list) = bare.lines().find(|l| l.contains("is ambiguous; possibilities:")) {
            for name in list.split("possibilities:").nth(1).unwrap_or_default().split_whitespace() {
                let name = name.trim_matches('\'').trim_start_matches("--").to_owned();
                if name.len() > prefix.len() {
                    // The listed names are found by asking for them; their own prefixes
                    // are explored from there.
                    stack.push(name);
                } else if name == prefix {
                    found.entry(name).or_insert(Arity::None);
                }
            }
            continue;
        }
        // A unique prefix (or a full name): the messages name the option.
        if let Some(name) = named(&bare, "requires an argument") {
            found.insert(name, Arity::Required);
            continue;
        }
        let with = stderr_of(program, &[&format!("--{prefix}=x")], dir);
        if let Some(name) = named(&with, "doesn't allow an argument") {
            found.insert(name, Arity::None);
            continue;
        }
        let mut candidates = known.iter().filter(|k| k.starts_with(prefix.as_str()));
        if let (Some(k), None) = (candidates.next(), candidates.next()) {
            let full = stderr_of(program, &[&format!("--{k}")], dir);
            let longer = stderr_of(program, &[&format!("--{k}z")], dir);
            if !unknown(&full) && !full.contains("ambiguous") && unknown(&longer) {
                found.insert(k.clone(), Arity::Optional);
                continue;
            }
        }
        // An optional value: no message names it, so the name is spelt out letter by
        // letter (a continuation the parser reads exactly as it read the prefix; `nice
        // --5a` is an adjustment of its own, no option).
        // Digits are a number the program reads before getopt does (`nice --5`), never
        // the start of a long option's name.
        if prefix.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        assert!(seen.len() < 20_000, "{program}: over 20,000 prefixes probed; the probe cannot read this parser");
        let next: Vec<String> = alphabet
            .iter()
            .map(|c| format!("{prefix}{c}"))
            .filter(|p| stderr_of(program, &[&format!("--{p}")], dir) == bare)
            .collect();
        if next.is_empty() {
            found.insert(prefix, Arity::Optional);
        } else {
            stack.extend(next);
        }
    }
    found
}

/// Every short option, and whether it takes a value (attached or not): `None` where the
/// program stops at the option itself (`-h`, `id -Z` without SELinux), so that what comes
/// after it cannot tell.
fn probe_shorts(program: &str, dir: &std::path::Path) -> BTreeMap<char, Option<bool>> {
    let letters: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let mut found = BTreeMap::new();
    for c in &letters {
        let err = stderr_of(program, &[&format!("-{c}")], dir);
        if !unknown(&err) {
            found.insert(*c, err.contains("requires an argument").then_some(true));
        }
    }
    // One letter that is no option: after a switch it is read as an option (and refused);
    // after an option that takes a value, attached to it, it is that value.
    let Some(spare) = letters.iter().find(|c| !found.contains_key(c) && c.is_ascii_alphabetic()) else { return found };
    let refused = format!("invalid option -- '{spare}'");
    for (c, takes) in found.iter_mut() {
        if takes.is_some() || c.is_ascii_digit() {
            continue;
        }
        let apart = stderr_of(program, &[&format!("-{c}"), &format!("-{spare}")], dir);
        if apart.contains(&refused) {
            let attached = stderr_of(program, &[&format!("-{c}{spare}")], dir);
            *takes = Some(!attached.contains(&refused));
        }
    }
    found
}

fn installed(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_table_knows_every_option_the_installed_programs_parse() {
    let table = options::table().expect("commands.txt reads");
    let dir = tempfile::tempdir().unwrap();
    let mut programs = Vec::new();
    for spec in table
        .specs()
        .expect("every entry of commands.txt reads")
        .into_iter()
        .filter(|s| matches!(s.parser, Parser::Gnu | Parser::GnuStop))
    {
        for name in spec.names.iter().filter(|n| !n.contains(' ')) {
            let only = std::env::var("HOLON_PROBE_ONLY").ok();
            if only.as_ref().is_some_and(|o| o != name) {
                continue;
            }
            if installed(name) {
                programs.push((name.clone(), spec));
            } else if std::env::var_os("CI").is_some() {
                panic!("`{name}` is in the option table but not installed; .ci/run installs the programs it probes");
            } else {
                eprintln!("skipped: `{name}` is not installed here");
            }
        }
    }
    if std::env::var_os("HOLON_PROBE_ONLY").is_none() {
        assert!(programs.len() >= 60, "only {} programs probed", programs.len());
    }
    let results: Vec<(String, Vec<String>)> = std::thread::scope(|s| {
        let chunks: Vec<_> = programs.chunks(programs.len().div_ceil(4)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let dir = dir.path().to_owned();
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|(name, spec)| {
                            let started = std::time::Instant::now();
                            let d = differences(name, spec, &dir);
                            eprintln!("probed {name} in {:.1} s", started.elapsed().as_secs_f64());
                            (name.clone(), d)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let wrong: Vec<String> = results
        .iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(name, d)| format!("{name}:\n  {}", d.join("\n  ")))
        .collect();
    eprintln!("{} programs probed against the option table", results.len());
    assert!(wrong.is_empty(), "the option table differs from the programs:\n{}", wrong.join("\n"));
}

fn table_arity(o: &options::Opt) -> Arity {
    match (o.values.is_empty(), o.optional) {
        (true, _) => Arity::None,
        (false, true) => Arity::Optional,
        (false, false) => Arity::Required,
    }
}

/// What differs between the program and its entry.
fn differences(program: &str, spec: &options::Spec, dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let known: BTreeSet<String> = spec
        .opts
        .iter()
        .flat_map(|o| o.spellings.iter())
        .filter_map(|s| s.strip_prefix("--"))
        .map(str::to_owned)
        .collect();
    let longs = probe_longs(program, dir, &known);
    let mut table_longs: BTreeMap<String, Arity> = BTreeMap::new();
    let mut table_shorts: BTreeMap<char, bool> = BTreeMap::new();
    for o in &spec.opts {
        for s in &o.spellings {
            match s.strip_prefix("--") {
                Some(l) => {
                    table_longs.insert(l.to_owned(), table_arity(o));
                }
                None => {
                    let c = s.chars().nth(1).unwrap_or('?');
                    table_shorts.insert(c, !o.values.is_empty() && !o.has(Mark::Number));
                }
            }
        }
    }
    for (name, arity) in &longs {
        match table_longs.get(name) {
            None => out.push(format!("--{name} ({arity:?}) is missing from the table")),
            Some(a) if a != arity => out.push(format!("--{name}: the program takes {arity:?}, the table says {a:?}")),
            _ => {}
        }
    }
    for (name, arity) in &table_longs {
        if longs.contains_key(name) {
            continue;
        }
        // An alias the probe did not meet (it resolves like a neighbour): asked in full.
        let bare = stderr_of(program, &[&format!("--{name}")], dir);
        let with = stderr_of(program, &[&format!("--{name}=x")], dir);
        let real = if unknown(&bare) || bare.contains("ambiguous") {
            None
        } else if bare.contains("requires an argument") {
            Some(Arity::Required)
        } else if with.contains("doesn't allow an argument") {
            Some(Arity::None)
        } else {
            Some(Arity::Optional)
        };
        match real {
            None => out.push(format!("--{name} is in the table but the program has no such option")),
            Some(r) if r != *arity => out.push(format!("--{name}: the program takes {r:?}, the table says {arity:?}")),
            _ => {}
        }
    }
    for (c, takes) in probe_shorts(program, dir) {
        match (table_shorts.get(&c), takes) {
            (None, _) => out.push(format!("-{c} is missing from the table")),
            (Some(t), Some(takes)) if *t != takes && !c.is_ascii_digit() => {
                out.push(format!("-{c}: the program {} value, the table {}", say(takes), say(*t)))
            }
            _ => {}
        }
    }
    out
}

fn say(takes: bool) -> &'static str {
    if takes { "takes a" } else { "takes no" }
}
