//! The atomic per-mandate ledger: what is reserved plus settled against `total`, and the
//! same for the current UTC day against `per_day`, in micro-units, updated by
//! compare-and-swap so that parallel calls can never overrun a limit.
//!
//! # The central words
//! - `claimed` = reserved + settled + **leased** against `total`;
//! - `day` = the UTC day number (high 16 bits) and what is reserved + settled + leased on
//!   it (low 48 bits), a [`DayWord`](words::DayWord). A reservation on a later day than the
//!   word's starts the day at 0.
//!
//! What the ledger reports as **spent** ([`Ledger::spent_micros`]) is reserved + settled:
//! the claimed word less what waits in leases. The conservation rule
//! `claimed = reserved + settled + leased` is checked at quiescence by [`Ledger::audit`].
//!
//! An exact reservation takes `claimed` first, then `day`; if the day is full it refunds
//! `claimed`. Each limit is a property of one atomic word, and every increase of a word is a
//! CAS that checks its limit, so no interleaving can take a word above its limit. The only
//! cost of the two-step reserve is conservative: between the two steps another call may
//! see `claimed` higher than it will end up and be denied; it is never allowed wrongly.
//!
//! # Leases (why one hot mandate scales)
//! If every call did its CASes on the central words, two threads on one mandate would
//! pass that cache line back and forth five times per call and together run slower than
//! one thread (measured: 0.5x). So a thread takes budget in **leases**: one exact
//! reservation of up to [`LEASE_CALLS`] times the call's worst case, of which the call
//! keeps its worst case and the rest waits in the thread's shard (one of
//! [`LEASE_SHARDS`], each on its own cache lines). The next calls of that thread reserve
//! from the shard with one uncontended CAS, and their settles give back to it.
//!
//! A lease is counted in `claimed` and in the day word like a reservation, so **leases never
//! weaken safety**: reserved + settled <= reserved + settled + leased = `claimed` <= limit.
//! What they could weaken is a denial (budget idle in another thread's lease), and three
//! rules keep that honest:
//! - a lease takes at most 1/[`LEASE_SHARE_DIVISOR`] of what remains of the total and of
//!   the day, so near the limit there are no leases and every call is exact;
//! - before a call is denied for its budget, every shard's lease is refunded and the
//!   exact reservation is tried once more; so a call is denied only if it does not fit
//!   what is reserved and settled, unless another thread took a new lease in that
//!   instant (which the first rule allows only while plenty of budget remains);
//! - a lease is tagged with its day and with the **epoch of the limits** it was taken
//!   under (bumped when a publish changes the mandate's limits): a call uses only a lease
//!   of its own day and of the limits it is checked against, so a lowered limit is never
//!   spent through a lease taken under the old one.
//!
//! A lease word ([`LeaseWord`](words::LeaseWord)) is
//! `live (1 bit) | epoch (16 bits) | day (16 bits) | micro-units (31 bits)`; a refunded
//! lease is the word 0 (not live), so no later settle can revive it. The epoch advances
//! only when a publish that changed the limits succeeds (a failed publish leaves it), and
//! every such publish refunds the leases of other epochs; a lease would have to
//! outlive 65,536 limit-changing publishes to meet its epoch again.
//!
//! # The day a call may open
//! A call on a later day than the day word's starts that day at 0. The day it may open is
//! at most the **engine's clock's** day ([`Ledger::reserve_clocked`]): a call whose `at`
//! runs ahead is charged to the clock's day (or the word's, if later), so it can neither
//! reset the word nor spend a fresh `per_day` early. The clock is read only then (once a
//! day per mandate), never on the path that stays within a day.
//!
//! # Orderings
//! Every limit is a property of a single atomic location, which the modification order of
//! that location alone guarantees, so the counters need no ordering with other memory:
//! `Relaxed` throughout. Moving an amount between a shard and the central words is two
//! RMWs on two locations; in between, the amount is counted in the central words only
//! (never in neither), so `claimed` never under-counts. What a reservation's holder must see
//! of other memory travels through the reservation table (`slots.rs`), not through here.
//!
//! # Refunds: one verb family
//! Money goes back only through `refund*`, each saying which words it moves:
//! [`Ledger::settle`] keeps the actual cost and refunds the rest of a charge;
//! [`Ledger::refund`] refunds a whole charge; internally `refund_part` sends part of a
//! charge to the lease it came from (`refund_to_lease`) or to the central words
//! (`refund_central`: `claimed` by `refund_claimed`, the day word by `refund_day`);
//! [`Ledger::refund_all_leases`] and [`Ledger::refund_stale_leases`] empty lease shards
//! into the central words.
//!
//! # Assertions
//! Every read-modify-write checks what it read and what it wrote with `debug_assert!`
//! (no underflow, nothing above its limit, the expected lease transitions): they fire in
//! tests, proptests and loom models and compile out of release builds.

