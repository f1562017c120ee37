//! The lease shards: budget a thread took from the central words in advance, so its next
//! calls reserve with one uncontended CAS on a line of its own (see the ledger's module
//! comment for the rules that keep leases from weakening a limit or a denial).

use super::words::{LEASE_MICROS_MAX, LeaseWord, Tag};
use super::{Charge, LEASE_CALLS, LEASE_SHARE_DIVISOR, Ledger, LedgerLimits};
use crate::sync::{AtomicU64, Ordering};

/// One thread group's lease and settled amount (each on cache lines of its own: the
/// ledger pads it).
#[derive(Debug, Default)]
pub(super) struct Shard {
    /// A [`LeaseWord`]: budget taken from the central words and not yet reserved.
    pub(super) lease: AtomicU64,
    /// Settled (kept) amounts of the reservations that ended through this shard.
    pub(super) settled: AtomicU64,
}

/// What a call reserving `worst` takes beyond it for a lease when `left` remains: a
/// chunk of at most 1/[`LEASE_SHARE_DIVISOR`] of `left` and [`LEASE_CALLS`] worst cases,
/// less the call's own `worst`; 0 when the chunk would not hold two worst cases.
pub(super) fn lease_extra(left: u64, worst_micros: u64) -> u64 {
    let chunk = (left / LEASE_SHARE_DIVISOR).min(worst_micros.saturating_mul(LEASE_CALLS)).min(LEASE_MICROS_MAX);
    if worst_micros == 0 || chunk < worst_micros.saturating_mul(2) { 0 } else { chunk - worst_micros }
}

impl Ledger {
    /// What waits in the leases that `counts(tag)` selects.
    pub(super) fn leased(&self, counts: impl Fn(Tag) -> bool) -> u64 {
        self.shards
            .iter()
            // Relaxed: each word read on its own (an estimate while calls run).
            .map(|s| LeaseWord::from_bits(s.lease.load(Ordering::Relaxed)).parts())
            .filter(|(tag, _)| counts(*tag))
            .map(|(_, micros)| micros)
            .sum()
    }

    /// Whether a lease with `tag` may serve a call on `today` under `limits`: taken under
    /// the same limits, and for the call's day (or, for a caller whose clock lags, a
    /// later day: like the day word, a lagging clock never reopens an earlier day).
    fn usable(tag: Tag, today: u64, limits: LedgerLimits) -> bool {
        tag.epoch() == limits.epoch
            && match limits.day_micros_max {
                None => tag.charged_day().is_none(),
                Some(_) => tag.charged_day().is_some_and(|day| day >= today),
            }
    }

    /// The fast path: one CAS on the shard's own line.
    pub(super) fn draw_lease(
        &self,
        shard: usize,
        worst_micros: u64,
        today: u64,
        limits: LedgerLimits,
    ) -> Option<Charge> {
        let s = self.shards.get(shard)?;
        // Relaxed: a single-location RMW loop (see the module comment).
        let mut word = LeaseWord::from_bits(s.lease.load(Ordering::Relaxed));
        loop {
            let (tag, micros) = word.parts();
            if micros == 0 {
                return None;
            }
            debug_assert!(word.is_live(), "a lease word holding an amount is live");
            if !Self::usable(tag, today, limits) {
                // Another day's or other limits' lease: refund it to the central words,
                // then take a fresh one. Relaxed: as above.
                let returned = LeaseWord::RETURNED.bits();
                if s.lease.compare_exchange(word.bits(), returned, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                    self.refund_central(tag.charged_day(), micros);
                    return None;
                }
                // Relaxed: as above.
                word = LeaseWord::from_bits(s.lease.load(Ordering::Relaxed));
                continue;
            }
            // Too little left (a remainder): the central path below may add a new lease to it.
            let rest = micros.checked_sub(worst_micros)?;
            let next = LeaseWord::live(tag, rest);
            // Relaxed: as above.
            match s.lease.compare_exchange_weak(word.bits(), next.bits(), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(Self::leased_charge(worst_micros, shard, tag, limits)),
                Err(seen) => word = LeaseWord::from_bits(seen),
            }
        }
    }

