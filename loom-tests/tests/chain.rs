//! loom models of calls under published sub-mandates (hierarchical reservation,
//! `crates/holon-engine/src/engine/chain.rs`): the real engine, every interleaving up to
//! LOOM_MAX_PREEMPTIONS, `Ledger::audit` on every level at the end of every model.
#![cfg(holon_loom)]

use std::sync::Arc;

use holon::engine::internals::Ledger;
use holon::engine::{Admission, Call, Engine, EngineConfig, synthetic};
use holon::money::Amount;
use holon::time::Timestamp;
use loom::thread;

/// A root `m0` of `root_total` with one sub-mandate per entry of `children` (its total),
/// published; the calls of `syn/a1` (0.00092 each) under each child.
fn chain_engine(root_total: &str, children: &[&str]) -> (Engine, Vec<Call>) {
    let shape = synthetic::Shape { agents: 2, mandates: 1, total: Amount::parse(root_total).unwrap() };
    let mut net = synthetic::network(&shape).unwrap();
    let root = Arc::clone(&net.input.mandates[0]);
    for (i, total) in children.iter().enumerate() {
        let child = synthetic::sub_mandate(&root, &format!("m0/c{i}"), Amount::parse(total).unwrap()).unwrap();
        net.input.mandates.push(Arc::new(child));
    }
    let engine = Engine::new(EngineConfig {
        in_flight_max: 4,
        clock: || Timestamp::from_unix(synthetic::AT_UNIX),
        ..Default::default()
    });
    engine.publish(&net.input).unwrap();
    let agent = engine.agent_ix("syn/a1").unwrap();
    let calls = (0..children.len()).map(|i| Call::new(engine.mandate_ix(&format!("m0/c{i}")).unwrap(), agent, net.at));
    let calls = calls.collect();
    (engine, calls)
}

fn ledger(engine: &Engine, id: &str) -> Arc<Ledger> {
    engine.ledger(engine.mandate_ix(id).unwrap()).unwrap()
}

fn audit(ledger: &Ledger) {
    if let Err(e) = ledger.audit(0) {
        panic!("ledger audit: {e}");
    }
}

/// Two threads admit under two children of one parent whose total fits one call (each
/// child, at most its parent by attenuation, fits one too): exactly one is allowed, the parent is never over its total at any step, and every level ends
/// exact.
#[test]
fn two_children_racing_for_one_parents_last_call() {
    loom::model(|| {
        let (engine, calls) = chain_engine("0.0015", &["0.0015", "0.0015"]);
        let engine = Arc::new(engine);
        let root = ledger(&engine, "m0");
        let handles: Vec<_> = calls
            .into_iter()
            .map(|call| {
                let (engine, root) = (Arc::clone(&engine), Arc::clone(&root));
                thread::spawn(move || {
                    let allowed = match engine.admit(&call) {
                        Admission::Allowed(r) => {
                            assert!(root.claimed_micros() <= 1500, "the parent over its total");
                            let worst = r.worst_case();
                            r.settle(worst, call.at).unwrap();
                            1
                        }
                        _ => 0,
                    };
                    assert!(root.claimed_micros() <= 1500, "the parent over its total");
                    allowed
                })
            })
            .collect();
        let allowed: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(allowed, 1, "exactly one of the two fits the parent");
        let (c0, c1) = (ledger(&engine, "m0/c0"), ledger(&engine, "m0/c1"));
        assert_eq!(root.spent_micros(), c0.spent_micros() + c1.spent_micros(), "the parent holds its children's spend");
        for l in [&root, &c0, &c1] {
            audit(l);
        }
    });
}

/// Two threads under one child that fits one call, whose parent fits both: the parent
/// reserves for both, the child refuses one, and the parent is given that charge back
/// before the answer: at the end the parent holds exactly what the child does.
#[test]
fn a_childs_refusal_after_the_parent_reserved_leaves_the_parent_exact() {
    loom::model(|| {
        let (engine, calls) = chain_engine("1", &["0.0015"]);
        let engine = Arc::new(engine);
        let call = calls[0];
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let engine = Arc::clone(&engine);
                thread::spawn(move || match engine.admit(&call) {
                    Admission::Allowed(r) => {
                        let worst = r.worst_case();
                        r.settle(worst, call.at).unwrap();
                        1
                    }
                    _ => 0,
                })
            })
            .collect();
        let allowed: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(allowed, 1);
        let (root, child) = (ledger(&engine, "m0"), ledger(&engine, "m0/c0"));
        assert_eq!(root.spent_micros(), child.spent_micros());
        root.refund_all_leases();
        child.refund_all_leases();
        assert_eq!(root.claimed_micros(), child.claimed_micros(), "the refused call holds nothing on the parent");
        audit(&root);
        audit(&child);
    });
}

/// The holder of a call under a sub-mandate settles while the reaper reclaims it: exactly
/// one ends the slot, every level keeps the worst case until the settle, and both levels
/// end at the actual cost, counted once.
#[test]
fn a_hierarchical_reservation_settles_against_the_reaper_once_on_every_level() {
    loom::model(|| {
        let (engine, calls) = chain_engine("1", &["1"]);
        let engine = Arc::new(engine);
        let call = calls[0];
        let (root, child) = (ledger(&engine, "m0"), ledger(&engine, "m0/c0"));
        let Admission::Allowed(r) = engine.admit(&call) else { panic!("not allowed") };
        let (e2, r2, c2) = (Arc::clone(&engine), Arc::clone(&root), Arc::clone(&child));
        let reaper = thread::spawn(move || {
            let reclaimed = e2.reclaim_expired(Timestamp::from_unix(call.at.unix() + 1_000_000));
            assert!(
                reclaimed == 0 || (r2.claimed_micros() >= 500 && c2.claimed_micros() >= 500),
                "a level lost its spend"
            );
            reclaimed
        });
        let settled = r.settle(Amount::from_micros(500), call.at).unwrap();
        let reclaimed = reaper.join().unwrap();
        assert_eq!(settled.late, reclaimed == 1, "exactly one of them ended the slot");
        for l in [&root, &child] {
            assert_eq!((l.spent_micros(), l.settled_micros()), (500, 500), "counted once, as the actual");
            audit(l);
        }
    });
}