// The ledger's items are `pub` for `engine::internals` (the `internals` feature: holon's
// own loom models and stress tests); without it they are the engine's alone.
#![cfg_attr(not(feature = "internals"), allow(unreachable_pub))]

mod allowance;
#[cfg(any(test, feature = "internals"))]
mod audit;
mod lease;
mod refund;
#[cfg(all(test, not(holon_loom)))]
mod tests;
mod words;

use crossbeam_utils::CachePadded;

use crate::admission::{Code, CodeSet};
use crate::sync::{AtomicBool, AtomicU64, Ordering};

#[cfg(feature = "internals")]
pub use allowance::AllowanceError;
pub use allowance::{ALLOWANCE_CAP_MICROS, StoreState};
#[cfg(any(test, feature = "internals"))]
pub use audit::AuditError;
pub(super) use words::{DAY_MICROS_MAX, DAY_NUMBER_MAX};

use lease::Shard;
use words::{DAYLESS, DayWord, Tag};

/// Lease shards per ledger: threads are spread over them by thread number. Eight keeps a
/// ledger at 1 KiB (10,000 mandates: 10 MiB); under loom two, which is enough for every
/// interleaving between shards and keeps the models small.
#[cfg(not(holon_loom))]
pub(super) const LEASE_SHARDS: usize = 8;
#[cfg(holon_loom)]
pub(super) const LEASE_SHARDS: usize = 2;
/// A lease holds at most this many worst cases of the call that takes it.
pub(super) const LEASE_CALLS: u64 = 32;
/// A lease takes at most this fraction (1/n) of what remains of the total and of the day.
pub(super) const LEASE_SHARE_DIVISOR: u64 = 32;

/// The limits a reservation is checked against, in micro-units (from the live snapshot,
/// so an updated mandate's new limits apply to the same ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerLimits {
    pub total_micros: u64,
    /// `None`: no daily limit, and the day word is not kept.
    pub day_micros_max: Option<u64>,
    /// Which limits these are, for this ledger ([`Ledger::epoch_for`]): leases are used
    /// only under the limits they were taken under.
    pub epoch: u16,
}

/// What one reservation took: needed to settle or refund it exactly. 16 bytes: it
/// travels inside every `Reservation`, which the hot path moves by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Charge {
    pub worst_micros: u64,
    /// The day charged (`Tag::day`) and, for a leased charge, the lease's epoch.
    tag: Tag,
    /// Whether the day word was charged (for `tag`'s day).
    has_day: bool,
    /// The lease shard it was taken from, or [`NOT_LEASED`].
    shard: u8,
}

/// [`Charge::shard`] of a charge not taken from a lease.
const NOT_LEASED: u8 = u8::MAX;
// Every shard number fits a charge's `u8` below `NOT_LEASED`.
const _: () = assert!(LEASE_SHARDS < NOT_LEASED as usize);

impl Charge {
    /// A charge on the central words: `worst`, and `day` if the day word was charged.
    pub fn exact(worst_micros: u64, day: Option<u64>) -> Self {
        let tag = Tag::new(0, day.unwrap_or(DAYLESS).min(DAY_NUMBER_MAX));
        Charge { worst_micros, tag, has_day: day.is_some(), shard: NOT_LEASED }
    }

