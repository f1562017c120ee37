//! loom explores every interleaving (up to LOOM_MAX_PREEMPTIONS) of the *real* ledger,
//! reservation table and snapshot cell. Invariants are asserted inside the model after
//! every step a thread takes, and once more when all threads are done.
#![cfg(holon_loom)]

use std::sync::Arc;

use holon::admission::Code;
use holon::engine::ledger::{Ledger, LedgerLimits};
use holon::engine::{Admission, Call, Engine, EngineConfig, ReservationError, synthetic};
use holon::money::Amount;
use holon::time::Timestamp;
use loom::thread;
use std::sync::atomic::Ordering::SeqCst;

const LIMITS: LedgerLimits = LedgerLimits { total_micros: 10, day_micros_max: Some(10) };

fn within(ledger: &Ledger, today: u64) {
    assert!(ledger.used_micros() <= LIMITS.total_micros, "total overrun: {}", ledger.used_micros());
    assert!(ledger.day_micros(today) <= 10, "day overrun: {}", ledger.day_micros(today));
}

/// The money actually granted: the sum of reservations that succeeded and have not ended.
/// The safety property is on this, not only on the ledger's own counter (a lost update
/// can keep the counter low while granting too much).
struct Granted(loom::sync::atomic::AtomicU64);

impl Granted {
    fn new() -> Arc<Self> {
        Arc::new(Granted(loom::sync::atomic::AtomicU64::new(0)))
    }
    fn add(&self, micros: u64) {
        let now = self.0.fetch_add(micros, SeqCst) + micros;
        assert!(now <= LIMITS.total_micros, "total overrun: {now} granted");
    }
    fn sub(&self, micros: u64) {
        self.0.fetch_sub(micros, SeqCst);
    }
}

/// Three threads ask for 4 + 4 + 4 > 10: at most two win; each settles, releases or
/// settles above its worst case. Nothing overruns; at the end settled = sum of kept and
/// nothing stays reserved.
#[test]
fn three_reservers_never_overrun_and_end_exact() {
    loom::model(|| {
        let ledger = Arc::new(Ledger::new());
        let granted = Granted::new();
        let handles: Vec<_> = [(4u64, Some(2u64)), (4, None), (4, Some(9))]
            .into_iter()
            .map(|(worst, settle)| {
                let (ledger, granted) = (Arc::clone(&ledger), Arc::clone(&granted));
                thread::spawn(move || {
                    let kept = match ledger.reserve(worst, 7, LIMITS) {
                        Ok(charge) => {
                            granted.add(worst);
                            within(&ledger, 7);
                            // Give back what is not kept before the ledger does, so
                            // `granted` never under-counts.
                            let kept = match settle {
                                Some(actual) => {
                                    granted.sub(worst - actual.min(worst));
                                    ledger.settle(charge, actual)
                                }
                                None => {
                                    granted.sub(worst);
                                    ledger.release(charge);
                                    0
                                }
                            };
                            within(&ledger, 7);
                            kept
                        }
                        Err(codes) => {
                            assert!(codes.contains(Code::TotalExceeded) || codes.contains(Code::PerDayExceeded));
                            0
                        }
                    };
                    within(&ledger, 7);
                    kept
                })
            })
            .collect();
        let kept: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(ledger.settled_micros(), kept);
        assert_eq!(ledger.used_micros(), kept, "nothing stays reserved");
    });
}

/// A reservation on a new UTC day races a reservation and a release on the old one.
#[test]
fn day_rollover_races_a_reservation() {
    loom::model(|| {
        let ledger = Arc::new(Ledger::new());
        let l1 = Arc::clone(&ledger);
        let old_day = thread::spawn(move || {
            if let Ok(c) = l1.reserve(6, 10, LIMITS) {
                within(&l1, 10);
                l1.release(c);
            }
            within(&l1, 10);
        });
        let l2 = Arc::clone(&ledger);
        let new_day = thread::spawn(move || {
            let charge = l2.reserve(4, 11, LIMITS);
            within(&l2, 11);
            charge
        });
        old_day.join().unwrap();
        let charge = new_day.join().unwrap().expect("4 always fits the total after the old day's release");
        assert_eq!(charge.day, Some(11));
        assert_eq!(ledger.used_micros(), 4);
        assert_eq!(ledger.day_word(), (11, 4));
    });
}

