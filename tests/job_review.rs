//! What a reviewer of a job mandate sees (issue #15): `job show` with `--pending` and
//! `--diff`, where a new pending version is and how to see it, rules marked when they
//! allow more than was observed, the Leash Line before the first approval, and a warning
//! for calls without a run id.
#![cfg(feature = "cli")] // runs the `holon` binary

mod common;
use common::job_state::State;

const JOB: &str = "review";

fn observed(name: &str) -> State {
    let s = State::new(name);
    for r in 1..=3 {
        // Without `git status`, which reads the whole work tree (`**`): the reads these tests
        // widen would all be allowed.
        let text: String = std::fs::read_to_string(format!("testdata/job/run{r}.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| !l.contains("git status"))
            .map(|l| format!("{l}\n"))
            .collect();
        let run = format!("run{r}");
        let (code, _, err) = s.holon(&["observe", JOB, "--run", &run, "--workdir", "/work/repo"], &text);
        assert_eq!(code, 0, "{err}");
    }
    s
}

/// Observed, proposed and approved: the job enforces its first version.
fn approved(name: &str) -> State {
    let s = observed(name);
    assert_eq!(s.holon(&["propose", JOB], "").0, 0);
    assert_eq!(s.holon(&["approve", JOB], "").0, 0);
    s
}

#[test]
fn show_prints_the_active_and_pending_versions_and_their_diff() {
    let s = observed("show");
    let (code, _, err) = s.holon(&["show", JOB], "");
    assert_eq!(code, 2, "nothing approved yet");
    assert!(err.contains("no approved version yet") && err.contains("--pending"), "{err}");
    let (code, _, err) = s.holon(&["show", JOB, "--pending"], "");
    assert_eq!(code, 2);
    assert!(err.contains("no pending version") && err.contains("holon job propose review"), "{err}");

    let (code, proposal, err) = s.holon(&["propose", JOB], "");
    assert_eq!(code, 0, "{err}");
    // The proposal says where the pending version is and how to read it.
    let file = s.0.join("jobs").join(JOB).join("versions").join("v1.yaml");
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(err.contains("holon job show review --pending") && err.contains("holon job show review --diff"), "{err}");
    let (code, pending, err) = s.holon(&["show", JOB, "--pending"], "");
    assert_eq!(code, 0, "{err}");
    assert_eq!(pending, proposal, "show --pending prints the pending version's text");
    assert!(err.starts_with("v1 "), "{err}");
    // Before any approval the diff is from nothing.
    let (code, diff, _) = s.holon(&["show", JOB, "--diff"], "");
    assert_eq!(code, 0);
    assert!(diff.starts_with("--- nothing approved yet\n+++ v1 (pending)\n"), "{diff}");
    assert_eq!(diff.lines().filter(|l| l.starts_with('+') && !l.starts_with("+++")).count(), proposal.lines().count());

    assert_eq!(s.holon(&["approve", JOB], "").0, 0);
    let (code, active, _) = s.holon(&["show", JOB], "");
    assert_eq!((code, active.as_str()), (0, proposal.as_str()), "show prints the active version");
    // A drift widened: the diff shows exactly the added rule.
    let call = r#"{"tool":"read_file","args":{"path":"docs/notes.md"}}"#;
    assert_eq!(s.holon(&["check", JOB, "--run", "r9"], call).0, 2);
    let (code, _, err) = s.holon(&["widen", JOB, "1"], "");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("v2.yaml") && err.contains("holon job show review --diff"), "{err}");
    let (_, diff, _) = s.holon(&["show", JOB, "--diff"], "");
    assert!(diff.starts_with("--- v1 (active)\n+++ v2 (pending)\n"), "{diff}");
    let added: Vec<&str> = diff.lines().filter(|l| l.starts_with('+') && !l.starts_with("+++")).collect();
    assert!(added.iter().any(|l| l.contains("\"docs/notes.md\"")), "{diff}");
    assert!(!diff.contains("\x1b"), "no colour in a pipe");
    // `--pending` and `--diff` are two different questions.
    assert_eq!(s.holon(&["show", JOB, "--pending", "--diff"], "").0, 2);
}

#[test]
fn show_refuses_an_active_version_that_no_longer_matches_its_approval() {
    let s = approved("show-tampered");
    let file = s.0.join("jobs").join(JOB).join("versions").join("v1.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("max_writes_per_run: 1", "max_writes_per_run: 100")).unwrap();
    let (code, out, err) = s.holon(&["show", JOB], "");
    assert_eq!(code, 2);
    assert!(out.is_empty(), "what is shown is what is enforced: {out}");
    assert!(err.contains("no longer hashes to its approval") && err.contains("blocked"), "{err}");
}

#[test]
fn show_never_writes_control_characters_from_an_edited_version() {
    let s = observed("show-escape");
    s.holon(&["propose", JOB], "");
    let file = s.0.join("jobs").join(JOB).join("versions").join("v1.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("# \x1b]0;owned\x07\n{text}")).unwrap();
    for args in [["show", JOB, "--pending"], ["show", JOB, "--diff"]] {
        let (code, out, _) = s.holon(&args, "");
        assert_eq!(code, 0);
        assert!(!out.contains('\x1b') && !out.contains('\x07') && out.contains("\\u{1b}"), "{out}");
    }
}

#[test]
fn a_proposal_marks_the_rules_that_allow_more_than_was_seen() {
    let s = observed("broader");
    let (_, yaml, _) = s.holon(&["propose", JOB], "");
    let line = |rule: &str| yaml.lines().find(|l| l.contains(rule)).unwrap_or_else(|| panic!("{rule} in {yaml}"));
    // Three report names became `*`.
    assert!(line("\"reports/*.md\"").contains("BROADER than seen: `*` stands for any file name; 3 names"));
    // Two flags, always used together: four combinations allowed, one seen.
    assert!(
        line("\"grep -n -r\"").contains("BROADER than seen: any subset")
            && line("\"grep -n -r\"").contains("(4 combinations), 1 seen")
    );
    // Exact rules are not marked.
    for exact in ["\"src/**\"", "\"ls\"", "\"pypi.org\"", "\"terminal\""] {
        assert!(!line(exact).contains("BROADER"), "{exact}");
    }
    // The mark survives approval: export reads it back from the approved file.
    s.holon(&["approve", JOB], "");
    let (_, export, _) = s.holon(&["export", JOB], "");
    let v: serde_json::Value = serde_json::from_str(&export).unwrap();
    let write = &v["paths"]["write"][0];
    assert_eq!(write["value"], "reports/*.md");
    assert!(write["broader"].as_str().is_some_and(|b| b.contains("3 names")), "{write}");
    assert!(v["tools"][0].get("broader").is_none(), "exact rules carry no mark");
}

#[test]
fn the_leash_line_before_the_first_approval_shows_pending_rules_not_allowed_ones() {
    let s = observed("leash-first");
    let (_, before, _) = s.holon(&["status", JOB], "");
    assert!(!counts_allowed(&before) && before.contains("nothing allowed yet"), "{before}");
    s.holon(&["propose", JOB], "");
    let (_, status, _) = s.holon(&["status", JOB], "");
    let track = |family: &str| status.lines().find(|l| l.trim_start().starts_with(family)).unwrap().to_owned();
    // src/**, reports/*.md, `.` (ls lists the workdir) and .git/** (git log reads its repository).
    assert!(track("paths").contains("◆4 pending"), "paths had no pending mark:\n{status}");
    assert!(track("tools").contains("◆5 pending"), "{status}");
    assert!(!counts_allowed(&status), "nothing is allowed before an approval:\n{status}");
    s.holon(&["approve", JOB], "");
    let (_, status, _) = s.holon(&["status", JOB], "");
    assert!(track_of(&status, "paths").contains("4 allowed") && !status.contains("pending"), "{status}");
}

/// Whether a track says "N allowed".
fn counts_allowed(status: &str) -> bool {
    let words: Vec<&str> = status.split_whitespace().collect();
    words.windows(2).any(|w| w[1] == "allowed" && w[0].parse::<u64>().is_ok())
}

fn track_of(status: &str, family: &str) -> String {
    status.lines().find(|l| l.trim_start().starts_with(family)).unwrap().to_owned()
}

#[test]
fn a_call_without_a_run_id_gets_a_warning() {
    let s = approved("no-run");
    let call = r#"{"tool":"terminal","args":{"command":"ls"}}"#;
    let (code, _, err) = s.holon(&["check", JOB], call);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning") && err.contains("no run id") && err.contains("`unknown`"), "{err}");
    let (code, out, _) = s.holon(&["check", JOB, "--json"], call);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["warning"].as_str().is_some_and(|w| w.contains("write budget")), "{v}");
    // Any run id silences it: the flag, HOLON_RUN, or the call's own session_id.
    assert!(!s.holon(&["check", JOB, "--run", "r1"], call).2.contains("warning"));
    assert!(!s.holon_env(&["check", JOB], call, &[("HOLON_RUN", "r2")]).2.contains("warning"));
    let hook = r#"{"tool_name":"Bash","tool_input":{"command":"ls"},"session_id":"s-1"}"#;
    assert!(!s.holon(&["check", JOB], hook).2.contains("warning"));
    // observe counts the calls that had none.
    let (code, _, err) = s.holon(&["observe", "other"], &format!("{call}\n{hook}\n{call}\n"));
    assert_eq!(code, 0);
    assert!(err.contains("warning: 2 call(s) had no run id"), "{err}");
}

#[test]
fn widen_by_pattern_never_opens_the_whole_workdir_and_names_each_list() {
    let s = approved("widen-top");
    let top = r#"{"tool":"write_file","args":{"path":"NOTES"}}"#;
    let (code, _, err) = s.holon(&["check", JOB, "--run", "r9"], top);
    assert_eq!(code, 2);
    // The guarded agent reads `check`'s answer: it never learns how to widen its leash.
    assert!(!err.contains("widen") && !err.contains("approve"), "{err}");
    // The person reading the drift does.
    let (_, drift, _) = s.holon(&["drift", JOB], "");
    assert!(drift.contains("to allow one: holon job widen review ID"), "{drift}");
    let (code, out, err) = s.holon(&["widen", JOB, "1", "--pattern"], "");
    assert_eq!(code, 0, "{err}");
    // A top-level name has no parent to widen to: `*` would allow every file of the job.
    assert!(out.contains("  + paths.write: NOTES\n"), "{out}");
    assert!(!out.contains(": *\n") && !out.contains(": **\n"), "{out}");
    let read = r#"{"tool":"read_file","args":{"path":"setup.cfg"}}"#;
    assert_eq!(s.holon(&["check", JOB, "--run", "r9"], read).0, 2);
    let (_, out, _) = s.holon(&["widen", JOB, "2", "--pattern"], "");
    assert!(out.contains("  + paths.read: setup.cfg\n"), "{out}");
    // Nor at the filesystem's root: `/etc` has no parent but `/`.
    let root = r#"{"tool":"read_file","args":{"path":"/etc"}}"#;
    assert_eq!(s.holon(&["check", JOB, "--run", "r9"], root).0, 2);
    let (_, out, _) = s.holon(&["widen", JOB, "3", "--pattern"], "");
    assert!(out.contains("  + paths.read: /etc\n") && !out.contains("**"), "{out}");
    // Widening a drift the pending version already allows writes no empty version.
    let (code, _, err) = s.holon(&["widen", JOB, "2"], "");
    assert_eq!(code, 2);
    assert!(err.contains("drift #2 is already allowed by v4: nothing to widen"), "{err}");
    let (_, pending, _) = s.holon(&["show", JOB, "--pending"], "");
    assert!(pending.contains("\"setup.cfg\""), "the pending version is still v4: {pending}");
}

#[test]
fn widen_by_pattern_keeps_a_pinned_command_exact() {
    let s = approved("widen-pinned");
    let sync = r#"{"tool":"terminal","args":{"command":"rsync -a out/ backup/"}}"#;
    assert_eq!(s.holon(&["check", JOB, "--run", "r9"], sync).0, 2);
    let (code, out, err) = s.holon(&["widen", JOB, "1", "--pattern"], "");
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("-- **") && !out.contains(" -*"), "a pinned command widened to any arguments: {out}");
    s.holon(&["approve", JOB], "");
    let wipe = r#"{"tool":"terminal","args":{"command":"rsync -a --delete empty/ .git/"}}"#;
    assert_eq!(s.holon(&["check", JOB, "--run", "r10"], wipe).0, 2);
    assert_eq!(s.holon(&["check", JOB, "--run", "r11"], sync).0, 0, "the call widened for passes");
}
