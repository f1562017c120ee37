//! The store's escrow protocol as a state machine, shared by the store tests: random
//! sequences of nodes taking leases, admitting calls against them, flushing, giving back,
//! crashing, restarting, being reconciled, and limits lowered, checked after every step
//! against an oracle of the money acknowledged to callers (see tests/store_model.rs).

use holon::store::{FlushEntry, GrantRequest, LeaseState, LedgerStore, Limits};
use proptest::prelude::*;

pub(crate) const NODES: usize = 3;
pub(crate) const LIMIT_MICROS: u64 = 1_000_000;
pub(crate) const TTL_S: u64 = 30;

#[derive(Debug, Clone)]
pub(crate) enum Op {
    Refill { node: usize, want: u64 },
    Spend { node: usize, amount: u64 },
    Flush { node: usize, give_back_pct: u64 },
    Crash { node: usize },
    Restart { node: usize },
    Advance { seconds: u64 },
    ReconcileExpired { node: usize },
    LowerLimit { pct: u64 },
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    let node = 0..NODES;
    prop_oneof![
        3 => (node.clone(), 1u64..=400_000).prop_map(|(node, want)| Op::Refill { node, want }),
        6 => (node.clone(), 1u64..=60_000).prop_map(|(node, amount)| Op::Spend { node, amount }),
        3 => (node.clone(), prop_oneof![Just(0u64), Just(50), Just(100)])
            .prop_map(|(node, give_back_pct)| Op::Flush { node, give_back_pct }),
        1 => node.clone().prop_map(|node| Op::Crash { node }),
        1 => node.clone().prop_map(|node| Op::Restart { node }),
        1 => (1u64..=40).prop_map(|seconds| Op::Advance { seconds }),
        1 => node.prop_map(|node| Op::ReconcileExpired { node }),
        1 => (50u64..=99).prop_map(|pct| Op::LowerLimit { pct }),
    ]
}

/// A node's view of one lease: what it may still admit against it, and what it settled and
/// has not flushed yet.
#[derive(Debug, Clone)]
struct Held {
    id: u64,
    headroom: u64,
    unflushed: u64,
}

#[derive(Debug, Clone, Default)]
struct Node {
    down: bool,
    leases: Vec<Held>,
}

struct World<'s> {
    store: &'s dyn LedgerStore,
    nodes: Vec<Node>,
    now: i64,
    acknowledged: u64,
    spent_seen: u64,
}

fn name(node: usize) -> String {
    format!("node-{node}")
}

