//! The atomic per-mandate ledger: what is reserved plus settled against `total`, and the
//! same for the current UTC day against `per_day`, in micro-units, updated by
//! compare-and-swap so that parallel calls can never overrun a limit.
//!
//! # The central words
//! - `used` = reserved + settled + **leased** against `total`;
//! - `day` = the UTC day number (high 16 bits) and what is reserved + settled + leased on
//!   it (low 48 bits). A reservation on a later day than the word's starts the day at 0.
//!
//! An exact reservation takes `used` first, then `day`; if the day is full it gives `used`
//! back. Each limit is a property of one atomic word, and every increase of a word is a
//! CAS that checks its limit, so no interleaving can take a word above its limit. The only
//! cost of the two-step reserve is conservative: between the two steps another call may
//! see `used` higher than it will end up and be denied; it is never allowed wrongly.
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
//! A lease is counted in `used` and in the day word like a reservation, so **leases never
//! weaken safety**: reserved + settled <= reserved + settled + leased = `used` <= limit.
//! What they could weaken is a denial (budget idle in another thread's lease), and three
//! rules keep that honest:
//! - a lease takes at most 1/[`LEASE_SHARE_DIVISOR`] of what remains of the total and of
//!   the day, so near the limit there are no leases and every call is exact;
//! - before a call is denied for its budget, every shard's lease is returned and the
//!   exact reservation is tried once more; so a call is denied only if it does not fit
//!   what is reserved and settled, unless another thread took a new lease in that
//!   instant (which the first rule allows only while plenty of budget remains);
//! - a lease is tagged with its day and with the **epoch of the limits** it was taken
//!   under (bumped when a publish changes the mandate's limits): a call uses only a lease
//!   of its own day and of the limits it is checked against, so a lowered limit is never
//!   spent through a lease taken under the old one.
//!
//! A lease word is `live (1 bit) | epoch (16 bits) | day (16 bits) | micro-units (31 bits)`;
//! a returned lease is the word 0 (not live), so no later settle can revive it. The epoch
//! advances only when a publish that changed the limits succeeds (a failed publish leaves
//! it), and every such publish returns the leases of other epochs; a lease would have to
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
//! (never in neither), so `used` never under-counts. What a reservation's holder must see
//! of other memory travels through the reservation table (`slots.rs`), not through here.

use crate::admission::{Code, CodeSet};
use crate::sync::{self, AtomicU64, Ordering};

#[cfg(holon_loom)]
#[doc(hidden)]
pub use crate::sync::pin_lease_shard;

/// Bits of the day word that hold the amount.
const DAY_AMOUNT_BITS: u32 = 48;
/// The largest per-day amount the day word holds (about 281 million units). A mandate
/// with a larger `per_day` is refused when the snapshot is compiled.
pub const DAY_MICROS_MAX: u64 = (1 << DAY_AMOUNT_BITS) - 1;
/// The largest UTC day number (days since 1970): 65535 is in the year 2149.
pub const DAY_NUMBER_MAX: u64 = (1 << (64 - DAY_AMOUNT_BITS)) - 1;

/// Lease shards per ledger: threads are spread over them by thread number. Eight keeps a
/// ledger at 1 KiB (10,000 mandates: 10 MiB); under loom two, which is enough for every
/// interleaving between shards and keeps the models small.
#[cfg(not(holon_loom))]
pub const LEASE_SHARDS: usize = 8;
#[cfg(holon_loom)]
pub const LEASE_SHARDS: usize = 2;
/// A lease holds at most this many worst cases of the call that takes it.
pub const LEASE_CALLS: u64 = 32;
/// A lease takes at most this fraction (1/n) of what remains of the total and of the day.
pub const LEASE_SHARE_DIVISOR: u64 = 32;
/// The bit of a lease word set while the shard holds a lease taken by [`Ledger::take`]
/// (even one drawn down to 0); a returned lease is the word 0.
const LEASE_LIVE: u64 = 1 << 63;
/// Bits of a lease word that hold the amount (the rest: live, epoch and day).
const LEASE_AMOUNT_BITS: u32 = 31;
/// The largest amount one lease holds (about 2,147 units; a call with a larger worst case
/// than a 64th of that reserves exactly, without a lease).
const LEASE_MICROS_MAX: u64 = (1 << LEASE_AMOUNT_BITS) - 1;
/// Bits of a lease tag: the epoch and the day.
const EPOCH_BITS: u32 = 16;
const TAG_DAY_BITS: u32 = 64 - DAY_AMOUNT_BITS;
// The lease word's bit budget: live + epoch + day + amount = 64, and the tag fits a u32.
const _: () = assert!(1 + EPOCH_BITS + TAG_DAY_BITS + LEASE_AMOUNT_BITS == 64);
const _: () = assert!(EPOCH_BITS + TAG_DAY_BITS == 32 && TAG_DAY_BITS == 16);
/// The day of a lease taken without a daily limit (not counted in any day word). Day 0
/// (1970-01-01) is never leased under a daily limit.
const DAYLESS: u64 = 0;

