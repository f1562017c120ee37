//! One test per admission condition: it passes at the boundary (equal to a limit) and
//! fails one micro-unit (or one step) beyond, with the documented code.

mod common;
use common::*;
use holon::admission::{self, Assessment, CallContext, Code, Verdict};
use holon::documents::{self, Document};
use holon::engine::Assessor;
use holon::lookup::NoAgents;
use holon::mandate::Mandate;
use holon::manifest::Manifest;
use holon::money::Amount;
use holon::record::AgentRecord;
use holon::time::Timestamp;
use serde_json::{Value, json};

fn mandate(edits: &[Edit]) -> Mandate {
    match documents::check_value(&apply(&load_value("examples/mandates/alice-root.yaml"), edits))
        .unwrap()
        .result
        .unwrap()
    {
        Document::Mandate(m) => *m,
        _ => unreachable!(),
    }
}
fn manifest(path: &str, edits: &[Edit]) -> Manifest {
    match documents::check_value(&apply(&load_value(path), edits)).unwrap().result.unwrap() {
        Document::Manifest(m) => *m,
        _ => unreachable!(),
    }
}
fn record(path: &str, edits: &[Edit]) -> AgentRecord {
    match documents::check_value(&apply(&load_value(path), edits)).unwrap().result.unwrap() {
        Document::Record(r) => *r,
        _ => unreachable!(),
    }
}
const TABLE: &str = "examples/agents/table-extract/holon.yaml";
const TABLE_REC: &str = "examples/agents/table-extract/record.yaml";
const AT: &str = "2026-11-20T10:00:00Z";

fn ctx() -> CallContext {
    CallContext::at(Timestamp::parse(AT).unwrap())
}
fn a(s: &str) -> Amount {
    Amount::parse(s).unwrap()
}

/// Decides a call of the table extractor under the root mandate with edits on each side.
fn decide(m: &[Edit], agent: &[Edit], rec: &[Edit], c: CallContext) -> (Verdict, Vec<Code>) {
    let m = mandate(m);
    let agent = manifest(TABLE, agent);
    let rec = record(TABLE_REC, rec);
    let out = assess(&m, &agent, Some(&rec), &NoAgents, &c);
    (out.verdict, out.reasons.iter().map(|r| r.code).collect())
}

/// The engine's rules, compiled and explained (what the CLI runs).
fn assess(
    m: &Mandate,
    agent: &Manifest,
    rec: Option<&AgentRecord>,
    lookup: &dyn holon::lookup::AgentLookup,
    c: &CallContext,
) -> Assessment {
    Assessor::new(m, lookup).unwrap().assess(agent, rec, c).unwrap()
}
fn codes_of(a: &Assessment) -> Vec<Code> {
    a.reasons.iter().map(|r| r.code).collect()
}

fn denied_only_by(result: (Verdict, Vec<Code>), code: Code) {
    assert_eq!(result, (Verdict::Denied, vec![code]));
}
fn allowed(result: (Verdict, Vec<Code>)) {
    assert_eq!(result, (Verdict::Allowed, vec![]));
}

#[test]
fn the_base_call_is_allowed() {
    allowed(decide(&[], &[], &[], ctx()));
}

#[test]
fn validity_window_inclusive() {
    let at = |s: &str| CallContext::at(Timestamp::parse(s).unwrap());
    allowed(decide(&[], &[], &[], at("2026-11-01T00:00:00Z")));
    allowed(decide(&[], &[], &[], at("2099-12-31T23:59:59Z")));
    denied_only_by(decide(&[], &[], &[], at("2026-10-31T23:59:59Z")), Code::MandateNotYetValid);
    denied_only_by(decide(&[], &[], &[], at("2100-01-01T00:00:00Z")), Code::MandateExpired);
}

#[test]
fn deny_wins_over_allow() {
    denied_only_by(decide(&[set("/deny/agents", json!(["acme/*"]))], &[], &[], ctx()), Code::AgentDenied);
    allowed(decide(&[set("/deny/agents", json!(["acmex/*"]))], &[], &[], ctx()));
}