fn tiny_engine(total: &str) -> (Engine, Call) {
    let shape = synthetic::Shape { agents: 2, mandates: 1, total: Amount::parse(total).unwrap() };
    let net = synthetic::network(&shape).unwrap();
    let engine =
        Engine::new(EngineConfig { in_flight_max: 4, clock: || Timestamp::from_unix(0), ..Default::default() });
    engine.publish(&net.input).unwrap();
    let call = Call::new(engine.mandate_ix("m0").unwrap(), engine.agent_ix("syn/a1").unwrap(), net.at);
    (engine, call)
}

/// Two threads admit through the whole engine against a budget that fits one call
/// (0.00092 each, total 0.0015): at most one is allowed at any moment.
#[test]
fn two_admissions_through_the_engine_never_overrun() {
    loom::model(|| {
        let (engine, call) = tiny_engine("0.0015");
        let engine = Arc::new(engine);
        let ledger = engine.ledger(call.mandate).unwrap();
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let (engine, ledger) = (Arc::clone(&engine), Arc::clone(&ledger));
                thread::spawn(move || {
                    let kept = match engine.admit(&call) {
                        Admission::Allowed(r) => {
                            assert!(ledger.used_micros() <= 1500);
                            r.settle(Amount::from_micros(100 * (i + 1)), call.at).unwrap().kept.micros()
                        }
                        _ => 0,
                    };
                    assert!(ledger.used_micros() <= 1500);
                    kept
                })
            })
            .collect();
        let kept: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!((ledger.settled_micros(), ledger.used_micros()), (kept, kept));
    });
}

/// The holder settles while the engine reclaims the expired reservation: exactly one of
/// them ends it, and the money is counted once.
#[test]
fn expiry_races_settle_and_exactly_one_wins() {
    loom::model(|| {
        let (engine, call) = tiny_engine("1");
        let engine = Arc::new(engine);
        let ledger = engine.ledger(call.mandate).unwrap();
        let Admission::Allowed(r) = engine.admit(&call) else { panic!("not allowed") };
        let e2 = Arc::clone(&engine);
        let reaper = thread::spawn(move || e2.reclaim_expired(Timestamp::from_unix(call.at.unix() + 1_000_000)));
        let settled = r.settle(Amount::from_micros(500), call.at);
        let reclaimed = reaper.join().unwrap();
        match settled {
            Ok(s) => {
                assert_eq!(reclaimed, 0);
                assert_eq!((ledger.used_micros(), ledger.settled_micros()), (s.kept.micros(), 500));
            }
            Err(ReservationError::Reclaimed) => {
                assert_eq!(reclaimed, 1);
                assert_eq!((ledger.used_micros(), ledger.settled_micros()), (0, 0));
            }
        }
    });
}

/// A snapshot publish races an admission: the call finishes on the snapshot it loaded,
/// and its money lands in the ledger the new snapshot carries over.
#[test]
fn publish_races_an_admission() {
    loom::model(|| {
        let shape = synthetic::Shape { agents: 2, mandates: 1, total: Amount::parse("1").unwrap() };
        let net = synthetic::network(&shape).unwrap();
        let (engine, call) = tiny_engine("1");
        let engine = Arc::new(engine);
        let e2 = Arc::clone(&engine);
        let publisher = thread::spawn(move || e2.publish(&net.input).unwrap());
        let kept = match engine.admit(&call) {
            Admission::Allowed(r) => r.settle(Amount::from_micros(300), call.at).unwrap().kept.micros(),
            other => panic!("{other:?}"),
        };
        assert_eq!(publisher.join().unwrap(), 2);
        let ledger = engine.ledger(call.mandate).unwrap();
        assert_eq!((kept, ledger.settled_micros(), ledger.used_micros()), (300, 300, 300));
        let snap = engine.snapshot();
        assert!(Arc::ptr_eq(&snap.mandates().next().unwrap().ledger, &ledger), "the ledger was carried over");
    });
}

/// The harness finds bugs: a check-then-store ledger lets two 6s into a limit of 10.
#[test]
#[should_panic(expected = "total overrun")]
fn a_racy_ledger_is_caught() {
    loom::model(|| {
        let ledger = Arc::new(Ledger::new());
        let granted = Granted::new();
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (ledger, granted) = (Arc::clone(&ledger), Arc::clone(&granted));
                thread::spawn(move || {
                    if ledger.reserve_racy(6, LIMITS).is_ok() {
                        granted.add(6);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        within(&ledger, 0);
    });
}
