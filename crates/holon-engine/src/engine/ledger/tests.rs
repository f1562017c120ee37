//! The ledger's unit tests: exact totals, days, leases, epochs and its size.

use super::words::LeaseWord;
use super::*;

const L: LedgerLimits = LedgerLimits { total_micros: 100, day_micros_max: Some(60), epoch: 0 };

#[test]
fn reserve_settle_release_keep_exact_totals() {
    let l = Ledger::new();
    let a = l.reserve(40, 10, L).unwrap();
    let b = l.reserve(20, 10, L).unwrap();
    assert_eq!(l.reserve(1, 10, L), Err(CodeSet::EMPTY.with(Code::PerDayExceeded)));
    assert_eq!(l.spent_micros(), 60, "a refused day reserve refunds `claimed`");
    assert_eq!(l.settle(a, 15), 15);
    l.refund(b);
    assert_eq!((l.spent_micros(), l.settled_micros(), l.spent_day_micros(10)), (15, 15, 15));
    // Settling above the worst case keeps the worst case.
    let c = l.reserve(5, 10, L).unwrap();
    assert_eq!(l.settle(c, 9), 5);
    assert_eq!((l.spent_micros(), l.settled_micros()), (20, 20));
}

#[test]
fn a_new_day_starts_at_zero_but_total_remembers() {
    let l = Ledger::new();
    let a = l.reserve(60, 10, L).unwrap();
    assert!(l.reserve(1, 10, L).is_err());
    let b = l.reserve(40, 11, L).unwrap();
    assert_eq!(l.spent_day_micros(11), 40);
    assert_eq!(l.reserve(1, 11, L), Err(CodeSet::EMPTY.with(Code::TotalExceeded)));
    // Releasing yesterday's charge does not touch today's word.
    l.refund(a);
    assert_eq!((l.spent_day_micros(11), l.spent_micros()), (40, 40));
    l.refund(b);
    assert_eq!((l.spent_day_micros(11), l.spent_micros()), (0, 0));
    // A lagging clock charges the later day already in the word.
    let c = l.reserve(5, 9, L).unwrap();
    assert_eq!(c.day(), Some(11));
}

#[test]
fn no_day_limit_means_no_day_word_and_overflow_is_exceeded() {
    let l = Ledger::new();
    let lim = LedgerLimits { total_micros: u64::MAX, day_micros_max: None, epoch: 0 };
    let a = l.reserve(u64::MAX, 1, lim).unwrap();
    assert_eq!(a.day(), None);
    assert!(l.reserve(1, 1, lim).is_err());
    assert!(l.reserve(1, DAY_NUMBER_MAX + 1, lim).unwrap_err().contains(Code::InternalError));
}

const BIG: LedgerLimits = LedgerLimits { total_micros: 128_000, day_micros_max: Some(128_000), epoch: 0 };

#[test]
fn a_call_takes_a_lease_and_the_next_ones_reserve_from_it() {
    let l = Ledger::new();
    // 1/32 of 128,000 = 4,000 = 4 worst cases: the call keeps 1,000, 3,000 wait.
    let a = l.reserve_on(0, 1_000, 10, BIG).unwrap();
    assert!(a.is_leased());
    assert_eq!((l.claimed_micros(), l.spent_micros(), l.claimed_day_word()), (4_000, 1_000, (10, 4_000)));
    assert_eq!(l.spent_day_word(), (10, 1_000), "what waits in a lease is not reserved");
    let b = l.reserve_on(0, 1_000, 10, BIG).unwrap();
    assert_eq!((l.claimed_micros(), l.spent_micros()), (4_000, 2_000), "from the lease: no new claim");
    // What is not kept goes back to the lease, and serves the next call.
    assert_eq!(l.settle(b, 300), 300);
    assert_eq!((l.claimed_micros(), l.spent_micros(), l.settled_micros()), (4_000, 1_300, 300));
    l.refund(a);
    assert_eq!((l.claimed_micros(), l.spent_micros()), (4_000, 300));
    assert_eq!(l.refund_all_leases(), 3_700);
    assert_eq!((l.claimed_micros(), l.spent_micros(), l.claimed_day_word()), (300, 300, (10, 300)));
}

#[test]
fn a_denial_first_takes_back_every_idle_lease() {
    let l = Ledger::new();
    let small = l.reserve_on(0, 1_000, 10, BIG).unwrap();
    assert_eq!(l.claimed_micros(), 4_000);
    // 127,000 fits what is reserved (1,000) but not what is claimed (4,000).
    let big = l.reserve_on(1, 127_000, 10, BIG).expect("the idle lease is taken back");
    assert_eq!((l.claimed_micros(), l.spent_micros()), (128_000, 128_000));
    assert!(!big.is_leased());
    assert_eq!(l.reserve_on(2, 1, 10, BIG), Err(CodeSet::EMPTY.with(Code::TotalExceeded)));
    // Its lease is gone, so the refund goes to the central words, not a new lease.
    l.refund(small);
    assert_eq!((l.claimed_micros(), l.spent_micros()), (127_000, 127_000));
    assert!(l.reserve_on(1, 1_000, 10, BIG).is_ok());
}

