//! A store-backed ledger: a node's ledger that admits only what the ledger store granted
//! this node in leases (docs/store.md, "The node side").
//!
//! The hot path does not change. The allowance lives in the words the reservation CAS
//! already checks: a store-backed ledger's limits are the caps [`ALLOWANCE_CAP_MICROS`] and
//! [`DAY_MICROS_MAX`], and what no lease granted is **withheld**, counted in the words as if
//! it were spent. So `claimed = reserved + settled + leased + withheld <= cap` is exactly
//! `reserved + settled + leased <= granted`: a node can never admit more than its leases.
//!
//! - A grant (the node's background thread, [`Ledger::grant_allowance`]) lowers `claimed`
//!   and, for a lease of a UTC day, the day word. A grant for a later day than the day
//!   word's **opens** that day with the whole day withheld but the grant. Calls never open a
//!   day on a store-backed ledger: a new day starts withheld in full, so a call on it is
//!   refused until the node holds a lease of that day.
//! - A give-back ([`Ledger::withdraw_allowance`]) raises the words by a compare-and-swap
//!   that checks the cap, so it takes only what no call has reserved.
//!
//! Both are single-location RMWs, like every step of the ledger: `Relaxed` (see the
//! ledger's module comment). Only one writer at a time changes the allowance (a mutex,
//! never taken on the hot path).

use super::words::{DAY_MICROS_MAX, DayWord};
use super::{Central, Ledger};
use crate::admission::{Code, CodeSet};
use crate::sync::{AtomicU64, Ordering};

/// A store-backed ledger's total limit: what its `claimed` word is checked against, and
/// what it withholds before the first grant (about 4.6 million million units). A node's
/// leases, summed over its life, never reach it (a mandate's total is far smaller).
pub const ALLOWANCE_CAP_MICROS: u64 = 1 << 62;
const _: () = assert!(
    ALLOWANCE_CAP_MICROS == crate::mandate::limits::TOTAL_MICROS_MAX,
    "a total the table admits fits the allowance"
);

/// What the node last learned from the store about a mandate: it says which code a call
/// gets when it does not fit the node's allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreState {
    /// The store has budget, or the node has not asked yet: a refill is due
    /// (`lease_pending`).
    Leasing = 0,
    /// The store granted nothing: the total is spent or leased to other nodes
    /// (`total_exceeded`).
    TotalExhausted = 1,
    /// The store granted nothing for the day (`per_day_exceeded`).
    DayExhausted = 2,
    /// The store could not be reached (`store_unavailable`, fail closed).
    Unavailable = 3,
}

/// The bits of the state word that hold the [`StoreState`].
const STATE_BITS: u64 = 0b11;

impl StoreState {
    fn from_bits(bits: u64) -> StoreState {
        match bits {
            0 => StoreState::Leasing,
            1 => StoreState::TotalExhausted,
            2 => StoreState::DayExhausted,
            _ => StoreState::Unavailable,
        }
    }

    /// The code of a call refused for want of allowance in this state.
    pub fn code(self) -> Code {
        match self {
            StoreState::Leasing => Code::LeasePending,
            StoreState::TotalExhausted => Code::TotalExceeded,
            StoreState::DayExhausted => Code::PerDayExceeded,
            StoreState::Unavailable => Code::StoreUnavailable,
        }
    }
}

/// Why a grant cannot be applied (the node gives the lease back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AllowanceError {
    #[error("the ledger keeps its budget in memory, not in a store")]
    NotStoreBacked,
    #[error("a grant of {micros} does not fit what the ledger withholds")]
    Overfull { micros: u64 },
    #[error("a grant for day {day} came after the ledger moved on to day {current}")]
    PastDay { day: u64, current: u64 },
}