    /// The day number the amount was charged to, if the day word was charged.
    pub fn day(&self) -> Option<u64> {
        self.has_day.then(|| self.tag.day())
    }

    /// Whether it was taken from a lease (what it refunds goes back there).
    pub fn is_leased(&self) -> bool {
        self.shard != NOT_LEASED
    }
}

/// The central words and the publish-only terms, on cache lines of their own.
#[derive(Debug)]
struct Central {
    /// Reserved + settled + leased: the word `total` is enforced on.
    claimed: AtomicU64,
    /// Settled (kept) amounts of reservations that ended on no shard.
    settled: AtomicU64,
    /// A [`DayWord`]: the word `per_day` is enforced on.
    day: AtomicU64,
    /// The limits last compiled for this ledger and their epoch (publish only).
    terms: parking_lot::Mutex<Option<(u64, Option<u64>, u16)>>,
    /// A store-backed ledger's allowance bookkeeping (`allowance.rs`): off the hot path.
    allowance: allowance::Words,
    /// Admits only what a node's store leases granted it (`allowance.rs`): its words start
    /// full of what is withheld, and its limits are the allowance caps. Here, on the
    /// central line, so the ledger stays nine lines.
    store_backed: bool,
    /// Its mandate is on the published revocation list (set by each publish; read by a
    /// settle for its receipt). A byte in the central line's padding.
    revoked: AtomicBool,
}

/// Reserved and settled amounts of one mandate (or of one delegated run).
///
/// The central words and each lease shard are [`CachePadded`] (two cache lines on
/// x86-64): ledgers are allocated one after another when a snapshot is compiled, and
/// without the padding two mandates' counters shared a line, so threads on *different*
/// mandates contended.
#[derive(Debug)]
pub struct Ledger {
    central: CachePadded<Central>,
    shards: [CachePadded<Shard>; LEASE_SHARDS],
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new()
    }
}

/// Adds `micros` to a word, saturating (restored spend only).
fn saturating_add(word: &AtomicU64, micros: u64) {
    // Relaxed: single-location RMWs, as everywhere in the ledger.
    let mut seen = word.load(Ordering::Relaxed);
    loop {
        let next = seen.saturating_add(micros);
        debug_assert!(next >= seen, "restored spend never lowers a word");
        // Relaxed: as above.
        match word.compare_exchange_weak(seen, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(before) => {
                debug_assert_eq!(before, seen);
                return;
            }
            Err(now) => seen = now,
        }
    }
}

impl Ledger {
    pub fn new() -> Self {
        Ledger::with_claimed(0, false)
    }

    /// Marks the mandate revoked or not (each publish).
    pub(crate) fn set_revoked(&self, revoked: bool) {
        // Relaxed: a note for receipts; admission reads revocation from the snapshot.
        self.central.revoked.store(revoked, Ordering::Relaxed);
    }
    /// Whether the last publish had the mandate on the revocation list.
    pub(crate) fn is_revoked(&self) -> bool {
        // Relaxed: see `set_revoked`.
        self.central.revoked.load(Ordering::Relaxed)
    }

    fn with_claimed(claimed_micros: u64, store_backed: bool) -> Self {
        Ledger {
            central: CachePadded::new(Central {
                claimed: AtomicU64::new(claimed_micros),
                settled: AtomicU64::new(0),
                day: AtomicU64::new(0),
                terms: parking_lot::Mutex::new(None),
                allowance: allowance::Words::new(claimed_micros),
                store_backed,
                revoked: AtomicBool::new(false),
            }),
            shards: std::array::from_fn(|_| CachePadded::new(Shard::default())),
        }
    }

    /// The epoch of these limits for this ledger: the same as the last committed one if
    /// they did not change, the next one if they did. Called when a snapshot is compiled;
    /// changes nothing ([`Ledger::commit_epoch`] does, once the snapshot is published).
    pub fn epoch_for(&self, total_micros: u64, day_micros_max: Option<u64>) -> u16 {
        match *self.central.terms.lock() {
            Some((total, day, epoch)) if (total, day) == (total_micros, day_micros_max) => epoch,
            Some((_, _, epoch)) => epoch.wrapping_add(1),
            None => 0,
        }
    }

