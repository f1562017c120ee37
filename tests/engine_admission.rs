//! The engine on the example network: the worked example through the engine (denied,
//! held, approved, delegated run, passthrough bill, receipt tree), the reservation guard,
//! expiry exactly once, snapshot swaps keeping ledgers, and spend export/import.

use holon::admission::{Code, Verdict};
use holon::catalog::Catalog;
use holon::delegation;
use holon::documents;
use holon::engine::{Admission, Call, ChannelSink, End, Engine, EngineConfig, EngineError, SnapshotInput, SubCall};
use holon::money::Amount;
use holon::pattern::Principal;
use holon::time::Timestamp;
use std::sync::Arc;

fn a(s: &str) -> Amount {
    Amount::parse(s).unwrap()
}

fn input() -> SnapshotInput {
    let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
    let root = documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap();
    SnapshotInput {
        mandates: vec![Arc::new(root)],
        agents: catalog.entries.into_iter().map(|e| (Arc::new(e.manifest), e.record.map(Arc::new))).collect(),
        ..SnapshotInput::default()
    }
}

/// The example input with its mandate edited.
fn input_with(edit: impl FnOnce(&mut holon::mandate::Mandate)) -> SnapshotInput {
    let mut input = input();
    let mut m = (*input.mandates[0]).clone();
    edit(&mut m);
    input.mandates = vec![Arc::new(m)];
    input
}

fn at() -> Timestamp {
    Timestamp::parse("2026-11-20T10:00:00Z").unwrap()
}

fn fixed_clock() -> Timestamp {
    at()
}

fn engine_with_receipts() -> (Engine, holon::engine::receipt::ReceiptReceiver) {
    let (sink, rx) = ChannelSink::new(1024);
    let engine = Engine::with_sink(EngineConfig { clock: fixed_clock, ..EngineConfig::default() }, Arc::new(sink));
    engine.publish(&input()).unwrap();
    (engine, rx)
}

fn call(engine: &Engine, agent: &str) -> Call {
    Call::new(engine.mandate_ix("alice/m-2026-11").unwrap(), engine.agent_ix(agent).unwrap(), at())
}