/// The allowance bookkeeping of a ledger (used only when it is store-backed).
#[derive(Debug)]
pub(super) struct Words {
    /// What `claimed` counts that no lease granted.
    withheld: AtomicU64,
    /// A [`DayWord`]: the day the allowance opened and what its day word withholds.
    withheld_day: AtomicU64,
    /// A [`StoreState`] in the low two bits; above them the smallest worst case an
    /// exhausted state was judged for (a smaller call refused meanwhile may still fit what
    /// is left: it is told `lease_pending`, and the node asks again for it). One word, so
    /// the central line stays one line.
    state: AtomicU64,
    /// The largest worst case a call took on the central words (the node's lease unit).
    worst_max: AtomicU64,
    /// The largest worst case refused for want of allowance since the node last looked,
    /// of the calls told to wait (`lease_pending`, `store_unavailable`): those a lease may
    /// still serve.
    need: AtomicU64,
    /// One allowance writer at a time (the node's thread; never the hot path).
    writer: parking_lot::Mutex<()>,
}

impl Words {
    pub(super) fn new(withheld_micros: u64) -> Self {
        Words {
            withheld: AtomicU64::new(withheld_micros),
            withheld_day: AtomicU64::new(0),
            state: AtomicU64::new(StoreState::Leasing as u64),
            worst_max: AtomicU64::new(0),
            need: AtomicU64::new(0),
            writer: parking_lot::Mutex::new(()),
        }
    }

    /// Notes a worst case taken on the central words (a cheap read first: the RMW only when
    /// it is a new maximum).
    #[inline]
    pub(super) fn note_worst(&self, worst_micros: u64) {
        // Relaxed: a statistic for the node's lease size; no other memory depends on it.
        if worst_micros > self.worst_max.load(Ordering::Relaxed) {
            // Relaxed: as above.
            self.worst_max.fetch_max(worst_micros, Ordering::Relaxed);
        }
    }
}

impl Ledger {
    /// A ledger that admits only what [`Ledger::grant_allowance`] grants it.
    pub fn new_store_backed() -> Self {
        Ledger::with_claimed(ALLOWANCE_CAP_MICROS, true)
    }

    pub fn is_store_backed(&self) -> bool {
        self.central.store_backed
    }

    fn words(&self) -> &Words {
        &self.central.allowance
    }

    /// The limits the words are checked against for a mandate's `total` and `per_day`:
    /// those, or for a store-backed ledger the allowance caps (the store enforces the
    /// mandate's limits on its grants).
    pub fn enforced(&self, total_micros: u64, day_micros_max: Option<u64>) -> (u64, Option<u64>) {
        if self.central.store_backed {
            (ALLOWANCE_CAP_MICROS, day_micros_max.map(|_| DAY_MICROS_MAX))
        } else {
            (total_micros, day_micros_max)
        }
    }

    /// What a new day's word starts at: 0, or for a store-backed ledger withheld in full
    /// (only a grant of that day opens it).
    #[inline]
    pub(super) fn fresh_day_base(&self) -> u64 {
        if self.central.store_backed { DAY_MICROS_MAX } else { 0 }
    }

    /// What `claimed` withholds (0 for a ledger that is not store-backed).
    pub(super) fn withheld_micros(&self) -> u64 {
        // Relaxed: a single location read on its own (an estimate while the node grants).
        if self.central.store_backed { self.words().withheld.load(Ordering::Relaxed) } else { 0 }
    }

    /// What the day word withholds on `day`.
    pub(super) fn withheld_day_micros(&self, day: u64) -> u64 {
        if !self.central.store_backed {
            return 0;
        }
        // Relaxed: as above.
        let (opened, micros) = DayWord::from_bits(self.words().withheld_day.load(Ordering::Relaxed)).parts();
        if opened == day { micros } else { 0 }
    }

    /// Reserved + settled + leased to threads: what the node's calls hold of its leases.
    pub fn used_micros(&self) -> u64 {
        self.claimed_micros().saturating_sub(self.withheld_micros())
    }

    /// Granted to this ledger so far, less what was withdrawn (0 for a ledger that is not
    /// store-backed): what calls may hold in all (reserved + settled + leased).
    pub fn allowance_granted_micros(&self) -> u64 {
        if !self.central.store_backed {
            return 0;
        }
        ALLOWANCE_CAP_MICROS.saturating_sub(self.withheld_micros())
    }

    /// Granted and not used: room for calls before the node needs another lease.
    pub fn allowance_free_micros(&self) -> u64 {
        if !self.central.store_backed {
            return u64::MAX;
        }
        ALLOWANCE_CAP_MICROS.saturating_sub(self.claimed_micros())
    }