    /// Records the limits of a published snapshot and their epoch: only a publish that
    /// succeeded advances the epoch, so failed publishes can never wrap it onto a lease.
    pub fn commit_epoch(&self, limits: LedgerLimits) {
        let mut terms = self.central.terms.lock();
        let before = terms.map(|(_, _, e)| e);
        debug_assert!(before.is_none_or(|e| limits.epoch == e || limits.epoch == e.wrapping_add(1)));
        *terms = Some((limits.total_micros, limits.day_micros_max, limits.epoch));
        debug_assert!(terms.is_some_and(|(_, _, e)| e == limits.epoch));
    }

    /// Adds restored spend (settled) to this ledger: `spent` to the total, and the day's
    /// amount when it is for the word's day or a later one. Saturates rather than wraps.
    pub fn absorb(&self, spent_micros: u64, day: u64, day_micros: u64) {
        saturating_add(&self.central.settled, spent_micros);
        saturating_add(&self.central.claimed, spent_micros);
        let (day, day_micros) = (day.min(DAY_NUMBER_MAX), day_micros.min(DAY_MICROS_MAX));
        // Relaxed: a single-location RMW loop (see the module comment).
        let mut word = self.central.day.load(Ordering::Relaxed);
        loop {
            let (current, micros) = DayWord::from_bits(word).parts();
            let next = match day.cmp(&current) {
                std::cmp::Ordering::Less => return,
                std::cmp::Ordering::Equal => DayWord::new(day, micros.saturating_add(day_micros).min(DAY_MICROS_MAX)),
                std::cmp::Ordering::Greater => DayWord::new(day, day_micros),
            };
            debug_assert!(next.day() >= current, "restored spend never moves the day word back");
            // Relaxed: as above.
            match self.central.day.compare_exchange_weak(word, next.bits(), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => word = seen,
            }
        }
    }

    /// Spent: reserved + settled against `total` (not what waits in leases). Exact when no
    /// call is running; while calls run, a moment's estimate that never exceeds
    /// [`Ledger::claimed_micros`].
    pub fn spent_micros(&self) -> u64 {
        let claimed = self.claimed_micros();
        claimed.saturating_sub(self.leased(|_| true)).saturating_sub(self.withheld_micros())
    }

    /// Reserved + settled + leased: the word the total limit is enforced on. Never above
    /// the limit at any moment, which makes it the right figure for a budget audit.
    pub fn claimed_micros(&self) -> u64 {
        // Relaxed: a single location, read on its own (see the module comment).
        self.central.claimed.load(Ordering::Relaxed)
    }

    /// Settled (kept) amounts.
    pub fn settled_micros(&self) -> u64 {
        // Relaxed: counters only summed (an estimate while calls run, exact at rest).
        let shards: u64 = self.shards.iter().map(|s| s.settled.load(Ordering::Relaxed)).sum();
        // Relaxed: as above.
        self.central.settled.load(Ordering::Relaxed).saturating_add(shards)
    }

    /// (reserved, settled), read together: reserved is spent less settled. The words are
    /// read one after the other while calls run, and a settle between the two reads can
    /// show settled above spent for that moment: reserved then reads 0 (a display figure,
    /// never an amount the ledger acts on).
    pub fn reserved_and_settled_micros(&self) -> (u64, u64) {
        let settled = self.settled_micros();
        (self.spent_micros().saturating_sub(settled), settled)
    }

    /// Spent (reserved + settled) on `today` (0 when the word holds an earlier day).
    pub fn spent_day_micros(&self, today: u64) -> u64 {
        let (day, micros) = self.spent_day_word();
        // A word already on a later day (a caller's clock behind) counts in full:
        // conservative, like `reserve`.
        if day >= today { micros } else { 0 }
    }

