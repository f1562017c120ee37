//! Calls under published sub-mandates (docs/admission.md, "Calls under a sub-mandate"):
//! the mandate standard's chain number for number on the bundled examples (alice's root,
//! the assistant's sub-mandate to the invoice pipeline, the pipeline's calls to the table
//! extractor), every level's budget at once, the denial naming the level, approval only by
//! the root's human, chains that do not hold, and a delegated run under a sub-mandate.

use holon::admission::Code;
use holon::catalog::Catalog;
use holon::documents;
use holon::engine::{Admission, Call, Engine, EngineConfig, SnapshotInput, SubCall};
use holon::mandate::Mandate;
use holon::money::Amount;
use holon::time::Timestamp;
use std::sync::Arc;

const ROOT: &str = "alice/m-2026-11";
const CHILD: &str = "alice/m-2026-11/invoices";

fn a(s: &str) -> Amount {
    Amount::parse(s).unwrap()
}

fn day(n: u32) -> Timestamp {
    Timestamp::parse(&format!("2026-11-{n:02}T10:00:00Z")).unwrap()
}

fn clock() -> Timestamp {
    day(28)
}

fn mandate(path: &str) -> Mandate {
    documents::load_mandate(path.as_ref()).unwrap()
}

fn input(mandates: Vec<Mandate>) -> SnapshotInput {
    let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
    SnapshotInput {
        mandates: mandates.into_iter().map(Arc::new).collect(),
        agents: catalog.entries.into_iter().map(|e| (Arc::new(e.manifest), e.record.map(Arc::new))).collect(),
        ..SnapshotInput::default()
    }
}

fn examples() -> SnapshotInput {
    input(vec![
        mandate("examples/mandates/alice-root.yaml"),
        mandate("examples/mandates/alice-invoices.yaml"),
        mandate("examples/mandates/alice-research.yaml"),
    ])
}

fn engine() -> Engine {
    let engine = Engine::new(EngineConfig { clock, ..EngineConfig::default() });
    engine.publish(&examples()).unwrap();
    engine
}

fn call(engine: &Engine, mandate: &str, agent: &str, at: Timestamp) -> Call {
    Call::new(engine.mandate_ix(mandate).unwrap(), engine.agent_ix(agent).unwrap(), at)
}

/// Admits and settles at the worst case; panics unless allowed.
fn spend(engine: &Engine, call: &Call) -> Amount {
    match engine.admit(call) {
        Admission::Allowed(r) => {
            let worst = r.worst_case();
            r.settle(worst, call.at).unwrap().kept
        }
        other => panic!("expected allowed, got {other:?}"),
    }
}

fn spent(engine: &Engine, id: &str, at: Timestamp) -> (Amount, Amount) {
    let ledger = engine.ledger(engine.mandate_ix(id).unwrap()).unwrap();
    let today = u64::try_from(at.utc_day()).unwrap();
    (Amount::from_micros(ledger.spent_micros()), Amount::from_micros(ledger.spent_day_micros(today)))
}

fn denied(admission: Admission<'_>) -> holon::engine::Denial {
    match admission {
        Admission::Denied(d) => d,
        other => panic!("expected denied, got {other:?}"),
    }
}

