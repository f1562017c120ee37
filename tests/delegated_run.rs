//! Inside a delegated run: undeclared calls, calls over their declared max_cost, calls
//! over the remaining cap and calls that would need approval are refused.

use holon::admission::{CallContext, Code, Verdict};
use holon::catalog::Catalog;
use holon::delegation;
use holon::documents;
use holon::engine::{Assessor, Callee};
use holon::mandate::Mandate;
use holon::money::Amount;
use holon::pattern::AgentId;
use holon::time::Timestamp;

fn id(s: &str) -> AgentId {
    AgentId::parse(s).unwrap()
}
fn a(s: &str) -> Amount {
    Amount::parse(s).unwrap()
}

fn setup(sub_budget: &str) -> (Catalog, Mandate) {
    let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
    let root = documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap();
    let pipeline = catalog.get(&id("holon-labs/invoice-pipeline")).unwrap().manifest.clone();
    let sub = delegation::derive(&root, &pipeline, a(sub_budget), &catalog).unwrap();
    (catalog, sub)
}

fn sub_call(catalog: &Catalog, sub: &Mandate, target: Callee<'_>, callee: &str, spent: &str) -> (Verdict, Vec<Code>) {
    let pipeline = &catalog.get(&id("holon-labs/invoice-pipeline")).unwrap().manifest;
    let e = catalog.get(&id(callee)).unwrap();
    let at = Timestamp::parse("2026-11-20T10:00:00Z").unwrap();
    let ctx = CallContext { spent_total: a(spent), spent_today: a(spent), delegated: true, ..CallContext::at(at) };
    let r = Assessor::new(sub, catalog)
        .unwrap()
        .assess_sub_call(pipeline, target, &e.manifest, e.record.as_ref(), &ctx)
        .unwrap();
    (r.verdict, r.reasons.iter().map(|r| r.code).collect())
}

#[test]
fn declared_calls_pass() {
    let (c, sub) = setup("0.50");
    assert_eq!(
        sub_call(&c, &sub, Callee::Capability("extraction.table"), "acme/table-extract", "0"),
        (Verdict::Allowed, vec![])
    );
    assert_eq!(sub_call(&c, &sub, Callee::Agent, "acme/company-lookup", "0"), (Verdict::Allowed, vec![]));
}

#[test]
fn undeclared_calls_are_refused() {
    let (c, sub) = setup("0.50");
    // page-reader (extraction.text) was not declared by the pipeline.
    let (v, codes) = sub_call(&c, &sub, Callee::Capability("extraction.text"), "holon-labs/page-reader", "0");
    assert_eq!(v, Verdict::Denied);
    assert!(codes.contains(&Code::CallNotDeclared), "{codes:?}");
    // Naming a declared capability but reaching an agent without that class.
    let (v, codes) = sub_call(&c, &sub, Callee::Capability("extraction.table"), "holon-labs/fx-convert", "0");
    assert_eq!(v, Verdict::Denied);
    assert!(codes.contains(&Code::CallNotDeclared), "{codes:?}");
}

#[test]
fn remaining_cap_is_enforced_at_the_boundary() {
    let (c, sub) = setup("0.50");
    // 0.496 spent + 0.004 = 0.50 passes; one micro more fails.
    assert_eq!(
        sub_call(&c, &sub, Callee::Capability("extraction.table"), "acme/table-extract", "0.496").0,
        Verdict::Allowed
    );
    let (v, codes) = sub_call(&c, &sub, Callee::Capability("extraction.table"), "acme/table-extract", "0.496001");
    assert_eq!(v, Verdict::Denied);
    assert!(codes.contains(&Code::DownstreamCapExceeded), "{codes:?}");
}

#[test]
fn declared_max_cost_is_enforced() {
    let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
    let root = documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap();
    let mut pipeline = catalog.get(&id("holon-labs/invoice-pipeline")).unwrap().manifest.clone();
    pipeline.calls[0].max_cost = a("0.003"); // extraction.table costs 0.004
    let sub = delegation::derive(&root, &pipeline, a("0.50"), &catalog).unwrap();
    let e = catalog.get(&id("acme/table-extract")).unwrap();
    let at = Timestamp::parse("2026-11-20T10:00:00Z").unwrap();
    let r = Assessor::new(&sub, &catalog)
        .unwrap()
        .assess_sub_call(
            &pipeline,
            Callee::Capability("extraction.table"),
            &e.manifest,
            e.record.as_ref(),
            &CallContext::at(at),
        )
        .unwrap();
    assert_eq!(r.verdict, Verdict::Denied);
    assert_eq!(r.reasons.iter().map(|r| r.code).collect::<Vec<_>>(), vec![Code::CallMaxCostExceeded]);
}

#[test]
fn a_sub_call_needing_approval_is_denied() {
    let (c, mut sub) = setup("0.50");
    sub.approval = Some(holon::mandate::Approval { above: a("0.003") });
    let (v, codes) = sub_call(&c, &sub, Callee::Capability("extraction.table"), "acme/table-extract", "0");
    assert_eq!((v, codes), (Verdict::Denied, vec![Code::ApprovalUnavailableInDelegation]));
}