impl World<'_> {
    fn totals(&self) -> (u64, u64, u64) {
        let s = self.store.status(Some("m")).unwrap();
        (s[0].spent_micros, s[0].leased_micros, s[0].limits.total_micros)
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Refill { node, want } if !self.nodes[node].down => {
                let request = GrantRequest {
                    node: name(node),
                    mandate: "m".into(),
                    day: None,
                    want_micros: want,
                    min_micros: (want / 2).max(1),
                    ttl_s: TTL_S,
                    now_unix: self.now,
                };
                if let Some(lease) = self.store.grant(&request).map_err(|e| e.to_string())? {
                    let (spent, leased, limit) = self.totals();
                    if spent + leased > limit {
                        return Err(format!("a grant left spent {spent} + leased {leased} above the limit {limit}"));
                    }
                    self.nodes[node].leases.push(Held { id: lease.id, headroom: lease.amount_micros, unflushed: 0 });
                }
            }
            Op::Spend { node, amount } if !self.nodes[node].down => {
                // The node admits a call only inside a lease it holds.
                if let Some(held) = self.nodes[node].leases.iter_mut().find(|h| h.headroom >= amount) {
                    held.headroom -= amount;
                    held.unflushed += amount;
                    self.acknowledged += amount;
                }
            }
            Op::Flush { node, give_back_pct } if !self.nodes[node].down => {
                let entries: Vec<FlushEntry> = self.nodes[node]
                    .leases
                    .iter()
                    .map(|h| {
                        let give_back = h.headroom * give_back_pct / 100;
                        FlushEntry {
                            lease: h.id,
                            settle_micros: h.unflushed,
                            give_back_micros: give_back,
                            close: give_back == h.headroom,
                            renew_ttl_s: Some(TTL_S),
                        }
                    })
                    .collect();
                let outcomes = self.store.flush(&name(node), &entries, self.now).map_err(|e| e.to_string())?;
                let mut kept = Vec::new();
                for (held, (entry, outcome)) in self.nodes[node].leases.drain(..).zip(entries.iter().zip(&outcomes)) {
                    if outcome.state == LeaseState::Open {
                        kept.push(Held { id: held.id, headroom: held.headroom - entry.give_back_micros, unflushed: 0 });
                    }
                }
                self.nodes[node].leases = kept;
            }
            Op::Crash { node } => self.nodes[node] = Node { down: true, leases: vec![] },
            Op::Restart { node } if self.nodes[node].down => {
                self.store.reconcile(&name(node), self.now, false).map_err(|e| e.to_string())?;
                self.nodes[node].down = false;
            }
            Op::Advance { seconds } => self.now += seconds as i64,
            Op::ReconcileExpired { node } => {
                // Anyone may reconcile a node's expired leases (`holon ledger reconcile`); a
                // live node that did not renew in time learns it on its next flush.
                self.store.reconcile(&name(node), self.now, true).map_err(|e| e.to_string())?;
            }
            Op::LowerLimit { pct } => {
                let (_, _, limit) = self.totals();
                let lower = Limits { total_micros: limit / 100 * pct, per_day_micros: None };
                self.store.publish_limits("m", lower, false).map_err(|e| e.to_string())?;
            }
            _ => {}
        }
        self.check()
    }

    fn check(&mut self) -> Result<(), String> {
        let (spent, leased, _) = self.totals();
        if spent < self.spent_seen {
            return Err(format!("spent fell from {} to {spent}", self.spent_seen));
        }
        self.spent_seen = spent;
        if self.acknowledged > LIMIT_MICROS {
            return Err(format!("{} acknowledged, above the limit {LIMIT_MICROS}", self.acknowledged));
        }
        if self.acknowledged > spent + leased {
            return Err(format!(
                "{} acknowledged but only spent {spent} + leased {leased}: a settlement was lost",
                self.acknowledged
            ));
        }
        Ok(())
    }

    /// Every node stops: a live one flushes and gives everything back, a dead one is
    /// reconciled. Then `spent` must cover everything acknowledged, within the limit.
    fn finish(&mut self) -> Result<(), String> {
        for node in 0..NODES {
            if self.nodes[node].down {
                self.step(&Op::Restart { node })?;
            }
            self.step(&Op::Flush { node, give_back_pct: 100 })?;
        }
        let (spent, leased, _) = self.totals();
        if leased != 0 || spent < self.acknowledged || spent > LIMIT_MICROS {
            return Err(format!("at the end spent {spent}, leased {leased}, acknowledged {}", self.acknowledged));
        }
        Ok(())
    }
}

pub(crate) fn run(store: &dyn LedgerStore, ops: &[Op]) -> Result<(), String> {
    store.publish_limits("m", Limits { total_micros: LIMIT_MICROS, per_day_micros: None }, false).unwrap();
    let mut world = World { store, nodes: vec![Node::default(); NODES], now: 1_000, acknowledged: 0, spent_seen: 0 };
    for op in ops {
        world.step(op).map_err(|e| format!("after {op:?}: {e}"))?;
    }
    world.finish()
}

