//! The atomic per-mandate ledger: what is reserved plus settled against `total`, and the
//! same for the current UTC day against `per_day`, in micro-units, updated by
//! compare-and-swap so that parallel calls can never overrun a limit.
//!
//! Two words:
//! - `used` = reserved + settled against `total` (and `settled`, for reporting);
//! - `day` = the UTC day number (high 16 bits) and what is reserved + settled on it
//!   (low 48 bits). A reservation on a later day than the word's starts the day at 0.
//!
//! A reservation takes `used` first, then `day`; if the day is full it gives `used` back.
//! Each limit is a property of one atomic word, and every change to a word is a CAS that
//! checks its limit, so no interleaving can take a word above its limit. The only cost of
//! the two-step reserve is conservative: between the two steps another call may see
//! `used` higher than it will end up and be denied `total_exceeded`; it is never allowed
//! wrongly.
//!
//! Orderings: every limit is a property of a single atomic location, which the
//! modification order of that location alone guarantees, so the counters need no
//! ordering with other memory: `Relaxed` throughout. What a reservation's holder must see
//! of other memory travels through the reservation table (`slots.rs`), not through here.

use crate::admission::{Code, CodeSet};
use crate::sync::{AtomicU64, Ordering};

/// Bits of the day word that hold the amount.
const DAY_AMOUNT_BITS: u32 = 48;
/// The largest per-day amount the day word holds (about 281 million units). A mandate
/// with a larger `per_day` is refused when the snapshot is compiled.
pub const DAY_MICROS_MAX: u64 = (1 << DAY_AMOUNT_BITS) - 1;
/// The largest UTC day number (days since 1970): 65535 is in the year 2149.
pub const DAY_NUMBER_MAX: u64 = (1 << (64 - DAY_AMOUNT_BITS)) - 1;

fn pack(day: u64, micros: u64) -> u64 {
    debug_assert!(day <= DAY_NUMBER_MAX && micros <= DAY_MICROS_MAX);
    (day << DAY_AMOUNT_BITS) | micros
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> DAY_AMOUNT_BITS, word & DAY_MICROS_MAX)
}

/// The limits a reservation is checked against, in micro-units (from the live snapshot,
/// so an updated mandate's new limits apply to the same ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerLimits {
    pub total_micros: u64,
    /// `None`: no daily limit, and the day word is not kept.
    pub day_micros_max: Option<u64>,
}

/// What one reservation took: needed to settle or release it exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Charge {
    pub worst_micros: u64,
    /// The day number the amount was charged to, if the day word was charged.
    pub day: Option<u64>,
}

/// Reserved and settled amounts of one mandate (or of one delegated run).
///
/// Aligned to 128 bytes (two cache lines, as crossbeam's `CachePadded` on x86-64): ledgers
/// are allocated one after another when a snapshot is compiled, and without the padding
/// two mandates' counters shared a line, so threads on *different* mandates contended.
#[derive(Debug)]
#[repr(align(128))]
pub struct Ledger {
    used: AtomicU64,
    settled: AtomicU64,
    day: AtomicU64,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new()
    }
}

impl Ledger {
    pub fn new() -> Self {
        Ledger { used: AtomicU64::new(0), settled: AtomicU64::new(0), day: AtomicU64::new(0) }
    }

