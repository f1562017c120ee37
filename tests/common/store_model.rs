//! The store's escrow protocol as a state machine, shared by the store tests: random
//! sequences of nodes taking leases on two mandates (one with a `per_day` limit), admitting
//! calls against them, flushing, giving back, crashing, restarting, being reconciled,
//! limits lowered, and UTC days passing, checked after every step against an oracle of the
//! money acknowledged to callers (see tests/store_model.rs).

use std::collections::{BTreeMap, BTreeSet};

use holon::store::{FlushEntry, GrantRequest, LeaseState, LedgerStore, StoreLimits};
use proptest::prelude::*;

pub(crate) const NODES: usize = 3;
pub(crate) const LIMIT_MICROS: u64 = 1_000_000;
/// The per-day limit of mandate "d": less than a third of its total, so days run out.
pub(crate) const DAY_LIMIT_MICROS: u64 = 300_000;
pub(crate) const TTL_S: u64 = 30;
const DAY_S: i64 = 86_400;

/// The model's mandates: "m" with a total only, "d" with a total and a per-day limit.
pub(crate) const MANDATES: [(&str, StoreLimits); 2] = [
    ("m", StoreLimits { total_micros: LIMIT_MICROS, per_day_micros: None }),
    ("d", StoreLimits { total_micros: LIMIT_MICROS, per_day_micros: Some(DAY_LIMIT_MICROS) }),
];

/// One day row as the store holds it: (mandate, UTC day, spent, leased). The model reads
/// them through a function its caller gives for each backend (the trait has no such read).
pub(crate) type DayFigures = (String, u64, u64, u64);

#[derive(Debug, Clone)]
pub(crate) enum Op {
    Refill {
        node: usize,
        mandate: usize,
        want: u64,
    },
    Spend {
        node: usize,
        mandate: usize,
        amount: u64,
    },
    Flush {
        node: usize,
        give_back_pct: u64,
    },
    Crash {
        node: usize,
    },
    Restart {
        node: usize,
    },
    Advance {
        seconds: u64,
    },
    /// To the next UTC day, `offset_s` seconds into it.
    NextDay {
        offset_s: u64,
    },
    ReconcileExpired {
        node: usize,
    },
    LowerLimit {
        mandate: usize,
        pct: u64,
    },
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    let node = 0..NODES;
    let mandate = 0..MANDATES.len();
    prop_oneof![
        3 => (node.clone(), mandate.clone(), 1u64..=400_000)
            .prop_map(|(node, mandate, want)| Op::Refill { node, mandate, want }),
        6 => (node.clone(), mandate.clone(), 1u64..=60_000)
            .prop_map(|(node, mandate, amount)| Op::Spend { node, mandate, amount }),
        3 => (node.clone(), prop_oneof![Just(0u64), Just(50), Just(100)])
            .prop_map(|(node, give_back_pct)| Op::Flush { node, give_back_pct }),
        1 => node.clone().prop_map(|node| Op::Crash { node }),
        1 => node.clone().prop_map(|node| Op::Restart { node }),
        1 => (1u64..=40).prop_map(|seconds| Op::Advance { seconds }),
        1 => (0u64..=3_600).prop_map(|offset_s| Op::NextDay { offset_s }),
        1 => node.prop_map(|node| Op::ReconcileExpired { node }),
        1 => (mandate, 50u64..=99).prop_map(|(mandate, pct)| Op::LowerLimit { mandate, pct }),
    ]
}

/// A node's view of one lease: its mandate and day, what it may still admit against it,
/// and what it settled and has not flushed yet.
#[derive(Debug, Clone)]
struct Held {
    id: u64,
    mandate: usize,
    day: Option<u64>,
    headroom: u64,
    unflushed: u64,
}

#[derive(Debug, Clone, Default)]
struct Node {
    down: bool,
    leases: Vec<Held>,
}

/// What a run exercised: the mandates and the UTC days leases were granted on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Covered {
    pub(crate) mandates: BTreeSet<usize>,
    pub(crate) days: BTreeSet<u64>,
}

