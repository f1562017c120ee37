//! Issue #10, engine part: every fail-open path found in the engine, one test each. Each
//! test failed on the code before its fix (the commit that fixed it says so).

use holon::admission::Code;
use holon::catalog::Catalog;
use holon::documents;
use holon::engine::{Admission, Call, ChannelSink, End, Engine, EngineConfig, SnapshotInput, SubCall};
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

fn engine() -> (Engine, holon::engine::receipt::ReceiptReceiver) {
    let (sink, rx) = ChannelSink::new(1024);
    let engine = Engine::with_sink(EngineConfig { clock: fixed_clock, ..EngineConfig::default() }, Arc::new(sink));
    engine.publish(&input()).unwrap();
    (engine, rx)
}

fn call(engine: &Engine, agent: &str) -> Call {
    Call::new(engine.mandate_ix("alice/m-2026-11").unwrap(), engine.agent_ix(agent).unwrap(), at())
}

fn later(s: i64) -> Timestamp {
    Timestamp::from_unix(at().unix() + s)
}

/// The orchestrator of the worked example, approved by alice, with a run of 0.50.
fn orchestrator(engine: &Engine) -> holon::engine::Reservation<'_> {
    let pipeline = Call { max_cost: Some(a("0.60")), ..call(engine, "holon-labs/invoice-pipeline") };
    let Admission::Held(p) = engine.admit(&pipeline) else { panic!("expected held") };
    let alice = Principal::parse("alice").unwrap();
    let Admission::Allowed(r) = engine.approve(p.id, &alice, at()).unwrap() else { panic!("expected allowed") };
    r
}

/// The reclaimed-orchestrator hole: after the reaper reclaimed the orchestrator's
/// reservation, its run kept admitting sub-calls against a run ledger the root no longer
/// backed, and the sub-calls settled before the reclaim dropped out of the mandate.
#[test]
fn a_reclaimed_orchestrator_admits_no_sub_call_and_its_run_stays_spent() {
    let (engine, rx) = engine();
    let ledger = engine.ledger(engine.mandate_ix("alice/m-2026-11").unwrap()).unwrap();
    let r = orchestrator(&engine);
    let table = engine.agent_ix("acme/table-extract").unwrap();
    let sub = SubCall { agent: table, capability: Some("extraction.table"), at: at() };
    for _ in 0..2 {
        let Admission::Allowed(child) = r.sub_call(&sub) else { panic!("sub-call not allowed") };
        child.settle(a("0.004"), at()).unwrap();
    }
    // invoice-pipeline: timeout_s 300, grace 30.
    assert_eq!(engine.reclaim_expired(later(331)), 1);
    ledger.refund_all_leases();
    assert!(
        ledger.claimed_micros() >= 8_000,
        "the run's settled sub-calls dropped out of the mandate: claimed {}",
        ledger.claimed_micros()
    );
    match r.sub_call(&sub) {
        Admission::Denied(d) => assert!(d.codes.contains(Code::ParentReservationEnded), "{:?}", d.codes),
        other => panic!("a sub-call of a reclaimed orchestrator was admitted: {other:?}"),
    }
    let last = rx.try_iter().last().unwrap();
    assert_eq!(
        (last.parent, last.codes),
        (r.receipt_id(), holon::admission::CodeSet::EMPTY.with(Code::ParentReservationEnded))
    );
}

/// The reaper no longer treats an expired call as costing nothing: its worst case stays
/// claimed, and the holder's late settle lowers it to the actual cost, once.
#[test]
fn an_expired_call_stays_spent_until_a_late_settle_reconciles_it_once() {
    let (engine, rx) = engine();
    let c = call(&engine, "acme/table-extract"); // worst 0.004, timeout 60 + grace 30
    let ledger = engine.ledger(c.mandate).unwrap();
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    assert_eq!(engine.reclaim_expired(later(91)), 1);
    assert_eq!(engine.reclaim_expired(later(1_000)), 0, "only once");
    assert_eq!(ledger.spent_micros(), 4_000, "the reaper keeps the worst case spent");
    let late = r.settle(a("0.001"), at());
    assert_eq!((ledger.spent_micros(), ledger.settled_micros()), (1_000, 1_000), "reconciled to the actual, once");
    let settled = late.unwrap();
    assert!(settled.late, "the settle says it came after the reclaim");
    assert_eq!(settled.kept, a("0.001"));
    let ends: Vec<_> = rx.try_iter().map(|r| (r.end, r.actual)).collect();
    assert_eq!(ends, vec![(End::Expired, a("0.004")), (End::Reconciled, a("0.001"))]);
    // A dropped (never settled) reclaimed reservation keeps its worst case.
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    assert_eq!(engine.reclaim_expired(later(91)), 1);
    drop(r);
    assert_eq!(ledger.spent_micros(), 5_000);
    ledger.audit(4_000).unwrap();
}