    /// The day word as (day number, spent on it: reserved + settled), for export and
    /// reports.
    pub fn spent_day_word(&self) -> (u64, u64) {
        let (day, micros) = self.claimed_day_word();
        let leased = self.leased(|tag| tag.charged_day() == Some(day));
        (day, micros.saturating_sub(leased).saturating_sub(self.withheld_day_micros(day)))
    }

    /// The day word with what waits in leases (the word `per_day` is enforced on).
    pub fn claimed_day_word(&self) -> (u64, u64) {
        // Relaxed: a single location, read on its own.
        DayWord::from_bits(self.central.day.load(Ordering::Relaxed)).parts()
    }

    /// Reserves `worst` if neither `total` nor today's limit would be exceeded, from the
    /// calling thread's lease shard.
    #[cfg(any(test, feature = "internals"))]
    pub fn reserve(&self, worst_micros: u64, today: u64, limits: LedgerLimits) -> Result<Charge, CodeSet> {
        self.reserve_on(crate::sync::lease_shard(), worst_micros, today, limits)
    }

    /// [`Ledger::reserve`] on a given lease shard (tests use it to play several threads).
    /// The call's day is trusted to open a new day (no clock: tests and models).
    #[cfg(any(test, feature = "internals"))]
    pub fn reserve_on(
        &self,
        shard: usize,
        worst_micros: u64,
        today: u64,
        limits: LedgerLimits,
    ) -> Result<Charge, CodeSet> {
        self.reserve_clocked(shard, worst_micros, today, limits, || today)
    }

    /// [`Ledger::reserve_on`] for a call whose day (`today`, from the caller's `at`) may
    /// open a new day word only up to `clock_day()`, the engine's clock's day: a call whose
    /// `at` runs ahead is charged to the clock's day (or the word's, if later) instead.
    /// `clock_day` is called only when the call's day is later than the word's. Inlined:
    /// not inlined into `decide`, the gate counted 1,030 instructions per call, not 980.
    #[inline(always)]
    pub fn reserve_clocked(
        &self,
        shard: usize,
        worst_micros: u64,
        today: u64,
        limits: LedgerLimits,
        clock_day: impl Fn() -> u64,
    ) -> Result<Charge, CodeSet> {
        if today > DAY_NUMBER_MAX {
            return Err(CodeSet::EMPTY.with(Code::InternalError));
        }
        let shard = shard % LEASE_SHARDS;
        if let Some(charge) = self.draw_lease(shard, worst_micros, today, limits) {
            return Ok(charge);
        }
        match self.take(worst_micros, today, limits, Some(shard), &clock_day) {
            Ok(charge) => Ok(charge),
            // Budget may be idle in leases: refund them all and try once more, so that a
            // denial means the call does not fit what is reserved and settled.
            Err(_) if self.refund_all_leases() > 0 => self.take(worst_micros, today, limits, None, &clock_day),
            Err(codes) => Err(codes),
        }
    }