/// A mandate's or a day's figures as last seen: `spent` never falls, and `spent + leased`
/// stays within the limit, or, after a limit was lowered under live leases, never grows.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    spent: u64,
    sum: u64,
}

impl Seen {
    fn step(&mut self, what: &str, spent: u64, leased: u64, limit: u64) -> Result<(), String> {
        if spent < self.spent {
            return Err(format!("{what}: spent fell from {} to {spent}", self.spent));
        }
        let sum = spent + leased;
        if sum > limit.max(self.sum) {
            return Err(format!(
                "{what}: spent {spent} + leased {leased} is above the limit {limit} (and above the {} before)",
                self.sum
            ));
        }
        *self = Seen { spent, sum };
        Ok(())
    }
}

struct World<'s> {
    store: &'s dyn LedgerStore,
    days: &'s mut dyn FnMut() -> Vec<DayFigures>,
    nodes: Vec<Node>,
    now: i64,
    /// Acknowledged to callers, per mandate and per (mandate, day) for day leases.
    acknowledged: [u64; MANDATES.len()],
    acknowledged_day: BTreeMap<(usize, u64), u64>,
    seen: [Seen; MANDATES.len()],
    seen_day: BTreeMap<(String, u64), Seen>,
    covered: Covered,
}

fn name(node: usize) -> String {
    format!("node-{node}")
}

fn today(now: i64) -> u64 {
    u64::try_from(now.div_euclid(DAY_S)).unwrap()
}