#[test]
fn the_worked_example_through_the_engine() {
    let (engine, rx) = engine_with_receipts();
    let pipeline = call(&engine, "holon-labs/invoice-pipeline");
    // 1. 0.10 + 3.00 passthrough = 3.10 > per_call 2.00.
    let Admission::Denied(d) = engine.admit(&pipeline) else { panic!("expected denied") };
    assert_eq!(d.codes.iter().collect::<Vec<_>>(), vec![Code::PerCallExceeded]);
    assert_eq!(d.worst_case, a("3.10"));
    let explained = engine.explain(&pipeline).unwrap();
    assert!(explained.reasons[0].message.contains("per-call limit 2.00"), "{:?}", explained.reasons);
    // 2. max_cost 0.60: held for alice; nothing reserved while held.
    let capped = Call { max_cost: Some(a("0.60")), ..pipeline };
    let Admission::Held(p) = engine.admit(&capped) else { panic!("expected held") };
    assert_eq!(p.worst_case, a("0.60"));
    let ledger = engine.ledger(capped.mandate).unwrap();
    assert_eq!(ledger.spent_micros(), 0);
    let bob = Principal::parse("bob").unwrap();
    assert!(matches!(engine.approve(p.id, &bob, at()), Err(EngineError::Approval(_))));
    let agent = Principal::parse("alice/assistant").unwrap();
    assert!(matches!(engine.approve(p.id, &agent, at()), Err(EngineError::Approval(_))));
    let alice = Principal::parse("alice").unwrap();
    let Admission::Allowed(r) = engine.approve(p.id, &alice, at()).unwrap() else { panic!("expected allowed") };
    assert!(matches!(engine.approve(p.id, &alice, at()), Err(EngineError::UnknownPending(_))));
    assert_eq!((r.worst_case(), r.sub_budget()), (a("0.60"), a("0.50")));
    assert_eq!(ledger.spent_micros(), a("0.60").micros());
    assert!(r.is_delegated_run());
    assert_eq!(r.sub_mandate().unwrap().id, "alice/m-2026-11/holon-labs/invoice-pipeline");
    // 3. Six sub-calls against the run's ledger.
    let table = engine.agent_ix("acme/table-extract").unwrap();
    let fx = engine.agent_ix("holon-labs/fx-convert").unwrap();
    for (agent, capability, cost) in [
        (table, "extraction.table", "0.004"),
        (table, "extraction.table", "0.004"),
        (table, "extraction.table", "0.004"),
        (table, "extraction.table", "0.004"),
        (fx, "finance.fx", "0.001"),
        (fx, "finance.fx", "0.001"),
    ] {
        let sub = SubCall { agent, capability: Some(capability), at: at() };
        let Admission::Allowed(child) = r.sub_call(&sub) else { panic!("sub-call to {capability} not allowed") };
        child.settle(a(cost), at()).unwrap();
    }
    // An undeclared sub-call is refused.
    let reader = engine.agent_ix("holon-labs/page-reader").unwrap();
    let Admission::Denied(d) = r.sub_call(&SubCall { agent: reader, capability: None, at: at() }) else {
        panic!("undeclared sub-call allowed")
    };
    assert!(d.codes.contains(Code::CallNotDeclared), "{:?}", d.codes.iter().collect::<Vec<_>>());
    assert_eq!(r.run_spent(), a("0.018"));
    // 4. The bill: own 0.10 + passthrough 0.018.
    let parent_id = r.receipt_id();
    let settled = r.settle(a("0.10"), at()).unwrap();
    assert_eq!((settled.billed, settled.kept, settled.passthrough), (a("0.118"), a("0.118"), a("0.018")));
    assert_eq!(ledger.spent_micros(), a("0.118").micros());
    assert_eq!(ledger.settled_micros(), a("0.118").micros());
    // 5. Receipts: denied, held, six children + one refused sub-call, the parent.
    let receipts: Vec<_> = rx.try_iter().collect();
    let kinds: Vec<_> = receipts.iter().map(|r| (r.decision, r.end)).collect();
    assert_eq!(kinds.first(), Some(&(Verdict::Denied, End::Decided)));
    assert_eq!(kinds.get(1), Some(&(Verdict::Held, End::Decided)));
    let children: Vec<_> = receipts.iter().filter(|r| r.parent == parent_id).collect();
    assert_eq!(children.len(), 7);
    assert_eq!(children.iter().filter(|c| c.end == End::Settled).map(|c| c.actual.micros()).sum::<u64>(), 18_000);
    let parent = receipts.iter().find(|r| r.id == parent_id).unwrap();
    assert_eq!((parent.end, parent.actual), (End::Settled, a("0.118")));
}

#[test]
fn dropping_a_reservation_releases_it_and_every_path_ends_once() {
    let (engine, rx) = engine_with_receipts();
    let c = call(&engine, "acme/table-extract");
    let ledger = engine.ledger(c.mandate).unwrap();
    {
        let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
        assert_eq!(ledger.spent_micros(), 4_000);
        let _ = r; // dropped here, unsettled
    }
    assert_eq!(ledger.spent_micros(), 0);
    let ends: Vec<_> = rx.try_iter().map(|r| r.end).collect();
    assert_eq!(ends, vec![End::Released]);
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    r.release(at()).unwrap();
    assert_eq!((ledger.spent_micros(), engine.stats().in_flight), (0, 0));
}