    /// Adds restored spend (settled) to this ledger: `spent` to the total, and the day's
    /// amount when it is for the word's day or a later one. Saturates rather than wraps.
    pub fn absorb(&self, spent_micros: u64, day: u64, day_micros: u64) {
        let add = |word: &AtomicU64, micros: u64| {
            // Relaxed: single-location RMWs, as everywhere in the ledger.
            let mut seen = word.load(Ordering::Relaxed);
            while let Err(now) =
                word.compare_exchange_weak(seen, seen.saturating_add(micros), Ordering::Relaxed, Ordering::Relaxed)
            {
                seen = now;
            }
        };
        add(&self.settled, spent_micros);
        add(&self.used, spent_micros);
        let (day, day_micros) = (day.min(DAY_NUMBER_MAX), day_micros.min(DAY_MICROS_MAX));
        let mut word = self.day.load(Ordering::Relaxed);
        loop {
            let (current, micros) = unpack(word);
            let next = match day.cmp(&current) {
                std::cmp::Ordering::Less => return,
                std::cmp::Ordering::Equal => pack(day, micros.saturating_add(day_micros).min(DAY_MICROS_MAX)),
                std::cmp::Ordering::Greater => pack(day, day_micros),
            };
            match self.day.compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => word = seen,
            }
        }
    }

    /// Reserved + settled against `total`.
    pub fn used_micros(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Settled (kept) amounts.
    pub fn settled_micros(&self) -> u64 {
        self.settled.load(Ordering::Relaxed)
    }

    /// Reserved + settled on `today` (0 when the word holds an earlier day).
    pub fn day_micros(&self, today: u64) -> u64 {
        let (day, micros) = unpack(self.day.load(Ordering::Relaxed));
        // A word already on a later day (a caller's clock behind) counts in full:
        // conservative, like `reserve`.
        if day >= today { micros } else { 0 }
    }

    /// The day word as (day number, micro-units), for export.
    pub fn day_word(&self) -> (u64, u64) {
        unpack(self.day.load(Ordering::Relaxed))
    }

    /// Reserves `worst` if neither `total` nor today's limit would be exceeded.
    pub fn reserve(&self, worst_micros: u64, today: u64, limits: LedgerLimits) -> Result<Charge, CodeSet> {
        if today > DAY_NUMBER_MAX {
            return Err(CodeSet::EMPTY.with(Code::InternalError));
        }
        // Step 1: `used`. Relaxed: see the module comment. A failed CAS backs off (spins a
        // little longer each time) so two threads on one hot mandate do not keep stealing
        // the line from each other.
        let backoff = crossbeam::utils::Backoff::new();
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let next = match used.checked_add(worst_micros) {
                Some(n) if n <= limits.total_micros => n,
                _ => return Err(CodeSet::EMPTY.with(Code::TotalExceeded)),
            };
            match self.used.compare_exchange_weak(used, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(seen) => {
                    used = seen;
                    backoff.spin();
                }
            }
        }
        let Some(day_max) = limits.day_micros_max else {
            return Ok(Charge { worst_micros, day: None });
        };
        // Step 2: the day word.
        let mut word = self.day.load(Ordering::Relaxed);
        loop {
            let (day, micros) = unpack(word);
            // A new day starts at 0; a word on a later day than ours keeps its day and
            // takes our amount (never let a lagging clock open a fresh day).
            let (charge_day, base) = if today > day { (today, 0) } else { (day, micros) };
            let next = match base.checked_add(worst_micros) {
                Some(n) if n <= day_max && n <= DAY_MICROS_MAX => n,
                _ => {
                    // Give step 1 back. Relaxed: a single-location RMW.
                    self.used.fetch_sub(worst_micros, Ordering::Relaxed);
                    return Err(CodeSet::EMPTY.with(Code::PerDayExceeded));
                }
            };
            match self.day.compare_exchange_weak(word, pack(charge_day, next), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(Charge { worst_micros, day: Some(charge_day) }),
                Err(seen) => word = seen,
            }
        }
    }

    /// Keeps `actual` (at most the reserved worst case) and releases the rest. Returns what
    /// was kept.
    pub fn settle(&self, charge: Charge, actual_micros: u64) -> u64 {
        let kept = actual_micros.min(charge.worst_micros);
        let back = charge.worst_micros - kept;
        // `settled` first, then `used` goes down: `used >= settled` at every moment.
        self.settled.fetch_add(kept, Ordering::Relaxed);
        self.used.fetch_sub(back, Ordering::Relaxed);
        self.give_back_day(charge.day, back);
        kept
    }

    /// Gives the whole reservation back.
    pub fn release(&self, charge: Charge) {
        self.used.fetch_sub(charge.worst_micros, Ordering::Relaxed);
        self.give_back_day(charge.day, charge.worst_micros);
    }

    fn give_back_day(&self, day: Option<u64>, micros: u64) {
        let Some(charged) = day else { return };
        if micros == 0 {
            return;
        }
        let mut word = self.day.load(Ordering::Relaxed);
        loop {
            let (current, amount) = unpack(word);
            // The day rolled over since: that day's counter is gone, nothing to give back.
            if current != charged {
                return;
            }
            let next = pack(current, amount.saturating_sub(micros));
            match self.day.compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => word = seen,
            }
        }
    }

    /// **Deliberately broken** (loom-tests only): check-then-store instead of CAS, so two
    /// threads can both pass the check. The loom suite must catch it.
    #[cfg(holon_loom)]
    #[doc(hidden)]
    pub fn reserve_racy(&self, worst_micros: u64, limits: LedgerLimits) -> Result<Charge, CodeSet> {
        let used = self.used.load(Ordering::Relaxed);
        if used + worst_micros > limits.total_micros {
            return Err(CodeSet::EMPTY.with(Code::TotalExceeded));
        }
        self.used.store(used + worst_micros, Ordering::Relaxed);
        Ok(Charge { worst_micros, day: None })
    }
}