impl World<'_> {
    /// (spent, leased, limits) of a mandate.
    fn totals(&self, mandate: usize) -> (u64, u64, StoreLimits) {
        let s = self.store.status(Some(MANDATES[mandate].0)).unwrap();
        (s[0].spent_micros, s[0].leased_micros, s[0].limits)
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Refill { node, mandate, want } if !self.nodes[node].down => {
                let (id, limits) = MANDATES[mandate];
                // A node's clock and its day agree: a per-day lease names today.
                let day = limits.per_day_micros.map(|_| today(self.now));
                let request = GrantRequest {
                    node: name(node),
                    mandate: id.into(),
                    day,
                    want_micros: want,
                    min_micros: (want / 2).max(1),
                    ttl_s: TTL_S,
                    now_unix: self.now,
                };
                if let Some(lease) = self.store.grant(&request).map_err(|e| e.to_string())? {
                    self.covered.mandates.insert(mandate);
                    self.covered.days.extend(day);
                    let held = Held { id: lease.id, mandate, day, headroom: lease.amount_micros, unflushed: 0 };
                    self.nodes[node].leases.push(held);
                }
            }
            Op::Spend { node, mandate, amount } if !self.nodes[node].down => {
                // The node admits a call only inside a lease it holds.
                if let Some(held) =
                    self.nodes[node].leases.iter_mut().find(|h| h.mandate == mandate && h.headroom >= amount)
                {
                    held.headroom -= amount;
                    held.unflushed += amount;
                    self.acknowledged[mandate] += amount;
                    if let Some(day) = held.day {
                        *self.acknowledged_day.entry((mandate, day)).or_default() += amount;
                    }
                }
            }
            Op::Flush { node, give_back_pct } if !self.nodes[node].down => {
                // One batch over the node's leases on every mandate.
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
                            expect_outstanding_micros: None,
                        }
                    })
                    .collect();
                let outcomes = self.store.flush(&name(node), &entries, self.now).map_err(|e| e.to_string())?;
                let mut kept = Vec::new();
                for (held, (entry, outcome)) in self.nodes[node].leases.drain(..).zip(entries.iter().zip(&outcomes)) {
                    if outcome.state == LeaseState::Open {
                        kept.push(Held { headroom: held.headroom - entry.give_back_micros, unflushed: 0, ..held });
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
            Op::NextDay { offset_s } => self.now = (self.now.div_euclid(DAY_S) + 1) * DAY_S + offset_s as i64,
            Op::ReconcileExpired { node } => {
                // Anyone may reconcile a node's expired leases (`holon ledger reconcile`); a
                // live node that did not renew in time learns it on its next flush.
                self.store.reconcile(&name(node), self.now, true).map_err(|e| e.to_string())?;
            }
            Op::LowerLimit { mandate, pct } => {
                let (_, _, limits) = self.totals(mandate);
                let lower = StoreLimits {
                    total_micros: limits.total_micros / 100 * pct,
                    per_day_micros: limits.per_day_micros.map(|d| d / 100 * pct),
                };
                self.store.publish_limits(MANDATES[mandate].0, lower, false).map_err(|e| e.to_string())?;
            }
            _ => {}
        }
        self.check()
    }

    /// After every step, per mandate and per day row: `spent` never falls; `spent + leased`
    /// within the limit (or not growing, above a limit lowered under live leases); no more
    /// acknowledged than the limit it started with; and every acknowledged micro-unit in
    /// `spent` or still leased (a crash can cost under-use, never a lost settlement).
    fn check(&mut self) -> Result<(), String> {
        let mut limits = [None; MANDATES.len()];
        for (i, (id, start)) in MANDATES.iter().enumerate() {
            let (spent, leased, now) = self.totals(i);
            limits[i] = Some((spent, leased, now));
            self.seen[i].step(&format!("mandate {id}"), spent, leased, now.total_micros)?;
            let acknowledged = self.acknowledged[i];
            if acknowledged > start.total_micros {
                return Err(format!(
                    "mandate {id}: {acknowledged} acknowledged, above the limit {}",
                    start.total_micros
                ));
            }
            if acknowledged > spent + leased {
                return Err(format!(
                    "mandate {id}: {acknowledged} acknowledged but only spent {spent} + leased {leased}: a settlement was lost"
                ));
            }
        }
        let rows = (self.days)();
        let mut day_totals = [(0u64, 0u64); MANDATES.len()];
        for (mandate, day, spent, leased) in &rows {
            let i = MANDATES.iter().position(|(id, _)| id == mandate).ok_or(format!("a day row of `{mandate}`"))?;
            let Some((_, _, StoreLimits { per_day_micros: Some(per_day), .. })) = limits[i] else {
                return Err(format!("a day row of `{mandate}`, which has no per_day"));
            };
            let seen = self.seen_day.entry((mandate.clone(), *day)).or_default();
            seen.step(&format!("mandate {mandate} day {day}"), *spent, *leased, per_day)?;
            day_totals[i].0 += spent;
            day_totals[i].1 += leased;
        }
        for (&(i, day), &acknowledged) in &self.acknowledged_day {
            let (id, start) = MANDATES[i];
            let (spent, leased) = rows
                .iter()
                .find(|r| r.0 == id && r.1 == day)
                .map(|r| (r.2, r.3))
                .ok_or(format!("{acknowledged} acknowledged on day {day} of {id}, which has no day row"))?;
            if start.per_day_micros.is_none_or(|cap| acknowledged > cap) {
                return Err(format!("{id} day {day}: {acknowledged} acknowledged, above the per_day {start:?}"));
            }
            if acknowledged > spent + leased {
                return Err(format!(
                    "{id} day {day}: {acknowledged} acknowledged but only spent {spent} + leased {leased}: a settlement was lost"
                ));
            }
        }
        // Every lease on a per-day mandate draws on a day: the days add up to its totals.
        for (i, (id, start)) in MANDATES.iter().enumerate() {
            if let (Some(_), Some((spent, leased, _))) = (start.per_day_micros, limits[i])
                && day_totals[i] != (spent, leased)
            {
                return Err(format!(
                    "{id}: its days add up to {:?}, its totals are {:?}",
                    day_totals[i],
                    (spent, leased)
                ));
            }
        }
        Ok(())
    }

    /// Every node stops: a live one flushes and gives everything back, a dead one is
    /// reconciled. Then `spent` must cover everything acknowledged, within the limit, on
    /// each mandate and each day.
    fn finish(&mut self) -> Result<(), String> {
        for node in 0..NODES {
            if self.nodes[node].down {
                self.step(&Op::Restart { node })?;
            }
            self.step(&Op::Flush { node, give_back_pct: 100 })?;
        }
        for (i, (id, start)) in MANDATES.iter().enumerate() {
            let (spent, leased, _) = self.totals(i);
            if leased != 0 || spent < self.acknowledged[i] || spent > start.total_micros {
                return Err(format!(
                    "at the end {id}: spent {spent}, leased {leased}, acknowledged {}",
                    self.acknowledged[i]
                ));
            }
        }
        for (mandate, day, spent, leased) in (self.days)() {
            let i = MANDATES.iter().position(|(id, _)| *id == mandate).unwrap_or(0);
            let acknowledged = self.acknowledged_day.get(&(i, day)).copied().unwrap_or(0);
            if leased != 0 || spent < acknowledged || spent > DAY_LIMIT_MICROS {
                return Err(format!(
                    "at the end {mandate} day {day}: spent {spent}, leased {leased}, acknowledged {acknowledged}"
                ));
            }
        }
        Ok(())
    }
}

