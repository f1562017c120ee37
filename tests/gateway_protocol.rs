//! The gateway protocol (`holon::gateway`, issue #50) against the real engine and node: the
//! held call rebuilt with its `max_cost` for an approval's sentences, a flush that leaves
//! the node running, a stopped node saying so, and the spend view that reads no allowance.
#![cfg(feature = "sqlite")]

use std::sync::Arc;

use holon::admission::{Code, CodeSet};
use holon::engine::{Admission, Call, Engine, EngineConfig, Spent, synthetic};
use holon::gateway;
use holon::money::Amount;
use holon::node::{Node, NodeConfig};
use holon::store::sqlite::SqliteStore;
use holon::store::{HeldCall, LedgerStore};
use holon::time::Timestamp;

fn at() -> Timestamp {
    Timestamp::from_unix(synthetic::AT_UNIX)
}

fn clock() -> Timestamp {
    at()
}

fn store_backed(total: &str) -> (Arc<Engine>, Call) {
    let net =
        synthetic::network(&synthetic::Shape { agents: 4, mandates: 1, total: Amount::parse(total).unwrap() }).unwrap();
    let engine = Arc::new(Engine::new(EngineConfig { store_backed: true, clock, ..EngineConfig::default() }));
    engine.publish(&net.input).unwrap();
    let call = Call::new(engine.mandate_ix("m0").unwrap(), engine.agent_ix("syn/a1").unwrap(), at());
    (engine, call)
}

/// Issue #50: the sidecar and Python rebuilt an approved held call with `Call::new`,
/// dropping its `max_cost` and capability, so a `max_cost_below_price` denial of the
/// approval was explained with `max_cost 0.00`. The protocol's `held_call` keeps them.
#[test]
fn an_approvals_sentences_name_the_held_calls_own_max_cost() {
    let (engine, call) = store_backed("100.00");
    let held = HeldCall {
        id: "n:0:1".to_owned(),
        mandate: "m0".to_owned(),
        agent: "syn/a1".to_owned(),
        at_unix: at().unix(),
        max_cost_micros: Some(Amount::parse("0.000300").unwrap().micros()),
        by_capability: true,
        worst_micros: 0,
        expires_unix: at().unix() + 60,
    };
    let rebuilt = gateway::held_call(&engine, &held, at()).expect("the engine holds its mandate and agent");
    assert_eq!((rebuilt.max_cost, rebuilt.by_capability), (Some(Amount::parse("0.0003").unwrap()), true));
    let codes = CodeSet::EMPTY.with(Code::MaxCostBelowPrice);
    let said = engine.reasons(&rebuilt, codes, Amount::ZERO, Spent::default());
    assert!(said[0].message.starts_with("max_cost 0.0003 "), "{:?}", said[0].message);
    let before = engine.reasons(&call, codes, Amount::ZERO, Spent::default());
    assert!(before[0].message.starts_with("max_cost 0.00 "), "what Call::new said: {:?}", before[0].message);
    let unknown = HeldCall { agent: "nobody/here".to_owned(), ..held };
    assert!(gateway::held_call(&engine, &unknown, at()).is_none());
}

fn allowed<'e>(engine: &'e Engine, node: &Node, call: &Call) -> holon::engine::Reservation<'e> {
    // The protocol's own wait; a lease may still be on its way at the very start.
    for _ in 0..1_000 {
        match gateway::lease_wait_blocking::<()>(Some(node), || Ok(engine.admit(call))).unwrap() {
            Admission::Allowed(r) => return r,
            Admission::Denied(d) if d.codes.contains(Code::LeasePending) => continue,
            other => panic!("{:?}", other.verdict()),
        }
    }
    panic!("never allowed")
}

/// Issue #50: Python's `flush()` stopped the node (every admit after it waited 2 s and was
/// denied `lease_pending`, for good). `Node::flush_now` sends the settlements and leaves the
/// node running; a stopped node's denials say `node_stopped`, at once.
#[test]
fn a_flush_leaves_the_node_running_and_a_stopped_node_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let (engine, call) = store_backed("100.00");
    let config = NodeConfig { flush_ms: 60_000, lease_ttl_s: 600, clock, ..NodeConfig::new("n1") };
    let node = Node::start(Arc::clone(&engine), Box::new(SqliteStore::open(&path).unwrap()), config).unwrap();
    let kept = allowed(&engine, &node, &call).settle(Amount::parse("0.001").unwrap(), at()).unwrap().kept;
    let store = SqliteStore::open(&path).unwrap();
    let spent = |s: &SqliteStore| s.status(Some("m0")).unwrap()[0].spent_micros;
    assert_eq!(spent(&store), 0, "a minute's flush interval: nothing flushed yet");
    node.flush_now().unwrap();
    assert_eq!(spent(&store), kept.micros(), "flushed now");
    assert!(node.is_running());
    let view = gateway::spend_view(&engine, call.mandate, at()).unwrap();
    assert_eq!((view.spent, view.settled, view.reserved), (kept, kept, Amount::ZERO), "no allowance in the view");
    // Admitting goes on at once.
    let Admission::Allowed(r) = engine.admit(&call) else { panic!("an admit after the flush") };
    r.release(at()).unwrap();
    node.drain_in_place().unwrap();
    assert!(!node.is_running());
    let mut asked = 0;
    let stopped = gateway::lease_wait_blocking::<()>(Some(&node), || {
        asked += 1;
        Ok(engine.admit(&call))
    })
    .unwrap();
    let Admission::Denied(d) = stopped else { panic!("a stopped node admits nothing") };
    assert_eq!(d.codes.iter().collect::<Vec<_>>(), vec![Code::NodeStopped]);
    assert_eq!(asked, 1, "answered at once: no wait for a lease that will never come");
    assert!(matches!(node.flush_now(), Err(holon::node::NodeError::Stopped)));
}
