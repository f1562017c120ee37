//! Every numeric flag has a range (NaN, infinity, zero where meaningless and absurd values
//! are refused with exit 2 and a sentence naming the flag), and a closed output pipe ends
//! a command with exit 2, never a panic. Each case runs the real binary under a time limit:
//! `demo --seconds inf` never ended and `--seconds nan` panicked.
#![cfg(feature = "cli")] // runs the `holon` binary

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn holon_within(args: &[&str], limit: Duration) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
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
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into(), started.elapsed())
}

#[test]
fn out_of_range_flags_are_refused_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["demo", "--seconds", "nan"], "--seconds"),
        (&["demo", "--seconds", "inf"], "--seconds"),
        (&["demo", "--seconds=-1"], "--seconds"),
        (&["demo", "--seconds", "0"], "--seconds"),
        (&["demo", "--seconds", "1e300"], "--seconds"),
        (&["loadtest", "--duration-s", "nan"], "--duration-s"),
        (&["loadtest", "--duration-s", "inf"], "--duration-s"),
        (&["loadtest", "--duration-s", "0"], "--duration-s"),
        (&["loadtest", "--duration-s=-0.5"], "--duration-s"),
        (&["loadtest", "--threads", "0"], "--threads"),
        (&["loadtest", "--threads", "100000"], "--threads"),
        (&["loadtest", "--mandates", "0"], "--mandates"),
        (&["loadtest", "--threads", "256", "--mandates", "1000000", "--calls", "1"], "--mandates"),
        (&["loadtest", "--agents", "5"], "--agents"),
        (&["loadtest", "--agents", "99999999999999999999"], "--agents"),
        (&["loadtest", "--calls", "0"], "--calls"),
        (&["loadtest", "--calls", "18446744073709551615"], "--calls"),
        (&["loadtest", "--calls", "10", "--publish-every-ms", "18446744073709551615"], "--publish-every-ms"),
        (&["loadtest", "--total", "nan"], "--total"),
        (&["loadtest", "--total=-1"], "--total"),
        (
            &["mandate", "check", "examples/mandates/alice-root.yaml", "examples/agents", "--max-cost", "nan"],
            "max-cost",
        ),
        (
            &["mandate", "check", "examples/mandates/alice-root.yaml", "examples/agents", "--spent-total", "inf"],
            "spent-total",
        ),
        (
            &["mandate", "check", "examples/mandates/alice-root.yaml", "examples/agents", "--spent-today", "1e400"],
            "spent-today",
        ),
        (
            &[
                "mandate",
                "derive",
                "examples/mandates/alice-root.yaml",
                "examples/agents/invoice-pipeline",
                "--max-cost=-0",
            ],
            "max-cost",
        ),
    ];
    let mut problems = Vec::new();
    // A negative or too large number is told as such, even with a space before the `-`
    // (clap took `-1` for a flag: "unexpected argument").
    let told: &[(&[&str], &str)] = &[
        (&["loadtest", "--threads", "-1"], "-1 is below 1"),
        (&["loadtest", "--calls", "99999999999999999999"], "is above 10000000000"),
        (&["loadtest", "--total", "-5"], "is not a decimal string"),
        (&["loadtest", "--publish-every-ms", "-1"], "-1 is below 0"),
        (&["serve", "--grace-s", "-1"], "-1 is below 0"),
    ];
    for (args, says) in told {
        let (code, err, _) = holon_within(args, Duration::from_secs(120));
        if code != Some(2) || !err.contains(says) {
            problems.push(format!("{args:?}: exit {code:?}, expected {says:?}, stderr: {err}"));
        }
    }
    for (args, flag) in cases {
        let (code, err, elapsed) = holon_within(args, Duration::from_secs(120));
        if code != Some(2) || !err.contains(flag) || err.contains("panicked") {
            problems.push(format!("{args:?}: exit {code:?} after {elapsed:?}, stderr: {err}"));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Spawns `holon args` with standard output on a pipe whose read end is closed before the
/// command starts: every write fails, however fast the command is. (Closing it after the
/// spawn raced the command: under load `holon man` wrote its whole page into the pipe's
/// buffer first and exited 0.)
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn a_closed_pipe_ends_the_command_with_exit_2_and_no_panic() {
    for args in [
        vec!["validate", "examples/"],
        vec!["validate", "--json", "examples/"],
        vec!["validate", "testdata/invalid"],
        vec!["search", "--mandate", "examples/mandates/alice-root.yaml", "--agents", "examples/agents"],
        vec!["loadtest", "--calls", "1000", "--mandates", "10", "--agents", "10"],
        vec!["demo", "--seconds", "0.1"],
    ] {
        let (code, err) = with_closed_stdout(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains("standard output was closed"), "{args:?}: {err}");
    }
}

/// A document with no verdict (a completion script, the manual) read by `| head` ends
/// normally: exit 0, nothing on standard error (issue #50).
#[test]
fn a_closed_pipe_is_a_normal_end_for_a_printed_document() {
    for args in [vec!["man"], vec!["completions", "zsh"], vec!["completions", "bash"]] {
        let (code, err) = with_closed_stdout(&args);
        assert_eq!((code, err.as_str()), (Some(0), ""), "{args:?}");
    }
}

/// `holon completions SHELL` and `holon man` come from the clap definitions: every verb
/// and flag is in them, and a shell that does not exist is refused.
#[test]
fn completions_and_the_manual_cover_every_verb() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_holon")).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, script) = run(&["completions", shell]);
        assert_eq!(code, Some(0), "{shell}");
        for word in ["validate", "attenuate", "spent-total", "widen"] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
    }
    assert_eq!(run(&["completions", "nosh"]).0, Some(2));
    let (code, page) = run(&["man"]);
    assert_eq!(code, Some(0));
    assert!(page.contains(".TH holon 1") && !page.contains(".TH holon-mandate-check 1"), "holon(1) alone");
    // One file per page, so that `holon-validate(1)` and the rest are found by `man`.
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("man1");
    let (code, said) = run(&["man", "--dir", man1.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");
    for (file, title) in [
        ("holon.1", ".TH holon 1"),
        ("holon-mandate-check.1", ".TH holon-mandate-check 1"),
        ("holon-job-widen.1", ".TH holon-job-widen 1"),
        ("holon-ledger-raise.1", ".TH holon-ledger-raise 1"),
    ] {
        let page = std::fs::read_to_string(man1.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(page.contains(title), "{file} lacks {title}");
    }
    let check = std::fs::read_to_string(man1.join("holon-mandate-check.1")).unwrap();
    assert!(check.contains("spent\\-total"), "the manual lacks --spent-total");
    // Every page a page names (`holon\-mandate\-check(1)` in roff) is a file beside it, and
    // every verb `--help` lists has its page.
    let mut named = 0;
    for entry in std::fs::read_dir(&man1).unwrap() {
        let page = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for (at, _) in page.match_indices("(1)") {
            let name_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '\\';
            let start = page[..at].rfind(|c: char| !name_char(c)).map_or(0, |i| i + 1);
            let name = page[start..at].replace("\\-", "-");
            assert!(man1.join(format!("{name}.1")).is_file(), "{name}(1) is named but has no page");
            named += 1;
        }
    }
    assert!(named > 30, "the pages name their verbs ({named} references)");
    for verb in verbs(&[]) {
        let file = format!("holon-{}.1", verb.join("-"));
        assert!(man1.join(&file).is_file(), "no page {file}");
    }
    assert!(said.contains(&format!("man -M {}", dir.path().display())), "{said}");
}

/// The verbs `holon --help` lists, recursively: ["validate"], ["mandate", "check"], …
fn verbs(prefix: &[String]) -> Vec<Vec<String>> {
    let mut args: Vec<&str> = prefix.iter().map(String::as_str).collect();
    args.push("--help");
    let out = Command::new(env!("CARGO_BIN_EXE_holon")).args(&args).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some(section) = help.split("Commands:\n").nth(1) else { return vec![prefix.to_vec()] };
    let names: Vec<String> = section
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_owned)
        .collect();
    names.iter().flat_map(|n| verbs(&[prefix.to_vec(), vec![n.clone()]].concat())).collect()
}

/// Every example in a verb's help that needs nothing but the bundled examples runs, and
/// exits with a code its EXIT CODES line lists (never 2, bad input).
#[test]
fn the_examples_in_the_help_run_as_documented() {
    let all = verbs(&[]);
    assert!(all.len() >= 20, "the verb walk went blind: {all:?}");
    let mut ran = 0;
    for verb in all {
        let mut args: Vec<&str> = verb.iter().map(String::as_str).collect();
        args.push("--help");
        let help =
            String::from_utf8_lossy(&Command::new(env!("CARGO_BIN_EXE_holon")).args(&args).output().unwrap().stdout)
                .into_owned();
        let codes =
            help.lines().find(|l| l.starts_with("EXIT CODES:")).unwrap_or_else(|| panic!("{verb:?}: no EXIT CODES"));
        let examples = help.split("EXAMPLES:\n").nth(1).unwrap_or_else(|| panic!("{verb:?}: no EXAMPLES"));
        for line in examples.lines().filter_map(|l| l.strip_prefix("  holon ")) {
            let self_contained = line.contains("examples/")
                && !line.contains(['>', '<', '|', '\'', '$', '&'])
                && !line.contains("sqlite:");
            if !self_contained {
                continue;
            }
            let out = Command::new(env!("CARGO_BIN_EXE_holon")).args(line.split_whitespace()).output().unwrap();
            let code = out.status.code().unwrap();
            assert_ne!(code, 2, "holon {line}: {}", String::from_utf8_lossy(&out.stderr));
            assert!(codes.contains(&format!("{code} ")), "holon {line} exited {code}; its help says {codes}");
            ran += 1;
        }
    }
    assert!(ran >= 8, "only {ran} examples ran");
}

/// `--store` and `--node` are checked by the library's one rule (`store::kind_of`,
/// `node::check_node_name`) as clap parses them, in every command that takes them, before
/// anything runs: `demo --store foo` used to print the whole worked example first.
#[test]
fn every_store_and_node_flag_is_checked_before_anything_runs() {
    let cases: &[(&[&str], &str)] = &[
        (&["demo", "--store", "foo"], "is not a store URL"),
        (&["demo", "--store", "sqlite:"], "is not a store URL"),
        (&["demo", "--node", ""], "a node name is 1 to 128 bytes"),
        (&["loadtest", "--store", "mysql://x/y", "--calls", "1"], "is not a store URL"),
        (&["loadtest", "--store", "memory", "--node", "a\tb", "--calls", "1"], "no control characters"),
        (&["serve", "--store", "file:/tmp/x"], "is not a store URL"),
        (&["serve", "--node", &"n".repeat(129)], "a node name is 1 to 128 bytes"),
        (&["ledger", "status", "--store", "sqlite:"], "is not a store URL"),
        (&["ledger", "reconcile", "--store", "memory", "--node", ""], "a node name"),
        (&["ledger", "raise", "--store", "postgres:/x", "--mandate", "m", "--total", "1"], "is not a store URL"),
    ];
    let mut problems = Vec::new();
    for (args, says) in cases {
        let (code, err, _) = holon_within(args, Duration::from_secs(120));
        if code != Some(2) || !err.contains(says) || !err.starts_with("error: invalid value") {
            problems.push(format!("{args:?}: exit {code:?}, expected {says:?}, stderr: {err}"));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// An error's causes are said once each: the store's error quotes its source, and the
/// binary printed the source again after it.
#[test]
fn an_error_says_each_cause_once() {
    let (code, err, _) =
        holon_within(&["demo", "--store", "sqlite:/proc/no-such-dir/ledger.db"], Duration::from_secs(120));
    assert_eq!(code, Some(2), "{err}");
    let line = err.lines().find(|l| l.starts_with("holon: ")).unwrap_or_else(|| panic!("no error line in {err}"));
    assert_eq!(line.matches("cannot be reached or used").count(), 1, "{line}");
    assert_eq!(line.matches("unable to open database file").count(), 1, "{line}");
}
