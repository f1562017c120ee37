//! `holon validate` through the real binary: exit codes, JSON shape, human output.
#![cfg(feature = "cli")] // runs the `holon` binary

mod common;
use common::holon;

#[test]
fn examples_are_valid() {
    let (code, out, _) = holon(&["validate", "examples/"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("0 with problems"));
}

#[test]
fn invalid_files_exit_1_with_every_error() {
    let (code, out, _) =
        holon(&["validate", "testdata/invalid/manifest-branch-ref.yaml", "examples/agents/fx-convert"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("/source/ref"), "{out}");
    assert!(out.contains("ok examples/agents/fx-convert/holon.yaml"), "{out}");
}

#[test]
fn unreadable_files_exit_2_with_the_line() {
    let (code, out, _) = holon(&["validate", "testdata/unreadable/syntax-error.yaml", "examples/agents/fx-convert"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("line "), "{out}");
    let (code, _, _) = holon(&["validate", "no/such/file.yaml"]);
    assert_eq!(code, 2);
}

#[test]
fn json_output_has_the_contract_shape() {
    let (code, out, _) =
        holon(&["validate", "--json", "testdata/invalid/mandate-typo-key.yaml", "examples/mandates/alice-root.yaml"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["kind"], "mandate");
    assert_eq!(files[0]["valid"], false);
    assert_eq!(files[0]["errors"][0]["path"], "/allow");
    assert!(files[0]["errors"][0]["message"].as_str().unwrap().contains("publsihed"));
    assert_eq!(files[1]["valid"], true);
    assert_eq!(files[1]["errors"].as_array().unwrap().len(), 0);
}

#[test]
fn bad_arguments_exit_2() {
    let (code, _, _) = holon(&["validate"]);
    assert_eq!(code, 2);
    let (code, _, _) = holon(&["frobnicate"]);
    assert_eq!(code, 2);
}

/// A directory walk says which YAML files it passed over and why; a scenario, named or
/// found in a walk, is checked as `mandate simulate` loads it (issue #15).
#[test]
fn skipped_files_are_listed_and_scenarios_are_recognised() {
    let (code, out, _) = holon(&["validate", "examples/"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok examples/worked-example/scenario.yaml (scenario)"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.yaml"), "title: not ours\n").unwrap();
    std::fs::copy("examples/mandates/alice-root.yaml", dir.path().join("m.yaml")).unwrap();
    let (code, out, _) = holon(&["validate", "--json", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["skipped"][0]["path"].as_str().unwrap().ends_with("notes.yaml"), "{out}");
    assert!(v["skipped"][0]["reason"].as_str().unwrap().contains("holon_scenario"), "{out}");
    let (code, out, _) = holon(&["validate", "examples/worked-example/scenario.yaml"]);
    assert_eq!((code, out.contains("ok examples/worked-example/scenario.yaml (scenario)")), (0, true), "{out}");
    // A scenario whose mandate is missing is invalid, and says why.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("scenario.yaml");
    std::fs::write(
        &broken,
        "holon_scenario: \"0.1\"\nmandate: nowhere.yaml\nagents: .\nat: \"2026-11-20T10:00:00Z\"\ncalls: []\n",
    )
    .unwrap();
    let (code, out, _) = holon(&["validate", broken.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("(scenario)") && out.contains("nowhere.yaml"), "{out}");
    // And found in a walk.
    let (code, out, _) = holon(&["validate", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("(scenario)") && out.contains("nowhere.yaml"), "{out}");
}

/// A scenario reports every shape problem in one pass, each at its pointer and with the
/// advice the documents get, against `schema/holon-scenario.schema.json` (issue #15).
#[test]
fn a_scenario_reports_every_shape_problem_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "holon_scenario: 0.1\nagentz: ../agents\nat: \"2026-11-20T10:00:00Z\"\ncalls:\n  - agent: Holon-Labs/x\n    max_cost: 0.60\n    outcome: failed\n    sub_calls:\n      - { capability: extraction.table, agent: acme/x, cost: \"0.004\" }\n      - { capability: finance.fx, cost: \"abc\" }\n",
    )
    .unwrap();
    let (code, out, _) = holon(&["validate", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let errors: Vec<(String, String)> = v["files"][0]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap().to_owned(), e["message"].as_str().unwrap().to_owned()))
        .collect();
    let says = |path: &str, text: &str| errors.iter().any(|(p, m)| p == path && m.contains(text));
    assert!(says("/holon_scenario", "quote it, like \"0.1\""), "{errors:?}");
    assert!(says("/", "missing required key \"agents\""), "{errors:?}");
    assert!(says("/", "did you mean `agents`?"), "{errors:?}");
    assert!(says("/calls/0/agent", "not an agent id"), "{errors:?}");
    assert!(says("/calls/0/max_cost", "quoted decimal string"), "{errors:?}");
    assert!(says("/calls/0/outcome", "`error:CODE`"), "{errors:?}");
    assert!(says("/calls/0/sub_calls/0", "exactly one of `capability` or `agent`"), "{errors:?}");
    assert!(says("/calls/0/sub_calls/1/cost", "not a decimal amount"), "{errors:?}");
    assert_eq!(errors.len(), 8, "{errors:?}");
}

/// A document whose kind key is misspelt is reported, not skipped: a directory walk with
/// one passed as "not a holon document" and exit 0 would let CI pass (new-user pass, #15).
#[test]
fn a_misspelt_kind_is_invalid_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("examples/mandates/alice-research.yaml").unwrap();
    std::fs::write(dir.path().join("m.yaml"), text.replace("holon_mandate:", "holon_mandat:")).unwrap();
    std::fs::write(dir.path().join("notes.yaml"), "title: someone else's YAML\n").unwrap();
    let (code, out, _) = holon(&["validate", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("did you mean `holon_mandate`?"), "{out}");
    assert!(out.contains("1 file(s), 0 valid, 1 with problems"), "{out}");
    assert!(out.contains("skipped") && out.contains("notes.yaml"), "other YAML is still passed over: {out}");
    let (code, out, _) = holon(&["validate", dir.path().join("m.yaml").to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
}

/// A syntax error gives its location once, and an unreadable file does not say
/// "unreadable" twice.
#[test]
fn a_syntax_error_says_its_place_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.yaml");
    std::fs::write(&path, "a: [1\n").unwrap();
    let (code, out, _) = holon(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert_eq!(out.matches("line 2").count(), 1, "{out}");
    assert!(!out.contains(" at line "), "{out}");
    assert!(!out.contains("(unreadable)"), "{out}");
}

/// Nothing validated is not a pass, and a file that is not YAML is named as such (a
/// Markdown file was blamed for YAML anchors in its `**bold**`).
#[test]
fn nothing_to_validate_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "**bold**\n").unwrap();
    let (code, _, err) = holon(&["validate", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nothing to validate"), "{err}");
    // YAML, but none of it ours: nothing validated either.
    std::fs::write(dir.path().join("notes.yaml"), "title: x\n").unwrap();
    let (code, _, err) = holon(&["validate", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("none of the 1 YAML file(s) found is a holon document"), "{err}");
    // Two kinds in one file are a broken document, not someone else's YAML.
    std::fs::write(dir.path().join("two.yaml"), "holon: \"0.1\"\nholon_mandate: \"0.1\"\n").unwrap();
    let (code, out, _) = holon(&["validate", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("`holon` and `holon_mandate` name two kinds of document in one file"), "{out}");
    let (code, _, err) = holon(&["validate", dir.path().join("README.md").to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a .yaml, .yml or .json file") && !err.contains("anchor"), "{err}");
}

/// `validate` refuses every figure the engine refuses at publish, with the bound (one
/// table, `mandate::limits`): a `per_day` above what the day word holds passed `validate`
/// and was then refused by publish.
#[test]
fn a_figure_the_engine_cannot_hold_is_refused_with_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("examples/mandates/alice-root.yaml").unwrap();
    let path = dir.path().join("m.yaml");
    let big = text
        .replace("total: \"100.00\"", "total: \"5000000000000.00\"")
        .replace("per_day: \"20.00\"", "per_day: \"300000000.00\"");
    std::fs::write(&path, big).unwrap();
    let (code, out, _) = holon(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("/budget/per_day") && out.contains("281474976.710655"), "{out}");
    assert!(out.contains("/budget/total") && out.contains("4611686018427.387904"), "{out}");
}

/// An expired mandate is a valid document that admits nothing: said, exit 0.
#[test]
fn an_expired_mandate_is_valid_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("examples/mandates/alice-root.yaml").unwrap();
    let path = dir.path().join("m.yaml");
    let old = text
        .replace("2026-11-01T00:00:00Z", "2020-01-01T00:00:00Z")
        .replace("2099-12-31T23:59:59Z", "2020-12-31T23:59:59Z");
    assert_ne!(old, text, "the example's validity was changed");
    std::fs::write(&path, old).unwrap();
    let (code, out, _) = holon(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("warning /valid/until the mandate expired at 2020-12-31T23:59:59Z"), "{out}");
    let (code, json, _) = holon(&["validate", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["files"][0]["warnings"][0]["path"], "/valid/until", "{json}");
    // A CI gate built on `--strict` fails on it (issue #50), and passes the examples.
    let (code, out, _) = holon(&["validate", "--strict", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let (code, out, _) = holon(&["validate", "--strict", "examples/mandates"]);
    assert_eq!(code, 0, "{out}");
}