#[test]
fn allow_by_class_or_agent() {
    denied_only_by(decide(&[set("/allow/capabilities", json!(["finance.*"]))], &[], &[], ctx()), Code::NotAllowed);
    allowed(decide(
        &[set("/allow/capabilities", json!(["finance.*"])), set("/allow/agents", json!(["acme/table-extract"]))],
        &[],
        &[],
        ctx(),
    ));
    allowed(decide(
        &[set("/allow/capabilities", json!(["extraction.table"])), set("/allow/agents", json!([]))],
        &[],
        &[],
        ctx(),
    ));
    denied_only_by(
        decide(&[set("/allow/capabilities", json!(["extraction"])), set("/allow/agents", json!([]))], &[], &[], ctx()),
        Code::NotAllowed,
    );
}

#[test]
fn published_applies_to_capability_calls_only() {
    let by_cap = CallContext { by_capability: true, ..ctx() };
    denied_only_by(decide(&[set("/allow/published", json!(false))], &[], &[], by_cap), Code::PublishedNotAllowed);
    allowed(decide(&[set("/allow/published", json!(false))], &[], &[], ctx()));
    allowed(decide(&[set("/allow/published", json!(false)), set("/issuer", json!("acme"))], &[], &[], by_cap));
}

#[test]
fn downstream_calls_need_depth_and_allow() {
    let calls = || set("/calls", json!([{"capability": "extraction.text", "max_cost": "0.01"}]));
    let ds = || set("/pricing/downstream", json!({"mode": "included"}));
    allowed(decide(&[], &[calls(), ds()], &[], ctx()));
    denied_only_by(
        decide(&[set("/delegation/max_depth", json!(0))], &[calls(), ds()], &[], ctx()),
        Code::DelegationDepthExceeded,
    );
    let outside = set("/calls", json!([{"capability": "legal.review", "max_cost": "0.01"}]));
    denied_only_by(decide(&[], &[outside, ds()], &[], ctx()), Code::DownstreamNotAllowed);
    let denied_agent = set("/calls", json!([{"agent": "shady/invoice-scraper@^0", "max_cost": "0.01"}]));
    denied_only_by(
        decide(&[set("/allow/agents", json!(["*"]))], &[denied_agent, ds()], &[], ctx()),
        Code::DownstreamNotAllowed,
    );
    let unknown_agent = set("/calls", json!([{"agent": "acme/company-lookup@^1", "max_cost": "0.01"}]));
    denied_only_by(decide(&[], &[unknown_agent, ds()], &[], ctx()), Code::DownstreamNotAllowed);
}

#[test]
fn pricing_runtime_and_data_requirements() {
    denied_only_by(
        decide(&[], &[set("/pricing/charge_on", json!("attempt"))], &[], ctx()),
        Code::ChargeOnSuccessRequired,
    );
    allowed(decide(&[], &[set("/pricing", json!({"model": "free", "charge_on": "attempt"}))], &[], ctx()));
    denied_only_by(decide(&[set("/require/runtimes", json!(["mcp"]))], &[], &[], ctx()), Code::RuntimeNotAllowed);
    allowed(decide(&[], &[set("/data/retention", json!("P7D"))], &[], ctx()));
    denied_only_by(decide(&[], &[set("/data/retention", json!("P8D"))], &[], ctx()), Code::RetentionTooLong);
    denied_only_by(
        decide(&[set("/data/max_retention", json!("P30D"))], &[set("/data/retention", json!("P1M"))], &[], ctx()),
        Code::RetentionTooLong,
    );
    denied_only_by(decide(&[], &[set("/data/training_use", json!(true))], &[], ctx()), Code::TrainingUseNotAllowed);
    allowed(decide(&[remove("/data/training_use")], &[set("/data/training_use", json!(true))], &[], ctx()));
    denied_only_by(decide(&[], &[set("/data/egress", json!(["api.example.com"]))], &[], ctx()), Code::EgressNotAllowed);
    allowed(decide(
        &[set("/data/allow_egress", json!(true))],
        &[set("/data/egress", json!(["api.example.com"]))],
        &[],
        ctx(),
    ));
}

