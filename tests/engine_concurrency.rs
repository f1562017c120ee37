//! Budget safety under real threads, and the ledger against a sequential model.
//! (The exhaustive interleavings are in `loom-tests/`.)

use holon::admission::Code;
use holon::engine::internals::{Charge, Ledger, LedgerLimits};
use holon::engine::{Admission, Call, Engine, EngineConfig, synthetic};
use holon::money::Amount;
use proptest::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Two threads hammer one mandate whose budget holds only five reservations of 0.00092 at
/// once (too tight for leases: every call is exact), while settling (mostly at 0, every
/// 1000th at 1 micro-unit, so the budget stays contested for the whole run), releasing,
/// holding and dropping reservations; a third thread watches the ledger. No observation
/// may exceed the limit, and at the end `used == settled == sum of kept`.
#[test]
fn threads_never_overrun_a_tight_budget() {
    hammer("0.005", false, |i| u64::from(i % 1000 == 0));
}

/// The same with a budget large enough for leases (0.00092 x 32 per lease), spent a few
/// micro-units per call so that it runs out during the run: the threads go from leases
/// to exact reservations and to denials that take the other thread's lease back.
#[test]
fn threads_never_overrun_a_budget_spent_through_leases() {
    hammer("3", true, |i| 3 + i % 8);
}

fn hammer(total: &str, leases: bool, keep: fn(u64) -> u64) {
    let total = Amount::parse(total).unwrap();
    let net = synthetic::network(&synthetic::Shape { agents: 4, mandates: 1, total }).unwrap();
    let engine = Engine::new(EngineConfig::default());
    engine.publish(&net.input).unwrap();
    let call = Call::new(engine.mandate_ix("m0").unwrap(), engine.agent_ix("syn/a1").unwrap(), net.at);
    let ledger = engine.ledger(call.mandate).unwrap();
    // Whether this budget is leased: one call, then what waits in a lease.
    let Admission::Allowed(r) = engine.admit(&call) else { panic!("the first call is allowed") };
    r.release(call.at).unwrap();
    assert_eq!(ledger.claimed_micros() > ledger.spent_micros(), leases, "a lease is taken iff the budget allows");
    ledger.refund_all_leases();
    let ops_per_thread: u64 = if cfg!(debug_assertions) { 1_000_000 } else { 2_000_000 };
    let kept_total = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let max_seen = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut max = 0;
            while !done.load(Ordering::Relaxed) {
                // The claimed word (reserved + settled + leased) bounds reserved + settled.
                let used = ledger.claimed_micros();
                assert!(used <= total.micros(), "observed {used} > {}", total.micros());
                max = max.max(used);
            }
            max
        });
        let workers: Vec<_> = (0..2u64)
            .map(|t| {
                let (engine, kept_total) = (&engine, &kept_total);
                s.spawn(move || {
                    let (mut kept, mut allowed, mut denied) = (0u64, 0u64, 0u64);
                    let mut slow_drain = Vec::new();
                    for i in 0..ops_per_thread {
                        match engine.admit(&call) {
                            Admission::Allowed(r) => {
                                allowed += 1;
                                match (i + t) % 4 {
                                    0 | 1 => {
                                        let actual = Amount::from_micros(keep(i));
                                        kept += r.settle(actual, call.at).unwrap().kept.micros();
                                    }
                                    2 => r.release(call.at).unwrap(),
                                    _ if slow_drain.len() < 2 => slow_drain.push(r),
                                    _ => drop(r),
                                }
                            }
                            Admission::Denied(d) => {
                                assert!(
                                    d.codes.contains(Code::TotalExceeded) || d.codes.contains(Code::PerDayExceeded),
                                    "{:?}",
                                    d.codes.iter().collect::<Vec<_>>()
                                );
                                denied += 1;
                                // Hand back what this thread holds so the other can go on.
                                slow_drain.clear();
                            }
                            Admission::Held(_) => panic!("nothing here is above the approval threshold"),
                        }
                    }
                    drop(slow_drain);
                    kept_total.fetch_add(kept, Ordering::Relaxed);
                    // Both outcomes must happen in every thread, or the budget was not tight.
                    assert!(allowed > ops_per_thread / 10 && denied > 0, "allowed {allowed}, denied {denied}");
                })
            })
            .collect();
        let results: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        // Stop the watcher before reporting a worker's panic, or the test would hang.
        done.store(true, Ordering::Relaxed);
        for r in results {
            if let Err(panic) = r {
                std::panic::resume_unwind(panic);
            }
        }
        watcher.join().unwrap()
    });
    let kept = kept_total.load(Ordering::Relaxed);
    assert!(max_seen <= total.micros());
    assert_eq!(ledger.settled_micros(), kept, "settled is exactly the sum of kept actuals");
    assert_eq!(ledger.spent_micros(), kept, "nothing stays reserved");
    ledger.audit(0).unwrap();
    ledger.refund_all_leases();
    ledger.audit(0).unwrap();
    assert_eq!(ledger.claimed_micros(), kept, "nothing stays leased either");
    assert!(kept >= 2 * (ops_per_thread / 1000) / 4, "kept {kept}");
    assert_eq!(engine.stats().in_flight, 0);
}

#[derive(Debug, Clone)]
enum Op {
    /// On lease shard `shard` (one per simulated thread).
    Reserve {
        micros: u64,
        day: u64,
        shard: usize,
    },
    Settle {
        which: usize,
        actual: u64,
    },
    Release {
        which: usize,
    },
}