#[test]
fn an_expired_reservation_is_reclaimed_exactly_once_and_a_late_settle_reconciles_it() {
    let (engine, rx) = engine_with_receipts();
    let c = call(&engine, "acme/table-extract"); // timeout_s 60, grace 30
    let ledger = engine.ledger(c.mandate).unwrap();
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    assert_eq!(engine.reclaim_expired(Timestamp::from_unix(at().unix() + 90)), 0, "not before the deadline");
    assert_eq!(engine.reclaim_expired(Timestamp::from_unix(at().unix() + 91)), 1);
    assert_eq!(engine.reclaim_expired(Timestamp::from_unix(at().unix() + 1000)), 0, "only once");
    assert_eq!(ledger.spent_micros(), 4_000, "the worst case stays spent");
    assert!(r.settle(a("0.004"), at()).unwrap().late);
    assert_eq!((ledger.spent_micros(), ledger.settled_micros()), (4_000, 4_000), "counted once");
    let ends: Vec<_> = rx.try_iter().map(|r| r.end).collect();
    assert_eq!(ends, vec![End::Expired, End::Reconciled]);
}

#[test]
fn a_swap_keeps_ledgers_and_in_flight_calls_finish_on_their_snapshot() {
    let (engine, _rx) = engine_with_receipts();
    let c = call(&engine, "acme/table-extract");
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    r.settle(a("0.004"), at()).unwrap();
    let Admission::Allowed(in_flight) = engine.admit(&c) else { panic!() };
    // Publish a snapshot without the mandate: new calls are denied, the reservation in
    // flight still settles into the same ledger.
    let mut without = input();
    without.mandates.clear();
    assert_eq!(engine.publish(&without).unwrap(), 2);
    let Admission::Denied(d) = engine.admit(&c) else { panic!() };
    assert!(d.codes.contains(Code::UnknownMandate));
    in_flight.settle(a("0.004"), at()).unwrap();
    // Bring it back: the spend is still there.
    engine.publish(&input()).unwrap();
    assert_eq!(engine.ledger(c.mandate).unwrap().settled_micros(), 8_000);
}

#[test]
fn lowered_limits_are_never_spent_through_an_old_lease() {
    let (engine, _rx) = engine_with_receipts();
    let c = call(&engine, "acme/table-extract");
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    r.settle(a("0.004"), at()).unwrap();
    let ledger = engine.ledger(c.mandate).unwrap();
    assert!(ledger.claimed_micros() > ledger.spent_micros(), "a lease waits under the old total");
    // The issuer lowers the total to 0.010: 0.004 is spent, so one more call of 0.004 fits.
    engine.publish(&input_with(|m| m.budget.total = a("0.010"))).unwrap();
    assert_eq!(ledger.claimed_micros(), 4_000, "the old lease went back at publish");
    let allowed = (0..5)
        .filter(|_| match engine.admit(&c) {
            Admission::Allowed(r) => r.settle(a("0.004"), at()).is_ok(),
            _ => false,
        })
        .count();
    assert_eq!(allowed, 1);
    assert_eq!((ledger.spent_micros(), ledger.claimed_micros()), (8_000, 8_000));
}

#[test]
fn a_bad_publish_changes_nothing() {
    let (engine, _rx) = engine_with_receipts();
    // Spend, and leave a lease in this thread's shard.
    let c = call(&engine, "acme/table-extract");
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    r.settle(a("0.003"), at()).unwrap();
    let ledger = engine.ledger(c.mandate).unwrap();
    let before = (ledger.claimed_micros(), ledger.spent_micros(), ledger.claimed_day_word());
    assert!(before.0 > before.1, "a lease waits");
    let snapshot = engine.snapshot();
    let epoch = snapshot.mandate(c.mandate).unwrap().ledger_limits().epoch;
    let mut twice = input();
    let first = twice.mandates[0].clone();
    twice.mandates.push(first);
    assert!(matches!(engine.publish(&twice), Err(EngineError::Compile { .. })));
    assert_eq!(engine.stats().generation, 1);
    let huge = input_with(|m| {
        m.budget.total = Amount::MAX;
        m.budget.per_day = Some(Amount::from_micros(u64::MAX));
    });
    let err = engine.publish(&huge).unwrap_err();
    assert!(err.to_string().contains("is above the most the engine can hold"), "{err}");
    let lowered = input_with(|m| m.budget.total = a("50.00"));
    let mut lowered_twice = lowered.clone();
    lowered_twice.mandates.push(lowered.mandates[0].clone());
    assert!(engine.publish(&lowered_twice).is_err());
    // Nothing changed: the snapshot, the ledger (spend and lease), the limits' epoch.
    assert_eq!(engine.stats().generation, 1);
    assert!(Arc::ptr_eq(&engine.snapshot(), &snapshot), "the live snapshot is the same");
    assert_eq!((ledger.claimed_micros(), ledger.spent_micros(), ledger.claimed_day_word()), before);
    ledger.audit(0).unwrap();
    // Publishing the same documents again keeps the epoch (the bad publishes did not
    // advance it) and so the lease.
    engine.publish(&input()).unwrap();
    assert_eq!(engine.snapshot().mandate(c.mandate).unwrap().ledger_limits().epoch, epoch);
    assert_eq!((ledger.claimed_micros(), ledger.spent_micros()), (before.0, before.1), "the lease was kept");
}

