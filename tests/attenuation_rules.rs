//! Attenuation: one failing case per rule, the narrow example passing, and the soundness
//! property: for random parents P and children C that attenuation accepts, whenever C
//! admits a call, P admits it too (also for derived sub-mandates).

mod common;
use common::*;
use holon::admission::{CallContext, Verdict};
use holon::attenuation::attenuate;
use holon::catalog::Catalog;
use holon::delegation;
use holon::documents::{self, Document};
use holon::engine::Assessor;
use holon::lookup::NoAgents;
use holon::mandate::Mandate;
use holon::manifest::Manifest;
use holon::money::Amount;
use holon::time::Timestamp;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Value, json};

fn mandate_from(v: &Value) -> Mandate {
    match documents::check_value(v).unwrap().result.unwrap_or_else(|e| panic!("{e:?}")) {
        Document::Mandate(m) => *m,
        _ => unreachable!(),
    }
}

#[test]
fn the_example_child_narrows_its_parent() {
    let p = documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap();
    let c = documents::load_mandate("examples/mandates/alice-research.yaml".as_ref()).unwrap();
    assert_eq!(attenuate(&p, &c, &NoAgents), vec![]);
}

#[test]
fn every_widening_is_caught() {
    let parent = documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap();
    let base = load_value("examples/mandates/alice-research.yaml");
    let cases: Vec<(Vec<Edit>, &str)> = vec![
        (vec![set("/parent", json!("alice/other"))], "parent_mismatch"),
        (vec![set("/issuer", json!("alice/other-agent"))], "issuer_mismatch"),
        (vec![set("/valid/from", json!("2026-10-31T00:00:00Z"))], "validity_outside_parent"),
        (vec![set("/valid/until", json!("2100-01-01T00:00:00Z"))], "validity_outside_parent"),
        (vec![set("/budget/currency", json!("USD")), set("/budget/fx", json!({}))], "currency_mismatch"),
        (
            vec![set("/budget/total", json!("100.000001")), remove("/budget/per_call"), remove("/budget/per_day")],
            "total_widened",
        ),
        (vec![set("/budget/per_call", json!("2.000001"))], "per_call_widened"),
        (vec![remove("/budget/per_call")], "per_call_widened"),
        (vec![remove("/budget/per_day")], "per_day_widened"),
        (vec![set("/approval/above", json!("0.500001"))], "approval_widened"),
        (vec![remove("/approval")], "approval_widened"),
        (vec![set("/budget/fx", json!({"USD": "0.919999"}))], "fx_rate_lowered"),
        (vec![set("/budget/fx", json!({"GBP": "1.15"}))], "fx_currency_added"),
        (vec![set("/allow/capabilities", json!(["legal.*"]))], "allow_capability_widened"),
        (vec![set("/allow/capabilities", json!(["*"]))], "allow_capability_widened"),
        (vec![set("/allow/agents", json!(["acme/*"]))], "allow_agent_widened"),
        (vec![set("/deny/agents", json!([]))], "deny_dropped"),
        (vec![set("/require/charge_on_success", json!(false))], "charge_on_success_dropped"),
        (vec![remove("/require/runtimes")], "runtimes_widened"),
        (vec![set("/require/min_success_rate", json!("0.89"))], "min_success_rate_lowered"),
        (vec![set("/require/max_latency_p95_s", json!(31))], "max_latency_p95_raised"),
        (vec![set("/require/min_runs_30d", json!(9))], "min_runs_lowered"),
        (vec![set("/require/min_eval_score", json!(0.79))], "min_eval_score_lowered"),
        (vec![set("/data/max_retention", json!("P8D"))], "retention_widened"),
        (vec![set("/data/training_use", json!(true))], "training_use_widened"),
        (vec![remove("/data/allow_egress")], "egress_widened"),
        (vec![set("/delegation/max_depth", json!(1))], "delegation_depth_not_reduced"),
    ];
    let mut problems = Vec::new();
    for (edits, code) in cases {
        let child = mandate_from(&apply(&base, &edits));
        let found = attenuate(&parent, &child, &NoAgents);
        if !found.iter().any(|w| w.code == code) {
            problems.push(format!("{code}: got {:?}", found.iter().map(|w| w.code).collect::<Vec<_>>()));
        }
    }
    let mut unpublished = parent.clone();
    unpublished.allow.published = false;
    let child = mandate_from(&base);
    assert!(attenuate(&unpublished, &child, &NoAgents).iter().any(|w| w.code == "published_widened"));
    let mut container_only = parent.clone();
    container_only.require.runtimes = Some(vec![holon::manifest::RuntimeKind::Container]);
    let child = mandate_from(&apply(&base, &[set("/require/runtimes", json!(["container", "mcp"]))]));
    assert!(attenuate(&container_only, &child, &NoAgents).iter().any(|w| w.code == "runtimes_widened"));
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn derived_sub_mandate_of_the_worked_example() {
    let parent = documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap();
    let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
    let pipeline = &catalog.get(&"holon-labs/invoice-pipeline".parse_id()).unwrap().manifest;
    let sub = delegation::derive(&parent, pipeline, Amount::parse("0.50").unwrap(), &catalog).unwrap();
    assert_eq!(sub.budget.total, Amount::parse("0.50").unwrap());
    assert_eq!(sub.issuer.as_str(), "alice/assistant");
    assert_eq!(sub.grantee.as_str(), "holon-labs/invoice-pipeline");
    assert_eq!(sub.delegation.max_depth, 0);
    assert_eq!(sub.allow.capabilities.len(), 2);
    // Without the manifests of declared agents, the company lookup is not covered: refused.
    assert!(delegation::derive(&parent, pipeline, Amount::parse("0.50").unwrap(), &NoAgents).is_err());
    // A parent that may not delegate refuses.
    let mut flat = parent.clone();
    flat.delegation.max_depth = 0;
    assert!(delegation::derive(&flat, pipeline, Amount::parse("0.50").unwrap(), &catalog).is_err());
    // With a sub-budget above the parent's total too, the depth alone is the reason, as
    // ever (the engine's per-call figures check is a second step of its own).
    let over = parent.budget.total.checked_add(Amount::from_micros(1)).unwrap();
    let refusal = delegation::derive(&flat, pipeline, over, &catalog).unwrap_err();
    let codes: Vec<_> = refusal.reasons.iter().map(|w| w.code).collect();
    assert_eq!(codes, ["delegation_depth_exceeded"]);
    // A total above the parent's is reported where the budget rules report it: before the
    // allow rules' reasons.
    let refusal = delegation::derive(&parent, pipeline, over, &NoAgents).unwrap_err();
    let codes: Vec<_> = refusal.reasons.iter().map(|w| w.code).collect();
    assert_eq!(codes.first(), Some(&"total_widened"), "{codes:?}");
    assert!(codes.len() > 1, "{codes:?}");
}

trait ParseId {
    fn parse_id(&self) -> holon::pattern::AgentId;
}
impl ParseId for str {
    fn parse_id(&self) -> holon::pattern::AgentId {
        holon::pattern::AgentId::parse(self).unwrap()
    }
}

// ---- the soundness property ----

fn class_pattern() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "*",
        "extraction.*",
        "extraction.table",
        "extraction.text",
        "finance.*",
        "finance.fx",
        "extraction.table.*",
    ])
    .prop_map(str::to_owned)
}
fn agent_pattern() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["*", "acme/*", "acme/table-extract", "holon-labs/*", "shady/*", "newco/x"])
        .prop_map(str::to_owned)
}
fn money(max_micros: u64) -> impl Strategy<Value = String> {
    (0..=max_micros).prop_map(|m| Amount::from_micros(m).to_string())
}