fn pack(day: u64, micros: u64) -> u64 {
    debug_assert!(day <= DAY_NUMBER_MAX && micros <= DAY_MICROS_MAX);
    (day << DAY_AMOUNT_BITS) | micros
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> DAY_AMOUNT_BITS, word & DAY_MICROS_MAX)
}

/// Which limits and day a lease was taken under: `epoch << 16 | day`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Tag(u32);

impl Tag {
    fn new(epoch: u16, day: u64) -> Self {
        debug_assert!(day <= DAY_NUMBER_MAX);
        Tag((u32::from(epoch) << TAG_DAY_BITS) | (day as u32 & 0xFFFF))
    }
    fn epoch(self) -> u16 {
        (self.0 >> TAG_DAY_BITS) as u16
    }
    fn day(self) -> u64 {
        u64::from(self.0 & 0xFFFF)
    }
    /// The day word the lease's amount is counted in (`None`: taken without a daily limit).
    fn charged_day(self) -> Option<u64> {
        Some(self.day()).filter(|d| *d != DAYLESS)
    }
}

fn lease_word(tag: Tag, micros: u64) -> u64 {
    debug_assert!(micros <= LEASE_MICROS_MAX);
    LEASE_LIVE | (u64::from(tag.0) << LEASE_AMOUNT_BITS) | micros
}

fn is_live(word: u64) -> bool {
    word & LEASE_LIVE != 0
}

fn lease_parts(word: u64) -> (Tag, u64) {
    (Tag(((word & !LEASE_LIVE) >> LEASE_AMOUNT_BITS) as u32), word & LEASE_MICROS_MAX)
}

/// What a call reserving `worst` takes beyond it for a lease when `left` remains: a
/// chunk of at most 1/[`LEASE_SHARE_DIVISOR`] of `left` and [`LEASE_CALLS`] worst cases,
/// less the call's own `worst`; 0 when the chunk would not hold two worst cases.
fn lease_extra(left: u64, worst_micros: u64) -> u64 {
    let chunk = (left / LEASE_SHARE_DIVISOR).min(worst_micros.saturating_mul(LEASE_CALLS)).min(LEASE_MICROS_MAX);
    if worst_micros == 0 || chunk < worst_micros.saturating_mul(2) { 0 } else { chunk - worst_micros }
}

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

/// What one reservation took: needed to settle or release it exactly. 16 bytes: it
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

    /// Whether it was taken from a lease (what it gives back goes back there).
    pub fn is_leased(&self) -> bool {
        self.shard != NOT_LEASED
    }
}

/// One thread group's lease and settled amount, on cache lines of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    /// [`lease_word`]: budget taken from the central words and not yet reserved.
    lease: AtomicU64,
    /// Settled (kept) amounts of the reservations that ended through this shard.
    settled: AtomicU64,
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
    shards: [Shard; LEASE_SHARDS],
    /// The limits last compiled for this ledger and their epoch (publish only).
    terms: parking_lot::Mutex<Option<(u64, Option<u64>, u16)>>,
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
    while let Err(now) =
        word.compare_exchange_weak(seen, seen.saturating_add(micros), Ordering::Relaxed, Ordering::Relaxed)
    {
        seen = now;
    }
}