#[test]
fn spend_survives_a_restart_and_in_flight_counts_as_spent() {
    let (engine, _rx) = engine_with_receipts();
    let c = call(&engine, "acme/table-extract");
    let Admission::Allowed(done) = engine.admit(&c) else { panic!() };
    done.settle(a("0.003"), at()).unwrap();
    let Admission::Allowed(_in_flight) = engine.admit(&c) else { panic!() };
    let before = engine.ledger(c.mandate).unwrap();
    assert!(before.claimed_micros() > before.spent_micros(), "a lease waits: the export must leave it out");
    let bytes = engine.export_spend().unwrap();

    let restarted = Engine::new(EngineConfig::default());
    assert_eq!(restarted.import_spend(&bytes).unwrap(), 1);
    restarted.publish(&input()).unwrap();
    let ledger = restarted.ledger(restarted.mandate_ix("alice/m-2026-11").unwrap()).unwrap();
    assert_eq!(ledger.spent_micros(), 3_000 + 4_000, "settled 0.003 + in flight 0.004");
    assert_eq!(ledger.spent_day_micros(u64::try_from(at().utc_day()).unwrap()), 7_000);

    // Hostile bytes: a clear error, nothing changes.
    for bad in [&b""[..], &b"\xff\xff\xff\xff\xff\xff\xff\xff\xff"[..], &bytes[..bytes.len() - 1]] {
        let err = restarted.import_spend(bad).unwrap_err();
        assert!(matches!(err, EngineError::SpendDecode(_) | EngineError::SpendCorrupt), "{err}");
    }
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(restarted.import_spend(&trailing).is_err());
    assert_eq!(ledger.spent_micros(), 7_000);
}

#[test]
fn unknown_ids_and_times_out_of_range_are_denied() {
    let (engine, _rx) = engine_with_receipts();
    let mut c = call(&engine, "acme/table-extract");
    c.at = Timestamp::from_unix(i64::MAX / 2);
    let Admission::Denied(d) = engine.admit(&c) else { panic!() };
    assert!(d.codes.contains(Code::MandateExpired) && d.codes.contains(Code::InternalError));
    let mut c = call(&engine, "acme/table-extract");
    c.agent = holon::engine::AgentIx(999_999);
    let Admission::Denied(d) = engine.admit(&c) else { panic!() };
    assert!(d.codes.contains(Code::UnknownAgent));
}

#[test]
fn a_full_reservation_table_denies_instead_of_growing() {
    let engine = Engine::new(EngineConfig { in_flight_max: 2, ..EngineConfig::default() });
    engine.publish(&input()).unwrap();
    let c = call(&engine, "acme/table-extract");
    let (Admission::Allowed(_r1), Admission::Allowed(_r2)) = (engine.admit(&c), engine.admit(&c)) else { panic!() };
    let Admission::Denied(d) = engine.admit(&c) else { panic!() };
    assert_eq!(d.codes.iter().collect::<Vec<_>>(), vec![Code::InFlightLimitReached]);
}

