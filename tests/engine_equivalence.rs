//! The compiled fit (`engine::snapshot::fit_codes`, integers only) must give exactly the
//! codes and converted prices of the pure `admission::fit` for every (mandate, agent):
//! the example network and the synthetic one, under random mandates.

mod common;
use common::load_value;
use holon::admission::{self, Code};
use holon::catalog::Catalog;
use holon::engine::snapshot::fit_codes;
use holon::engine::{Engine, EngineConfig, SnapshotInput, synthetic};
use holon::mandate::Mandate;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};

fn agents() -> &'static SnapshotInput {
    static INPUT: OnceLock<SnapshotInput> = OnceLock::new();
    INPUT.get_or_init(|| {
        let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
        let mut input =
            synthetic::network(&synthetic::Shape { agents: 20, mandates: 0, ..Default::default() }).unwrap().input;
        for e in catalog.entries {
            input.agents.push((Arc::new(e.manifest), e.record.map(Arc::new)));
        }
        input
    })
}

fn subset(options: &'static [&'static str]) -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(options, 0..=options.len())
}

fn opt<T: std::fmt::Debug + Clone + 'static>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Option<T>> {
    proptest::option::of(s)
}

prop_compose! {
    fn mandate()(
        caps in subset(&["*", "extraction.*", "extraction.table", "finance.*", "finance.fx", "legal.*", "syn.*", "syn.leaf", "syn"]),
        agents in subset(&["*", "holon-labs/*", "acme/table-extract", "shady/*", "syn/a3", "syn/*"]),
        deny in subset(&["shady/*", "acme/*", "holon-labs/invoice-pipeline", "syn/a1", "acme/fx-convert"]),
        published: bool,
        issuer in prop_oneof![Just("alice"), Just("acme"), Just("syn")],
        cos: bool,
        runtimes in opt(subset(&["container", "mcp", "a2a"])),
        success in opt(0u32..=100), eval in opt(0u32..=100), latency in opt(0u32..=60), runs in opt(0u64..=2000),
        retention in opt(prop_oneof![Just("P1D"), Just("P7D"), Just("P30D"), Just("PT1H"), Just("P1M")]),
        training in opt(any::<bool>()), egress in opt(any::<bool>()),
        usd in opt(prop_oneof![Just("0.92"), Just("1"), Just("0.000001")]),
        depth in 0u32..3,
    ) -> Mandate {
        let mut require = json!({ "charge_on_success": cos });
        if let Some(r) = runtimes { require["runtimes"] = json!(r); }
        if let Some(v) = success { require["min_success_rate"] = json!(format!("{}", f64::from(v) / 100.0)); }
        if let Some(v) = eval { require["min_eval_score"] = json!(format!("{}", f64::from(v) / 100.0)); }
        if let Some(v) = latency { require["max_latency_p95_s"] = json!(v); }
        if let Some(v) = runs { require["min_runs_30d"] = json!(v); }
        let mut data = json!({});
        if let Some(r) = retention { data["max_retention"] = json!(r); }
        if let Some(t) = training { data["training_use"] = json!(t); }
        if let Some(e) = egress { data["allow_egress"] = json!(e); }
        let mut budget = json!({ "currency": "EUR", "total": "100" });
        if let Some(rate) = usd { budget["fx"] = json!({ "USD": rate }); }
        let v: Value = json!({
            "holon_mandate": "0.1", "id": "gen", "issuer": issuer, "grantee": format!("{issuer}/bot"),
            "valid": { "from": "2026-11-01T00:00:00Z", "until": "2026-12-31T23:59:59Z" },
            "budget": budget,
            "allow": { "capabilities": caps, "agents": agents, "published": published },
            "deny": { "agents": deny }, "require": require, "data": data,
            "delegation": { "max_depth": depth },
        });
        serde_json::from_value(v).unwrap()
    }
}

fn check_all_pairs(mandate: Mandate) -> usize {
    let mut input = agents().clone();
    input.mandates = vec![Arc::new(mandate)];
    let engine = Engine::new(EngineConfig::default());
    engine.publish(&input).unwrap();
    let snap = engine.snapshot();
    let m = snap.mandates().next().unwrap();
    let mut allowed = 0;
    for a in snap.agents() {
        let pure = admission::fit(&m.source, &a.source, a.record.as_deref(), &*snap);
        for by_capability in [false, true] {
            let compiled = fit_codes(m, a, by_capability);
            let mut expected = pure.codes;
            if by_capability && pure.published.is_some() {
                expected.insert(Code::PublishedNotAllowed);
            }
            assert_eq!(
                compiled.codes,
                expected,
                "{} under {:?} (by_capability {by_capability}): compiled {:?} vs pure {:?}",
                a.source.id,
                m.source.allow,
                compiled.codes.iter().collect::<Vec<_>>(),
                expected.iter().collect::<Vec<_>>()
            );
            assert_eq!((compiled.own_ceiling, compiled.passthrough_cap), (pure.own_ceiling, pure.passthrough_cap));
        }
        allowed += usize::from(pure.codes.is_empty());
    }
    allowed
}

#[test]
fn the_example_mandates_agree_on_every_agent() {
    for path in ["examples/mandates/alice-root.yaml", "examples/mandates/alice-research.yaml"] {
        let m: Mandate = serde_json::from_value(load_value(path)).unwrap();
        check_all_pairs(m);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn compiled_fit_equals_the_pure_fit(m in mandate()) {
        check_all_pairs(m);
    }
}

/// The generator must reach both sides: pairs that fit and pairs that do not.
#[test]
fn the_generator_reaches_fitting_pairs() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut fits, mut total) = (0, 0);
    for _ in 0..100 {
        let m = mandate().new_tree(&mut runner).unwrap().current();
        fits += check_all_pairs(m);
        total += agents().agents.len();
    }
    assert!(fits > total / 20 && fits < total, "{fits} of {total} pairs fit");
}

#[test]
fn every_synthetic_document_passes_every_rule() {
    let shape = synthetic::Shape { agents: 20, mandates: 3, ..Default::default() };
    let (agents, mandates) = synthetic::documents(&shape);
    for v in agents.iter().chain(&mandates) {
        assert_eq!(common::violations(v), Vec::<String>::new(), "{v}");
    }
    let net = synthetic::network(&shape).unwrap();
    assert_eq!((net.input.agents.len(), net.input.mandates.len()), (20, 3));
}