#[test]
fn the_standards_chain_number_for_number() {
    let engine = engine();
    assert!(engine.snapshot().untrusted().is_empty());
    let extract = call(&engine, CHILD, "acme/table-extract", day(20));
    // The pipeline's calls under its sub-mandate: 0.004 each, reserved on both levels.
    for _ in 0..100 {
        assert_eq!(spend(&engine, &extract), a("0.004"));
    }
    assert_eq!(spent(&engine, CHILD, day(20)), (a("0.40"), a("0.40")));
    assert_eq!(spent(&engine, ROOT, day(20)), (a("0.40"), a("0.40")), "the root holds its children's spend");
    // The assistant's own calls under the root take alice's day to 19.997 of 20.00.
    let own = call(&engine, ROOT, "acme/table-extract", day(20));
    for _ in 0..4_899 {
        spend(&engine, &own);
    }
    spend(&engine, &call(&engine, ROOT, "holon-labs/fx-convert", day(20)));
    assert_eq!(spent(&engine, ROOT, day(20)).1, a("19.997"));
    // Fits the sub-mandate (0.40 + 0.004 of 1.00) but not alice's 0.003 left today: denied,
    // naming alice's mandate, and the sub-mandate's ledger holds nothing of it.
    let d = denied(engine.admit(&extract));
    assert_eq!(d.codes.iter().collect::<Vec<_>>(), vec![Code::PerDayExceeded]);
    assert_eq!(d.spent.limited_by, engine.mandate_ix(ROOT));
    assert_eq!(d.spent.today, a("19.997"));
    let reasons = engine.explain_denial(&extract, &d);
    assert!(
        reasons[0].message.starts_with("alice/m-2026-11 (an ancestor of alice/m-2026-11/invoices): "),
        "{reasons:?}"
    );
    assert!(reasons[0].message.contains("19.997"), "{reasons:?}");
    // The live explanation judges the chain the same way.
    let live = engine.explain(&extract).unwrap();
    assert_eq!(live.verdict, holon::admission::Verdict::Denied);
    assert_eq!(live.reasons, reasons);
    assert_eq!(spent(&engine, CHILD, day(20)), (a("0.40"), a("0.40")));
    assert_eq!(spent(&engine, ROOT, day(20)), (a("19.997"), a("19.997")));
    // The next day: 250 extractions fill the sub-mandate's 1.00; the 251st fits alice's
    // day (1.00 of 20.00) but not the pipeline's: denied, naming no ancestor.
    let next = call(&engine, CHILD, "acme/table-extract", day(21));
    for _ in 0..250 {
        spend(&engine, &next);
    }
    assert_eq!(spent(&engine, CHILD, day(21)), (a("1.40"), a("1.00")));
    assert_eq!(spent(&engine, ROOT, day(21)), (a("20.997"), a("1.00")));
    let d = denied(engine.admit(&next));
    assert_eq!(d.codes.iter().collect::<Vec<_>>(), vec![Code::PerDayExceeded]);
    assert_eq!((d.spent.limited_by, d.spent.today), (None, a("1.00")));
    let reasons = engine.explain_denial(&next, &d);
    assert!(!reasons[0].message.contains("an ancestor"), "{reasons:?}");
    assert_eq!(spent(&engine, ROOT, day(21)), (a("20.997"), a("1.00")), "a refused call holds nothing anywhere");
}

fn codes(d: &holon::engine::Denial) -> Vec<Code> {
    d.codes.iter().collect()
}

/// The examples with the two mandates edited (`root`, `child`), published.
fn edited(edit_root: impl FnOnce(&mut Mandate), edit_child: impl FnOnce(&mut Mandate)) -> Engine {
    let (mut root, mut child) =
        (mandate("examples/mandates/alice-root.yaml"), mandate("examples/mandates/alice-invoices.yaml"));
    edit_root(&mut root);
    edit_child(&mut child);
    let engine = Engine::new(EngineConfig { clock, ..EngineConfig::default() });
    engine.publish(&input(vec![root, child])).unwrap();
    engine
}

#[test]
fn release_drop_expiry_and_late_settle_apply_to_every_level_once() {
    let engine = engine();
    let extract = call(&engine, CHILD, "acme/table-extract", day(20));
    let both = |engine: &Engine| (spent(engine, CHILD, day(20)), spent(engine, ROOT, day(20)));
    let zero = ((Amount::ZERO, Amount::ZERO), (Amount::ZERO, Amount::ZERO));
    let Admission::Allowed(r) = engine.admit(&extract) else { panic!("allowed") };
    assert_eq!(both(&engine), ((a("0.004"), a("0.004")), (a("0.004"), a("0.004"))), "reserved on both levels");
    r.release(day(20)).unwrap();
    assert_eq!(both(&engine), zero);
    let Admission::Allowed(r) = engine.admit(&extract) else { panic!("allowed") };
    drop(r);
    assert_eq!(both(&engine), zero, "a dropped reservation gives back every level");
    let Admission::Allowed(r) = engine.admit(&extract) else { panic!("allowed") };
    assert_eq!(r.settle(a("0.003"), day(20)).unwrap().kept, a("0.003"));
    assert_eq!(both(&engine), ((a("0.003"), a("0.003")), (a("0.003"), a("0.003"))));
    // Expired: the reaper keeps the worst case on every level; the late settle reconciles
    // every level once.
    let Admission::Allowed(r) = engine.admit(&extract) else { panic!("allowed") };
    let late = Timestamp::from_unix(day(20).unix() + 3_600);
    assert_eq!(engine.reclaim_expired(late), 1);
    assert_eq!(both(&engine), ((a("0.007"), a("0.007")), (a("0.007"), a("0.007"))));
    let settled = r.settle(a("0.001"), late).unwrap();
    assert!(settled.late);
    assert_eq!(both(&engine), ((a("0.004"), a("0.004")), (a("0.004"), a("0.004"))));
    for id in [CHILD, ROOT] {
        engine.ledger(engine.mandate_ix(id).unwrap()).unwrap().audit(0).unwrap();
    }
}