#[test]
fn the_default_sink_writes_one_json_line_per_call_with_names() {
    let (sink, rx) = ChannelSink::new(64);
    let engine = Engine::with_sink(EngineConfig { clock: fixed_clock, ..EngineConfig::default() }, Arc::new(sink));
    engine.publish(&input()).unwrap();
    let path = std::env::temp_dir().join(format!("holon-receipts-{}.jsonl", std::process::id()));
    let writer =
        holon::engine::receipt::spawn_json_lines_writer(rx, engine.names(), std::fs::File::create(&path).unwrap());
    let c = call(&engine, "acme/table-extract");
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    r.settle(a("0.003"), at()).unwrap();
    let _ = engine.admit(&call(&engine, "shady/invoice-scraper"));
    drop(engine); // the last sender goes: the writer drains and stops
    assert_eq!(writer.join().unwrap().unwrap(), 2);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["agent"], "acme/table-extract");
    assert_eq!(lines[0]["mandate"], "alice/m-2026-11");
    assert_eq!((lines[0]["decision"].as_str(), lines[0]["end"].as_str()), (Some("allowed"), Some("settled")));
    assert_eq!((lines[0]["worst_case"].as_str(), lines[0]["actual"].as_str()), (Some("0.004"), Some("0.003")));
    assert_eq!(lines[1]["decision"], "denied");
    assert!(lines[1]["reasons"].as_array().unwrap().iter().any(|r| r == "agent_denied"));
    let _ = std::fs::remove_file(&path);
}

/// Releasing (or dropping) an orchestrator whose sub-calls spent keeps what they took:
/// before the fix, a release refunded the parent's whole worst case and the sub-calls'
/// spend left the mandate, so admit → sub-calls → release could spend without limit.
#[test]
fn releasing_an_orchestrator_keeps_what_its_sub_calls_took() {
    let (engine, _rx) = engine_with_receipts();
    let capped = Call { max_cost: Some(a("0.30")), ..call(&engine, "holon-labs/invoice-pipeline") };
    let table = engine.agent_ix("acme/table-extract").unwrap();
    let ledger = engine.ledger(capped.mandate).unwrap();
    for release in [true, false] {
        let before = ledger.settled_micros();
        let Admission::Allowed(r) = engine.admit(&capped) else { panic!("expected allowed") };
        for _ in 0..4 {
            let sub = SubCall { agent: table, capability: Some("extraction.table"), at: at() };
            let Admission::Allowed(child) = r.sub_call(&sub) else { panic!("sub-call not allowed") };
            child.settle(a("0.004"), at()).unwrap();
        }
        if release {
            r.release(at()).unwrap();
        } else {
            drop(r);
        }
        assert_eq!(ledger.settled_micros() - before, 16_000, "release {release}: the sub-calls' 0.016 stays spent");
        assert_eq!(ledger.spent_micros(), ledger.settled_micros(), "nothing else stays reserved");
    }
}

