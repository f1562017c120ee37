//! Revocation (docs/trust.md): once the publish that carries the list returns, no call is
//! admitted under a revoked mandate or any mandate chained to it, at any thread count;
//! calls in flight follow the documented rules (a reserved call settles, a delegated run
//! opens no new sub-call, a held call cannot be approved).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use holon::admission::{Code, Verdict};
use holon::catalog::Catalog;
use holon::documents;
use holon::engine::{Admission, Call, ChannelSink, Engine, EngineConfig, SnapshotInput, SubCall};
use holon::mandate::Mandate;
use holon::money::Amount;
use holon::pattern::Principal;
use holon::time::Timestamp;
use holon::trust::Revocations;
use holon::trust::revocation::Revoked;

fn a(s: &str) -> Amount {
    Amount::parse(s).unwrap()
}

fn at() -> Timestamp {
    Timestamp::parse("2026-11-20T10:00:00Z").unwrap()
}

fn fixed_clock() -> Timestamp {
    at()
}

fn root() -> Mandate {
    documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap()
}

fn research() -> Mandate {
    documents::load_mandate("examples/mandates/alice-research.yaml".as_ref()).unwrap()
}

fn input(mandates: Vec<Mandate>, revoked: &[&str]) -> SnapshotInput {
    let catalog = Catalog::load(&["examples/agents".into()], None).unwrap();
    SnapshotInput {
        mandates: mandates.into_iter().map(Arc::new).collect(),
        agents: catalog.entries.into_iter().map(|e| (Arc::new(e.manifest), e.record.map(Arc::new))).collect(),
        revocations: list(revoked),
        ..SnapshotInput::default()
    }
}

fn list(revoked: &[&str]) -> Revocations {
    Revocations {
        revoked: revoked
            .iter()
            .map(|m| Revoked { mandate: (*m).to_owned(), at: at(), reason: "the assistant's laptop was stolen".into() })
            .collect(),
        ..Revocations::default()
    }
}

fn codes(adm: &Admission<'_>) -> Vec<Code> {
    match adm {
        Admission::Denied(d) => d.codes.iter().collect(),
        other => panic!("expected a denial, got {:?}", other.verdict()),
    }
}

#[test]
fn a_revoked_mandate_and_every_mandate_chained_to_it_admit_nothing() {
    let engine = Engine::new(EngineConfig { clock: fixed_clock, ..EngineConfig::default() });
    engine.publish(&input(vec![root(), research()], &[])).unwrap();
    let m = engine.mandate_ix("alice/m-2026-11").unwrap();
    let child = engine.mandate_ix("alice/m-2026-11/research").unwrap();
    let fx = engine.agent_ix("holon-labs/fx-convert").unwrap();
    let table = engine.agent_ix("acme/table-extract").unwrap();
    assert_eq!(engine.admit(&Call::new(m, fx, at())).verdict(), Verdict::Allowed);
    // Revoked by id: the root and, through its `parent`, the research sub-mandate.
    engine.publish(&input(vec![root(), research()], &["alice/m-2026-11"])).unwrap();
    assert_eq!(codes(&engine.admit(&Call::new(m, fx, at()))), vec![Code::MandateRevoked]);
    assert_eq!(codes(&engine.admit(&Call::new(child, table, at()))), vec![Code::MandateRevoked]);
    let explained = engine.explain(&Call::new(m, fx, at())).unwrap();
    assert!(explained.reasons[0].message.contains("revocation list"), "{:?}", explained.reasons);
    // Taken off the list, it admits again (the ledger kept its spend).
    engine.publish(&input(vec![root(), research()], &[])).unwrap();
    assert_eq!(engine.admit(&Call::new(m, fx, at())).verdict(), Verdict::Allowed);
    // Revoked by digest, a child naming its parent by digest goes with it.
    let root = root();
    let digest = root.digest().unwrap().to_string();
    let mut by_digest = research();
    by_digest.parent = Some(digest.clone());
    engine.publish(&input(vec![root, by_digest], &[&digest])).unwrap();
    assert_eq!(codes(&engine.admit(&Call::new(m, fx, at()))), vec![Code::MandateRevoked]);
    assert_eq!(codes(&engine.admit(&Call::new(child, table, at()))), vec![Code::MandateRevoked]);
}