impl Ledger {
    pub fn new() -> Self {
        Ledger {
            used: AtomicU64::new(0),
            settled: AtomicU64::new(0),
            day: AtomicU64::new(0),
            shards: std::array::from_fn(|_| Shard::default()),
            terms: parking_lot::Mutex::new(None),
        }
    }

    /// The epoch of these limits for this ledger: the same as the last committed one if
    /// they did not change, the next one if they did. Called when a snapshot is compiled;
    /// changes nothing ([`Ledger::commit_epoch`] does, once the snapshot is published).
    pub fn epoch_for(&self, total_micros: u64, day_micros_max: Option<u64>) -> u16 {
        match *self.terms.lock() {
            Some((total, day, epoch)) if (total, day) == (total_micros, day_micros_max) => epoch,
            Some((_, _, epoch)) => epoch.wrapping_add(1),
            None => 0,
        }
    }

    /// Records the limits of a published snapshot and their epoch: only a publish that
    /// succeeded advances the epoch, so failed publishes can never wrap it onto a lease.
    pub fn commit_epoch(&self, limits: LedgerLimits) {
        let mut terms = self.terms.lock();
        let before = terms.map(|(_, _, e)| e);
        debug_assert!(before.is_none_or(|e| limits.epoch == e || limits.epoch == e.wrapping_add(1)));
        *terms = Some((limits.total_micros, limits.day_micros_max, limits.epoch));
        debug_assert!(terms.is_some_and(|(_, _, e)| e == limits.epoch));
    }

