//! One failing case per mandate and record rule, and the passing bases.

mod common;
use common::*;
use serde_json::json;

const MANDATE: &str = "examples/mandates/alice-root.yaml";
const RECORD: &str = "examples/agents/table-extract/record.yaml";

fn check(base: &str, cases: Vec<(&str, Vec<Edit>, &str)>) {
    let base = load_value(base);
    assert_eq!(violations(&base), Vec::<String>::new());
    let mut problems = Vec::new();
    for (rule, edits, path) in cases {
        let found = violations(&apply(&base, &edits));
        if !found.iter().any(|v| v.starts_with(&format!("{path}: "))) {
            problems.push(format!("{rule}: expected a violation at {path}, got {found:?}"));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn mandate_rules() {
    check(
        MANDATE,
        vec![
            ("version", vec![set("/holon_mandate", json!("1"))], "/holon_mandate"),
            ("id shape", vec![set("/id", json!("Alice M"))], "/id"),
            ("issuer shape", vec![set("/issuer", json!("Alice"))], "/issuer"),
            ("root issuer is an account", vec![set("/issuer", json!("alice/bot"))], "/issuer"),
            ("grantee is an agent", vec![set("/grantee", json!("bob"))], "/grantee"),
            ("window ordered", vec![set("/valid/until", json!("2026-10-01T00:00:00Z"))], "/valid/until"),
            ("window not empty", vec![set("/valid/until", json!("2026-11-01T00:00:00Z"))], "/valid/until"),
            ("timestamps RFC 3339", vec![set("/valid/from", json!("1 Nov 2026"))], "/valid/from"),
            ("currency shape", vec![set("/budget/currency", json!("Euro"))], "/budget/currency"),
            ("total is money", vec![set("/budget/total", json!(100))], "/budget/total"),
            ("total required", vec![remove("/budget/total")], "/budget"),
            ("per_call is money", vec![set("/budget/per_call", json!("-2"))], "/budget/per_call"),
            ("per_call within total", vec![set("/budget/per_call", json!("100.01"))], "/budget/per_call"),
            ("per_day within total", vec![set("/budget/per_day", json!("101"))], "/budget/per_day"),
            ("fx key shape", vec![set("/budget/fx", json!({"usd": "0.92"}))], "/budget/fx"),
            ("fx rate is money", vec![set("/budget/fx", json!({"USD": 0.92}))], "/budget/fx/USD"),
            ("fx rate positive", vec![set("/budget/fx", json!({"USD": "0"}))], "/budget/fx/USD"),
            ("fx not own currency", vec![set("/budget/fx", json!({"EUR": "1"}))], "/budget/fx/EUR"),
            ("approval is money", vec![set("/approval/above", json!("0,50"))], "/approval/above"),
            ("class patterns", vec![set("/allow/capabilities", json!(["extraction*"]))], "/allow/capabilities/0"),
            ("agent patterns", vec![set("/allow/agents", json!(["holon-labs/inv*"]))], "/allow/agents/0"),
            ("deny patterns", vec![set("/deny/agents", json!(["shady"]))], "/deny/agents/0"),
            ("min_success_rate range", vec![set("/require/min_success_rate", json!(1.2))], "/require/min_success_rate"),
            ("min_eval_score range", vec![set("/require/min_eval_score", json!("-0.1"))], "/require/min_eval_score"),
            (
                "max_latency non-negative",
                vec![set("/require/max_latency_p95_s", json!(-1))],
                "/require/max_latency_p95_s",
            ),
            ("min_runs integer", vec![set("/require/min_runs_30d", json!(2.5))], "/require/min_runs_30d"),
            ("runtimes values", vec![set("/require/runtimes", json!(["docker"]))], "/require/runtimes/0"),
            ("max_retention", vec![set("/data/max_retention", json!("a week"))], "/data/max_retention"),
            ("training_use boolean", vec![set("/data/training_use", json!("no"))], "/data/training_use"),
            ("delegation depth integer", vec![set("/delegation/max_depth", json!(-1))], "/delegation/max_depth"),
            ("delegation depth bounded", vec![set("/delegation/max_depth", json!(100))], "/delegation/max_depth"),
            ("unknown keys", vec![set("/require/min_sucess_rate", json!(0.9))], "/require"),
            ("own parent", vec![set("/parent", json!("alice/m-2026-11")), set("/issuer", json!("alice/x"))], "/parent"),
        ],
    );
}

#[test]
fn record_rules() {
    check(
        RECORD,
        vec![
            ("version", vec![set("/holon_record", json!("0.2"))], "/holon_record"),
            ("agent id", vec![set("/agent", json!("table-extract"))], "/agent"),
            ("success_rate range", vec![set("/success_rate", json!(1.01))], "/success_rate"),
            ("eval_score range", vec![set("/eval_score", json!("2"))], "/eval_score"),
            ("latency non-negative", vec![set("/latency_p95_s", json!(-3))], "/latency_p95_s"),
            ("p50 <= p95", vec![set("/latency_p50_s", json!(5))], "/latency_p50_s"),
            ("runs integer", vec![set("/runs_30d", json!("many"))], "/runs_30d"),
            ("version semver", vec![set("/version", json!("2.3"))], "/version"),
            ("benchmark range", vec![set("/benchmarks", json!({"suite": 3}))], "/benchmarks/suite"),
            ("unknown keys", vec![set("/stars", json!(5))], "/"),
        ],
    );
}

/// Which record applies to an agent is one rule (`lookup::record_for`), the same in the
/// catalog (`holon mandate check`, `search`, `demo`), the engine and the server: two agents
/// of the same version with crossed records each get their own. Before, the catalog took
/// the `record.yaml` beside the manifest, found it was another agent's and gave none, while
/// the server found the right one: the agent failed its thresholds in one and not the other.
#[test]
fn two_agents_of_one_version_with_crossed_records_each_get_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    copy_tree(std::path::Path::new("examples"), &docs);
    cross_records(&docs);
    let catalog = holon::catalog::Catalog::load(&[docs.join("agents")], None).unwrap();
    for (agent, rate) in [("holon-labs/fx-convert", "0.99"), ("holon-labs/page-reader", "0.5")] {
        let entry = catalog.get(&holon::pattern::AgentId::parse(agent).unwrap()).unwrap();
        let record = entry.record.as_ref().unwrap_or_else(|| panic!("{agent} has no record"));
        assert_eq!((record.agent.as_str(), record.success_rate.unwrap().to_string()), (agent, rate.to_owned()));
    }
    // A manifest named as a file still finds the record beside it (here another agent's:
    // none applies), and a records directory given explicitly wins over it.
    let alone = holon::catalog::Catalog::load(&[docs.join("agents/fx-convert/holon.yaml")], None).unwrap();
    assert!(alone.entries[0].record.is_none(), "page-reader's record is not fx-convert's");
    let with_dir = holon::catalog::Catalog::load(
        &[docs.join("agents/fx-convert/holon.yaml")],
        Some(&docs.join("agents/page-reader")),
    )
    .unwrap();
    assert_eq!(with_dir.entries[0].record.as_ref().unwrap().agent.as_str(), "holon-labs/fx-convert");
    // The engine compiles a record given for another agent as no record.
    let fx = catalog.get(&holon::pattern::AgentId::parse("holon-labs/fx-convert").unwrap()).unwrap();
    let other = catalog.get(&holon::pattern::AgentId::parse("holon-labs/page-reader").unwrap()).unwrap();
    let mandate = holon::documents::load_mandate(std::path::Path::new(MANDATE)).unwrap();
    let crossed = holon::engine::SnapshotInput {
        mandates: vec![std::sync::Arc::new(mandate)],
        agents: vec![(std::sync::Arc::new(fx.manifest.clone()), other.record.clone().map(std::sync::Arc::new))],
        ..holon::engine::SnapshotInput::default()
    };
    let engine = holon::engine::Engine::new(holon::engine::EngineConfig::default());
    engine.publish(&crossed).unwrap();
    let at = holon::time::Timestamp::parse("2026-11-20T10:00:00Z").unwrap();
    let call = holon::engine::Call::new(
        engine.mandate_ix("alice/m-2026-11").unwrap(),
        engine.agent_ix("holon-labs/fx-convert").unwrap(),
        at,
    );
    match engine.admit(&call) {
        holon::engine::Admission::Denied(d) => {
            assert!(d.codes.contains(holon::admission::Code::RecordMissing), "{d:?}")
        }
        other => panic!("another agent's record applied: {other:?}"),
    }
}
