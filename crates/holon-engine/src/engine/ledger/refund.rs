//! Giving money back: the one verb family (`refund*`) and the settle that uses it. Each
//! function says which words it moves; see the ledger's module comment for the rules.

use super::words::DayWord;
use super::{Charge, LEASE_SHARDS, Ledger};
use crate::sync::{self, Ordering};

impl Ledger {
    /// Keeps `actual` (at most the reserved worst case) and refunds the rest. Returns what
    /// was kept.
    pub fn settle(&self, charge: Charge, actual_micros: u64) -> u64 {
        let kept = actual_micros.min(charge.worst_micros);
        if kept > 0 {
            // Settled on the lease's shard (its line is already this thread's), or on the
            // calling thread's. Relaxed: a single-location RMW; `settled` is only summed.
            let shard = if charge.is_leased() { usize::from(charge.shard) } else { sync::lease_shard() };
            let before = match self.shards.get(shard % LEASE_SHARDS) {
                Some(s) => s.settled.fetch_add(kept, Ordering::Relaxed),
                // Relaxed, as above (a shard index past the table: the central word).
                None => self.central.settled.fetch_add(kept, Ordering::Relaxed),
            };
            debug_assert!(before.checked_add(kept).is_some(), "settled overflows");
        }
        self.refund_part(charge, charge.worst_micros - kept);
        kept
    }

    /// Refunds the whole charge (the call cost nothing): to the lease it came from, or to
    /// the central words.
    pub fn refund(&self, charge: Charge) {
        self.refund_part(charge, charge.worst_micros);
    }

    /// Refunds `micros` of a charge: to the lease it came from ([`Ledger::refund_to_lease`],
    /// which falls back to the central words), or to the central words.
    fn refund_part(&self, charge: Charge, micros: u64) {
        debug_assert!(micros <= charge.worst_micros, "a refund is at most the charge");
        if micros == 0 {
            return;
        }
        if charge.is_leased() {
            self.refund_to_lease(usize::from(charge.shard), charge.tag, micros);
        } else {
            self.refund_central(charge.day(), micros);
        }
    }

    /// Refunds `micros` to the central words: to `claimed`, and to `day`'s word if it still
    /// holds that day.
    pub(super) fn refund_central(&self, day: Option<u64>, micros: u64) {
        self.refund_claimed(micros);
        self.refund_day(day, micros);
    }

    /// Refunds `micros` to `claimed` alone (a reservation's step 1, or a lease's share the
    /// day word refused).
    pub(super) fn refund_claimed(&self, micros: u64) {
        // Relaxed: a single-location RMW.
        let before = self.central.claimed.fetch_sub(micros, Ordering::Relaxed);
        debug_assert!(before >= micros, "`claimed` underflows: {before} - {micros}");
    }

    /// Refunds `micros` to the day word, if it still holds `day` (a word that has moved to
    /// a later day has forgotten that day's amounts). Nothing without a day.
    fn refund_day(&self, day: Option<u64>, micros: u64) {
        let Some(charged) = day else { return };
        if micros == 0 {
            return;
        }
        // Relaxed: a single-location RMW loop (see the module comment).
        let mut word = self.central.day.load(Ordering::Relaxed);
        loop {
            let (current, amount) = DayWord::from_bits(word).parts();
            // The day rolled over since: that day's counter is gone, nothing to refund.
            // (The word's day only grows, so a later day read here is true.)
            if current > charged {
                return;
            }
            let next = if current < charged {
                // An earlier day than the charge's: this load may be stale (another
                // thread's charge reached us through a lease, with no ordering on this
                // word). Confirm with an RMW, which always reads the latest value: refund
                // nothing only if the word really is on another day. loom found this.
                word
            } else {
                DayWord::new(current, amount.saturating_sub(micros)).bits()
            };
            // Relaxed: as above.
            match self.central.day.compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    // Checked only now that the RMW confirmed `word` (the plain load above
                    // may be stale; loom found an assertion placed before the CAS firing on
                    // a stale word): the day held what is refunded.
                    debug_assert!(
                        current != charged || amount >= micros,
                        "day {current} underflows: {amount} - {micros}"
                    );
                    return;
                }
                Err(seen) => word = seen,
            }
        }
    }
}