    /// The day the allowance's day word is on and the room on it (`None` before any grant
    /// of a day).
    pub fn allowance_day(&self) -> Option<(u64, u64)> {
        let (day, micros) = self.claimed_day_word();
        (self.central.store_backed && day != 0).then(|| (day, DAY_MICROS_MAX.saturating_sub(micros)))
    }

    /// Adds `micros` granted by a store lease to the allowance: to the total, and to `day`'s
    /// word for a lease of a day (opening that day if the word is on an earlier one).
    pub fn grant_allowance(&self, micros: u64, day: Option<u64>) -> Result<(), AllowanceError> {
        if !self.central.store_backed {
            return Err(AllowanceError::NotStoreBacked);
        }
        let w = self.words();
        let _writer = w.writer.lock();
        // Relaxed: the writer lock makes this thread the only writer of `withheld`.
        if w.withheld.load(Ordering::Relaxed) < micros || (micros > DAY_MICROS_MAX && day.is_some()) {
            return Err(AllowanceError::Overfull { micros });
        }
        if let Some(day) = day {
            self.open_day(w, day, micros)?;
        }
        // Relaxed: single-location RMWs; `withheld` first so it never exceeds `claimed`.
        let before = w.withheld.fetch_sub(micros, Ordering::Relaxed);
        // Relaxed: as above.
        let claimed = self.central.claimed.fetch_sub(micros, Ordering::Relaxed);
        debug_assert!(before >= micros && claimed >= micros, "a grant never lowers a word below 0");
        debug_assert!(claimed - micros >= before - micros, "claimed still counts what is withheld");
        Ok(())
    }

    /// Step 1 of a day grant: lowers `day`'s word by `micros`, or opens `day` with all
    /// but `micros` withheld.
    fn open_day(&self, w: &Words, day: u64, micros: u64) -> Result<(), AllowanceError> {
        let central: &Central = &self.central;
        // Relaxed: a single-location RMW loop (see the ledger's module comment).
        let mut word = central.day.load(Ordering::Relaxed);
        loop {
            let (current, held) = DayWord::from_bits(word).parts();
            let next = match day.cmp(&current) {
                std::cmp::Ordering::Less => return Err(AllowanceError::PastDay { day, current }),
                std::cmp::Ordering::Equal if held >= micros && current != 0 => DayWord::new(day, held - micros),
                std::cmp::Ordering::Equal if current != 0 => return Err(AllowanceError::Overfull { micros }),
                _ => DayWord::new(day, DAY_MICROS_MAX - micros),
            };
            debug_assert!(next.day() >= current, "a grant never moves the day word back");
            // Relaxed: as above.
            match central.day.compare_exchange_weak(word, next.bits(), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(seen) => word = seen,
            }
        }
        // Relaxed: only the writer changes it.
        let (opened, withheld) = DayWord::from_bits(w.withheld_day.load(Ordering::Relaxed)).parts();
        let next = if opened == day { withheld.saturating_sub(micros) } else { DAY_MICROS_MAX - micros };
        // Relaxed: as above.
        w.withheld_day.store(DayWord::new(day, next).bits(), Ordering::Relaxed);
        Ok(())
    }

    /// Takes back up to `micros` of allowance no call uses (to give back to the store): from
    /// the total, and from `day`'s word for a lease of the day the word is on (pass `None`
    /// for a lease of a past day). Returns what it took.
    pub fn withdraw_allowance(&self, micros: u64, day: Option<u64>) -> u64 {
        if !self.central.store_backed || micros == 0 {
            return 0;
        }
        let w = self.words();
        let _writer = w.writer.lock();
        let central: &Central = &self.central;
        // Step 1: `claimed`, checked against the cap (what calls use cannot be taken).
        // Relaxed: a single-location RMW loop (see the ledger's module comment).
        let mut claimed = central.claimed.load(Ordering::Relaxed);
        let taken = loop {
            let take = micros.min(ALLOWANCE_CAP_MICROS.saturating_sub(claimed));
            if take == 0 {
                return 0;
            }
            // Relaxed: as above.
            match central.claimed.compare_exchange_weak(claimed, claimed + take, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break take,
                Err(seen) => claimed = seen,
            }
        };
        // Step 2: the day word, when the lease is of the day it is on.
        let taken = match day {
            None => taken,
            Some(day) => {
                let on_day = self.withdraw_day(day, taken);
                if on_day < taken {
                    self.refund_claimed(taken - on_day);
                }
                on_day
            }
        };
        // Relaxed: only the writer changes it.
        w.withheld.fetch_add(taken, Ordering::Relaxed);
        debug_assert!(self.claimed_micros() <= ALLOWANCE_CAP_MICROS, "a give-back never passes the cap");
        taken
    }