#[cfg(all(test, not(holon_loom)))]
mod tests {
    use super::*;

    const L: LedgerLimits = LedgerLimits { total_micros: 100, day_micros_max: Some(60) };

    #[test]
    fn reserve_settle_release_keep_exact_totals() {
        let l = Ledger::new();
        let a = l.reserve(40, 10, L).unwrap();
        let b = l.reserve(20, 10, L).unwrap();
        assert_eq!(l.reserve(1, 10, L), Err(CodeSet::EMPTY.with(Code::PerDayExceeded)));
        assert_eq!(l.used_micros(), 60, "a refused day reserve gives `used` back");
        assert_eq!(l.settle(a, 15), 15);
        l.release(b);
        assert_eq!((l.used_micros(), l.settled_micros(), l.day_micros(10)), (15, 15, 15));
        // Settling above the worst case keeps the worst case.
        let c = l.reserve(5, 10, L).unwrap();
        assert_eq!(l.settle(c, 9), 5);
        assert_eq!((l.used_micros(), l.settled_micros()), (20, 20));
    }

    #[test]
    fn a_new_day_starts_at_zero_but_total_remembers() {
        let l = Ledger::new();
        let a = l.reserve(60, 10, L).unwrap();
        assert!(l.reserve(1, 10, L).is_err());
        let b = l.reserve(40, 11, L).unwrap();
        assert_eq!(l.day_micros(11), 40);
        assert_eq!(l.reserve(1, 11, L), Err(CodeSet::EMPTY.with(Code::TotalExceeded)));
        // Releasing yesterday's charge does not touch today's word.
        l.release(a);
        assert_eq!((l.day_micros(11), l.used_micros()), (40, 40));
        l.release(b);
        assert_eq!((l.day_micros(11), l.used_micros()), (0, 0));
        // A lagging clock charges the later day already in the word.
        let c = l.reserve(5, 9, L).unwrap();
        assert_eq!(c.day, Some(11));
    }

    #[test]
    fn no_day_limit_means_no_day_word_and_overflow_is_exceeded() {
        let l = Ledger::new();
        let lim = LedgerLimits { total_micros: u64::MAX, day_micros_max: None };
        let a = l.reserve(u64::MAX, 1, lim).unwrap();
        assert_eq!(a.day, None);
        assert!(l.reserve(1, 1, lim).is_err());
        assert!(l.reserve(1, DAY_NUMBER_MAX + 1, lim).unwrap_err().contains(Code::InternalError));
    }
}