prop_compose! {
    fn mandate_json(parent: bool)(
        total in money(5_000_000),
        per_call in prop::option::of(money(2_000_000)),
        per_day in prop::option::of(money(4_000_000)),
        fx in prop::option::of(900_000u64..1_100_000),
        above in prop::option::of(money(1_000_000)),
        caps in prop::collection::vec(class_pattern(), 1..4),
        agents in prop::collection::vec(agent_pattern(), 0..3),
        deny in prop::collection::vec(agent_pattern(), 0..2),
        published in any::<bool>(),
        cos in any::<bool>(),
        runtimes in prop::option::weighted(0.3, prop::sample::subsequence(vec!["container", "mcp", "a2a"], 0..=3)),
        msr in prop::option::weighted(0.3, 800_000u64..=1_000_000),
        lat in prop::option::weighted(0.3, 2u64..40),
        runs in prop::option::weighted(0.3, 0u64..1500),
        eval in prop::option::weighted(0.3, 800_000u64..=1_000_000),
        retention in prop::option::weighted(0.3, prop::sample::select(vec!["none", "P1D", "P7D", "P1M", "P30D"])),
        training in prop::option::weighted(0.3, any::<bool>()),
        egress in prop::option::weighted(0.3, any::<bool>()),
        depth in 1u32..4,
        from_day in 1u32..10,
        until_day in 20u32..29,
    ) -> Value {
        let mut m = json!({
            "holon_mandate": "0.1",
            "id": if parent { "alice/p" } else { "alice/p/c" },
            "issuer": if parent { "alice" } else { "alice/assistant" },
            "grantee": if parent { "alice/assistant" } else { "alice/helper" },
            "valid": { "from": format!("2026-11-{from_day:02}T00:00:00Z"), "until": format!("2026-11-{until_day:02}T00:00:00Z") },
            "budget": { "currency": "EUR", "total": total, "fx": {} },
            "allow": { "capabilities": caps, "agents": agents, "published": published },
            "deny": { "agents": deny },
            "require": { "charge_on_success": cos },
            "data": {},
            "delegation": { "max_depth": depth },
        });
        if !parent { m["parent"] = json!("alice/p"); }
        let total_micros = Amount::parse(m["budget"]["total"].as_str().unwrap()).unwrap();
        let clamp = |s: String| Amount::parse(&s).unwrap().min(total_micros).to_string();
        if let Some(v) = per_call { m["budget"]["per_call"] = json!(clamp(v)); }
        if let Some(v) = per_day { m["budget"]["per_day"] = json!(clamp(v)); }
        if let Some(r) = fx { m["budget"]["fx"]["USD"] = json!(Amount::from_micros(r).to_string()); }
        if let Some(a) = above { m["approval"] = json!({"above": a}); }
        if let Some(r) = runtimes { m["require"]["runtimes"] = json!(r); }
        let ratio = |v: u64| holon::money::Fixed6::from_millionths(v).to_string();
        if let Some(v) = msr { m["require"]["min_success_rate"] = json!(ratio(v)); }
        if let Some(v) = lat { m["require"]["max_latency_p95_s"] = json!(v); }
        if let Some(v) = runs { m["require"]["min_runs_30d"] = json!(v); }
        if let Some(v) = eval { m["require"]["min_eval_score"] = json!(ratio(v)); }
        if let Some(v) = retention { m["data"]["max_retention"] = json!(v); }
        if let Some(v) = training { m["data"]["training_use"] = json!(v); }
        if let Some(v) = egress { m["data"]["allow_egress"] = json!(v); }
        m
    }
}

