//! The ledger's two packed words as types, with their bit budgets checked at compile time.
//!
//! - [`DayWord`]: `day number (16 bits) | micro-units (48 bits)`, the word `per_day` is
//!   enforced on;
//! - [`LeaseWord`]: `live (1 bit) | epoch (16 bits) | day (16 bits) | micro-units (31 bits)`,
//!   one per lease shard; the epoch and the day form its [`Tag`]. A returned lease is the
//!   word 0 ([`LeaseWord::RETURNED`], not live).
//!
//! The atomics hold the raw `u64` (`from_bits`/`bits`); every reading and building of a
//! word goes through these types, so no code outside this file shifts or masks a word.

/// Bits of the day word that hold the amount.
const DAY_AMOUNT_BITS: u32 = 48;
/// Bits of the day word (and of a lease tag) that hold the UTC day number.
const DAY_NUMBER_BITS: u32 = 16;
/// The largest per-day amount the day word holds (about 281 million units). A mandate
/// with a larger `per_day` is refused when the snapshot is compiled (and by `validate`: the
/// bound is `mandate::limits::PER_DAY_MICROS_MAX`, the one table).
pub(crate) const DAY_MICROS_MAX: u64 = (1 << DAY_AMOUNT_BITS) - 1;
const _: () = assert!(DAY_MICROS_MAX == crate::mandate::limits::PER_DAY_MICROS_MAX, "the table is the day word's");
/// The largest UTC day number (days since 1970): 65535 is in the year 2149.
pub(crate) const DAY_NUMBER_MAX: u64 = (1 << DAY_NUMBER_BITS) - 1;

// The day word's bit budget: day + amount = 64, each maximum is all ones of its field.
const _: () = assert!(DAY_NUMBER_BITS + DAY_AMOUNT_BITS == u64::BITS);
const _: () = assert!(DAY_MICROS_MAX == u64::MAX >> DAY_NUMBER_BITS);
const _: () = assert!(DAY_NUMBER_MAX == u64::MAX >> DAY_AMOUNT_BITS);

/// The bit of a lease word set while the shard holds a lease (even one drawn down to 0).
const LEASE_LIVE: u64 = 1 << 63;
/// Bits of a lease word that hold the amount (the rest: live, epoch and day).
const LEASE_AMOUNT_BITS: u32 = 31;
/// The largest amount one lease holds (about 2,147 units; a call with a larger worst case
/// than a 64th of that reserves exactly, without a lease).
pub(super) const LEASE_MICROS_MAX: u64 = (1 << LEASE_AMOUNT_BITS) - 1;
/// Bits of a lease tag that hold the epoch of the limits (the rest: the day).
const EPOCH_BITS: u32 = 16;
/// Bits of a lease tag: the epoch and the day.
const TAG_BITS: u32 = EPOCH_BITS + DAY_NUMBER_BITS;
/// The tag's day field, in place.
const TAG_DAY_MASK: u32 = (1 << DAY_NUMBER_BITS) - 1;

// The lease word's bit budget: live + epoch + day + amount = 64; the tag is exactly a u32,
// its epoch exactly a u16; the live bit is the one above the tag and the amount.
const _: () = assert!(1 + TAG_BITS + LEASE_AMOUNT_BITS == u64::BITS);
const _: () = assert!(TAG_BITS == u32::BITS && EPOCH_BITS == u16::BITS);
const _: () = assert!(LEASE_LIVE == 1 << (TAG_BITS + LEASE_AMOUNT_BITS));
const _: () = assert!(LEASE_MICROS_MAX == (1 << LEASE_AMOUNT_BITS) - 1 && LEASE_MICROS_MAX < LEASE_LIVE);
// A tag's day holds every day the day word holds.
const _: () = assert!(TAG_DAY_MASK as u64 == DAY_NUMBER_MAX);

/// The day of a lease taken without a daily limit (not counted in any day word). Day 0
/// (1970-01-01) is never leased under a daily limit.
pub(super) const DAYLESS: u64 = 0;

/// The day word: the UTC day number and what is reserved + settled + leased on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct DayWord(u64);

impl DayWord {
    /// The word for `micros` on `day` (each at most its maximum).
    #[inline]
    pub(super) fn new(day: u64, micros: u64) -> Self {
        debug_assert!(day <= DAY_NUMBER_MAX, "day {day} does not fit the day word");
        debug_assert!(micros <= DAY_MICROS_MAX, "{micros} does not fit the day word");
        DayWord((day << DAY_AMOUNT_BITS) | micros)
    }

    #[inline]
    pub(super) fn from_bits(bits: u64) -> Self {
        DayWord(bits)
    }

    #[inline]
    pub(super) fn bits(self) -> u64 {
        self.0
    }

    /// The UTC day number.
    #[inline]
    pub(super) fn day(self) -> u64 {
        self.0 >> DAY_AMOUNT_BITS
    }

    /// What is counted on the day, in micro-units.
    #[inline]
    pub(super) fn micros(self) -> u64 {
        self.0 & DAY_MICROS_MAX
    }