#[test]
fn above_a_sub_mandates_threshold_nobody_can_approve_so_it_is_denied() {
    // The sub-mandate's issuer is the assistant, an agent: a call above its approval
    // threshold is denied, never held (attenuation keeps a child's threshold at most its
    // parent's, so a call above an ancestor's is above the child's first).
    let engine = edited(|_| {}, |c| c.approval = Some(holon::mandate::Approval { above: a("0.001") }));
    let extract = call(&engine, CHILD, "acme/table-extract", day(20));
    let d = denied(engine.admit(&extract));
    assert_eq!(codes(&d), vec![Code::ApprovalUnavailableInDelegation]);
    assert_eq!(d.spent.limited_by, None);
    assert_eq!(spent(&engine, ROOT, day(20)).0, Amount::ZERO);
    // Who would approve a held call under the sub-mandate: alice, the root's issuer.
    assert_eq!(engine.approver_of(extract.mandate).map(|p| p.to_string()).as_deref(), Some("alice"));
}

#[test]
fn a_chain_that_does_not_hold_admits_nothing_and_says_why() {
    let fx = |engine: &Engine, at: Timestamp| denied(engine.admit(&call(engine, CHILD, "holon-labs/fx-convert", at)));
    // The parent is not published.
    let engine = Engine::new(EngineConfig { clock, ..EngineConfig::default() });
    engine.publish(&input(vec![mandate("examples/mandates/alice-invoices.yaml")])).unwrap();
    let d = fx(&engine, day(20));
    assert_eq!(codes(&d), vec![Code::SubMandateChainBroken]);
    let reasons = engine.explain_denial(&call(&engine, CHILD, "holon-labs/fx-convert", day(20)), &d);
    assert!(reasons[0].message.contains("its parent alice/m-2026-11 is not published"), "{reasons:?}");
    // The root lowered below the child it once covered: the child is barred, not admitted
    // on limits its parent no longer grants.
    let engine = edited(|r| r.budget.per_day = Some(a("0.50")), |_| {});
    let d = fx(&engine, day(20));
    assert_eq!(codes(&d), vec![Code::SubMandateChainBroken]);
    let reasons = engine.explain_denial(&call(&engine, CHILD, "holon-labs/fx-convert", day(20)), &d);
    assert!(reasons[0].message.contains("widens its parent alice/m-2026-11"), "{reasons:?}");
    // A child that is its own grandparent.
    let engine = edited(|r| r.parent = Some(CHILD.into()), |_| {});
    assert_eq!(codes(&fx(&engine, day(20))), vec![Code::SubMandateChainBroken]);
    // Revoked at the root: every call under the child is denied `mandate_revoked`.
    let mut revoked = examples();
    revoked.revocations.revoked.push(holon::trust::revocation::Revoked {
        mandate: ROOT.into(),
        at: day(20),
        reason: "test".into(),
    });
    let engine = Engine::new(EngineConfig { clock, ..EngineConfig::default() });
    engine.publish(&revoked).unwrap();
    assert_eq!(codes(&fx(&engine, day(20))), vec![Code::MandateRevoked]);
}