/// One thread, tiny amounts against a limit of 100, any order of days (a lagging clock).
fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..40, 100u64..103).prop_map(|(micros, day)| Op::Reserve { micros, day, shard: 0 }),
        2 => (any::<usize>(), 0u64..50).prop_map(|(which, actual)| Op::Settle { which, actual }),
        1 => any::<usize>().prop_map(|which| Op::Release { which }),
    ]
}

/// Several shards (threads taking turns) and amounts that take leases, days only going
/// forward (as one clock in one process does).
fn leasing_ops() -> impl Strategy<Value = Vec<Op>> {
    let one = prop_oneof![
        4 => (0u64..3_000, 0usize..4, prop_oneof![9 => Just(0u64), 1 => Just(1u64)])
            .prop_map(|(micros, shard, step)| Op::Reserve { micros, day: step, shard }),
        2 => (any::<usize>(), 0u64..3_500).prop_map(|(which, actual)| Op::Settle { which, actual }),
        1 => any::<usize>().prop_map(|which| Op::Release { which }),
    ];
    proptest::collection::vec(one, 1..120).prop_map(|ops| {
        let mut day = 100;
        ops.into_iter()
            .map(|op| match op {
                Op::Reserve { micros, day: step, shard } => {
                    day += step;
                    Op::Reserve { micros, day, shard }
                }
                other => other,
            })
            .collect()
    })
}

/// The sequential model: the obvious bookkeeping with plain integers.
#[derive(Default)]
struct Model {
    used: u64,
    settled: u64,
    day: u64,
    day_amount: u64,
}

/// Runs `ops` on a ledger and on the model: every decision, kept amount and counter must
/// agree (leases are invisible: `spent_micros` and `spent_day_word` are reserved + settled).
fn agrees_with_model(ops: Vec<Op>, limits: LedgerLimits) -> Result<(), TestCaseError> {
    let ledger = Ledger::new();
    let mut model = Model::default();
    let mut open: Vec<(Charge, u64)> = Vec::new();
    for op in ops {
        match op {
            Op::Reserve { micros, day, shard } => {
                let got = ledger.reserve_on(shard, micros, day, limits);
                let (charge_day, base) = if day > model.day { (day, 0) } else { (model.day, model.day_amount) };
                let total_ok = model.used + micros <= limits.total_micros;
                let day_ok = limits.day_micros_max.is_none_or(|max| base + micros <= max);
                match got {
                    Ok(charge) => {
                        prop_assert!(total_ok && day_ok);
                        model.used += micros;
                        if limits.day_micros_max.is_some() {
                            model.day = charge_day;
                            model.day_amount = base + micros;
                            prop_assert_eq!(charge.day(), Some(charge_day));
                        }
                        open.push((charge, micros));
                    }
                    Err(codes) => {
                        prop_assert!(!(total_ok && day_ok));
                        prop_assert_eq!(codes.contains(Code::TotalExceeded), !total_ok);
                    }
                }
            }
            Op::Settle { which, actual } if !open.is_empty() => {
                let (charge, worst) = open.remove(which % open.len());
                let kept = ledger.settle(charge, actual);
                prop_assert_eq!(kept, actual.min(worst));
                model.used -= worst - kept;
                model.settled += kept;
                if charge.day() == Some(model.day) {
                    model.day_amount -= worst - kept;
                }
            }
            Op::Release { which } if !open.is_empty() => {
                let (charge, worst) = open.remove(which % open.len());
                ledger.refund(charge);
                model.used -= worst;
                if charge.day() == Some(model.day) {
                    model.day_amount -= worst;
                }
            }
            _ => {}
        }
        prop_assert_eq!(ledger.spent_micros(), model.used);
        prop_assert_eq!(ledger.settled_micros(), model.settled);
        prop_assert!(ledger.claimed_micros() <= limits.total_micros);
        if let Some(max) = limits.day_micros_max {
            prop_assert_eq!(ledger.spent_day_word(), (model.day, model.day_amount));
            prop_assert!(ledger.claimed_day_word().1 <= max);
        }
        // One thread: quiescent after every step, with the open reservations reserved.
        let reserved: u64 = open.iter().map(|(_, worst)| worst).sum();
        if let Err(e) = ledger.audit(reserved) {
            prop_assert!(false, "ledger audit: {}", e);
        }
    }
    // Everything ended: nothing is reserved; returning the leases leaves exactly the settled.
    for (charge, _) in open.drain(..) {
        ledger.refund(charge);
    }
    ledger.refund_all_leases();
    prop_assert_eq!(ledger.claimed_micros(), model.settled);
    prop_assert!(ledger.audit(0).is_ok());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn the_ledger_behaves_like_the_sequential_model(ops in proptest::collection::vec(op(), 1..60), day_limit in proptest::option::of(10u64..80)) {
        agrees_with_model(ops, LedgerLimits { total_micros: 100, day_micros_max: day_limit, epoch: 0 })?;
    }

    /// Leases (taken, drawn from, given back to, returned on a new day and before a
    /// denial) never change a decision.
    #[test]
    fn leases_never_change_a_decision(ops in leasing_ops(), day_limit in proptest::option::of(20_000u64..100_000)) {
        agrees_with_model(ops, LedgerLimits { total_micros: 100_000, day_micros_max: day_limit, epoch: 0 })?;
    }
}
