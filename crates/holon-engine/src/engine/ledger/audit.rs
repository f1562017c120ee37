//! The ledger audit (tests, loom models, proptests) and, for the loom suite only, a
//! deliberately broken reserve that the audit and the limit checks must catch.

use super::Ledger;
use super::words::LeaseWord;
use crate::sync::Ordering;
#[cfg(holon_loom)]
use {
    super::{Charge, LedgerLimits},
    crate::admission::{Code, CodeSet},
    crate::sync::AtomicU64,
};

/// What [`Ledger::audit`] found wrong: a broken invariant of the words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    /// The conservation rule `claimed = reserved + settled + leased (+ withheld, for a
    /// store-backed ledger)` does not hold.
    #[error(
        "claimed {claimed_micros} != reserved {reserved_micros} + settled {settled_micros} + leased {leased_micros}"
    )]
    Unbalanced { claimed_micros: u64, reserved_micros: u64, settled_micros: u64, leased_micros: u64 },
    /// The day word holds more than is claimed in total.
    #[error("day {day} holds {day_micros}, more than the {claimed_micros} claimed in total")]
    DayAboveTotal { day: u64, day_micros: u64, claimed_micros: u64 },
    /// A lease word that is not live holds a tag or an amount (a refunded lease is 0).
    #[error("a lease word {word:#x} holds an amount but is not live")]
    DeadLease { word: u64 },
}

impl Ledger {
    /// The ledger audit (tests, loom models, proptests; `doc(hidden)`): at quiescence, with
    /// `reserved_micros` the reservations the caller knows are still held (0 when every
    /// reservation has ended; a reclaimed one dropped unsettled stays reserved), the words
    /// the limits are enforced on must add up exactly:
    /// `claimed = reserved + settled + leased`, and the day word holds no more than is
    /// claimed. While calls run it may fail spuriously (the figures are read one by one).
    #[doc(hidden)]
    pub fn audit(&self, reserved_micros: u64) -> Result<(), AuditError> {
        let claimed_micros = self.claimed_micros();
        let settled_micros = self.settled_micros();
        let leased_micros = self.leased(|_| true);
        let sum = reserved_micros
            .checked_add(settled_micros)
            .and_then(|n| n.checked_add(leased_micros))
            .and_then(|n| n.checked_add(self.withheld_micros()));
        if sum != Some(claimed_micros) {
            return Err(AuditError::Unbalanced { claimed_micros, reserved_micros, settled_micros, leased_micros });
        }
        let (day, day_micros) = self.claimed_day_word();
        if day_micros > claimed_micros {
            return Err(AuditError::DayAboveTotal { day, day_micros, claimed_micros });
        }
        for s in &self.shards {
            // Relaxed: read at quiescence, one word at a time.
            let word = LeaseWord::from_bits(s.lease.load(Ordering::Relaxed));
            if word != LeaseWord::RETURNED && !word.is_live() {
                return Err(AuditError::DeadLease { word: word.bits() });
            }
        }
        Ok(())
    }

    /// **Deliberately broken** (loom-tests only): check-then-store instead of CAS, so two
    /// threads can both pass the check, and one's update of `claimed` can be lost. The
    /// loom suite must catch it.
    #[cfg(holon_loom)]
    #[doc(hidden)]
    pub fn reserve_racy(&self, worst_micros: u64, limits: LedgerLimits) -> Result<Charge, CodeSet> {
        let claimed: &AtomicU64 = &self.central.claimed;
        // Relaxed: the bug is the missing RMW, not the ordering.
        let seen = claimed.load(Ordering::Relaxed);
        if seen + worst_micros > limits.total_micros {
            return Err(CodeSet::EMPTY.with(Code::TotalExceeded));
        }
        // Relaxed: as above.
        claimed.store(seen + worst_micros, Ordering::Relaxed);
        Ok(Charge::exact(worst_micros, None))
    }
}