#[test]
fn an_ancestors_rules_hold_under_the_child_and_the_denial_names_it() {
    // Past the root's validity the child's own window (inside it) ends too; a root whose
    // per_call drops to the child's: a call within the child but above the root's per-call
    // limit cannot happen (attenuation), so the root's rules show through its budget only.
    // Here the root's total is nearly spent by its own calls.
    let engine = edited(|r| r.budget.total = a("5.00"), |c| c.budget.per_day = Some(a("1.00")));
    let own = call(&engine, ROOT, "acme/table-extract", day(20));
    for _ in 0..1_249 {
        spend(&engine, &own);
    }
    assert_eq!(spent(&engine, ROOT, day(20)).0, a("4.996"));
    let extract = call(&engine, CHILD, "acme/table-extract", day(20));
    spend(&engine, &extract);
    let d = denied(engine.admit(&extract));
    assert_eq!(codes(&d), vec![Code::TotalExceeded]);
    assert_eq!(d.spent.limited_by, engine.mandate_ix(ROOT));
    assert_eq!(d.spent.total, a("5.00"));
}

#[test]
fn a_delegated_run_under_a_sub_mandate_holds_the_whole_chain() {
    // Depth 2 at the root lets the sub-mandate admit an orchestrator (depth 1), whose run's
    // derived sub-mandate sits below it.
    let engine = edited(
        |r| {
            r.delegation.max_depth = 2;
            r.approval = Some(holon::mandate::Approval { above: a("1.00") });
        },
        |c| {
            c.delegation.max_depth = 1;
            c.approval = Some(holon::mandate::Approval { above: a("1.00") });
            c.budget.per_call = Some(a("1.00"));
            c.allow.capabilities.push(holon::pattern::ClassPattern::parse("extraction.invoice").unwrap());
        },
    );
    let pipeline = Call { max_cost: Some(a("0.60")), ..call(&engine, CHILD, "holon-labs/invoice-pipeline", day(20)) };
    let Admission::Allowed(r) = engine.admit(&pipeline) else { panic!("{:?}", engine.admit(&pipeline)) };
    assert!(r.is_delegated_run());
    assert_eq!((r.worst_case(), r.sub_budget()), (a("0.60"), a("0.50")));
    assert_eq!(spent(&engine, ROOT, day(20)).0, a("0.60"), "the orchestrator's worst case is on the root too");
    let sub = SubCall {
        agent: engine.agent_ix("acme/table-extract").unwrap(),
        capability: Some("extraction.table"),
        at: day(20),
    };
    let Admission::Allowed(s) = r.sub_call(&sub) else { panic!("sub-call allowed") };
    s.settle(a("0.004"), day(20)).unwrap();
    let settled = r.settle(a("0.10"), day(20)).unwrap();
    assert_eq!(settled.kept, a("0.104"));
    assert_eq!(spent(&engine, CHILD, day(20)).0, a("0.104"));
    assert_eq!(spent(&engine, ROOT, day(20)).0, a("0.104"));
}

