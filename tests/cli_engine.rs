//! `holon loadtest` and `holon demo` end to end.
#![cfg(feature = "cli")] // runs the `holon` binary

mod common;
use common::holon;

#[test]
fn loadtest_json_has_the_contract_keys_and_an_honest_audit() {
    let (code, out, err) =
        holon(&["loadtest", "--threads", "2", "--mandates", "10", "--agents", "100", "--calls", "20000", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for key in ["threads", "calls", "ops_per_sec", "latency_ns", "decisions", "overrun", "mandates_audited"] {
        assert!(v.get(key).is_some(), "missing {key} in {out}");
    }
    for key in ["p50", "p99", "p999"] {
        assert!(v["latency_ns"][key].as_u64().unwrap() > 0);
    }
    let d = &v["decisions"];
    assert!(d["allowed"].as_u64().unwrap() > 0 && d["held"].as_u64().unwrap() > 0 && d["denied"].as_u64().unwrap() > 0);
    assert_eq!(v["calls"], 20000);
    assert_eq!(v["overrun"], false);
    assert_eq!(v["mandates_audited"], 10);
    assert!(v["latency_ns"]["p50"].as_u64() <= v["latency_ns"]["p99"].as_u64());
}

#[test]
fn a_hot_mandate_runs_out_without_overrun() {
    let (code, out, err) =
        holon(&["loadtest", "--threads", "2", "--hot", "--agents", "20", "--calls", "40000", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["overrun"], false);
    assert!(v["decisions"]["denied"].as_u64().unwrap() > 20_000, "the budget ran out: {out}");
    assert!(v["max_used_micros"].as_u64().unwrap() <= v["limit_micros"].as_u64().unwrap());
    assert!(v["max_used_micros"].as_u64().unwrap() > v["limit_micros"].as_u64().unwrap() * 9 / 10, "{out}");
}

#[test]
fn a_hot_mandate_with_a_large_total_stays_allowed() {
    let (code, out, err) = holon(&[
        "loadtest",
        "--threads",
        "2",
        "--hot",
        "--allowed-only",
        "--total",
        "1000000",
        "--agents",
        "20",
        "--calls",
        "20000",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["overrun"].as_bool(), v["decisions"]["denied"].as_u64()), (Some(false), Some(0)), "{out}");
    assert_eq!(v["limit_micros"], 1_000_000_000_000u64);
}

#[test]
fn loadtest_refuses_impossible_options() {
    for args in [
        &["loadtest", "--threads", "0"][..],
        &["loadtest", "--agents", "5"],
        &["loadtest", "--duration-s", "-1"],
        &["loadtest", "--total", "1e6"],
        &["loadtest", "--total", "-5"],
    ] {
        let (code, _, err) = holon(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("holon:") || err.contains("error:"), "{err}");
    }
}

#[test]
fn the_demo_reproduces_the_worked_example_and_passes() {
    let (code, out, err) = holon(&["demo", "--seconds", "0.3"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("billed own 0.10 + sub-calls 0.018 = 0.118 EUR"), "{out}");
    assert!(out.contains("per_call_exceeded"), "{out}");
    assert!(out.contains("demo passed"), "{out}");
    assert!(!out.contains('\x1b'), "NO_COLOR is honoured");
}

#[test]
fn demo_without_the_examples_says_to_pass_examples() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("examples");
    let (code, _, err) = holon(&["demo", "--examples", missing.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--examples DIR") && err.contains("repository's root"), "{err}");
}

/// The progress bar of long work: silent when standard error is a pipe (or under
/// `--json`), drawn on a terminal (`script` gives the run a pseudo-terminal).
#[test]
fn the_progress_bar_shows_on_a_terminal_and_never_in_a_pipe() {
    let exe = env!("CARGO_BIN_EXE_holon");
    for args in
        [vec!["loadtest", "--duration-s", "1", "--threads", "1"], vec!["loadtest", "--calls", "300000", "--json"]]
    {
        let out = std::process::Command::new(exe).args(&args).env("NO_COLOR", "1").output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains('\r') && !err.contains("of the run") && !err.contains('█'),
            "{args:?} drew in a pipe: {err:?}"
        );
    }
    let Ok(out) = std::process::Command::new("script")
        .args(["-qec", &format!("{exe} loadtest --duration-s 1 --threads 1"), "/dev/null"])
        .output()
    else {
        panic!("util-linux `script` is needed to give the run a terminal");
    };
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("of the run") && shown.contains("calls"), "no bar on a terminal: {shown:?}");
}