#[test]
fn measured_thresholds_at_the_boundary() {
    allowed(decide(&[set("/require/min_success_rate", json!("0.97"))], &[], &[], ctx()));
    denied_only_by(
        decide(&[set("/require/min_success_rate", json!("0.970001"))], &[], &[], ctx()),
        Code::SuccessRateBelowMin,
    );
    allowed(decide(&[set("/require/max_latency_p95_s", json!(3.4))], &[], &[], ctx()));
    denied_only_by(
        decide(&[set("/require/max_latency_p95_s", json!("3.399999"))], &[], &[], ctx()),
        Code::LatencyP95AboveMax,
    );
    allowed(decide(&[set("/require/min_runs_30d", json!(1200))], &[], &[], ctx()));
    denied_only_by(decide(&[set("/require/min_runs_30d", json!(1201))], &[], &[], ctx()), Code::RunsBelowMin);
    allowed(decide(&[set("/require/min_eval_score", json!("0.91"))], &[], &[], ctx()));
    denied_only_by(
        decide(&[set("/require/min_eval_score", json!("0.910001"))], &[], &[], ctx()),
        Code::EvalScoreBelowMin,
    );
    denied_only_by(decide(&[], &[], &[remove("/eval_score")], ctx()), Code::EvalScoreBelowMin);
}

#[test]
fn no_record_means_thresholds_unmet() {
    let m = mandate(&[]);
    let agent = manifest(TABLE, &[]);
    assert_eq!(codes_of(&assess(&m, &agent, None, &NoAgents, &ctx())), vec![Code::RecordMissing]);
    // A record of another version does not apply.
    let rec = record(TABLE_REC, &[set("/version", json!("2.3.0"))]);
    assert_eq!(codes_of(&assess(&m, &agent, Some(&rec), &NoAgents, &ctx())), vec![Code::RecordMissing]);
    // No thresholds: no record needed.
    let m = mandate(&[set("/require", json!({}))]);
    assert!(assess(&m, &agent, None, &NoAgents, &ctx()).reasons.is_empty());
}

#[test]
fn cold_start_eval_score_feeds_success_rate() {
    let m = mandate(&[remove("/require/min_runs_30d"), remove("/require/max_latency_p95_s")]);
    let agent = manifest(TABLE, &[]);
    let rec = record(TABLE_REC, &[remove("/success_rate"), set("/runs_30d", json!(0))]);
    let out = assess(&m, &agent, Some(&rec), &NoAgents, &ctx());
    assert!(out.reasons.is_empty(), "{:?}", out.reasons);
}

#[test]
fn currency_conversion_and_rates() {
    // 0.004 USD at 0.92 = 0.00368 EUR (exact), within any limit here.
    let m = mandate(&[]);
    let agent = manifest(TABLE, &[set("/pricing/currency", json!("USD"))]);
    assert_eq!(assess(&m, &agent, Some(&record(TABLE_REC, &[])), &NoAgents, &ctx()).own_ceiling, a("0.00368"));
    denied_only_by(decide(&[], &[set("/pricing/currency", json!("GBP"))], &[], ctx()), Code::CurrencyWithoutRate);
    // Rounding up: 0.000001 USD * 0.92 -> 0.000001 EUR.
    let agent = manifest(TABLE, &[set("/pricing/currency", json!("USD")), set("/pricing/amount", json!("0.000001"))]);
    assert_eq!(assess(&m, &agent, None, &NoAgents, &ctx()).own_ceiling, Amount::from_micros(1));
}

#[test]
fn budget_limits_at_the_boundary() {
    // per_call 2.00: the table extractor at exactly 2.00 passes, 2.000001 fails.
    allowed(decide(&[set("/approval/above", json!("5.00"))], &[set("/pricing/amount", json!("2.00"))], &[], ctx()));
    denied_only_by(
        decide(&[set("/approval/above", json!("5.00"))], &[set("/pricing/amount", json!("2.000001"))], &[], ctx()),
        Code::PerCallExceeded,
    );
    // total 100.00: spent 99.996 + 0.004 passes, one micro more fails.
    allowed(decide(&[], &[], &[], CallContext { spent_total: a("99.996"), ..ctx() }));
    denied_only_by(decide(&[], &[], &[], CallContext { spent_total: a("99.996001"), ..ctx() }), Code::TotalExceeded);
    // per_day 20.00.
    allowed(decide(&[], &[], &[], CallContext { spent_today: a("19.996"), ..ctx() }));
    denied_only_by(decide(&[], &[], &[], CallContext { spent_today: a("19.996001"), ..ctx() }), Code::PerDayExceeded);
}