/// `nodes` threads, each with its own handle from `open` (as separate processes would
/// have), take leases of up to `want` micro-units on mandate "m" and settle two thirds of
/// each, giving the rest back, for at most `rounds_max` leases each or until the store
/// grants nothing more. After every flush `spent + leased <= limit` is checked. Returns
/// what they settled in all.
pub(crate) fn share_one_budget<S: LedgerStore>(
    nodes: usize,
    want: u64,
    rounds_max: usize,
    open: impl Fn() -> S + Sync,
) -> u64 {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..nodes)
            .map(|n| {
                let open = &open;
                s.spawn(move || {
                    let store = open();
                    let node = format!("node-{n}");
                    let mut settled = 0;
                    for _ in 0..rounds_max {
                        let request = GrantRequest {
                            node: node.clone(),
                            mandate: "m".into(),
                            day: None,
                            want_micros: want,
                            min_micros: 1,
                            ttl_s: 30,
                            now_unix: 0,
                        };
                        let Some(lease) = store.grant(&request).unwrap() else { break };
                        let settle = lease.amount_micros - lease.amount_micros / 3;
                        let entry = FlushEntry {
                            lease: lease.id,
                            settle_micros: settle,
                            give_back_micros: lease.amount_micros - settle,
                            close: true,
                            renew_ttl_s: None,
                        };
                        store.flush(&node, &[entry], 0).unwrap();
                        settled += settle;
                        let s = &store.status(Some("m")).unwrap()[0];
                        assert!(s.spent_micros + s.leased_micros <= s.limits.total_micros, "{s:?}");
                    }
                    settled
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    })
}

/// A reconciled lease is kept, so its node's late flush is told `Reconciled` (and moves no
/// money); a closed lease is deleted, so a flush naming it is refused as unknown. On
/// mandate "kept", which the caller's store must not hold yet.
pub(crate) fn reconciled_leases_are_kept_and_closed_ones_deleted(store: &dyn LedgerStore) {
    use holon::store::StoreError;
    store.publish_limits("kept", Limits { total_micros: 1_000_000, per_day_micros: None }, false).unwrap();
    let ask = |node: &str| GrantRequest {
        node: node.into(),
        mandate: "kept".into(),
        day: None,
        want_micros: 1_000,
        min_micros: 1_000,
        ttl_s: 30,
        now_unix: 0,
    };
    let totals = || {
        let s = &store.status(Some("kept")).unwrap()[0];
        (s.spent_micros, s.leased_micros, s.nodes.len())
    };

    let closed = store.grant(&ask("a")).unwrap().unwrap();
    let close =
        FlushEntry { lease: closed.id, settle_micros: 400, give_back_micros: 600, close: true, renew_ttl_s: None };
    assert_eq!(store.flush("a", &[close], 0).unwrap()[0].state, LeaseState::Closed);
    let late = FlushEntry { lease: closed.id, ..FlushEntry::default() };
    match store.flush("a", &[late], 1) {
        Err(StoreError::UnknownLease(id)) => assert_eq!(id, closed.id),
        other => panic!("a flush naming a closed lease: {other:?}"),
    }

    let reconciled = store.grant(&ask("b")).unwrap().unwrap();
    let part = FlushEntry { lease: reconciled.id, settle_micros: 100, renew_ttl_s: Some(30), ..FlushEntry::default() };
    assert_eq!(store.flush("b", &[part], 0).unwrap()[0].state, LeaseState::Open);
    let done = store.reconcile("b", 5, false).unwrap();
    assert_eq!(done.counted_micros, 900);
    assert_eq!(totals(), (400 + 100 + 900, 0, 0));
    // Later, and again much later: the lease is still there to say so, and nothing moves.
    for now_unix in [10, 100_000] {
        let late = FlushEntry {
            lease: reconciled.id,
            settle_micros: 50,
            give_back_micros: 10,
            close: true,
            renew_ttl_s: Some(30),
        };
        let out = store.flush("b", &[late], now_unix).unwrap();
        assert_eq!((out[0].lease, out[0].state, out[0].outstanding_micros), (reconciled.id, LeaseState::Reconciled, 0));
        assert_eq!(totals(), (1_400, 0, 0));
    }
    assert_eq!(store.reconcile("b", 200_000, true).unwrap().counted_micros, 0);
}