#[test]
fn parallel_calls_under_two_children_never_overrun_their_parent() {
    // Two sub-mandates of one root whose total holds 500 calls of 0.004; each child alone
    // could take 1,000. Four threads race; exactly 500 are allowed, and every level's ledger
    // audits exact.
    let mut root = mandate("examples/mandates/alice-root.yaml");
    root.budget.total = a("2.00");
    root.budget.per_day = Some(a("2.00"));
    let child = |id: &str| {
        let mut c = mandate("examples/mandates/alice-invoices.yaml");
        c.id = id.into();
        c.budget.total = a("2.00");
        c.budget.per_day = Some(a("2.00"));
        c.budget.per_call = Some(a("0.10"));
        c
    };
    let engine = Engine::new(EngineConfig { clock, ..EngineConfig::default() });
    engine.publish(&input(vec![root, child("alice/m-2026-11/one"), child("alice/m-2026-11/two")])).unwrap();
    let allowed = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (engine, allowed) = (&engine, &allowed);
            scope.spawn(move || {
                let id = if t % 2 == 0 { "alice/m-2026-11/one" } else { "alice/m-2026-11/two" };
                let c = call(engine, id, "acme/table-extract", day(20));
                for _ in 0..400 {
                    if let Admission::Allowed(r) = engine.admit(&c) {
                        let worst = r.worst_case();
                        r.settle(worst, day(20)).unwrap();
                        allowed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(allowed.into_inner(), 500);
    assert_eq!(spent(&engine, ROOT, day(20)).0, a("2.00"));
    let one = spent(&engine, "alice/m-2026-11/one", day(20)).0;
    let two = spent(&engine, "alice/m-2026-11/two", day(20)).0;
    assert_eq!(one.checked_add(two).unwrap(), a("2.00"), "the root's spend is its children's, to the micro-unit");
    for id in [ROOT, "alice/m-2026-11/one", "alice/m-2026-11/two"] {
        let ledger = engine.ledger(engine.mandate_ix(id).unwrap()).unwrap();
        ledger.refund_all_leases();
        ledger.audit(0).unwrap();
    }
}

#[test]
fn the_chain_limits_hold_and_the_docs_state_them() {
    use holon::engine::{CHAIN_MANDATES_MAX, SUB_MANDATES_PER_PARENT_MAX, synthetic};
    // A chain of CHAIN_MANDATES_MAX mandates admits; one more level is barred.
    let mut net = synthetic::network(&synthetic::Shape { agents: 2, mandates: 1, ..Default::default() }).unwrap();
    let levels = u32::try_from(CHAIN_MANDATES_MAX).unwrap();
    let deepest = synthetic::add_chain(&mut net, levels).unwrap();
    let engine =
        Engine::new(EngineConfig { clock: || Timestamp::from_unix(synthetic::AT_UNIX), ..EngineConfig::default() });
    engine.publish(&net.input).unwrap();
    let agent = engine.agent_ix("syn/a1").unwrap();
    let decide = |id: &str| engine.admit(&Call::new(engine.mandate_ix(id).unwrap(), agent, net.at)).verdict();
    let last_allowed = deepest.rsplit_once('/').unwrap().0;
    assert_eq!(decide(last_allowed), holon::admission::Verdict::Allowed, "{CHAIN_MANDATES_MAX} mandates in a chain");
    let d = denied(engine.admit(&Call::new(engine.mandate_ix(&deepest).unwrap(), agent, net.at)));
    assert_eq!(codes(&d), vec![Code::SubMandateChainBroken]);
    // A parent's children past SUB_MANDATES_PER_PARENT_MAX are barred, the earlier ones not.
    let mut net = synthetic::network(&synthetic::Shape { agents: 2, mandates: 1, ..Default::default() }).unwrap();
    let root = Arc::clone(&net.input.mandates[0]);
    for c in 0..=SUB_MANDATES_PER_PARENT_MAX {
        let child = synthetic::sub_mandate(&root, &format!("m0/c{c}"), root.budget.total).unwrap();
        net.input.mandates.push(Arc::new(child));
    }
    let engine =
        Engine::new(EngineConfig { clock: || Timestamp::from_unix(synthetic::AT_UNIX), ..EngineConfig::default() });
    engine.publish(&net.input).unwrap();
    let agent = engine.agent_ix("syn/a1").unwrap();
    let under = |c: usize| engine.admit(&Call::new(engine.mandate_ix(&format!("m0/c{c}")).unwrap(), agent, net.at));
    assert_eq!(under(SUB_MANDATES_PER_PARENT_MAX - 1).verdict(), holon::admission::Verdict::Allowed);
    assert_eq!(codes(&denied(under(SUB_MANDATES_PER_PARENT_MAX))), vec![Code::SubMandateChainBroken]);
    // docs/admission.md states both figures.
    let doc = std::fs::read_to_string("docs/admission.md").unwrap();
    assert!(doc.contains(&format!("`CHAIN_MANDATES_MAX` = {CHAIN_MANDATES_MAX} ")), "docs/admission.md");
    assert!(doc.contains("`SUB_MANDATES_PER_PARENT_MAX` = 1,024"), "docs/admission.md");
    assert_eq!(SUB_MANDATES_PER_PARENT_MAX, 1_024);
}

/// A busy child takes at most its own limits of its parent's budget: the parent's own calls
/// still get the rest (docs/store.md, "Sub-mandates: every level has its own row").
#[test]
fn a_busy_child_takes_no_more_of_its_parent_than_its_own_limits() {
    let engine = edited(|r| r.budget.per_day = Some(a("2.00")), |c| c.budget.per_day = Some(a("1.00")));
    let child = call(&engine, CHILD, "acme/table-extract", day(20));
    let mut taken = 0;
    while let Admission::Allowed(r) = engine.admit(&child) {
        let worst = r.worst_case();
        r.settle(worst, day(20)).unwrap();
        taken += 1;
    }
    assert_eq!(taken, 250, "the child's own 1.00 a day");
    let own = call(&engine, ROOT, "acme/table-extract", day(20));
    let mut left = 0;
    while let Admission::Allowed(r) = engine.admit(&own) {
        let worst = r.worst_case();
        r.settle(worst, day(20)).unwrap();
        left += 1;
    }
    assert_eq!(left, 250, "the parent's own calls get the other 1.00");
}

/// A delegated run whose orchestrator calls another orchestrator opens a nested run under
/// the run's own sub-mandate. A run opened before a publish keeps its document; the nested
/// run it opens after the publish must not become the template of runs under the new
/// document (the key (run mandate, orchestrator) names both alike). Found by review of the
/// per-snapshot templates: a nested sub-call under the replaced parent's deny was allowed.
#[test]
fn a_nested_run_of_an_older_run_is_not_the_template_of_a_newer_one() {
    use holon::engine::synthetic;
    let mut net = synthetic::network(&synthetic::Shape { agents: 20, mandates: 1, ..Default::default() }).unwrap();
    synthetic::add_chain(&mut net, 1).unwrap();
    // m0 → m0/s1 with room for two runs (the orchestrator's, and its callee's).
    let depth = |m: &Arc<Mandate>, d: u32| {
        let mut m = (**m).clone();
        m.delegation.max_depth = d;
        Arc::new(m)
    };
    net.input.mandates = vec![depth(&net.input.mandates[0], 3), depth(&net.input.mandates[1], 2)];
    // syn/a5 may call an orchestrator (syn/a15) too, with room for its worst case.
    for (m, _) in &mut net.input.agents {
        if m.id.as_str() == "syn/a5" {
            let mut v = serde_json::to_value(&**m).unwrap();
            v["pricing"]["downstream"]["cap"] = serde_json::json!("0.05");
            v["calls"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({ "capability": "syn.orchestrate", "max_cost": "0.02" }));
            *m = Arc::new(serde_json::from_value(v).unwrap());
        }
    }
    let engine = Engine::new(EngineConfig::default());
    engine.publish(&net.input).unwrap();
    let (s1, a5, a15, a1) = (
        engine.mandate_ix("m0/s1").unwrap(),
        engine.agent_ix("syn/a5").unwrap(),
        engine.agent_ix("syn/a15").unwrap(),
        engine.agent_ix("syn/a1").unwrap(),
    );
    let nested = SubCall { agent: a15, capability: Some("syn.orchestrate"), at: net.at };
    let leaf = SubCall { agent: a1, capability: Some("syn.leaf"), at: net.at };
    let Admission::Allowed(old_run) = engine.admit(&Call::new(s1, a5, net.at)) else { panic!("a5 allowed") };
    // The same sub-mandate, now denying syn/a1 (its root unchanged).
    let mut republished = net.input.clone();
    let mut s1_doc = (*republished.mandates[1]).clone();
    s1_doc.deny.agents.push(holon::pattern::AgentPattern::parse("syn/a1").unwrap());
    republished.mandates[1] = Arc::new(s1_doc);
    engine.publish(&republished).unwrap();
    // The old run, on its old document, opens a nested run after the publish.
    let Admission::Allowed(old_nested) = old_run.sub_call(&nested) else { panic!("the old run's nested call allowed") };
    assert!(old_nested.is_delegated_run());
    drop(old_nested);
    // A run under the new document: its nested run inherits the new deny.
    let Admission::Allowed(new_run) = engine.admit(&Call::new(s1, a5, net.at)) else { panic!("a5 allowed") };
    let Admission::Allowed(new_nested) = new_run.sub_call(&nested) else { panic!("the new run's nested call allowed") };
    let d = denied(new_nested.sub_call(&leaf));
    assert!(d.codes.contains(Code::AgentDenied), "{:?}", d.codes.iter().collect::<Vec<_>>());
}