/// Shadow mode (`EngineConfig::shadow`): every call is decided as usual and the receipt
/// says so; a call the engine would deny or hold is allowed on a shadow reservation whose
/// settlement goes into the mandate's shadow tally, never into its ledger, which stays
/// exact (spent never above the total); allowed calls reserve and settle as usual.
#[test]
fn shadow_mode_allows_what_it_would_deny_and_keeps_the_ledger_exact() {
    // Every receipt kept (the sink shares its capacity among its shards).
    let (sink, rx) = ChannelSink::new(1 << 20);
    let config = EngineConfig { clock: fixed_clock, shadow: true, ..EngineConfig::default() };
    let engine = Engine::with_sink(config, Arc::new(sink));
    engine.publish(&input_with(|m| m.budget.total = a("1.00"))).unwrap();
    let m = engine.mandate_ix("alice/m-2026-11").unwrap();
    let ledger = engine.ledger(m).unwrap();
    // Would be denied: 0.10 + 3.00 passthrough is above per_call 2.00.
    let pipeline = call(&engine, "holon-labs/invoice-pipeline");
    let Admission::Allowed(shadowed) = engine.admit(&pipeline) else { panic!("shadow mode allows") };
    let real = *shadowed.shadow().expect("a shadow reservation");
    assert_eq!(real.verdict, Verdict::Denied);
    assert!(real.codes.contains(Code::PerCallExceeded), "{real:?}");
    assert!(!shadowed.is_delegated_run(), "a shadow reservation opens no run");
    let settled = shadowed.settle(a("0.25"), at()).unwrap();
    assert_eq!(settled.kept, a("0.25"));
    assert_eq!((ledger.spent_micros(), ledger.claimed_micros()), (0, 0), "the ledger never saw it");
    assert_eq!(engine.shadow_tally(m).settled, a("0.25"));
    // Would be held (0.60 is above approval 0.50): allowed in shadow, nothing held.
    let held = Call { max_cost: Some(a("0.60")), ..pipeline };
    let Admission::Allowed(r) = engine.admit(&held) else { panic!("shadow mode allows a held call") };
    assert_eq!(r.shadow().map(|s| s.verdict), Some(Verdict::Held));
    assert_eq!(engine.stats().pending, 0, "nothing waits for an approval");
    r.release(at()).unwrap();
    // Allowed calls reserve and settle as usual, until the budget is spent; then shadow.
    let fx = call(&engine, "holon-labs/fx-convert");
    let (mut real_calls, mut shadow_calls) = (0, 0);
    for _ in 0..1_100 {
        let Admission::Allowed(r) = engine.admit(&fx) else { panic!("shadow mode allows every call") };
        match r.shadow() {
            None => real_calls += 1,
            Some(s) => {
                assert!(s.codes.contains(Code::TotalExceeded), "{s:?}");
                shadow_calls += 1;
            }
        }
        r.settle(a("0.001"), at()).unwrap();
    }
    assert_eq!((real_calls, shadow_calls), (1_000, 100), "1.00 of 0.001 calls, then shadow");
    assert_eq!(ledger.settled_micros(), 1_000_000, "the ledger holds exactly the real calls");
    assert!(ledger.spent_micros() <= 1_000_000);
    assert_eq!(engine.shadow_tally(m).settled, a("0.35"));
    // Receipts: the decisions it would have made, and the shadow settlements, say shadow.
    let receipts: Vec<_> = rx.try_iter().collect();
    let shadow_decided = receipts.iter().filter(|r| r.shadow && r.end == End::Decided).count();
    let shadow_settled = receipts.iter().filter(|r| r.shadow && r.end == End::Settled).count();
    let real_settled = receipts.iter().filter(|r| !r.shadow && r.end == End::Settled).count();
    assert_eq!((shadow_decided, shadow_settled, real_settled), (102, 101, 1_000));
}

#[test]
fn a_sub_call_on_its_own_engine_is_a_sub_call_and_on_another_admits_nothing() {
    let engine = Engine::new(EngineConfig { clock: fixed_clock, ..EngineConfig::default() });
    engine.publish(&input()).unwrap();
    let other = Engine::new(EngineConfig { clock: fixed_clock, ..EngineConfig::default() });
    other.publish(&input()).unwrap();
    let capped = Call { max_cost: Some(a("0.60")), ..call(&engine, "holon-labs/invoice-pipeline") };
    let Admission::Held(p) = engine.admit(&capped) else { panic!("expected held") };
    let alice = Principal::parse("alice").unwrap();
    let Admission::Allowed(r) = engine.approve(p.id, &alice, at()).unwrap() else { panic!("expected allowed") };
    let fx = engine.agent_ix("holon-labs/fx-convert").unwrap();
    let sub = SubCall { agent: fx, capability: Some("finance.fx"), at: at() };
    // The reservation a sub-call on its own engine makes borrows only that engine.
    let child = match r.sub_call_on(&engine, &sub, None) {
        Admission::Allowed(child) => child,
        other => panic!("sub-call on its own engine: {:?}", other.verdict()),
    };
    let Admission::Denied(d) = r.sub_call_on(&other, &sub, None) else { panic!("another engine admitted a sub-call") };
    assert_eq!(d.codes.iter().collect::<Vec<_>>(), vec![Code::ParentReservationEnded]);
    assert_eq!(other.ledger(capped.mandate).unwrap().spent_micros(), 0, "nothing reserved on the other engine");
    child.settle(a("0.001"), at()).unwrap();
    assert_eq!(r.settle(a("0.10"), at()).unwrap().kept, a("0.101"));
}