static CLOCK_UNIX: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

fn moving_clock() -> Timestamp {
    Timestamp::from_unix(at().unix() + CLOCK_UNIX.load(std::sync::atomic::Ordering::SeqCst))
}

/// Held calls never expired, so a gateway that never answered them filled the pending
/// table for good: now they expire after `pending_ttl_s` on the engine's clock.
#[test]
fn a_held_call_expires_after_its_time_to_live() {
    let config = EngineConfig { clock: moving_clock, pending_ttl_s: 600, pending_max: 1, ..EngineConfig::default() };
    let engine = Engine::new(config);
    engine.publish(&input()).unwrap();
    let pipeline = Call { max_cost: Some(a("0.60")), ..call(&engine, "holon-labs/invoice-pipeline") };
    let Admission::Held(p) = engine.admit(&pipeline) else { panic!("expected held") };
    let Admission::Denied(d) = engine.admit(&pipeline) else { panic!("pending_max 1: the second is denied") };
    assert!(d.codes.contains(Code::InFlightLimitReached));
    CLOCK_UNIX.store(601, std::sync::atomic::Ordering::SeqCst);
    let alice = Principal::parse("alice").unwrap();
    let err = engine.approve(p.id, &alice, later(601)).unwrap_err();
    assert!(matches!(err, holon::engine::EngineError::PendingExpired(id) if id == p.id), "{err}");
    assert_eq!(engine.stats().pending, 0);
    // Its place is free again: a new call is held.
    let Admission::Held(p2) = engine.admit(&pipeline) else { panic!("expected held") };
    // And a full table drops expired calls by itself.
    CLOCK_UNIX.store(1_300, std::sync::atomic::Ordering::SeqCst);
    let Admission::Held(p3) = engine.admit(&pipeline) else { panic!("the expired call made room") };
    assert_ne!(p2.id, p3.id);
    assert_eq!(engine.stats().pending, 1);
}

/// `pending_max` was a soft bound (a `len()` check, then an insert): parallel holds could
/// all pass it. A place is now reserved by an RMW before the insert.
#[test]
fn pending_max_is_a_hard_bound_under_parallel_holds() {
    let engine = Engine::new(EngineConfig { clock: fixed_clock, pending_max: 3, ..EngineConfig::default() });
    engine.publish(&input()).unwrap();
    let pipeline = Call { max_cost: Some(a("0.60")), ..call(&engine, "holon-labs/invoice-pipeline") };
    for _round in 0..50 {
        let barrier = std::sync::Barrier::new(8);
        let held: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        (0..4).filter(|_| matches!(engine.admit(&pipeline), Admission::Held(_))).count()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert!(held <= 3, "{held} calls held with pending_max 3");
        assert_eq!(engine.stats().pending, held);
        // Empty the table for the next round.
        assert_eq!(engine.expire_pending(Timestamp::from_unix(i64::MAX)), held);
    }
    // A held call reserves nothing: the mandate's ledger holds nothing.
    let ledger = engine.ledger(pipeline.mandate).unwrap();
    ledger.audit(0).unwrap();
    assert_eq!(ledger.claimed_micros(), 0);
}

/// A publish that fails advanced the lease epoch, a `u8`: 256 of them wrapped it onto a
/// live lease taken under higher limits, which then served calls past the lowered total.
#[test]
fn failed_publishes_cannot_wrap_the_lease_epoch_onto_a_live_lease() {
    let (engine, _rx) = engine();
    let c = call(&engine, "acme/table-extract");
    let ledger = engine.ledger(c.mandate).unwrap();
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    r.settle(a("0.004"), at()).unwrap();
    assert!(ledger.claimed_micros() > ledger.spent_micros(), "a lease waits in this thread's shard");
    for i in 0..255 {
        let total = if i % 2 == 0 { "90.00" } else { "80.00" };
        let mut bad = input_with(|m| m.budget.total = a(total));
        let again = bad.mandates[0].clone();
        bad.mandates.push(again);
        assert!(engine.publish(&bad).is_err());
    }
    // The spend so far is the whole total now.
    engine.publish(&input_with(|m| m.budget.total = a("0.004"))).unwrap();
    match engine.admit(&c) {
        Admission::Denied(d) => assert!(d.codes.contains(Code::TotalExceeded), "{:?}", d.codes),
        Admission::Allowed(r) => {
            let _ = r.release(at());
            panic!("a lease of old limits served a call past the lowered total")
        }
        other => panic!("{other:?}"),
    }
}