#[test]
fn a_returned_lease_is_not_revived_by_a_late_settle() {
    // No daily limit and epoch 0: the lease's tag is all zeros, like an empty word.
    let lim = LedgerLimits { total_micros: 128_000, day_micros_max: None, epoch: 0 };
    let l = Ledger::new();
    let a = l.reserve_on(0, 1_000, 10, lim).unwrap();
    assert!(a.is_leased());
    assert_eq!(l.refund_all_leases(), 3_000);
    // Its shard's lease is gone: what it refunds goes to the central words.
    l.refund(a);
    assert_eq!((l.claimed_micros(), l.spent_micros()), (0, 0));
    assert_eq!(l.refund_all_leases(), 0, "no lease came back to life");
}

#[test]
fn a_lease_serves_only_its_day_and_its_limits() {
    let l = Ledger::new();
    let a = l.reserve_on(0, 1_000, 10, BIG).unwrap();
    // The next day: yesterday's lease goes back (to the total; its day is gone).
    let b = l.reserve_on(0, 1_000, 11, BIG).unwrap();
    assert_eq!(b.day(), Some(11));
    // 1/32 of the 127,000 left: 3,968.
    assert_eq!(l.claimed_day_word(), (11, 3_968));
    assert_eq!((l.claimed_micros(), l.spent_micros()), (4_968, 2_000));
    // Lowered limits (a new epoch): the lease taken under the old ones is not used.
    let lowered = LedgerLimits { total_micros: 2_500, epoch: 1, ..BIG };
    assert_eq!(l.reserve_on(0, 1_000, 11, lowered), Err(CodeSet::EMPTY.with(Code::TotalExceeded)));
    assert_eq!(l.claimed_micros(), 2_000, "the old lease went back");
    l.refund(a);
    l.refund(b);
    assert_eq!((l.claimed_micros(), l.spent_micros(), l.claimed_day_word()), (0, 0, (11, 0)));
    // A publish that changes the limits returns the old epoch's leases.
    let _c = l.reserve_on(3, 1_000, 11, BIG).unwrap();
    assert_eq!(l.refund_stale_leases(0), 0);
    assert_eq!(l.refund_stale_leases(1), 3_000);
    assert_eq!(l.claimed_micros(), 1_000);
}

#[test]
fn a_ledger_is_nine_padded_lines() {
    // The central words (and the publish-only terms) on one padded line, a shard on each
    // of the rest. On x86-64 a `CachePadded` line is 128 bytes: docs/engine.md gives
    // this size.
    let line = std::mem::align_of::<CachePadded<u8>>();
    assert_eq!(std::mem::size_of::<CachePadded<Central>>(), line, "the central words fit one line");
    assert_eq!(std::mem::size_of::<Ledger>(), line * (1 + LEASE_SHARDS));
    if cfg!(target_arch = "x86_64") {
        assert_eq!(std::mem::size_of::<Ledger>(), 1_152);
    }
    assert_eq!(std::mem::size_of::<Charge>(), 16, "a Reservation moves it by value");
}

#[test]
fn epochs_change_only_with_the_limits_and_only_when_committed() {
    let l = Ledger::new();
    let commit = |total, day, epoch| l.commit_epoch(LedgerLimits { total_micros: total, day_micros_max: day, epoch });
    assert_eq!(l.epoch_for(10, None), 0);
    commit(10, None, 0);
    assert_eq!(l.epoch_for(10, None), 0);
    assert_eq!(l.epoch_for(10, Some(5)), 1);
    assert_eq!(l.epoch_for(10, Some(5)), 1, "not committed: asking again changes nothing");
    commit(10, Some(5), 1);
    assert_eq!(l.epoch_for(10, None), 2);
}

#[test]
fn the_audit_catches_each_broken_invariant() {
    let l = Ledger::new();
    let a = l.reserve_on(0, 1_000, 10, BIG).unwrap();
    assert_eq!(l.audit(1_000), Ok(()));
    assert_eq!(
        l.audit(0),
        Err(AuditError::Unbalanced {
            claimed_micros: 4_000,
            reserved_micros: 0,
            settled_micros: 0,
            leased_micros: 3_000
        }),
        "a reservation the caller forgot"
    );
    // A lost update of `claimed` (what a check-then-store reserve does).
    l.central.claimed.fetch_sub(1_000, Ordering::Relaxed);
    assert!(matches!(l.audit(1_000), Err(AuditError::Unbalanced { claimed_micros: 3_000, .. })));
    l.central.claimed.fetch_add(1_000, Ordering::Relaxed);
    // The day word above the total.
    l.central.day.store(DayWord::new(10, 5_000).bits(), Ordering::Relaxed);
    assert_eq!(l.audit(1_000), Err(AuditError::DayAboveTotal { day: 10, day_micros: 5_000, claimed_micros: 4_000 }));
    l.central.day.store(DayWord::new(10, 4_000).bits(), Ordering::Relaxed);
    // An amount in a lease word that is not live.
    let Some(shard) = l.shards.first() else { panic!("no shard") };
    let live = shard.lease.load(Ordering::Relaxed);
    // 3,000 micro-units with the live bit clear.
    shard.lease.store(LeaseWord::from_bits(3_000).bits(), Ordering::Relaxed);
    assert!(matches!(l.audit(1_000), Err(AuditError::DeadLease { .. })));
    shard.lease.store(live, Ordering::Relaxed);
    l.refund(a);
    assert_eq!(l.refund_all_leases(), 4_000);
    assert_eq!(l.audit(0), Ok(()));
}
