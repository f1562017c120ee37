//! The examples, the demo and the commands of the documentation give the same results
//! whatever today's date: the bundled mandates are valid until the end of 2099 (the research sub-mandate until November 2099), and the
//! worked example runs at its scenario's fixed `at`. Each command is run at a time in
//! their first month and at one five years on (`--at`, the clock the commands read when
//! no `--at` is given), and must decide the same.
#![cfg(feature = "cli")] // runs the `holon` binary

use std::process::Command;

fn holon(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_holon")).args(args).env("NO_COLOR", "1").output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap())
}

const ROOT: &str = "examples/mandates/alice-root.yaml";
const RESEARCH: &str = "examples/mandates/alice-research.yaml";
const TIMES: [&str; 3] = ["2026-11-20T10:00:00Z", "2031-06-01T12:00:00Z", "2099-06-30T00:00:00Z"];

/// (agent, decision, reason codes) for each agent.
fn decisions(out: &str) -> Vec<(String, String, String)> {
    let v: serde_json::Value = serde_json::from_str(out).unwrap();
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let codes: Vec<_> = r["reasons"].as_array().unwrap().iter().map(|c| c["code"].to_string()).collect();
            (r["agent"].as_str().unwrap().to_owned(), r["decision"].to_string(), codes.join(","))
        })
        .collect()
}

#[test]
fn mandate_check_decides_the_same_in_2031() {
    for mandate in [ROOT, RESEARCH] {
        let runs: Vec<_> = TIMES
            .iter()
            .map(|at| {
                let (code, out) = holon(&["mandate", "check", mandate, "examples/agents", "--at", at, "--json"]);
                (code, decisions(&out))
            })
            .collect();
        assert!(runs.iter().all(|r| r == &runs[0]), "{mandate}: {runs:#?}");
    }
    // The root mandate allows some of the examples; none is refused for its time.
    let (_, out) = holon(&["mandate", "check", ROOT, "examples/agents", "--json"]);
    let now = decisions(&out);
    assert!(now.iter().any(|(_, d, _)| d == "\"allowed\""), "{now:#?}");
    assert!(!now.iter().any(|(_, _, codes)| codes.contains("mandate_")), "{now:#?}");
}

#[test]
fn search_ranks_the_same_in_2031() {
    let runs: Vec<_> = TIMES
        .iter()
        .map(|at| holon(&["search", "table", "--mandate", ROOT, "--agents", "examples/agents", "--at", at, "--json"]))
        .collect();
    assert!(runs.iter().all(|r| r == &runs[0]), "{runs:#?}");
    assert!(runs[0].1.contains("acme/table-extract"), "{}", runs[0].1);
}

#[test]
fn the_examples_stay_valid_and_nested() {
    let (code, out) = holon(&["validate", "examples/"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = holon(&["mandate", "attenuate", ROOT, RESEARCH]);
    assert_eq!(code, 0, "{out}");
}

/// The demo's decisions run at the scenario's `at`, not at the wall clock.
#[test]
fn the_demo_reproduces_the_worked_example() {
    let (code, out) = holon(&["demo", "--seconds", "0.1"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("demo passed"), "{out}");
    let scenario = std::fs::read_to_string("examples/worked-example/scenario.yaml").unwrap();
    assert!(scenario.contains("\nat: \"2026-11-20T10:00:00Z\""), "the worked example must keep a fixed time");
}