#[test]
fn calls_in_flight_settle_runs_open_no_sub_call_and_held_calls_cannot_be_approved() {
    let (sink, rx) = ChannelSink::new(1024);
    let engine = Engine::with_sink(EngineConfig { clock: fixed_clock, ..EngineConfig::default() }, Arc::new(sink));
    engine.publish(&input(vec![root()], &[])).unwrap();
    let m = engine.mandate_ix("alice/m-2026-11").unwrap();
    let alice = Principal::parse("alice").unwrap();
    // A reservation, a delegated run (approved: its worst case is above 0.50), a held call.
    let Admission::Allowed(reserved) =
        engine.admit(&Call::new(m, engine.agent_ix("holon-labs/fx-convert").unwrap(), at()))
    else {
        panic!("fx-convert not allowed")
    };
    let pipeline = Call {
        max_cost: Some(a("0.60")),
        ..Call::new(m, engine.agent_ix("holon-labs/invoice-pipeline").unwrap(), at())
    };
    let Admission::Held(first) = engine.admit(&pipeline) else { panic!("expected held") };
    let Admission::Allowed(run) = engine.approve(first.id, &alice, at()).unwrap() else { panic!("not approved") };
    let table = engine.agent_ix("acme/table-extract").unwrap();
    let sub = SubCall { agent: table, capability: Some("extraction.table"), at: at() };
    let Admission::Allowed(before) = run.sub_call(&sub) else { panic!("sub-call before the revocation") };
    let Admission::Held(waiting) = engine.admit(&pipeline) else { panic!("expected held") };

    engine.publish(&input(vec![root()], &["alice/m-2026-11"])).unwrap();

    // The reservation settles: the money was committed before the revocation.
    let settled = reserved.settle(a("0.001"), at()).unwrap();
    assert_eq!(settled.billed, a("0.001"));
    // The run opens no new sub-call; the one already reserved settles.
    assert_eq!(codes(&run.sub_call(&sub)), vec![Code::MandateRevoked]);
    before.settle(a("0.004"), at()).unwrap();
    run.settle(a("0.10"), at()).unwrap();
    // The held call is refused when approved.
    assert_eq!(codes(&engine.approve(waiting.id, &alice, at()).unwrap()), vec![Code::MandateRevoked]);
    let ledger = engine.ledger(m).unwrap();
    assert_eq!(ledger.spent_micros(), a("0.105").micros(), "what ran is billed, nothing else");
    // The receipts say so: the refused sub-call and approval carry `mandate_revoked`, and
    // so do the settles of the two calls on the root ledger that ended after it.
    let receipts: Vec<_> = rx.try_iter().filter(|r| r.codes.contains(Code::MandateRevoked)).collect();
    let denied = receipts.iter().filter(|r| r.decision == Verdict::Denied).count();
    let settled = receipts.iter().filter(|r| r.decision == Verdict::Allowed).count();
    assert_eq!((denied, settled), (2, 2), "{receipts:?}");
}

#[test]
fn no_call_is_admitted_after_the_revoking_publish_returns_at_any_thread_count() {
    let mut rich = root();
    rich.budget.total = a("1000000");
    rich.budget.per_day = Some(a("1000000"));
    let engine = Arc::new(Engine::new(EngineConfig { clock: fixed_clock, ..EngineConfig::default() }));
    engine.publish(&input(vec![rich.clone()], &[])).unwrap();
    let call = Call::new(
        engine.mandate_ix("alice/m-2026-11").unwrap(),
        engine.agent_ix("holon-labs/fx-convert").unwrap(),
        at(),
    );
    for threads in [1, 2, 4, 8] {
        engine.publish(&input(vec![rich.clone()], &[])).unwrap();
        let published = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (before, after_allowed, after_denied) =
            (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (engine, published, stop) = (Arc::clone(&engine), Arc::clone(&published), Arc::clone(&stop));
                let (before, after_allowed, after_denied) =
                    (Arc::clone(&before), Arc::clone(&after_allowed), Arc::clone(&after_denied));
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        // Read before the call: true means the publish had returned.
                        let revoked_already = published.load(Ordering::Acquire);
                        let admission = engine.admit(&call);
                        let allowed = matches!(admission, Admission::Allowed(_));
                        if let Admission::Allowed(r) = admission {
                            r.settle(Amount::ZERO, at()).unwrap();
                        }
                        match (revoked_already, allowed) {
                            (false, true) => before.fetch_add(1, Ordering::Relaxed),
                            (true, true) => after_allowed.fetch_add(1, Ordering::Relaxed),
                            (true, false) => after_denied.fetch_add(1, Ordering::Relaxed),
                            (false, false) => 0,
                        };
                    }
                })
            })
            .collect();
        while before.load(Ordering::Relaxed) < 1_000 {
            std::thread::yield_now();
        }
        engine.publish(&input(vec![rich.clone()], &["alice/m-2026-11"])).unwrap();
        published.store(true, Ordering::Release);
        while after_denied.load(Ordering::Relaxed) < 1_000 {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Release);
        workers.into_iter().for_each(|w| w.join().unwrap());
        assert_eq!(after_allowed.load(Ordering::Relaxed), 0, "{threads} threads: admitted after the revocation");
    }
}

