//! The reservation table: one slot per reservation in flight, so that a reservation ends
//! **exactly once** — settled or released by its holder, or reclaimed by the engine after
//! its deadline — whoever wins one compare-and-swap on the slot's state.
//!
//! A slot's state word is `generation << 2 | status`. A holder remembers the generation
//! it claimed; ending a slot moves `Active(g)` to `Free(g + 1)`, so a late holder (or a
//! late reaper) that still expects `Active(g)` fails its CAS and changes nothing. The
//! generation wraps after 2^62 uses of one slot, which no process lives to see.
//!
//! The table is fixed at construction (a limit, not a growing heap): when every slot is
//! taken the call is denied `in_flight_limit_reached`. Each thread searches from its own
//! cursor, so threads rarely touch the same slots.

use crate::sync::{self, AtomicU64, Ordering};

const FREE: u64 = 0;
const CLAIMED: u64 = 1;
const ACTIVE: u64 = 2;
const STATUS_MASK: u64 = 0b11;

fn state(generation: u64, status: u64) -> u64 {
    (generation << 2) | status
}

/// Most slots a table may have (the reservations in flight at once).
pub(super) const SLOTS_MAX: usize = 1 << 22;
/// Most slots one claim looks at before the call is denied `in_flight_limit_reached`: a
/// full (or nearly full) table costs every admit this many probes, not a sweep of the
/// whole table. A thread that gives up moves its cursor past the slots it looked at, so
/// its next claim searches the next stretch of the table.
pub(super) const SLOT_PROBES_MAX: usize = 64;

/// What the engine needs to reclaim an expired reservation without its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SlotRecord {
    /// For the expired receipt: the reaper keeps it spent and touches no ledger.
    pub worst_micros: u64,
    /// Unix seconds after which the reservation may be reclaimed.
    pub deadline: i64,
    /// Receipt fields: mandate and agent symbols (high and low 32 bits).
    pub ids: u64,
    pub receipt_id: u64,
    pub parent_id: u64,
    pub at: i64,
    /// A shadow reservation's slot (`EngineConfig::shadow`): its expired receipt says so.
    pub shadow: bool,
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot {
    state: AtomicU64,
    worst_micros: AtomicU64,
    deadline: AtomicU64,
    ids: AtomicU64,
    receipt_id: AtomicU64,
    parent_id: AtomicU64,
    at: AtomicU64,
    /// 1 for a shadow reservation (the slot stays one cache line: eight words).
    shadow: AtomicU64,
}

/// A claimed slot: index and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub index: u32,
    pub generation: u64,
}

#[derive(Debug)]
pub(crate) struct Slots {
    slots: Box<[Slot]>,
}

