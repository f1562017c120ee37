//! The store's escrow protocol as a model-checked state machine: random sequences of
//! nodes taking leases, admitting calls against them, flushing settlements (group commits),
//! giving budget back, crashing, restarting, being reconciled after their time to live, and
//! limits lowered under live leases, against an oracle of the money acknowledged to callers.
//!
//! After every step: `spent` never falls; a grant leaves `spent + leased <= limit`; no more
//! was ever acknowledged than the limit; and every acknowledged micro-unit is in `spent` or
//! still held in an open lease (`acknowledged <= spent + leased`), so a crash can cost
//! under-use of the budget but never a lost settlement. At the end every node stops and
//! `spent` covers everything acknowledged. A deliberately broken store (a reconcile that
//! gives a dead node's remainder back) is caught.

use holon::store::{FlushEntry, GrantRequest, LeaseState, LedgerStore, Limits, MemoryStore};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

const NODES: usize = 3;
const LIMIT_MICROS: u64 = 1_000_000;
const TTL_S: u64 = 30;

#[derive(Debug, Clone)]
enum Op {
    Refill { node: usize, want: u64 },
    Spend { node: usize, amount: u64 },
    Flush { node: usize, give_back_pct: u64 },
    Crash { node: usize },
    Restart { node: usize },
    Advance { seconds: u64 },
    ReconcileExpired { node: usize },
    LowerLimit { pct: u64 },
}