    /// `(day, micros)`.
    #[inline]
    pub(super) fn parts(self) -> (u64, u64) {
        (self.day(), self.micros())
    }
}

/// Which limits and day a lease was taken under: `epoch << 16 | day`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Tag(u32);

impl Tag {
    #[inline]
    pub(super) fn new(epoch: u16, day: u64) -> Self {
        debug_assert!(day <= DAY_NUMBER_MAX, "day {day} does not fit a tag");
        // The day is masked to its 16 bits: the cast keeps exactly the bits the mask takes.
        #[allow(clippy::cast_possible_truncation)]
        Tag((u32::from(epoch) << DAY_NUMBER_BITS) | (day as u32 & TAG_DAY_MASK))
    }

    /// The epoch of the limits the lease was taken under.
    #[inline]
    pub(super) fn epoch(self) -> u16 {
        (self.0 >> DAY_NUMBER_BITS) as u16
    }

    /// The day the lease is counted on ([`DAYLESS`] without a daily limit).
    #[inline]
    pub(super) fn day(self) -> u64 {
        u64::from(self.0 & TAG_DAY_MASK)
    }

    /// The day word the lease's amount is counted in (`None`: taken without a daily limit).
    #[inline]
    pub(super) fn charged_day(self) -> Option<u64> {
        Some(self.day()).filter(|d| *d != DAYLESS)
    }
}

/// A lease shard's word: whether it holds a lease, the lease's [`Tag`] and what is left
/// of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct LeaseWord(u64);

impl LeaseWord {
    /// A returned lease (or none yet): not live, no tag, no amount.
    pub(super) const RETURNED: LeaseWord = LeaseWord(0);

    /// A live lease under `tag` holding `micros` (at most [`LEASE_MICROS_MAX`]).
    #[inline]
    pub(super) fn live(tag: Tag, micros: u64) -> Self {
        debug_assert!(micros <= LEASE_MICROS_MAX, "{micros} does not fit a lease");
        LeaseWord(LEASE_LIVE | (u64::from(tag.0) << LEASE_AMOUNT_BITS) | micros)
    }

    #[inline]
    pub(super) fn from_bits(bits: u64) -> Self {
        LeaseWord(bits)
    }

    #[inline]
    pub(super) fn bits(self) -> u64 {
        self.0
    }

    /// Whether the shard holds a lease (taken by `Ledger::take`, not yet returned).
    #[inline]
    pub(super) fn is_live(self) -> bool {
        self.0 & LEASE_LIVE != 0
    }

    #[inline]
    pub(super) fn tag(self) -> Tag {
        Tag(((self.0 & !LEASE_LIVE) >> LEASE_AMOUNT_BITS) as u32)
    }

    /// What is left of the lease, in micro-units.
    #[inline]
    pub(super) fn micros(self) -> u64 {
        self.0 & LEASE_MICROS_MAX
    }

    /// `(tag, micros)`.
    #[inline]
    pub(super) fn parts(self) -> (Tag, u64) {
        (self.tag(), self.micros())
    }
}

#[cfg(all(test, not(holon_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_day_word_round_trips_up_to_its_maxima() {
        for (day, micros) in [(0, 0), (1, 2), (20_000, 123_456_789), (DAY_NUMBER_MAX, DAY_MICROS_MAX)] {
            let word = DayWord::new(day, micros);
            assert_eq!(word.parts(), (day, micros));
            assert_eq!(DayWord::from_bits(word.bits()), word);
        }
        assert_eq!(DayWord::new(DAY_NUMBER_MAX, DAY_MICROS_MAX).bits(), u64::MAX, "every bit is used");
        assert_eq!(DayWord::default().parts(), (0, 0));
    }

    #[test]
    fn a_lease_word_round_trips_up_to_its_maxima() {
        for (epoch, day, micros) in [(0, 0, 0), (1, 7, 3), (u16::MAX, DAY_NUMBER_MAX, LEASE_MICROS_MAX)] {
            let tag = Tag::new(epoch, day);
            assert_eq!((tag.epoch(), tag.day()), (epoch, day));
            let word = LeaseWord::live(tag, micros);
            assert!(word.is_live());
            assert_eq!(word.parts(), (tag, micros));
            assert_eq!(LeaseWord::from_bits(word.bits()), word);
        }
        let full = LeaseWord::live(Tag::new(u16::MAX, DAY_NUMBER_MAX), LEASE_MICROS_MAX);
        assert_eq!(full.bits(), u64::MAX, "every bit is used");
    }

    #[test]
    fn a_returned_lease_is_not_live_even_with_an_all_zero_tag() {
        // No daily limit and epoch 0: a live lease's tag is all zeros, like the empty word.
        let empty = LeaseWord::live(Tag::new(0, DAYLESS), 0);
        assert!(empty.is_live());
        assert_ne!(empty, LeaseWord::RETURNED);
        assert!(!LeaseWord::RETURNED.is_live());
        assert_eq!(LeaseWord::RETURNED.parts(), (Tag::default(), 0));
        assert_eq!(Tag::new(3, DAYLESS).charged_day(), None);
        assert_eq!(Tag::new(3, 9).charged_day(), Some(9));
    }
}