impl Slots {
    /// A table of `capacity` slots (at least 1, at most [`SLOTS_MAX`]).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, SLOTS_MAX);
        let slots: Box<[Slot]> = (0..capacity).map(|_| Slot::default()).collect();
        Slots { slots }
    }

    /// Claims a free slot. `None` when none is free among the [`SLOT_PROBES_MAX`] slots
    /// from the thread's cursor (or the whole table, if smaller).
    // Always inlined into its one caller, `Engine::decide`: LLVM flipped between the two
    // with unrelated changes to the crate (984 and 968 instructions per admit+settle on
    // the same engine code, docs/PERFORMANCE.md); inlined is the smaller.
    #[inline(always)]
    pub(crate) fn claim(&self) -> Option<Ticket> {
        let len = self.slots.len();
        let start = sync::cursor() % len;
        let probes = len.min(SLOT_PROBES_MAX);
        for step in 0..probes {
            let index = (start + step) % len;
            let slot = self.slots.get(index)?;
            // Relaxed: a peek to skip busy slots; the CAS below decides.
            let seen = slot.state.load(Ordering::Relaxed);
            if seen & STATUS_MASK != FREE {
                continue;
            }
            let generation = seen >> 2;
            // Acquire on success: we must see the previous holder's field writes as
            // finished before we overwrite them (pairs with the Release in `end`).
            if let Ok(before) =
                slot.state.compare_exchange(seen, state(generation, CLAIMED), Ordering::Acquire, Ordering::Relaxed)
            {
                debug_assert_eq!(before & STATUS_MASK, FREE, "a claim takes a free slot");
                sync::set_cursor(index + 1);
                return Some(Ticket { index: u32::try_from(index).ok()?, generation });
            }
        }
        sync::set_cursor(start + probes);
        None
    }

    /// Gives back a claimed slot that never became active (the ledger refused).
    pub(crate) fn unclaim(&self, t: Ticket) {
        if let Some(slot) = self.slots.get(t.index as usize) {
            debug_assert_claimed(slot, t);
            // Release: orders our (unused) writes before the slot is free again.
            slot.state.store(state(t.generation.wrapping_add(1), FREE), Ordering::Release);
        }
    }

    /// Fills a claimed slot and makes it visible to the reaper.
    pub(crate) fn activate(&self, t: Ticket, r: &SlotRecord) {
        let Some(slot) = self.slots.get(t.index as usize) else { return };
        debug_assert_claimed(slot, t);
        // Relaxed stores: published by the Release store of the state below.
        slot.worst_micros.store(r.worst_micros, Ordering::Relaxed);
        slot.deadline.store(r.deadline as u64, Ordering::Relaxed);
        slot.ids.store(r.ids, Ordering::Relaxed);
        // Relaxed, as above: the state's Release store below publishes these too.
        slot.receipt_id.store(r.receipt_id, Ordering::Relaxed);
        slot.parent_id.store(r.parent_id, Ordering::Relaxed);
        slot.at.store(r.at as u64, Ordering::Relaxed);
        // Relaxed, as above.
        slot.shadow.store(u64::from(r.shadow), Ordering::Relaxed);
        // Release: a reaper that Acquire-loads `Active(g)` sees every field above.
        slot.state.store(state(t.generation, ACTIVE), Ordering::Release);
    }

    /// Ends an active reservation: true for exactly one caller per ticket (the holder
    /// settling or releasing, or the reaper). The loser must change nothing.
    pub(crate) fn end(&self, t: Ticket) -> bool {
        let Some(slot) = self.slots.get(t.index as usize) else { return false };
        // AcqRel: Acquire pairs with `activate`'s Release (the reaper reads fields after
        // winning); Release pairs with `claim`'s Acquire (the next holder overwrites them).
        match slot.state.compare_exchange(
            state(t.generation, ACTIVE),
            state(t.generation.wrapping_add(1), FREE),
            Ordering::AcqRel,  // see above
            Ordering::Relaxed, // the loser reads nothing else and changes nothing
        ) {
            Ok(before) => {
                debug_assert_eq!(before, state(t.generation, ACTIVE), "an end ends the ticket's active slot");
                true
            }
            Err(seen) => {
                // The other one of holder and reaper ended it: the slot has moved on to a
                // later generation (free, claimed or active again), never back.
                debug_assert_ne!(seen >> 2, t.generation, "a ticket's slot is ended, not unclaimed");
                false
            }
        }
    }

    /// Whether the ticket's reservation is still active (not ended by its holder or the
    /// reaper). A generation compare: a slot reused since holds a later generation.
    pub(crate) fn is_active(&self, t: Ticket) -> bool {
        let Some(slot) = self.slots.get(t.index as usize) else { return false };
        // Acquire: pairs with the AcqRel of `end`, so a reaper's end is not missed by a
        // load ordered after what the caller saw of it.
        slot.state.load(Ordering::Acquire) == state(t.generation, ACTIVE)
    }

    /// Calls `reclaim` once for every active slot whose deadline is before `now`, after
    /// winning it from its holder. Returns how many were reclaimed.
    pub(crate) fn reclaim_expired(&self, now: i64, mut reclaim: impl FnMut(SlotRecord)) -> usize {
        let mut count = 0;
        for (index, slot) in self.slots.iter().enumerate() {
            // Acquire: pairs with `activate`'s Release, so the fields read below are the
            // ones of generation `g`.
            let seen = slot.state.load(Ordering::Acquire);
            if seen & STATUS_MASK != ACTIVE {
                continue;
            }
            let record = read(slot);
            if record.deadline >= now {
                continue;
            }
            let Ok(index) = u32::try_from(index) else { continue };
            // If the CAS wins, no one could have changed the fields since we read them:
            // they only change after the slot is free again, which bumps the generation.
            if self.end(Ticket { index, generation: seen >> 2 }) {
                reclaim(record);
                count += 1;
            }
        }
        count
    }

    /// Reservations currently active (a diagnostic count, not a synchronised snapshot).
    pub(crate) fn active(&self) -> usize {
        self.slots.iter().filter(|s| s.state.load(Ordering::Relaxed) & STATUS_MASK == ACTIVE).count()
    }
}