#[test]
fn a_run_opens_no_sub_call_once_its_root_is_removed_or_replaced() {
    let engine = Engine::new(EngineConfig { clock: fixed_clock, ..EngineConfig::default() });
    engine.publish(&input(vec![root()], &[])).unwrap();
    let m = engine.mandate_ix("alice/m-2026-11").unwrap();
    let alice = Principal::parse("alice").unwrap();
    let pipeline = Call {
        max_cost: Some(a("0.60")),
        ..Call::new(m, engine.agent_ix("holon-labs/invoice-pipeline").unwrap(), at())
    };
    let table = engine.agent_ix("acme/table-extract").unwrap();
    let sub = SubCall { agent: table, capability: Some("extraction.table"), at: at() };
    let open_run = || {
        let Admission::Held(p) = engine.admit(&pipeline) else { panic!("expected held") };
        let Admission::Allowed(run) = engine.approve(p.id, &alice, at()).unwrap() else { panic!("not approved") };
        run
    };
    // Removed from the snapshot: fail closed.
    let run = open_run();
    engine.publish(&input(vec![], &[])).unwrap();
    assert_eq!(codes(&run.sub_call(&sub)), vec![Code::UnknownMandate]);
    run.release(at()).unwrap();
    // Replaced by another document with the same id: not the mandate the run was opened
    // under.
    engine.publish(&input(vec![root()], &[])).unwrap();
    let run = open_run();
    let mut other = documents::mandate_from_str(
        &std::fs::read_to_string("examples/mandates/alice-root.yaml").unwrap().replace("\"100.00\"", "\"99.00\""),
    )
    .unwrap();
    other.id = "alice/m-2026-11".into();
    engine.publish(&input(vec![other], &[])).unwrap();
    assert_eq!(codes(&run.sub_call(&sub)), vec![Code::UnknownMandate]);
    run.release(at()).unwrap();
    // The same document published again: the run goes on.
    engine.publish(&input(vec![root()], &[])).unwrap();
    let run = open_run();
    engine.publish(&input(vec![root()], &[])).unwrap();
    assert_eq!(run.sub_call(&sub).verdict(), Verdict::Allowed);
}

/// Issue #50: a reservation dropped without a word ends as `release` would end it, and its
/// receipt says the same: `mandate_revoked` after a revocation (docs/trust.md), and
/// `Settled` for an orchestrator whose sub-calls spent (what they took stays billed), where
/// `drop` wrote no code and `Released`.
#[test]
fn a_dropped_reservation_gets_the_receipt_release_would_give() {
    use holon::engine::End;
    let (sink, rx) = ChannelSink::new(1024);
    let engine = Engine::with_sink(EngineConfig { clock: fixed_clock, ..EngineConfig::default() }, Arc::new(sink));
    engine.publish(&input(vec![root()], &[])).unwrap();
    let m = engine.mandate_ix("alice/m-2026-11").unwrap();
    let alice = Principal::parse("alice").unwrap();
    let fx = engine.agent_ix("holon-labs/fx-convert").unwrap();
    let pipeline = Call {
        max_cost: Some(a("0.60")),
        ..Call::new(m, engine.agent_ix("holon-labs/invoice-pipeline").unwrap(), at())
    };
    // Each ended both ways: released (or settled) by hand, and dropped.
    let ends = |engine: &Engine, by_hand: bool| {
        let Admission::Held(held) = engine.admit(&pipeline) else { panic!("expected held") };
        let Admission::Allowed(run) = engine.approve(held.id, &alice, at()).unwrap() else { panic!("not approved") };
        let sub = SubCall {
            agent: engine.agent_ix("acme/table-extract").unwrap(),
            capability: Some("extraction.table"),
            at: at(),
        };
        let Admission::Allowed(inner) = run.sub_call(&sub) else { panic!("sub-call") };
        inner.settle(a("0.004"), at()).unwrap();
        if by_hand { run.release(at()).unwrap() } else { drop(run) }
    };
    let ledger = engine.ledger(m).unwrap();
    let before = ledger.spent_micros();
    ends(&engine, true);
    let by_release = ledger.spent_micros() - before;
    ends(&engine, false);
    let by_drop = ledger.spent_micros() - before - by_release;
    assert_eq!((by_release, by_drop), (a("0.004").micros(), a("0.004").micros()), "the same spend either way");
    let runs: Vec<_> = rx.try_iter().filter(|r| r.worst_case == a("0.60") && r.decision == Verdict::Allowed).collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!((runs[0].end, runs[0].actual), (End::Settled, a("0.004")), "release: {:?}", runs[0]);
    assert_eq!((runs[1].end, runs[1].actual), (runs[0].end, runs[0].actual), "drop as release: {:?}", runs[1]);
    // After a revocation: released by hand and dropped both carry `mandate_revoked`.
    let Admission::Allowed(by_hand) = engine.admit(&Call::new(m, fx, at())) else { panic!("fx") };
    let Admission::Allowed(dropped) = engine.admit(&Call::new(m, fx, at())) else { panic!("fx") };
    engine.publish(&input(vec![root()], &["alice/m-2026-11"])).unwrap();
    by_hand.release(at()).unwrap();
    drop(dropped);
    let ended: Vec<_> = rx.try_iter().filter(|r| r.decision == Verdict::Allowed).collect();
    assert_eq!(ended.len(), 2, "{ended:?}");
    for r in &ended {
        assert_eq!((r.end, r.codes.contains(Code::MandateRevoked)), (End::Released, true), "{r:?}");
    }
}