    /// The reservation on the central words: `claimed`, then the day word. With
    /// `lease_into` it also takes a lease for that shard in the same two CASes, when there
    /// is room for one ([`lease::lease_extra`]): the call keeps `worst`, the rest goes to
    /// the shard.
    fn take(
        &self,
        worst_micros: u64,
        today: u64,
        limits: LedgerLimits,
        lease_into: Option<usize>,
        clock_day: &impl Fn() -> u64,
    ) -> Result<Charge, CodeSet> {
        // Day 0 cannot tag a lease under a daily limit (it means `DAYLESS`).
        let lease_into = lease_into.filter(|_| limits.day_micros_max.is_none() || today != DAYLESS);
        // Step 1: `claimed`. A failed CAS backs off (spins a little longer each time) so
        // two threads on one hot mandate do not keep stealing the line from each other.
        let backoff = crossbeam_utils::Backoff::new();
        // Relaxed: see the module comment.
        let mut claimed = self.central.claimed.load(Ordering::Relaxed);
        let extra = loop {
            let Some(left) = limits.total_micros.checked_sub(claimed).filter(|left| *left >= worst_micros) else {
                return Err(CodeSet::EMPTY.with(Code::TotalExceeded));
            };
            let extra = if lease_into.is_some() { lease::lease_extra(left, worst_micros) } else { 0 };
            // Cannot overflow: claimed + worst + extra <= claimed + left = total.
            let next = claimed + worst_micros + extra;
            debug_assert!(next <= limits.total_micros, "a reservation never takes `claimed` above the total");
            // Relaxed: a single-location RMW (see the module comment).
            match self.central.claimed.compare_exchange_weak(claimed, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(before) => {
                    debug_assert_eq!(before, claimed);
                    break extra;
                }
                Err(seen) => {
                    claimed = seen;
                    backoff.spin();
                }
            }
        };
        let (day, extra) = match limits.day_micros_max {
            None => (None, extra),
            Some(day_max) => {
                let (day, day_extra) = self.take_day(worst_micros, extra, today, day_max, clock_day)?;
                // The day had less room for a lease than the total: refund the difference.
                if day_extra < extra {
                    self.refund_claimed(extra - day_extra);
                }
                if day == DAYLESS && day_extra > 0 {
                    // Charged to day 0 (a clock at 1970): no lease can be tagged with it.
                    self.refund_central(Some(day), day_extra);
                    (Some(day), 0)
                } else {
                    (Some(day), day_extra)
                }
            }
        };
        // A store-backed ledger's lease unit: the largest worst case it reserved (a refused
        // call's is only the next refill's need, so one oversized call cannot inflate it).
        if self.central.store_backed {
            self.central.allowance.note_worst(worst_micros);
        }
        let mut charge = Charge::exact(worst_micros, day);
        if let (Some(shard), true) = (lease_into, extra > 0) {
            // The day actually charged (a word on a later day keeps its day).
            let tag = Tag::new(limits.epoch, day.unwrap_or(DAYLESS));
            self.open_lease(shard, tag, extra);
            charge = Self::leased_charge(worst_micros, shard, tag, limits);
        }
        Ok(charge)
    }

    /// Step 2 of [`Ledger::take`]: charges `worst` (and up to `extra` for a lease) to the
    /// day word. Returns the day charged and the lease part it took. On refusal refunds
    /// step 1 (`worst + extra`) to `claimed`.
    fn take_day(
        &self,
        worst_micros: u64,
        extra: u64,
        today: u64,
        day_max: u64,
        clock_day: &impl Fn() -> u64,
    ) -> Result<(u64, u64), CodeSet> {
        // Relaxed: a single-location RMW loop (see the module comment).
        let mut word = self.central.day.load(Ordering::Relaxed);
        // The engine's day, read at most once (only when the call's day is later).
        let mut clock: Option<u64> = None;
        loop {
            let (day, micros) = DayWord::from_bits(word).parts();
            // A new day starts at 0, but never a day after the engine's clock (a call whose
            // `at` runs ahead must not reset the word); a word on a later day than ours
            // keeps its day and takes our amount (never let a lagging clock open a fresh day).
            let (charge_day, base) = if today > day {
                let open = today.min(*clock.get_or_insert_with(|| clock_day().min(DAY_NUMBER_MAX)));
                if open > day { (open, self.fresh_day_base()) } else { (day, micros) }
            } else {
                (day, micros)
            };
            let cap = day_max.min(DAY_MICROS_MAX);
            let Some(left) = cap.checked_sub(base).filter(|left| *left >= worst_micros) else {
                self.refund_claimed(worst_micros + extra);
                return Err(CodeSet::EMPTY.with(Code::PerDayExceeded));
            };
            let day_extra = if extra > 0 { lease::lease_extra(left, worst_micros).min(extra) } else { 0 };
            let next = DayWord::new(charge_day, base + worst_micros + day_extra);
            debug_assert!(next.micros() <= cap && charge_day >= day, "the day word stays within its limit");
            // Relaxed: as above.
            match self.central.day.compare_exchange_weak(word, next.bits(), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok((charge_day, day_extra)),
                Err(seen) => word = seen,
            }
        }
    }
}