    /// Adds restored spend (settled) to this ledger: `spent` to the total, and the day's
    /// amount when it is for the word's day or a later one. Saturates rather than wraps.
    pub fn absorb(&self, spent_micros: u64, day: u64, day_micros: u64) {
        saturating_add(&self.settled, spent_micros);
        saturating_add(&self.used, spent_micros);
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

    /// Reserved + settled against `total` (not what waits in leases). Exact when no call
    /// is running; while calls run, a moment's estimate that never exceeds
    /// [`Ledger::claimed_micros`].
    pub fn used_micros(&self) -> u64 {
        let claimed = self.claimed_micros();
        claimed.saturating_sub(self.leased(|_| true))
    }

    /// Reserved + settled + leased: the word the total limit is enforced on. Never above
    /// the limit at any moment, which makes it the right figure for a budget audit.
    pub fn claimed_micros(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Settled (kept) amounts.
    pub fn settled_micros(&self) -> u64 {
        let shards: u64 = self.shards.iter().map(|s| s.settled.load(Ordering::Relaxed)).sum();
        self.settled.load(Ordering::Relaxed).saturating_add(shards)
    }

    /// Reserved + settled on `today` (0 when the word holds an earlier day).
    pub fn day_micros(&self, today: u64) -> u64 {
        let (day, micros) = self.day_word();
        // A word already on a later day (a caller's clock behind) counts in full:
        // conservative, like `reserve`.
        if day >= today { micros } else { 0 }
    }

    /// The day word as (day number, reserved + settled on it), for export and reports.
    pub fn day_word(&self) -> (u64, u64) {
        let (day, micros) = unpack(self.day.load(Ordering::Relaxed));
        (day, micros.saturating_sub(self.leased(|tag| tag.charged_day() == Some(day))))
    }

    /// The day word with what waits in leases (the word `per_day` is enforced on).
    pub fn claimed_day_word(&self) -> (u64, u64) {
        unpack(self.day.load(Ordering::Relaxed))
    }

    fn leased(&self, counts: impl Fn(Tag) -> bool) -> u64 {
        self.shards
            .iter()
            .map(|s| lease_parts(s.lease.load(Ordering::Relaxed)))
            .filter(|(tag, _)| counts(*tag))
            .map(|(_, micros)| micros)
            .sum()
    }

    /// Reserves `worst` if neither `total` nor today's limit would be exceeded, from the
    /// calling thread's lease shard.
    pub fn reserve(&self, worst_micros: u64, today: u64, limits: LedgerLimits) -> Result<Charge, CodeSet> {
        self.reserve_on(sync::lease_shard(), worst_micros, today, limits)
    }

    /// [`Ledger::reserve`] on a given lease shard (tests use it to play several threads).
    /// The call's day is trusted to open a new day (no clock: tests and models).
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
    /// `clock_day` is called only when the call's day is later than the word's.
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
            // Budget may be idle in leases: take them all back and try once more, so
            // that a denial means the call does not fit what is reserved and settled.
            Err(_) if self.return_all_leases() > 0 => self.take(worst_micros, today, limits, None, &clock_day),
            Err(codes) => Err(codes),
        }
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
    fn draw_lease(&self, shard: usize, worst_micros: u64, today: u64, limits: LedgerLimits) -> Option<Charge> {
        let s = self.shards.get(shard)?;
        // Relaxed: a single-location RMW (see the module comment).
        let mut word = s.lease.load(Ordering::Relaxed);
        loop {
            let (tag, micros) = lease_parts(word);
            if micros == 0 {
                return None;
            }
            if !Self::usable(tag, today, limits) {
                // Another day's or other limits' lease: give it back to the central
                // words, then take a fresh one.
                if s.lease.compare_exchange(word, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                    self.give_back(tag.charged_day(), micros);
                    return None;
                }
                word = s.lease.load(Ordering::Relaxed);
                continue;
            }
            // Too little left (a remainder): the central path below may add a new lease to it.
            let rest = micros.checked_sub(worst_micros)?;
            match s.lease.compare_exchange_weak(word, lease_word(tag, rest), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(Self::leased_charge(worst_micros, shard, tag, limits)),
                Err(seen) => word = seen,
            }
        }
    }

    fn leased_charge(worst_micros: u64, shard: usize, tag: Tag, limits: LedgerLimits) -> Charge {
        // `shard` < LEASE_SHARDS (8), so it fits a u8 below NOT_LEASED.
        Charge { worst_micros, tag, has_day: limits.day_micros_max.is_some(), shard: shard as u8 }
    }

    /// Puts `micros` (counted in the central words under `tag`) into a shard's lease when
    /// it holds a live lease with the same tag, or (`create`, for a new lease) none at all;
    /// otherwise `micros` goes back to the central words. So leases come into being only
    /// through [`Ledger::take`] and its share rule, never from a late settle.
    fn put_back(&self, shard: usize, tag: Tag, micros: u64, create: bool) {
        if micros == 0 {
            return;
        }
        let Some(s) = self.shards.get(shard) else { return self.give_back(tag.charged_day(), micros) };
        let mut word = s.lease.load(Ordering::Relaxed);
        loop {
            let (held_tag, held) = lease_parts(word);
            let fits = held.checked_add(micros).filter(|n| *n <= LEASE_MICROS_MAX);
            let next = match fits {
                Some(n) if (is_live(word) && held_tag == tag) || (held == 0 && create) => lease_word(tag, n),
                _ => return self.give_back(tag.charged_day(), micros),
            };
            match s.lease.compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => word = seen,
            }
        }
    }

    /// Gives `micros` back to the central words: to the total, and to `day`'s word if it
    /// still holds that day.
    fn give_back(&self, day: Option<u64>, micros: u64) {
        // Relaxed: a single-location RMW.
        self.used.fetch_sub(micros, Ordering::Relaxed);
        self.give_back_day(day, micros);
    }