/// A parent that admits most of the example network (wide patterns, the whole month, a
/// USD rate, few requirements), so that many children derived from it admit calls too
/// and the soundness property is tested on allowed and held calls, not only denials.
fn permissive_parent() -> impl Strategy<Value = Value> {
    (mandate_json(true), 1_000_000u64..5_000_000, any::<bool>(), any::<bool>(), any::<bool>(), 900_000u64..1_100_000)
        .prop_map(|(mut m, total, keep_require, keep_data, keep_caps, fx)| {
            m["valid"] = json!({ "from": "2026-11-01T00:00:00Z", "until": "2026-11-29T00:00:00Z" });
            m["budget"]["total"] = json!(Amount::from_micros(total).to_string());
            for key in ["per_call", "per_day"] {
                if let Some(v) = m["budget"].get_mut(key) {
                    *v = json!(Amount::from_micros(total).to_string());
                }
            }
            m["budget"]["fx"] = json!({ "USD": Amount::from_micros(fx).to_string() });
            let caps = if keep_caps { m["allow"]["capabilities"].clone() } else { json!(["*"]) };
            m["allow"] = json!({ "capabilities": caps, "agents": ["*"], "published": true });
            m["deny"] = json!({ "agents": [] });
            if !keep_require {
                m["require"] = json!({});
            }
            if !keep_data {
                m["data"] = json!({});
            }
            m
        })
}

