//! Random trees of sub-mandates (chains of at most 4 mandates) with random limits, random
//! calls, settles, releases, drops and expiries, against a model of hierarchical
//! reservation (docs/admission.md, "Calls under a sub-mandate"): after every step each
//! level's ledger holds exactly what the model says (its own calls and its descendants'),
//! never above its limit; every decision is the model's (allowed iff the worst case fits
//! every level; a denial names the topmost level it does not fit); and after a parallel
//! phase every level's spend is, to the micro-unit, the sum of what the calls under it kept.

use holon::engine::{Admission, Call, Engine, EngineConfig, Reservation, synthetic};
use holon::mandate::Mandate;
use holon::money::Amount;
use holon::time::Timestamp;
use proptest::prelude::*;
use std::sync::Arc;

/// `syn/a1`'s worst case (0.001 USD at 0.92), in micro-units.
const WORST: u64 = 920;
const LEVELS_MAX: usize = 4;

#[derive(Debug, Clone)]
struct Tree {
    root_micros: u64,
    /// (parent choice, share of the parent's total in thousandths) per child.
    children: Vec<(usize, u64)>,
}

#[derive(Debug, Clone)]
enum Op {
    Admit(usize),
    Settle(usize, u64),
    Release(usize),
    Drop(usize),
    Reclaim,
}

fn tree() -> impl Strategy<Value = Tree> {
    (1_000u64..25_000, prop::collection::vec((0usize..100, 1u64..=1_000), 1..7))
        .prop_map(|(root_micros, children)| Tree { root_micros, children })
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0usize..8).prop_map(Op::Admit),
        2 => (0usize..8, 0u64..1_200).prop_map(|(s, a)| Op::Settle(s, a)),
        1 => (0usize..8).prop_map(Op::Release),
        1 => (0usize..8).prop_map(Op::Drop),
        1 => Just(Op::Reclaim),
    ];
    prop::collection::vec(op, 1..60)
}

/// The published tree: ids, each node's chain (itself first, root last), totals.
struct Built {
    ids: Vec<String>,
    chains: Vec<Vec<usize>>,
    totals: Vec<u64>,
    input: holon::engine::SnapshotInput,
    at: Timestamp,
}

fn build(tree: &Tree) -> Built {
    let shape = synthetic::Shape { agents: 2, mandates: 1, total: Amount::from_micros(tree.root_micros) };
    let net = synthetic::network(&shape).unwrap();
    let mut root: Mandate = (*net.input.mandates[0]).clone();
    root.delegation.max_depth = 4;
    let mut docs = vec![root];
    let (mut ids, mut chains, mut totals) = (vec!["m0".to_owned()], vec![vec![0]], vec![tree.root_micros]);
    for (i, (choice, share)) in tree.children.iter().enumerate() {
        let eligible: Vec<usize> = (0..docs.len()).filter(|&n| chains[n].len() < LEVELS_MAX).collect();
        let parent = eligible[choice % eligible.len()];
        let total = (totals[parent] * share / 1_000).max(1);
        let id = format!("{}/c{i}", ids[parent]);
        docs.push(synthetic::sub_mandate(&docs[parent], &id, Amount::from_micros(total)).unwrap());
        let mut chain = vec![docs.len() - 1];
        chain.extend(&chains[parent]);
        ids.push(id);
        chains.push(chain);
        totals.push(total);
    }
    let mut input = net.input;
    input.mandates = docs.into_iter().map(Arc::new).collect();
    Built { ids, chains, totals, input, at: net.at }
}

fn clock() -> Timestamp {
    Timestamp::from_unix(synthetic::AT_UNIX)
}

/// What the model holds per node: the spend counted on it (its calls and its descendants').
struct Model {
    spent: Vec<u64>,
    /// Of `spent`: the worst cases of reclaimed reservations dropped unsettled (claimed for
    /// good, never settled: the audit counts them as still reserved).
    stranded: Vec<u64>,
}

impl Model {
    fn add(&mut self, chain: &[usize], micros: u64) {
        for &n in chain {
            self.spent[n] += micros;
        }
    }
    fn sub(&mut self, chain: &[usize], micros: u64) {
        for &n in chain {
            self.spent[n] -= micros;
        }
    }
}

struct Open<'e> {
    reservation: Reservation<'e>,
    node: usize,
    reclaimed: bool,
}

fn check(engine: &Engine, built: &Built, model: &Model) -> Result<(), TestCaseError> {
    for (n, id) in built.ids.iter().enumerate() {
        let ledger = engine.ledger(engine.mandate_ix(id).unwrap()).unwrap();
        prop_assert_eq!(ledger.spent_micros(), model.spent[n], "{}: spend", id);
        prop_assert!(ledger.claimed_micros() <= built.totals[n], "{}: over its total", id);
    }
    Ok(())
}