/// Checks (debug builds, tests and loom) that the ticket's slot is still claimed by it:
/// only the claimer changes a claimed slot (others CAS free slots, the reaper active ones).
fn debug_assert_claimed(slot: &Slot, t: Ticket) {
    if cfg!(debug_assertions) {
        // Relaxed: the claimer's own earlier write, read back in the same thread.
        let seen = slot.state.load(Ordering::Relaxed);
        debug_assert_eq!(seen, state(t.generation, CLAIMED), "the slot is claimed by this ticket");
    }
}

/// The fields of an active slot. Relaxed loads: the caller's Acquire load of the state
/// made the activating thread's writes visible.
fn read(slot: &Slot) -> SlotRecord {
    SlotRecord {
        worst_micros: slot.worst_micros.load(Ordering::Relaxed),
        // Relaxed, as above.
        deadline: slot.deadline.load(Ordering::Relaxed) as i64,
        ids: slot.ids.load(Ordering::Relaxed),
        // Relaxed, as above: ordered by the caller's Acquire load of the state.
        receipt_id: slot.receipt_id.load(Ordering::Relaxed),
        parent_id: slot.parent_id.load(Ordering::Relaxed),
        at: slot.at.load(Ordering::Relaxed) as i64,
        // Relaxed, as above.
        shadow: slot.shadow.load(Ordering::Relaxed) != 0,
    }
}

#[cfg(all(test, not(holon_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_ends_exactly_once_and_slots_are_reused() {
        let s = Slots::new(2);
        let a = s.claim().unwrap();
        s.activate(a, &SlotRecord { deadline: 10, ..Default::default() });
        let b = s.claim().unwrap();
        assert_ne!(a.index, b.index);
        assert!(s.claim().is_none(), "two slots, two claims");
        s.activate(b, &SlotRecord { deadline: 100, ..Default::default() });
        let mut reclaimed = 0;
        assert_eq!(s.reclaim_expired(50, |_| reclaimed += 1), 1);
        assert_eq!(reclaimed, 1);
        assert!(!s.end(a), "the reaper won: the holder's late end is refused");
        assert!(s.end(b));
        assert!(!s.end(b), "twice is refused");
        let c = s.claim().unwrap();
        assert!(c.generation > 0);
        s.unclaim(c);
        assert_eq!(s.active(), 0);
    }

    #[test]
    fn a_nearly_full_table_is_probed_a_bounded_stretch_at_a_time() {
        // 1,024 slots, all taken but one, which lies 500 slots past this thread's cursor.
        let s = Slots::new(1024);
        let start = sync::cursor() % 1024;
        let tickets: Vec<_> = (0..1024).map(|_| s.claim().unwrap()).collect();
        assert!(s.claim().is_none());
        let far = (start + 500) % 1024;
        let t = tickets.iter().find(|t| t.index as usize == far).unwrap();
        s.unclaim(*t);
        sync::set_cursor(start);
        assert!(s.claim().is_none(), "the free slot is beyond SLOT_PROBES_MAX probes: denied, not a sweep");
        // Each refusal moves the cursor on a stretch: the slot is found within 1024/64 claims.
        let found = (0..1024 / SLOT_PROBES_MAX).find_map(|_| s.claim());
        assert_eq!(found.map(|t| t.index as usize), Some(far));
    }
}