/// The example network, loaded once (validating it per case dominated the run time).
fn shared_catalog() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| Catalog::load(&["examples/agents".into()], None).unwrap())
}

fn agents() -> Vec<(Manifest, Option<holon::record::AgentRecord>)> {
    shared_catalog().entries.iter().map(|e| (e.manifest.clone(), e.record.clone())).collect()
}

/// Derives a child from a parent by random narrowing steps; `widen` (when set) applies
/// one random change that may widen, which attenuation must then catch or allow soundly.
fn narrow(parent: &Value, steps: &[u32], widen: Option<(u32, u32)>) -> Value {
    let mut c = parent.clone();
    c["id"] = json!("alice/p/c");
    c["parent"] = json!("alice/p");
    c["issuer"] = json!("alice/assistant");
    c["grantee"] = json!("alice/helper");
    let step = |i: usize| steps.get(i).copied().unwrap_or(0) % 1000;
    let lower = |c: &mut Value, ptr: &str, pct: u32| {
        if let Some(v) = c.pointer_mut(ptr) {
            let a = Amount::parse(v.as_str().unwrap()).unwrap().micros();
            *v = json!(Amount::from_micros(a / 100 * u64::from(pct % 101)).to_string());
        }
    };
    // A third of the children keep the parent's limits, so that a widening elsewhere (a
    // lower fx rate, say) shows in calls near those limits.
    let share = |s: u32| if s.is_multiple_of(3) { 100 } else { 50 + s % 51 };
    lower(&mut c, "/budget/total", share(step(0)));
    let total = Amount::parse(c["budget"]["total"].as_str().unwrap()).unwrap();
    for key in ["per_call", "per_day"] {
        lower(&mut c, &format!("/budget/{key}"), share(step(1)));
        if let Some(v) = c["budget"].get_mut(key) {
            *v = json!(Amount::parse(v.as_str().unwrap()).unwrap().min(total).to_string());
        }
    }
    lower(&mut c, "/approval/above", step(2));
    if step(3) % 2 == 0
        && let Some(r) = c.pointer_mut("/budget/fx/USD")
    {
        let a = Amount::parse(r.as_str().unwrap()).unwrap().micros();
        *r = json!(Amount::from_micros(a + u64::from(step(3) % 50_000)).to_string());
    }
    for (ptr, keep) in [("/allow/capabilities", step(4)), ("/allow/agents", step(5))] {
        if let Some(Value::Array(items)) = c.pointer_mut(ptr) {
            let n = items.len();
            items.truncate(n.saturating_sub((keep % 3) as usize));
        }
    }
    if step(6) % 3 == 0 {
        c["deny"]["agents"].as_array_mut().unwrap().push(json!("newco/x"));
    }
    if step(7) % 2 == 0 {
        c["require"]["charge_on_success"] = json!(true);
    }
    if step(8) % 2 == 0 {
        c["require"]["min_runs_30d"] =
            json!(c["require"]["min_runs_30d"].as_u64().unwrap_or(0) + u64::from(step(8) % 500));
    }
    if step(9) % 3 == 0 {
        c["data"]["training_use"] = json!(false);
        c["data"]["allow_egress"] = json!(false);
    }
    if step(10) % 3 == 0 {
        c["data"]["max_retention"] = json!("P1D");
    }
    let depth = c["delegation"]["max_depth"].as_u64().unwrap_or(0);
    c["delegation"]["max_depth"] = json!(depth.saturating_sub(1 + u64::from(step(11) % 2)));
    if step(12) % 2 == 0 {
        c["valid"]["from"] = json!("2026-11-12T00:00:00Z");
        c["valid"]["until"] = json!("2026-11-18T00:00:00Z");
    }
    if let Some((what, v)) = widen {
        match what % 8 {
            0 => c["budget"]["total"] = json!(Amount::from_micros(u64::from(v) * 10).to_string()),
            1 => c["allow"]["capabilities"] = json!(["*"]),
            2 => c["allow"]["agents"] = json!(["*"]),
            3 => c["deny"]["agents"] = json!([]),
            4 => c["require"] = json!({}),
            5 => c["data"] = json!({}),
            6 => c["approval"] = json!({"above": Amount::from_micros(u64::from(v)).to_string()}),
            _ => c["budget"]["fx"] = json!({"USD": "0.5"}),
        }
    }
    c
}