fn run(tree: &Tree, ops: &[Op], parallel: &[usize]) -> Result<(), TestCaseError> {
    let built = build(tree);
    let engine = Engine::new(EngineConfig { clock, ..EngineConfig::default() });
    engine.publish(&built.input).unwrap();
    prop_assert!(engine.snapshot().untrusted().is_empty());
    let agent = engine.agent_ix("syn/a1").unwrap();
    let call = |n: usize| Call::new(engine.mandate_ix(&built.ids[n]).unwrap(), agent, built.at);
    let nodes = built.ids.len();
    let mut model = Model { spent: vec![0; nodes], stranded: vec![0; nodes] };
    let mut open: Vec<Open<'_>> = Vec::new();
    for op in ops {
        match *op {
            Op::Admit(n) => {
                let n = n % nodes;
                let chain = &built.chains[n];
                let fits = |m: &usize| model.spent[*m] + WORST <= built.totals[*m];
                match engine.admit(&call(n)) {
                    Admission::Allowed(r) => {
                        prop_assert!(chain.iter().all(fits), "allowed past a level's limit");
                        prop_assert_eq!(r.worst_case().micros(), WORST);
                        model.add(chain, WORST);
                        open.push(Open { reservation: r, node: n, reclaimed: false });
                    }
                    Admission::Denied(d) => {
                        // Reserved root first, the sub-mandate's own ledger last.
                        let blocking = chain.iter().rev().find(|m| !fits(m)).copied();
                        prop_assert!(blocking.is_some(), "denied {:?} though it fits every level", d.codes);
                        let named =
                            d.spent.limited_by.map(|ix| engine.snapshot().mandate(ix).unwrap().source().id.clone());
                        let expected = blocking.filter(|&b| b != n).map(|b| built.ids[b].clone());
                        prop_assert_eq!(named, expected);
                    }
                    Admission::Held(_) => prop_assert!(false, "held"),
                }
            }
            Op::Settle(s, actual) if !open.is_empty() => {
                let o = open.swap_remove(s % open.len());
                let settled = o.reservation.settle(Amount::from_micros(actual), built.at).unwrap();
                prop_assert_eq!(settled.late, o.reclaimed);
                prop_assert_eq!(settled.kept.micros(), actual.min(WORST));
                model.sub(&built.chains[o.node], WORST - actual.min(WORST));
            }
            Op::Release(s) if !open.is_empty() => {
                let o = open.swap_remove(s % open.len());
                o.reservation.release(built.at).unwrap();
                model.sub(&built.chains[o.node], WORST);
            }
            Op::Drop(s) if !open.is_empty() => {
                let o = open.swap_remove(s % open.len());
                drop(o.reservation);
                // A reclaimed reservation dropped unsettled keeps its worst case.
                if o.reclaimed {
                    built.chains[o.node].iter().for_each(|&m| model.stranded[m] += WORST);
                } else {
                    model.sub(&built.chains[o.node], WORST);
                }
            }
            Op::Reclaim => {
                let active = open.iter().filter(|o| !o.reclaimed).count();
                prop_assert_eq!(engine.reclaim_expired(Timestamp::from_unix(built.at.unix() + 1_000_000)), active);
                open.iter_mut().for_each(|o| o.reclaimed = true);
            }
            _ => {}
        }
        check(&engine, &built, &model)?;
    }
    for o in open.drain(..) {
        let node = o.node;
        o.reservation.release(built.at).unwrap();
        model.sub(&built.chains[node], WORST);
    }
    check(&engine, &built, &model)?;
    // In parallel: two threads admit and settle at the worst case under the nodes given.
    let kept: Vec<Vec<usize>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let (engine, call) = (&engine, &call);
                scope.spawn(move || {
                    let mut allowed = Vec::new();
                    for (i, n) in parallel.iter().enumerate() {
                        let n = (n + t + i) % nodes;
                        if let Admission::Allowed(r) = engine.admit(&call(n)) {
                            r.settle(Amount::from_micros(WORST), built.at).unwrap();
                            allowed.push(n);
                        }
                    }
                    allowed
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for n in kept.into_iter().flatten() {
        model.add(&built.chains[n], WORST);
    }
    check(&engine, &built, &model)?;
    for (n, id) in built.ids.iter().enumerate() {
        let ledger = engine.ledger(engine.mandate_ix(id).unwrap()).unwrap();
        ledger.refund_all_leases();
        let audit = ledger.audit(model.stranded[n]);
        prop_assert!(audit.is_ok(), "{}: {:?}", id, audit);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_level_holds_and_sums_exactly(tree in tree(), ops in ops(), parallel in prop::collection::vec(0usize..8, 0..40)) {
        run(&tree, &ops, &parallel)?;
    }
}