#[test]
fn max_cost_and_approval() {
    let m = mandate(&[]);
    let pipeline = manifest("examples/agents/invoice-pipeline/holon.yaml", &[]);
    let rec = record("examples/agents/invoice-pipeline/record.yaml", &[]);
    let catalog = holon::catalog::Catalog::load(&["examples/agents".into()], None).unwrap();
    let run =
        |max: Option<&str>| assess(&m, &pipeline, Some(&rec), &catalog, &CallContext { max_cost: max.map(a), ..ctx() });
    let r = run(None);
    assert_eq!((r.verdict, r.worst_case), (Verdict::Denied, a("3.10")));
    assert_eq!(r.reasons[0].code, Code::PerCallExceeded);
    let r = run(Some("0.60"));
    assert_eq!((r.verdict, r.worst_case, r.sub_budget), (Verdict::Held, a("0.60"), a("0.50")));
    assert_eq!(r.reasons[0].code, Code::ApprovalRequired);
    let r = run(Some("0.50"));
    assert_eq!((r.verdict, r.sub_budget), (Verdict::Allowed, a("0.40")));
    let r = run(Some("0.500001"));
    assert_eq!(r.verdict, Verdict::Held);
    let r = run(Some("0.099999"));
    assert_eq!(r.verdict, Verdict::Denied);
    assert_eq!(r.reasons[0].code, Code::MaxCostBelowPrice);
}

#[test]
fn every_failing_condition_is_reported() {
    let (v, codes) = decide(
        &[set("/deny/agents", json!(["acme/*"])), set("/require/runtimes", json!(["mcp"]))],
        &[set("/data/training_use", json!(true)), set("/pricing/amount", json!("3.00"))],
        &[],
        CallContext { spent_today: a("19"), ..ctx() },
    );
    assert_eq!(v, Verdict::Denied);
    for c in [
        Code::AgentDenied,
        Code::RuntimeNotAllowed,
        Code::TrainingUseNotAllowed,
        Code::PerCallExceeded,
        Code::PerDayExceeded,
    ] {
        assert!(codes.contains(&c), "{c} missing from {codes:?}");
    }
}

#[test]
fn only_the_issuer_account_approves() {
    let m = mandate(&[]);
    let p = |s: &str| holon::pattern::Principal::parse(s).unwrap();
    assert!(admission::check_approver(&m, &p("alice")).is_ok());
    assert!(admission::check_approver(&m, &p("bob")).is_err());
    assert!(admission::check_approver(&m, &p("alice/assistant")).is_err());
    let _unused: Value = json!(null);
}

/// Found by `tests/admission_reference.rs`: the compiled rules let `allow.capabilities:
/// ["*"]` admit a declared downstream agent that no known manifest resolves (it has no
/// class, so no class pattern can match it).
#[test]
fn an_unresolved_declared_agent_matches_no_class_pattern() {
    let m = mandate(&[
        set("/allow/capabilities", json!(["*"])),
        set("/allow/agents", json!([])),
        set("/require", json!({})),
        remove("/approval"),
    ]);
    let pipeline = manifest(
        "examples/agents/invoice-pipeline/holon.yaml",
        &[set("/calls", json!([{ "agent": "acme/ghost@^1", "max_cost": "0.02" }]))],
    );
    let out = assess(&m, &pipeline, None, &NoAgents, &CallContext { max_cost: Some(a("0.50")), ..ctx() });
    assert_eq!(codes_of(&out), vec![Code::DownstreamNotAllowed], "{:?}", out.reasons);
}