    /// Returns every lease that `stale(tag)` selects to the central words. Returns the
    /// amount returned.
    fn return_leases(&self, stale: impl Fn(Tag) -> bool) -> u64 {
        let mut returned = 0u64;
        for s in &self.shards {
            let mut word = s.lease.load(Ordering::Relaxed);
            loop {
                let (tag, micros) = lease_parts(word);
                if micros == 0 || !stale(tag) {
                    break;
                }
                match s.lease.compare_exchange_weak(word, 0, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        self.give_back(tag.charged_day(), micros);
                        returned = returned.saturating_add(micros);
                        break;
                    }
                    Err(seen) => word = seen,
                }
            }
        }
        returned
    }

    /// Returns every lease to the central words (spend export does this first, so that
    /// what it writes is what is reserved and settled).
    pub fn return_all_leases(&self) -> u64 {
        self.return_leases(|_| true)
    }

    /// Returns the leases taken under other limits than `epoch`'s (a publish that changed
    /// the limits does this, so no old lease waits in an idle shard).
    pub fn return_stale_leases(&self, epoch: u16) -> u64 {
        self.return_leases(|tag| tag.epoch() != epoch)
    }

    /// The reservation on the central words: `used`, then the day word. With `lease_into`
    /// it also takes a lease for that shard in the same two CASes, when there is room for
    /// one ([`lease_extra`]): the call keeps `worst`, the rest goes to the shard.
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
        // Step 1: `used`. Relaxed: see the module comment. A failed CAS backs off (spins a
        // little longer each time) so two threads on one hot mandate do not keep stealing
        // the line from each other.
        let backoff = crossbeam_utils::Backoff::new();
        let mut used = self.used.load(Ordering::Relaxed);
        let extra = loop {
            let Some(left) = limits.total_micros.checked_sub(used).filter(|left| *left >= worst_micros) else {
                return Err(CodeSet::EMPTY.with(Code::TotalExceeded));
            };
            let extra = if lease_into.is_some() { lease_extra(left, worst_micros) } else { 0 };
            // Cannot overflow: used + worst + extra <= used + left = total.
            let next = used + worst_micros + extra;
            match self.used.compare_exchange_weak(used, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break extra,
                Err(seen) => {
                    used = seen;
                    backoff.spin();
                }
            }
        };
        let (day, extra) = match limits.day_micros_max {
            None => (None, extra),
            Some(day_max) => {
                let (day, day_extra) = self.take_day(worst_micros, extra, today, day_max, clock_day)?;
                // The day had less room for a lease than the total: give the difference
                // back. Relaxed: a single-location RMW.
                if day_extra < extra {
                    self.used.fetch_sub(extra - day_extra, Ordering::Relaxed);
                }
                if day == DAYLESS && day_extra > 0 {
                    // Charged to day 0 (a clock at 1970): no lease can be tagged with it.
                    self.give_back(Some(day), day_extra);
                    (Some(day), 0)
                } else {
                    (Some(day), day_extra)
                }
            }
        };
        let mut charge = Charge::exact(worst_micros, day);
        if let (Some(shard), true) = (lease_into, extra > 0) {
            // The day actually charged (a word on a later day keeps its day).
            let tag = Tag::new(limits.epoch, day.unwrap_or(DAYLESS));
            self.put_back(shard, tag, extra, true);
            charge = Self::leased_charge(worst_micros, shard, tag, limits);
        }
        Ok(charge)
    }

    /// Step 2 of [`Ledger::take`]: charges `worst` (and up to `extra` for a lease) to the
    /// day word. Returns the day charged and the lease part it took. On refusal gives
    /// step 1 (`worst + extra`) back.
    fn take_day(
        &self,
        worst_micros: u64,
        extra: u64,
        today: u64,
        day_max: u64,
        clock_day: &impl Fn() -> u64,
    ) -> Result<(u64, u64), CodeSet> {
        let mut word = self.day.load(Ordering::Relaxed);
        // The engine's day, read at most once (only when the call's day is later).
        let mut clock: Option<u64> = None;
        loop {
            let (day, micros) = unpack(word);
            // A new day starts at 0, but never a day after the engine's clock (a call whose
            // `at` runs ahead must not reset the word); a word on a later day than ours
            // keeps its day and takes our amount (never let a lagging clock open a fresh day).
            let (charge_day, base) = if today > day {
                let open = today.min(*clock.get_or_insert_with(|| clock_day().min(DAY_NUMBER_MAX)));
                if open > day { (open, 0) } else { (day, micros) }
            } else {
                (day, micros)
            };
            let cap = day_max.min(DAY_MICROS_MAX);
            let Some(left) = cap.checked_sub(base).filter(|left| *left >= worst_micros) else {
                // Give step 1 back. Relaxed: a single-location RMW.
                self.used.fetch_sub(worst_micros + extra, Ordering::Relaxed);
                return Err(CodeSet::EMPTY.with(Code::PerDayExceeded));
            };
            let day_extra = if extra > 0 { lease_extra(left, worst_micros).min(extra) } else { 0 };
            let next = pack(charge_day, base + worst_micros + day_extra);
            match self.day.compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok((charge_day, day_extra)),
                Err(seen) => word = seen,
            }
        }
    }

    /// Keeps `actual` (at most the reserved worst case) and releases the rest. Returns what
    /// was kept.
    pub fn settle(&self, charge: Charge, actual_micros: u64) -> u64 {
        let kept = actual_micros.min(charge.worst_micros);
        if kept > 0 {
            // Settled on the lease's shard (its line is already this thread's), or on the
            // calling thread's. Relaxed: a single-location RMW; `settled` is only summed.
            let shard = if charge.is_leased() { usize::from(charge.shard) } else { sync::lease_shard() };
            match self.shards.get(shard % LEASE_SHARDS) {
                Some(s) => s.settled.fetch_add(kept, Ordering::Relaxed),
                None => self.settled.fetch_add(kept, Ordering::Relaxed),
            };
        }
        self.give(charge, charge.worst_micros - kept);
        kept
    }

    /// Gives the whole reservation back.
    pub fn release(&self, charge: Charge) {
        self.give(charge, charge.worst_micros);
    }

    /// Gives `micros` of a reservation back: to the lease it came from, or to the central
    /// words.
    fn give(&self, charge: Charge, micros: u64) {
        if micros == 0 {
            return;
        }
        if charge.is_leased() {
            self.put_back(usize::from(charge.shard), charge.tag, micros, false);
        } else {
            self.give_back(charge.day(), micros);
        }
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
            // (The word's day only grows, so a later day read here is true.)
            if current > charged {
                return;
            }
            let next = if current < charged {
                // An earlier day than the charge's: this load may be stale (another
                // thread's charge reached us through a lease, with no ordering on this
                // word). Confirm with an RMW, which always reads the latest value: give
                // nothing back only if the word really is on another day. loom found this.
                word
            } else {
                pack(current, amount.saturating_sub(micros))
            };
            match self.day.compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => word = seen,
            }
        }
    }

    /// The ledger audit (tests, loom models, proptests; `doc(hidden)`): at quiescence, with
    /// `reserved_micros` the reservations the caller knows are still held (0 when every
    /// reservation has ended; a reclaimed one dropped unsettled stays reserved), the words
    /// the limits are enforced on must add up exactly:
    /// `claimed = reserved + settled + leased`, and the day word holds no more than is
    /// claimed. While calls run it may fail spuriously (the figures are read one by one).
    #[doc(hidden)]
    pub fn audit(&self, reserved_micros: u64) -> Result<(), String> {
        let claimed = self.claimed_micros();
        let settled = self.settled_micros();
        let leased = self.leased(|_| true);
        let sum = reserved_micros.checked_add(settled).and_then(|n| n.checked_add(leased));
        if sum != Some(claimed) {
            return Err(format!(
                "claimed {claimed} != reserved {reserved_micros} + settled {settled} + leased {leased}"
            ));
        }
        let (day, day_micros) = self.claimed_day_word();
        if day_micros > claimed {
            return Err(format!("day {day} holds {day_micros}, more than the {claimed} claimed in total"));
        }
        for s in &self.shards {
            let word = s.lease.load(Ordering::Relaxed);
            if word != 0 && !is_live(word) {
                return Err(format!("a lease word {word:#x} holds an amount but is not live"));
            }
        }
        Ok(())
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
        Ok(Charge::exact(worst_micros, None))
    }
}