/// A call whose `at` is a day ahead of the engine's clock reset the day word and spent a
/// fresh `per_day`.
#[test]
fn a_call_a_day_ahead_cannot_open_a_fresh_day() {
    let (engine, _rx) = engine();
    let c = call(&engine, "acme/table-extract");
    let ledger = engine.ledger(c.mandate).unwrap();
    // Spend all but 0.002 of today's 20.00 (the engine's clock says today).
    let today = u64::try_from(at().utc_day()).unwrap();
    ledger.absorb(19_998_000, today, 19_998_000);
    let ahead = Call { at: later(86_400), ..c };
    match engine.admit(&ahead) {
        Admission::Denied(d) => assert!(d.codes.contains(Code::PerDayExceeded), "{:?}", d.codes),
        Admission::Allowed(r) => {
            let _ = r.release(at());
            panic!("a call a day ahead opened a fresh day")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ledger.claimed_day_word(), (today, 19_998_000), "the day word kept the engine's day");
}
/// Corrupted spend state that still decoded was imported (a fuzz run lowered a mandate's
/// spend in 3,859 of 100,000 corrupt imports): every single-byte change is refused now.
#[test]
fn every_single_byte_corruption_of_a_spend_export_is_refused() {
    let (engine, _rx) = engine();
    let c = call(&engine, "acme/table-extract");
    let Admission::Allowed(r) = engine.admit(&c) else { panic!() };
    r.settle(a("0.003"), at()).unwrap();
    let bytes = engine.export_spend().unwrap();
    let fresh = Engine::new(EngineConfig::default());
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[i] ^= flip;
            assert!(fresh.import_spend(&bad).is_err(), "byte {i} ^ {flip:#x} was accepted");
        }
    }
    assert!(fresh.ledger(c.mandate).is_none_or(|l| l.claimed_micros() == 0), "nothing was imported");
    assert_eq!(fresh.import_spend(&bytes).unwrap(), 1);
}

/// A spend state from a later format is refused with a message that says so.
#[test]
fn a_spend_state_from_a_future_version_is_refused_clearly() {
    let (engine, _rx) = engine();
    let mut bytes = engine.export_spend().unwrap();
    bytes[8..12].copy_from_slice(&(holon::engine::spend::SPEND_FORMAT + 1).to_le_bytes());
    let err = Engine::new(EngineConfig::default()).import_spend(&bytes).unwrap_err();
    assert!(err.to_string().contains("newer than this engine"), "{err}");
}

/// The CLI's agent lookup (newest version in range) and the engine's (newest version,
/// then filtered) disagreed when an agent had several versions: with company-lookup 1.2
/// and 2.0 known and a declared call `acme/company-lookup@^1`, the CLI allowed the
/// orchestrator and the engine denied it. One function (`lookup::newest_in_range`) now.
#[test]
fn the_cli_and_the_engine_resolve_a_declared_agent_alike() {
    let dir = std::env::temp_dir().join(format!("holon-lookup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let v1 = std::fs::read_to_string("examples/agents/company-lookup/holon.yaml").unwrap();
    let v2 = v1.replace("version: 1.2.0", "version: 2.0.0").replace("finance.company_lookup", "marketing.leads");
    assert_ne!(v1, v2);
    std::fs::write(dir.join("holon.yaml"), v2).unwrap();
    let catalog = Catalog::load(&["examples/agents".into(), dir.clone()], None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let mandate = documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap();
    let pipeline = &catalog.get(&holon::pattern::AgentId::parse("holon-labs/invoice-pipeline").unwrap()).unwrap();
    // The CLI: the assessor against the catalog.
    let ctx = holon::admission::CallContext { max_cost: Some(a("0.60")), ..holon::admission::CallContext::at(at()) };
    let cli = holon::engine::Assessor::new(&mandate, &catalog)
        .unwrap()
        .assess(&pipeline.manifest, pipeline.record.as_ref(), &ctx)
        .unwrap();
    assert_eq!(cli.verdict, holon::admission::Verdict::Held, "the CLI: {:?}", cli.reasons);
    // The engine: the same documents published.
    let engine = Engine::new(EngineConfig { clock: fixed_clock, ..EngineConfig::default() });
    engine
        .publish(&SnapshotInput {
            mandates: vec![Arc::new(mandate)],
            agents: catalog
                .entries
                .iter()
                .map(|e| (Arc::new(e.manifest.clone()), e.record.clone().map(Arc::new)))
                .collect(),
            ..SnapshotInput::default()
        })
        .unwrap();
    let c = Call { max_cost: Some(a("0.60")), ..call(&engine, "holon-labs/invoice-pipeline") };
    match engine.admit(&c) {
        Admission::Held(_) => {}
        Admission::Denied(d) => panic!("the engine denies what the CLI allows: {:?}", d.codes),
        Admission::Allowed(_) => panic!("above approval.above: held"),
    }
}