/// What the soundness property is checked on: a parent, narrowing steps, an optional
/// widening, an agent and a call.
type SoundnessInput = (Value, Vec<u32>, Option<(u32, u32)>, usize, Option<u64>, u64, u64, u32, bool);

fn soundness_input() -> impl Strategy<Value = SoundnessInput> {
    (
        prop_oneof![1 => mandate_json(true), 3 => permissive_parent()],
        prop::collection::vec(any::<u32>(), 13),
        prop::option::weighted(0.5, (any::<u32>(), 0u32..1_000_000)),
        0usize..7,
        prop::option::of(prop_oneof![0u64..4_000_000, 0u64..200_000]),
        // Spend as a share of the parent's limits (%), so calls near and over them are common.
        prop_oneof![0u64..=105, 95u64..=105],
        prop_oneof![0u64..=105, 95u64..=105],
        8u32..22,
        any::<bool>(),
    )
}

/// One case of the soundness property. `Ok(true)` when the case reached an assertion
/// with teeth (the child admitted or held the call, so the parent had to as well).
fn soundness_case(input: SoundnessInput) -> Result<bool, TestCaseError> {
    let (p, steps, widen, agent_index, max_cost, spent_total_pct, spent_today_pct, day, by_capability) = input;
    let parent = mandate_from(&p);
    // A random widening can make the child invalid on its own (per_call above total).
    let child = match documents::check_value(&narrow(&p, &steps, widen)).unwrap().result {
        Ok(Document::Mandate(m)) => *m,
        _ => return Ok(false),
    };
    let catalog = shared_catalog();
    prop_assume!(attenuate(&parent, &child, catalog).is_empty());
    let all = agents();
    let (agent, record) = &all[agent_index % all.len()];
    let ctx = CallContext {
        at: Timestamp::parse(&format!("2026-11-{day:02}T12:00:00Z")).unwrap(),
        max_cost: max_cost.map(Amount::from_micros),
        spent_total: Amount::from_micros(parent.budget.total.micros() / 100 * spent_total_pct),
        spent_today: Amount::from_micros(
            parent.budget.per_day.unwrap_or(parent.budget.total).micros() / 100 * spent_today_pct,
        ),
        by_capability,
        delegated: false,
    };
    let in_child = Assessor::new(&child, catalog).unwrap().assess(agent, record.as_ref(), &ctx).unwrap();
    let in_parent = Assessor::new(&parent, catalog).unwrap().assess(agent, record.as_ref(), &ctx).unwrap();
    if in_child.verdict != Verdict::Denied {
        prop_assert_ne!(
            in_parent.verdict,
            Verdict::Denied,
            "child admits {} but parent denies: {:?}",
            agent.id,
            in_parent.reasons
        );
    }
    if in_child.verdict == Verdict::Allowed {
        prop_assert_eq!(in_parent.verdict, Verdict::Allowed);
    }
    Ok(in_child.verdict != Verdict::Denied)
}

type DerivedInput = (Value, u64, usize, u64, u32);

fn derived_input() -> impl Strategy<Value = DerivedInput> {
    (
        prop_oneof![1 => mandate_json(true), 1 => permissive_parent()],
        0u64..3_000_000,
        0usize..7,
        0u64..3_000_000,
        1u32..29,
    )
}