    /// Raises `day`'s word by up to `micros` within its cap; returns what it took.
    fn withdraw_day(&self, day: u64, micros: u64) -> u64 {
        let central: &Central = &self.central;
        // Relaxed: a single-location RMW loop.
        let mut word = central.day.load(Ordering::Relaxed);
        loop {
            let (current, held) = DayWord::from_bits(word).parts();
            if current != day {
                return 0;
            }
            let take = micros.min(DAY_MICROS_MAX - held);
            if take == 0 {
                return 0;
            }
            let next = DayWord::new(day, held + take);
            // Relaxed: as above.
            match central.day.compare_exchange_weak(word, next.bits(), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    let words = self.words();
                    // Relaxed: only the writer changes it.
                    let (opened, withheld) = DayWord::from_bits(words.withheld_day.load(Ordering::Relaxed)).parts();
                    if opened == day {
                        let next = DayWord::new(day, (withheld + take).min(DAY_MICROS_MAX));
                        // Relaxed: as above.
                        words.withheld_day.store(next.bits(), Ordering::Relaxed);
                    }
                    return take;
                }
                Err(seen) => word = seen,
            }
        }
    }

    /// What the node last learned from the store.
    pub fn store_state(&self) -> StoreState {
        // Relaxed: a flag read on the denial path; it selects a code, nothing else.
        StoreState::from_bits(self.words().state.load(Ordering::Relaxed) & STATE_BITS)
    }

    pub fn set_store_state(&self, state: StoreState) {
        self.set_store_state_from(state, 0);
    }

    /// The store's answer for calls of `from_micros` and more (an exhausted total or day is
    /// so for those: a smaller call may still fit what is left).
    pub fn set_store_state_from(&self, state: StoreState, from_micros: u64) {
        let word = (from_micros.min(u64::MAX >> 2) << 2) | state as u64;
        // Relaxed: as above (the state and its bound in one word, read as one).
        self.words().state.store(word, Ordering::Relaxed);
    }

    /// The smallest worst case the store's last exhausted answer covers (0: every call).
    #[cfg(feature = "internals")]
    pub fn exhausted_from_micros(&self) -> u64 {
        // Relaxed: a hint.
        self.words().state.load(Ordering::Relaxed) >> 2
    }

    /// The codes of a call that did not fit the allowance (the denial path), and a note for
    /// the node that a call needing `worst_micros` was refused.
    pub fn allowance_refused(&self, worst_micros: u64) -> CodeSet {
        // Relaxed: one word, the state and its bound together (a hint that selects a code).
        let word = self.words().state.load(Ordering::Relaxed);
        let state = StoreState::from_bits(word & STATE_BITS);
        let exhausted = matches!(state, StoreState::TotalExhausted | StoreState::DayExhausted);
        if exhausted && worst_micros >= word >> 2 {
            return CodeSet::EMPTY.with(state.code());
        }
        // Relaxed: a hint for the node's next refill (a call it may still serve).
        self.words().need.fetch_max(worst_micros, Ordering::Relaxed);
        if exhausted {
            // Judged for larger calls: this one may fit what is left; the node asks for it.
            return CodeSet::EMPTY.with(Code::LeasePending);
        }
        CodeSet::EMPTY.with(state.code())
    }

    /// The largest worst case refused for want of allowance since the last call (resets it).
    pub fn take_need_micros(&self) -> u64 {
        // Relaxed: a hint (see above).
        self.words().need.swap(0, Ordering::Relaxed)
    }

    /// The largest worst case a call took on the central words.
    pub fn worst_max_micros(&self) -> u64 {
        // Relaxed: a statistic.
        self.words().worst_max.load(Ordering::Relaxed)
    }
}
