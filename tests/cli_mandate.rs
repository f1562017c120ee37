//! The mandate and search verbs through the real binary: the contract's exit codes,
//! JSON keys, and the worked example end to end.
#![cfg(feature = "cli")] // runs the `holon` binary

use std::process::Command;

use serde_json::Value;

fn holon(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_holon")).args(args).env("NO_COLOR", "1").output().unwrap();
    let mut text = String::from_utf8(out.stdout).unwrap();
    text.push_str(&String::from_utf8(out.stderr).unwrap());
    (out.status.code().unwrap(), text)
}

const ROOT: &str = "examples/mandates/alice-root.yaml";
const AT: &str = "2026-11-20T10:00:00Z";

#[test]
fn worked_example_number_for_number() {
    let (code, out) = holon(&["mandate", "simulate", ROOT, "examples/worked-example/scenario.yaml", "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let first = &v["receipts"][0];
    assert_eq!(first["decision"], "denied");
    assert_eq!(first["worst_case"], "3.10");
    assert_eq!(first["reasons"][0]["code"], "per_call_exceeded");
    let second = &v["receipts"][1];
    assert_eq!(second["worst_case"], "0.60");
    assert_eq!(second["reasons"][0]["code"], "approval_required");
    assert_eq!(second["approved_by"], "alice");
    assert_eq!(second["decision"], "allowed");
    let children = second["children"].as_array().unwrap();
    assert_eq!(children.len(), 6);
    let tables = children.iter().filter(|c| c["agent"] == "acme/table-extract" && c["billed"] == "0.004").count();
    let fx = children.iter().filter(|c| c["agent"] == "holon-labs/fx-convert" && c["billed"] == "0.001").count();
    assert_eq!((tables, fx), (4, 2));
    assert_eq!(second["settlement"]["downstream"], "0.018");
    assert_eq!(second["billed"], "0.118");
    assert_eq!(v["billed"], "0.118");
    let (_, human) = holon(&["mandate", "simulate", ROOT, "examples/worked-example/scenario.yaml"]);
    assert!(human.contains("billed in total 0.118 EUR"), "{human}");
}

#[test]
fn check_json_contract_and_exit_codes() {
    let (code, out) = holon(&["mandate", "check", ROOT, "examples/agents", "--at", AT, "--json"]);
    assert_eq!(code, 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["mandate"], "alice/m-2026-11");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 7);
    for r in results {
        for key in ["agent", "version", "decision", "worst_case", "currency", "reasons"] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
    }
    let (code, _) = holon(&["mandate", "check", ROOT, "examples/agents/table-extract", "--at", AT]);
    assert_eq!(code, 0);
    let (code, out) = holon(&[
        "mandate",
        "check",
        ROOT,
        "examples/agents/invoice-pipeline",
        "examples/agents/company-lookup",
        "--at",
        AT,
        "--max-cost",
        "0.60",
    ]);
    assert_eq!(code, 3, "{out}");
    let (code, out) =
        holon(&["mandate", "check", ROOT, "examples/agents/table-extract", "--at", AT, "--spent-total", "99.996001"]);
    assert_eq!(code, 1);
    assert!(out.contains("total_exceeded"), "{out}");
    let (code, out) = holon(&["mandate", "check", ROOT, "examples/agents/table-extract", "--spent-total", "1e3"]);
    assert_eq!(code, 2, "{out}");
    let (code, _) = holon(&["mandate", "check", ROOT, "examples/agents/table-extract", "--at", "yesterday"]);
    assert_eq!(code, 2);
    let (code, _) = holon(&["mandate", "check", "testdata/invalid/mandate-typo-key.yaml", "examples/agents"]);
    assert_eq!(code, 2);
}

#[test]
fn attenuate_and_derive() {
    let (code, out) = holon(&["mandate", "attenuate", ROOT, "examples/mandates/alice-research.yaml", "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["valid"], true);
    let (code, out) = holon(&["mandate", "attenuate", "examples/mandates/alice-research.yaml", ROOT, "--json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["reasons"].as_array().unwrap().len() > 3);
    assert!(v["reasons"][0]["code"].is_string() && v["reasons"][0]["message"].is_string());
    let (code, out) = holon(&["mandate", "derive", ROOT, "examples/agents/invoice-pipeline", "--max-cost", "0.60"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("total: '0.50'") || out.contains("total: \"0.50\"") || out.contains("total: 0.50"), "{out}");
    assert!(out.contains("issuer: alice/assistant"), "{out}");
    // The manifest's own path derives the same sub-mandate as its directory (it searched
    // only the agent's directory for the declared downstream agents, and refused).
    let by_file =
        holon(&["mandate", "derive", ROOT, "examples/agents/invoice-pipeline/holon.yaml", "--max-cost", "0.60"]);
    assert_eq!(by_file, (0, out.clone()));
    let (code, out) = holon(&["mandate", "derive", ROOT, "examples/agents/table-extract"]);
    assert_eq!(code, 2, "{out}");
}

/// `derive`'s output must pass `attenuate` against its own parent: with the manifests
/// derive used (`--agents`). Without them the declared `acme/company-lookup@^1` is
/// unresolved and the derived mandate seems to widen its parent (issue #10).
#[test]
fn derived_output_passes_attenuate_with_the_agents_derive_used() {
    let (code, derived) = holon(&["mandate", "derive", ROOT, "examples/agents/invoice-pipeline", "--max-cost", "0.60"]);
    assert_eq!(code, 0, "{derived}");
    let path = std::env::temp_dir().join(format!("holon-derived-{}.yaml", std::process::id()));
    std::fs::write(&path, &derived).unwrap();
    let child = path.to_str().unwrap();
    let (with_agents, out) = holon(&["mandate", "attenuate", ROOT, child, "--agents", "examples/agents", "--json"]);
    let (without, _) = holon(&["mandate", "attenuate", ROOT, child, "--json"]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(with_agents, 0, "{out}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["valid"], true);
    assert_eq!(without, 1, "without the manifests the declared agent is unresolved");
}

#[test]
fn search_contract() {
    let (code, out) =
        holon(&["search", "table", "--mandate", ROOT, "--agents", "examples/agents", "--at", AT, "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let first = &v["ranked"][0];
    for key in ["agent", "worst_case", "cost_per_success", "latency_p95_s"] {
        assert!(first.get(key).is_some(), "{key}");
    }
    assert!(v["excluded"][0]["reason"]["code"].is_string());
    let (_, out) =
        holon(&["search", "--mandate", ROOT, "--agents", "examples/agents", "--at", "2100-02-01T00:00:00Z", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ranked"].as_array().unwrap().len(), 0, "an expired mandate ranks nothing");
}

/// Search compares word stems, and lists as excluded only the agents the query matched
/// (issue #15: "tables" found nothing, and every denied agent was listed whatever the query).
#[test]
fn search_matches_stems_and_excludes_only_matching_agents() {
    let search = |q: &str| {
        let (code, out) = holon(&["search", q, "--mandate", ROOT, "--agents", "examples/agents", "--at", AT, "--json"]);
        assert_eq!(code, 0, "{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let ids = |key: &str| -> Vec<String> {
            v[key].as_array().unwrap().iter().map(|x| x["agent"].as_str().unwrap().to_owned()).collect()
        };
        (ids("ranked"), ids("excluded"))
    };
    for q in ["tables", "extracting", "TABLE"] {
        assert!(search(q).0.contains(&"acme/table-extract".to_owned()), "{q}");
    }
    assert_eq!(search("converting currencies").0, vec!["holon-labs/fx-convert".to_owned()]);
    let (_, excluded) = search("converting currencies");
    assert!(
        !excluded.contains(&"shady/invoice-scraper".to_owned()),
        "{excluded:?} lists an agent the query did not match"
    );
    // Without a query every denied agent is excluded with its reason.
    let (code, out) = holon(&["search", "--mandate", ROOT, "--agents", "examples/agents", "--at", AT, "--json"]);
    assert_eq!(code, 0);
    assert!(out.contains("shady/invoice-scraper"));
    // No match says so, and how matching works.
    let (code, out) = holon(&["search", "zebra", "--mandate", ROOT, "--agents", "examples/agents", "--at", AT]);
    assert_eq!(code, 0);
    assert!(out.contains("no agent matches `zebra`") && out.contains("stem"), "{out}");
    // The order is explained, and an all-excluded result says so.
    let (_, out) = holon(&["search", "table", "--mandate", ROOT, "--agents", "examples/agents", "--at", AT]);
    assert!(out.contains("most relevant first, then the lowest cost per success"), "{out}");
    let (_, out) = holon(&["search", "invoices", "--mandate", ROOT, "--agents", "examples/agents", "--at", AT]);
    assert!(out.contains("nothing ranked: every agent that matches is excluded"), "{out}");
}

/// An unreadable file is named once, with its reason once (the error chain printed the
/// reason twice: `cannot read: …: cannot read: …`).
#[test]
fn an_unreadable_document_is_reported_once() {
    for args in [
        vec!["mandate", "check", "/nonexistent/m.yaml", "examples/agents"],
        vec!["mandate", "attenuate", "/nonexistent/m.yaml", ROOT],
        vec!["search", "--mandate", "/nonexistent/m.yaml", "--agents", "examples/agents"],
    ] {
        let (code, out) = holon(&args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert_eq!(out.matches("cannot read").count(), 1, "{args:?}: {out}");
    }
}

/// What a newcomer tried (issue #15): an agent id where a path goes, the simulate
/// arguments swapped, `attenuate` on a derived mandate without the manifests, and a
/// scenario calling an agent it has no manifest for.
#[test]
fn common_first_mistakes_say_how_to_move_on() {
    let (code, out) = holon(&["mandate", "check", ROOT, "holon-labs/fx-convert"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not by id") && out.contains("examples/agents/fx-convert"), "{out}");
    assert_eq!(out.matches("holon-labs/fx-convert:").count(), 1, "the path said once: {out}");

    let (code, out) = holon(&["mandate", "simulate", "examples/worked-example/scenario.yaml", ROOT]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("found a mandate") && out.contains("MANDATE SCENARIO"), "{out}");
    assert!(!out.contains("unknown key"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let derived = dir.path().join("derived.yaml");
    let (code, text) = holon(&["mandate", "derive", ROOT, "examples/agents/invoice-pipeline", "--max-cost", "0.60"]);
    assert_eq!(code, 0, "{text}");
    std::fs::write(&derived, text).unwrap();
    let (code, out) = holon(&["mandate", "attenuate", ROOT, derived.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("pass --agents DIR"), "{out}");
    let (code, out) = holon(&["mandate", "attenuate", ROOT, derived.to_str().unwrap(), "--agents", "examples/agents"]);
    assert_eq!(code, 0, "{out}");

    let scenario = dir.path().join("s.yaml");
    let root = std::fs::canonicalize(ROOT).unwrap();
    let agents = std::fs::canonicalize("examples/agents").unwrap();
    std::fs::write(
        &scenario,
        format!(
            "holon_scenario: \"0.1\"\nmandate: {}\nagents: {}\nat: \"{AT}\"\ncalls:\n  - agent: nobody/ghost\n",
            root.display(),
            agents.display()
        ),
    )
    .unwrap();
    let (code, out) = holon(&["mandate", "simulate", ROOT, scenario.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("unknown_agent") && !out.contains("internal_error"), "{out}");
}

/// From the new user's trial: a negative amount is refused as an amount (clap's tip to pass
/// `-- -1` would make it an agent argument), and arguments in the wrong order get the order
/// to use: `mandate check DIR MANDATE`, `job JOB status`.
#[test]
fn a_negative_amount_and_swapped_arguments_say_what_to_give() {
    let (code, err) =
        holon(&["mandate", "check", "examples/mandates/alice-root.yaml", "examples/agents", "--max-cost", "-1"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'-1' for '--max-cost") && err.contains("is not a decimal string") && !err.contains("-- -1"),
        "{err}"
    );
    let (code, err) = holon(&[
        "mandate",
        "derive",
        "examples/mandates/alice-root.yaml",
        "examples/agents/invoice-pipeline",
        "--max-cost",
        "-0.5",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'-0.5' for '--max-cost") && err.contains("is not a decimal string"), "{err}");
    let (code, err) = holon(&["mandate", "check", "examples/agents", "examples/mandates/alice-root.yaml"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("swap them: holon mandate check examples/mandates/alice-root.yaml examples/agents"), "{err}");
    let (code, err) = holon(&["job", "nightly", "status"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("swap them: holon job status nightly"), "{err}");
}

/// `mandate check --parents`: a sub-mandate judged on its chain, with the spend per level,
/// as the engine judges it; the denial names the level that refused.
#[test]
fn check_judges_a_sub_mandate_on_its_chain_and_names_the_level() {
    let child = "examples/mandates/alice-invoices.yaml";
    let agent = "examples/agents/table-extract";
    let (code, out) = holon(&["mandate", "check", child, agent, "--parents", ROOT, "--at", AT]);
    assert_eq!(code, 0, "{out}");
    // Alice's day nearly spent: the call fits the pipeline's 1.00 but not alice's 20.00.
    let parent_spent = "alice/m-2026-11=19.997,19.997";
    let (code, out) =
        holon(&["mandate", "check", child, agent, "--parents", ROOT, "--parent-spent", parent_spent, "--at", AT]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("per_day_exceeded alice/m-2026-11 (an ancestor of alice/m-2026-11/invoices): spent today 19.997"),
        "{out}"
    );
    // The pipeline's own day spent: denied on its own limit, no ancestor named.
    let (code, out) =
        holon(&["mandate", "check", child, agent, "--parents", ROOT, "--spent-today", "0.998", "--at", AT]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("per_day_exceeded spent today 0.998"), "{out}");
    // Without its parent the chain does not hold; a spend for a mandate not given is an error.
    let (code, out) =
        holon(&["mandate", "check", child, agent, "--parents", "examples/mandates/alice-research.yaml", "--at", AT]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("sub_mandate_chain_broken"), "{out}");
    let (code, out) =
        holon(&["mandate", "check", child, agent, "--parents", ROOT, "--parent-spent", "bob/x=1", "--at", AT]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not among the --parents"), "{out}");
    let (code, out) =
        holon(&["mandate", "check", child, agent, "--parents", ROOT, "--parent-spent", "alice/m-2026-11", "--at", AT]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("expected ID=TOTAL"), "{out}");
}

/// `mandate simulate --parents`: a scenario under a sub-mandate, every call judged on the
/// chain and what it bills counted on every level: the parent's 0.004 before, plus the
/// first call's 0.004, leaves too little for the second.
#[test]
fn simulate_counts_a_sub_mandates_bills_on_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let small = |from: &str, to: &str, edits: &[(&str, &str)]| {
        let mut text = std::fs::read_to_string(from).unwrap();
        for (a, b) in edits {
            assert!(text.contains(a), "{from}: {a}");
            text = text.replace(a, b);
        }
        std::fs::write(dir.path().join(to), text).unwrap();
    };
    let budget = |total: &'static str, per_day: &'static str, per_call: &'static str, above: &'static str| {
        [
            (total, "total: \"0.01\""),
            (per_day, "per_day: \"0.01\""),
            (per_call, "per_call: \"0.01\""),
            (above, "above: \"0.01\""),
        ]
    };
    small(
        ROOT,
        "root.yaml",
        &budget("total: \"100.00\"", "per_day: \"20.00\"", "per_call: \"2.00\"", "above: \"0.50\""),
    );
    small(
        "examples/mandates/alice-invoices.yaml",
        "child.yaml",
        &budget("total: \"5.00\"", "per_day: \"1.00\"", "per_call: \"0.10\"", "above: \"0.05\""),
    );
    let agents = std::fs::canonicalize("examples/agents").unwrap();
    let scenario = format!(
        "holon_scenario: \"0.1\"\nmandate: child.yaml\nagents: {}\nat: \"{AT}\"\ncalls:\n  - agent: acme/table-extract\n  - agent: acme/table-extract\n",
        agents.display()
    );
    std::fs::write(dir.path().join("s.yaml"), scenario).unwrap();
    let p = |f: &str| dir.path().join(f).display().to_string();
    let args = ["mandate", "simulate", &p("child.yaml"), &p("s.yaml"), "--parents", &p("root.yaml"), "--json"];
    let (code, out) = holon(&args);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["billed"], "0.008", "{out}");
    let mut with_spent = args.to_vec();
    with_spent.extend(["--parent-spent", "alice/m-2026-11=0.004,0.004"]);
    let (code, out) = holon(&with_spent);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["billed"], "0.004", "{out}");
    let second = &report["receipts"][1];
    assert_eq!(second["decision"], "denied", "{out}");
    let message = second["reasons"][0]["message"].as_str().unwrap();
    assert!(message.starts_with("alice/m-2026-11 (an ancestor of alice/m-2026-11/invoices): spent 0.008"), "{out}");
}