/// A run's compiled sub-mandate comes from a template kept per snapshot and a copy reused
/// from the engine's pool: each run's document is still exactly what deriving it whole for
/// that call gives, a reused run starts from an empty ledger, and a run whose sub-call is
/// still held when the orchestrator's reservation ends is never handed to the next call.
#[test]
fn pooled_runs_are_each_their_own_derived_run() {
    let (engine, _rx) = engine_with_receipts();
    let input = input();
    let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
    let pipeline = catalog.get(&holon::pattern::AgentId::parse("holon-labs/invoice-pipeline").unwrap()).unwrap();
    let table = engine.agent_ix("acme/table-extract").unwrap();
    let sub = SubCall { agent: table, capability: Some("extraction.table"), at: at() };
    let approve = |max_cost: &str| {
        let capped = Call { max_cost: Some(a(max_cost)), ..call(&engine, "holon-labs/invoice-pipeline") };
        // Above the approval threshold (0.50) the call is held for alice first.
        let admitted = match engine.admit(&capped) {
            Admission::Held(p) => engine.approve(p.id, &Principal::parse("alice").unwrap(), at()).unwrap(),
            other => other,
        };
        let Admission::Allowed(r) = admitted else { panic!("expected allowed") };
        r
    };
    for max_cost in ["0.60", "0.35", "1.10", "0.60"] {
        let r = approve(max_cost);
        let whole = delegation::derive(&input.mandates[0], &pipeline.manifest, r.sub_budget(), &catalog).unwrap();
        assert_eq!(r.sub_mandate().unwrap(), whole, "max_cost {max_cost}");
        assert_eq!(r.run_spent(), Amount::ZERO, "a reused run starts from an empty ledger");
        let Admission::Allowed(child) = r.sub_call(&sub) else { panic!("sub-call not allowed") };
        child.settle(a("0.004"), at()).unwrap();
        assert_eq!(r.run_spent(), a("0.004"));
        r.settle(a("0.10"), at()).unwrap();
    }
    // The orchestrator's reservation ends while its sub-call still holds the run's ledger.
    let r = approve("0.60");
    let Admission::Allowed(child) = r.sub_call(&sub) else { panic!("sub-call not allowed") };
    r.release(at()).unwrap();
    let next = approve("0.60");
    assert_eq!(next.run_spent(), Amount::ZERO, "the held ledger was not reused");
    child.settle(a("0.004"), at()).unwrap();
    assert_eq!(next.run_spent(), Amount::ZERO, "the old sub-call's settle reaches the old run only");
    next.release(at()).unwrap();
}

/// The kept template belongs to its snapshot: after a publish that denies the callee in the
/// parent mandate, the next run's sub-mandate carries the new deny.
#[test]
fn a_publish_compiles_the_runs_anew() {
    let (engine, _rx) = engine_with_receipts();
    let table = engine.agent_ix("acme/table-extract").unwrap();
    let sub = SubCall { agent: table, capability: Some("extraction.table"), at: at() };
    let run = |engine: &Engine| {
        let capped = Call { max_cost: Some(a("0.35")), ..call(engine, "holon-labs/invoice-pipeline") };
        let r = match engine.admit(&capped) {
            Admission::Allowed(r) => r,
            other => panic!("expected allowed: {other:?}"),
        };
        let verdict = r.sub_call(&sub).verdict();
        r.release(at()).unwrap();
        verdict
    };
    assert_eq!(run(&engine), Verdict::Allowed);
    engine
        .publish(&input_with(|m| {
            m.deny.agents.push(holon::pattern::AgentPattern::parse("acme/table-extract").unwrap())
        }))
        .unwrap();
    assert_eq!(run(&engine), Verdict::Denied);
}