fn op() -> impl Strategy<Value = Op> {
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
                    min_micros: 1,
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

fn run(store: &dyn LedgerStore, ops: &[Op]) -> Result<(), String> {
    store.publish_limits("m", Limits { total_micros: LIMIT_MICROS, per_day_micros: None }, false).unwrap();
    let mut world = World { store, nodes: vec![Node::default(); NODES], now: 1_000, acknowledged: 0, spent_seen: 0 };
    for op in ops {
        world.step(op).map_err(|e| format!("after {op:?}: {e}"))?;
    }
    world.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn the_memory_store_keeps_every_invariant(ops in proptest::collection::vec(op(), 1..80)) {
        let store = MemoryStore::new();
        prop_assert_eq!(run(&store, &ops), Ok(()));
    }
}

/// The same model on the embedded store: a fresh SQLite file per case (every step is a
/// durable transaction, so fewer cases).
#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use holon::store::sqlite::SqliteStore;

    pub(super) fn temp_store(tag: &str) -> (SqliteStore, std::path::PathBuf) {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "holon-store-{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        (SqliteStore::open(&dir.join("ledger.db")).unwrap(), dir)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn the_sqlite_store_keeps_every_invariant(ops in proptest::collection::vec(op(), 1..60)) {
            let (store, dir) = temp_store("model");
            let result = run(&store, &ops);
            drop(store);
            std::fs::remove_dir_all(dir).unwrap();
            prop_assert_eq!(result, Ok(()));
        }
    }

    /// Two handles on one file (as two processes would have): many grants and flushes
    /// interleaved by two threads never take spent + leased above the limit, and at the end
    /// spent is exactly what both settled.
    #[test]
    fn two_handles_on_one_file_share_one_budget() {
        let (first, dir) = temp_store("shared");
        first.publish_limits("m", Limits { total_micros: 50_000, per_day_micros: None }, false).unwrap();
        let path = dir.join("ledger.db");
        let settled: Vec<u64> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|n| {
                    let path = path.clone();
                    s.spawn(move || {
                        let store = SqliteStore::open(&path).unwrap();
                        let node = format!("node-{n}");
                        let mut settled = 0;
                        for _ in 0..60 {
                            let request = GrantRequest {
                                node: node.clone(),
                                mandate: "m".into(),
                                day: None,
                                want_micros: 1_000,
                                min_micros: 1,
                                ttl_s: 30,
                                now_unix: 0,
                            };
                            let Some(lease) = store.grant(&request).unwrap() else { break };
                            let settle = lease.amount_micros / 2;
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
                            assert!(s.spent_micros + s.leased_micros <= s.limits.total_micros);
                        }
                        settled
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let s = &first.status(Some("m")).unwrap()[0];
        assert_eq!((s.spent_micros, s.leased_micros), (settled.iter().sum::<u64>(), 0));
        drop(first);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_store_from_a_newer_schema_is_refused_untouched() {
        let (store, dir) = temp_store("newer");
        drop(store);
        let path = dir.join("ledger.db");
        let conn = rusqlite_free_bump(&path);
        assert!(conn);
        let before = std::fs::read(&path).unwrap();
        let err = SqliteStore::open(&path).unwrap_err().to_string();
        assert!(err.contains("newer holon") && err.contains("upgrade"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Sets the file's schema version one above this build's, with the sqlite3 tool's
    /// file format knowledge only: `user_version` is the big-endian u32 at byte 60.
    fn rusqlite_free_bump(path: &std::path::Path) -> bool {
        let mut bytes = std::fs::read(path).unwrap();
        let version = (holon::store::sqlite::SCHEMA_VERSION + 1) as u32;
        bytes[60..64].copy_from_slice(&version.to_be_bytes());
        std::fs::write(path, bytes).is_ok()
    }
}

#[test]
fn a_store_whose_reconcile_gives_back_is_caught() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = proptest::collection::vec(op(), 1..80);
    let caught = (0..500).find_map(|_| {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        run(&MemoryStore::broken_reconcile_gives_back(), &ops).err()
    });
    let caught = caught.expect("500 random runs never caught the broken reconcile");
    assert!(caught.contains("a settlement was lost") || caught.contains("acknowledged"), "{caught}");
}

#[test]
fn a_limit_lowered_under_a_live_lease_stops_new_grants_but_not_the_lease() {
    let store = MemoryStore::new();
    store.publish_limits("m", Limits { total_micros: 1_000, per_day_micros: None }, false).unwrap();
    let ask = |node: &str, want| GrantRequest {
        node: node.into(),
        mandate: "m".into(),
        day: None,
        want_micros: want,
        min_micros: 1,
        ttl_s: 30,
        now_unix: 0,
    };
    let a = store.grant(&ask("a", 600)).unwrap().unwrap();
    // Node b publishes older documents with a lower total: the store takes the lower one.
    let now = store.publish_limits("m", Limits { total_micros: 500, per_day_micros: None }, false).unwrap();
    assert_eq!(now.total_micros, 500);
    // A publish can never raise it back; only the explicit command does.
    assert_eq!(
        store.publish_limits("m", Limits { total_micros: 1_000, per_day_micros: None }, false).unwrap().total_micros,
        500
    );
    // No new lease while spent + leased is at or above the lowered limit.
    assert_eq!(store.grant(&ask("b", 1)).unwrap(), None);
    // Node a's lease stays valid: what it admitted against it is settled.
    let out = store
        .flush(
            "a",
            &[FlushEntry { lease: a.id, settle_micros: 550, give_back_micros: 50, close: true, renew_ttl_s: None }],
            0,
        )
        .unwrap();
    assert_eq!(out[0].state, LeaseState::Closed);
    let status = &store.status(Some("m")).unwrap()[0];
    assert_eq!((status.spent_micros, status.leased_micros), (550, 0));
    // Over the lowered limit by what the live lease spent: still no grant.
    assert_eq!(store.grant(&ask("b", 1)).unwrap(), None);
    // The operator raises it explicitly.
    store.publish_limits("m", Limits { total_micros: 1_000, per_day_micros: None }, true).unwrap();
    assert_eq!(store.grant(&ask("b", 1_000)).unwrap().unwrap().amount_micros, 450);
}

#[test]
fn bad_flushes_change_nothing() {
    let store = MemoryStore::new();
    store.publish_limits("m", Limits { total_micros: 1_000, per_day_micros: None }, false).unwrap();
    let ask = GrantRequest {
        node: "a".into(),
        mandate: "m".into(),
        day: None,
        want_micros: 100,
        min_micros: 1,
        ttl_s: 30,
        now_unix: 0,
    };
    let lease = store.grant(&ask).unwrap().unwrap();
    let before = store.status(None).unwrap();
    let good = FlushEntry { lease: lease.id, settle_micros: 10, ..FlushEntry::default() };
    // More than the lease holds, another node's lease, an unknown lease: refused whole,
    // including the good entry before it.
    for bad in [
        FlushEntry { lease: lease.id, settle_micros: 60, give_back_micros: 41, ..FlushEntry::default() },
        FlushEntry { lease: 999, settle_micros: 1, ..FlushEntry::default() },
        FlushEntry { lease: lease.id, settle_micros: u64::MAX, give_back_micros: 2, ..FlushEntry::default() },
    ] {
        assert!(store.flush("a", &[good, bad], 0).is_err(), "{bad:?}");
        assert_eq!(store.status(None).unwrap(), before);
    }
    assert!(store.flush("b", &[good], 0).is_err(), "another node's lease");
    assert_eq!(store.status(None).unwrap(), before);
    // A per-day mandate asked without a day: refused.
    store.publish_limits("d", Limits { total_micros: 1_000, per_day_micros: Some(100) }, false).unwrap();
    assert!(store.grant(&GrantRequest { mandate: "d".into(), ..ask.clone() }).is_err());
    assert!(store.grant(&GrantRequest { mandate: "nope".into(), ..ask }).is_err());
}