/// One case of the derivation properties: a derived sub-mandate never has a total above
/// its parent's, always passes `attenuate` against its parent with the catalog `derive`
/// used, and admits nothing its parent denies. `Ok(true)` when it reached the last check
/// with a call the sub-mandate admits.
fn derived_case(input: DerivedInput) -> Result<bool, TestCaseError> {
    let (p, sub_budget, agent_index, spent, day) = input;
    let parent = mandate_from(&p);
    let catalog = shared_catalog();
    let pipeline = &catalog.get(&"holon-labs/invoice-pipeline".parse_id()).unwrap().manifest;
    let Ok(sub) = delegation::derive(&parent, pipeline, Amount::from_micros(sub_budget), catalog) else {
        return Ok(false);
    };
    prop_assert!(
        sub.budget.total <= parent.budget.total,
        "derive widened the total: {} > {}",
        sub.budget.total,
        parent.budget.total
    );
    let widenings = attenuate(&parent, &sub, catalog);
    prop_assert!(widenings.is_empty(), "derive's output fails attenuate against its parent: {:?}", widenings);
    let all = agents();
    let (agent, record) = &all[agent_index % all.len()];
    let ctx = CallContext {
        spent_total: Amount::from_micros(spent),
        spent_today: Amount::from_micros(spent),
        ..CallContext::at(Timestamp::parse(&format!("2026-11-{day:02}T12:00:00Z")).unwrap())
    };
    let in_sub = Assessor::new(&sub, catalog).unwrap().assess(agent, record.as_ref(), &ctx).unwrap();
    let in_parent = Assessor::new(&parent, catalog).unwrap().assess(agent, record.as_ref(), &ctx).unwrap();
    if in_sub.verdict != Verdict::Denied {
        prop_assert_ne!(
            in_parent.verdict,
            Verdict::Denied,
            "sub admits {} but parent denies: {:?}",
            agent.id,
            in_parent.reasons
        );
    }
    Ok(in_sub.verdict != Verdict::Denied)
}

proptest! {
    // Half the children get a random widening; the ones attenuation refuses are rejected
    // (`prop_assume`), hence the high reject limit.
    #![proptest_config(ProptestConfig { cases: 6000, max_global_rejects: 50_000, ..ProptestConfig::default() })]
    #[test]
    fn attenuation_is_sound(input in soundness_input()) {
        soundness_case(input)?;
    }

    #[test]
    fn derived_sub_mandates_are_sound_and_pass_attenuate(input in derived_input()) {
        derived_case(input)?;
    }
}

/// Both properties above pass silently when no case reaches their assertions: the
/// generators must reach them in a fair share of cases (a deterministic sample).
#[test]
fn the_property_generators_reach_their_assertions() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut sound, mut derived, mut derived_any) = (0, 0, 0);
    const CASES: usize = 400;
    for _ in 0..CASES {
        let input = soundness_input().new_tree(&mut runner).unwrap().current();
        match soundness_case(input) {
            Ok(true) => sound += 1,
            Ok(false) | Err(TestCaseError::Reject(_)) => {}
            Err(e) => panic!("{e}"),
        }
        let input = derived_input().new_tree(&mut runner).unwrap().current();
        let derives = {
            let (p, sub_budget, ..) = &input;
            let parent = mandate_from(p);
            let catalog = shared_catalog();
            let pipeline = &catalog.get(&"holon-labs/invoice-pipeline".parse_id()).unwrap().manifest;
            delegation::derive(&parent, pipeline, Amount::from_micros(*sub_budget), catalog).is_ok()
        };
        derived_any += usize::from(derives);
        match derived_case(input) {
            Ok(true) => derived += 1,
            Ok(false) | Err(TestCaseError::Reject(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!("reached: soundness {sound}, derive ok {derived_any}, derived admits {derived} of {CASES}");
    // Measured on this deterministic sample: 16, see the commit; about half of that is the bar.
    assert!(sound >= CASES / 50, "the soundness property reached its assertion in {sound} of {CASES} cases");
    assert!(derived_any > CASES / 10, "derive succeeded in {derived_any} of {CASES} cases");
    assert!(derived > CASES / 40, "a derived sub-mandate admitted a call in {derived} of {CASES} cases");
}