/// Runs `ops` on `store` from an empty start; `days` reads the store's day rows. Returns
/// what the run exercised, or the first broken invariant and the step after which it broke.
pub(crate) fn run(
    store: &dyn LedgerStore,
    days: &mut dyn FnMut() -> Vec<DayFigures>,
    ops: &[Op],
) -> Result<Covered, String> {
    for (id, limits) in MANDATES {
        store.publish_limits(id, limits, false).unwrap();
    }
    let mut world = World {
        store,
        days,
        nodes: vec![Node::default(); NODES],
        now: 1_000,
        acknowledged: [0; MANDATES.len()],
        acknowledged_day: BTreeMap::new(),
        seen: [Seen::default(); MANDATES.len()],
        seen_day: BTreeMap::new(),
        covered: Covered::default(),
    };
    for op in ops {
        world.step(op).map_err(|e| format!("after {op:?}: {e}"))?;
    }
    world.finish()?;
    Ok(world.covered)
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
                            expect_outstanding_micros: None,
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
pub(crate) fn reconciled_and_closed_leases_are_kept(store: &dyn LedgerStore) {
    use holon::store::StoreError;
    store.publish_limits("kept", StoreLimits { total_micros: 1_000_000, per_day_micros: None }, false).unwrap();
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
    let close = FlushEntry {
        lease: closed.id,
        settle_micros: 400,
        give_back_micros: 600,
        close: true,
        renew_ttl_s: None,
        expect_outstanding_micros: None,
    };
    assert_eq!(store.flush("a", &[close], 0).unwrap()[0].state, LeaseState::Closed);
    // A closed lease is kept (a repeated flush must find it): naming it moves nothing, and
    // money through it is refused.
    let late = FlushEntry { lease: closed.id, ..FlushEntry::default() };
    assert_eq!(store.flush("a", &[late], 1).unwrap()[0].state, LeaseState::Closed);
    let more = FlushEntry { lease: closed.id, settle_micros: 1, ..FlushEntry::default() };
    match store.flush("a", &[more], 1) {
        Err(StoreError::Escrow(holon::store::EscrowError::LeaseClosed { lease })) => assert_eq!(lease, closed.id),
        other => panic!("money through a closed lease: {other:?}"),
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
            expect_outstanding_micros: None,
        };
        let out = store.flush("b", &[late], now_unix).unwrap();
        assert_eq!((out[0].lease, out[0].state, out[0].outstanding_micros), (reconciled.id, LeaseState::Reconciled, 0));
        assert_eq!(totals(), (1_400, 0, 0));
    }
    assert_eq!(store.reconcile("b", 200_000, true).unwrap().counted_micros, 0);
}