#[cfg(all(test, not(holon_loom)))]
mod tests {
    use super::*;

    const L: LedgerLimits = LedgerLimits { total_micros: 100, day_micros_max: Some(60), epoch: 0 };

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
        assert_eq!((l.claimed_micros(), l.used_micros(), l.claimed_day_word()), (4_000, 1_000, (10, 4_000)));
        assert_eq!(l.day_word(), (10, 1_000), "what waits in a lease is not reserved");
        let b = l.reserve_on(0, 1_000, 10, BIG).unwrap();
        assert_eq!((l.claimed_micros(), l.used_micros()), (4_000, 2_000), "from the lease: no new claim");
        // What is not kept goes back to the lease, and serves the next call.
        assert_eq!(l.settle(b, 300), 300);
        assert_eq!((l.claimed_micros(), l.used_micros(), l.settled_micros()), (4_000, 1_300, 300));
        l.release(a);
        assert_eq!((l.claimed_micros(), l.used_micros()), (4_000, 300));
        assert_eq!(l.return_all_leases(), 3_700);
        assert_eq!((l.claimed_micros(), l.used_micros(), l.claimed_day_word()), (300, 300, (10, 300)));
    }

    #[test]
    fn a_denial_first_takes_back_every_idle_lease() {
        let l = Ledger::new();
        let small = l.reserve_on(0, 1_000, 10, BIG).unwrap();
        assert_eq!(l.claimed_micros(), 4_000);
        // 127,000 fits what is reserved (1,000) but not what is claimed (4,000).
        let big = l.reserve_on(1, 127_000, 10, BIG).expect("the idle lease is taken back");
        assert_eq!((l.claimed_micros(), l.used_micros()), (128_000, 128_000));
        assert!(!big.is_leased());
        assert_eq!(l.reserve_on(2, 1, 10, BIG), Err(CodeSet::EMPTY.with(Code::TotalExceeded)));
        // Its lease is gone, so the release goes to the central words, not a new lease.
        l.release(small);
        assert_eq!((l.claimed_micros(), l.used_micros()), (127_000, 127_000));
        assert!(l.reserve_on(1, 1_000, 10, BIG).is_ok());
    }

    #[test]
    fn a_returned_lease_is_not_revived_by_a_late_settle() {
        // No daily limit and epoch 0: the lease's tag is all zeros, like an empty word.
        let lim = LedgerLimits { total_micros: 128_000, day_micros_max: None, epoch: 0 };
        let l = Ledger::new();
        let a = l.reserve_on(0, 1_000, 10, lim).unwrap();
        assert!(a.is_leased());
        assert_eq!(l.return_all_leases(), 3_000);
        // Its shard's lease is gone: what it gives back goes to the central words.
        l.release(a);
        assert_eq!((l.claimed_micros(), l.used_micros()), (0, 0));
        assert_eq!(l.return_all_leases(), 0, "no lease came back to life");
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
        assert_eq!((l.claimed_micros(), l.used_micros()), (4_968, 2_000));
        // Lowered limits (a new epoch): the lease taken under the old ones is not used.
        let lowered = LedgerLimits { total_micros: 2_500, epoch: 1, ..BIG };
        assert_eq!(l.reserve_on(0, 1_000, 11, lowered), Err(CodeSet::EMPTY.with(Code::TotalExceeded)));
        assert_eq!(l.claimed_micros(), 2_000, "the old lease went back");
        l.release(a);
        l.release(b);
        assert_eq!((l.claimed_micros(), l.used_micros(), l.claimed_day_word()), (0, 0, (11, 0)));
        // A publish that changes the limits returns the old epoch's leases.
        let _c = l.reserve_on(3, 1_000, 11, BIG).unwrap();
        assert_eq!(l.return_stale_leases(0), 0);
        assert_eq!(l.return_stale_leases(1), 3_000);
        assert_eq!(l.claimed_micros(), 1_000);
    }

    #[test]
    fn a_ledger_is_nine_lines_of_128_bytes() {
        // The central words (and the publish-only terms) on one, a shard on each of the
        // rest: docs/engine.md gives this size.
        assert_eq!(std::mem::size_of::<Ledger>(), 128 * (1 + LEASE_SHARDS));
        assert_eq!(std::mem::size_of::<Charge>(), 16, "a Reservation moves it by value");
    }

    #[test]
    fn epochs_change_only_with_the_limits_and_only_when_committed() {
        let l = Ledger::new();
        let commit =
            |total, day, epoch| l.commit_epoch(LedgerLimits { total_micros: total, day_micros_max: day, epoch });
        assert_eq!(l.epoch_for(10, None), 0);
        commit(10, None, 0);
        assert_eq!(l.epoch_for(10, None), 0);
        assert_eq!(l.epoch_for(10, Some(5)), 1);
        assert_eq!(l.epoch_for(10, Some(5)), 1, "not committed: asking again changes nothing");
        commit(10, Some(5), 1);
        assert_eq!(l.epoch_for(10, None), 2);
    }
}