    pub(super) fn leased_charge(worst_micros: u64, shard: usize, tag: Tag, limits: LedgerLimits) -> Charge {
        // `shard` < LEASE_SHARDS, so it fits a u8 below NOT_LEASED (a const assertion).
        #[allow(clippy::cast_possible_truncation)]
        Charge { worst_micros, tag, has_day: limits.day_micros_max.is_some(), shard: shard as u8 }
    }

    /// Refunds `micros` of a leased charge to its shard's lease, if that shard still holds
    /// a live lease with the same `tag`; otherwise to the central words. So a refunded
    /// lease is never revived by a late settle.
    #[inline]
    pub(super) fn refund_to_lease(&self, shard: usize, tag: Tag, micros: u64) {
        self.credit_lease(shard, tag, micros, false);
    }

    /// Puts `micros` just claimed under `tag` into a shard's lease: a new lease if the
    /// shard holds none (or added to its live lease with the same tag); otherwise `micros`
    /// is refunded to the central words. Leases come into being only through this, from
    /// [`Ledger::take`] and its share rule.
    #[inline]
    pub(super) fn open_lease(&self, shard: usize, tag: Tag, micros: u64) {
        self.credit_lease(shard, tag, micros, true);
    }

    /// Adds `micros` (counted in the central words under `tag`) to a shard's lease when it
    /// holds a live lease with the same tag, or (`may_open`) none at all; otherwise
    /// refunds `micros` to the central words.
    fn credit_lease(&self, shard: usize, tag: Tag, micros: u64, may_open: bool) {
        if micros == 0 {
            return;
        }
        let Some(s) = self.shards.get(shard) else { return self.refund_central(tag.charged_day(), micros) };
        // Relaxed: a single-location RMW loop (see the module comment).
        let mut word = LeaseWord::from_bits(s.lease.load(Ordering::Relaxed));
        loop {
            let (held_tag, held) = word.parts();
            let fits = held.checked_add(micros).filter(|n| *n <= LEASE_MICROS_MAX);
            let next = match fits {
                Some(n) if (word.is_live() && held_tag == tag) || (held == 0 && may_open) => LeaseWord::live(tag, n),
                _ => return self.refund_central(tag.charged_day(), micros),
            };
            debug_assert!(next.micros() > held && next.is_live(), "a credit grows a live lease");
            // Relaxed: as above.
            match s.lease.compare_exchange_weak(word.bits(), next.bits(), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => word = LeaseWord::from_bits(seen),
            }
        }
    }

    /// Refunds every lease that `stale(tag)` selects to the central words; each becomes
    /// [`LeaseWord::RETURNED`]. Returns the amount refunded.
    fn refund_leases(&self, stale: impl Fn(Tag) -> bool) -> u64 {
        let mut refunded = 0u64;
        for s in &self.shards {
            // Relaxed: a single-location RMW loop (see the module comment).
            let mut word = LeaseWord::from_bits(s.lease.load(Ordering::Relaxed));
            loop {
                let (tag, micros) = word.parts();
                if micros == 0 || !stale(tag) {
                    break;
                }
                debug_assert!(word.is_live(), "a lease word holding an amount is live");
                let returned = LeaseWord::RETURNED.bits();
                // Relaxed: as above.
                match s.lease.compare_exchange_weak(word.bits(), returned, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        self.refund_central(tag.charged_day(), micros);
                        refunded = refunded.saturating_add(micros);
                        break;
                    }
                    Err(seen) => word = LeaseWord::from_bits(seen),
                }
            }
        }
        refunded
    }

    /// Refunds every lease to the central words (spend export does this first, so that
    /// what it writes is what is reserved and settled). Returns the amount refunded.
    pub fn refund_all_leases(&self) -> u64 {
        self.refund_leases(|_| true)
    }

    /// Refunds the leases taken under other limits than `epoch`'s (a publish that changed
    /// the limits does this, so no old lease waits in an idle shard). Returns the amount.
    pub fn refund_stale_leases(&self, epoch: u16) -> u64 {
        self.refund_leases(|tag| tag.epoch() != epoch)
    }
}
