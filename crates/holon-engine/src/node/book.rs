//! A node's book of the store leases it holds on one mandate, and the plan of its next
//! flush: which lease each settled amount and each give-back goes to (docs/store.md, "The
//! node side").
//!
//! The ledger counts what the node's calls settled in one figure; the store keeps it per
//! lease. The book assigns settled amounts to leases oldest first. Which lease takes a
//! settled amount does not matter for safety: a settle moves money from a lease's
//! outstanding to spent *within* the lease, so what each lease (and each day's row) holds
//! granted to this node does not change. What matters is the give-back, which lowers what
//! a lease holds: a give-back is first withdrawn from the ledger's allowance (so no call can
//! use it any more), and only then planned here, from leases of the day it was withdrawn
//! for (a give-back of today's day word from today's leases; the rest from leases of past
//! days), newest first.
//!
//! Everything here is computed as a [`Plan`] and applied only once the store has
//! committed the flush: a flush that fails changes nothing.

use crate::store::{FlushEntry, FlushOutcome, Lease, LeaseState};

/// One store lease this node holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    id: u64,
    /// The UTC day the lease draws on (`None` for a mandate without `per_day`).
    day: Option<u64>,
    /// What the store counts as still outstanding (granted, not flushed as settled or given
    /// back).
    outstanding_micros: u64,
}

/// Which leases a give-back comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GiveBackFrom {
    /// Leases of `day`, or of no day.
    Day(Option<u64>),
    /// Leases of days before `day`.
    Before(u64),
    /// Any lease: only when the node has nothing reserved and withdrew its whole
    /// allowance (a drain), so it will spend nothing more through any lease.
    Any,
}

impl GiveBackFrom {
    fn takes(self, lease_day: Option<u64>) -> bool {
        match self {
            GiveBackFrom::Day(day) => lease_day == day,
            GiveBackFrom::Before(day) => lease_day.is_some_and(|d| d < day),
            GiveBackFrom::Any => true,
        }
    }
}

/// One give-back owed: withdrawn from the ledger's allowance, not yet given back. The id
/// ties what a plan took to the entry it took it from, so a plan committed late (a flush
/// sent again after its answer was lost) takes only what it planned, never the give-backs
/// recorded since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owed {
    id: u64,
    from: GiveBackFrom,
    micros: u64,
}

/// The leases of one mandate and what is still to be flushed.
#[derive(Debug, Default)]
pub(crate) struct Book {
    /// Oldest first.
    leases: Vec<Held>,
    /// The ledger's settled figure at the last committed flush.
    settled_seen_micros: u64,
    /// Settled amounts already counted as spent in the store: a lease of this node was
    /// reconciled, which counted its whole remainder, so that much of what the node settles
    /// next must not be flushed again.
    prepaid_micros: u64,
    /// Withdrawn from the ledger's allowance and not yet given back to the store.
    give_back: Vec<Owed>,
    /// The id of the next give-back recorded.
    next_owed_id: u64,
}

/// What one flush will do for a mandate, applied by [`Book::commit`] once the store
/// committed it.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) entries: Vec<FlushEntry>,
    settled_now_micros: u64,
    prepaid_used_micros: u64,
    /// What this flush gives back of each owed give-back (by its id).
    give_back_taken: Vec<(u64, u64)>,
    /// Settled amounts no lease could take (none should exist; kept for the next flush).
    unassigned_micros: u64,
}

#[cfg(all(test, not(holon_loom)))]
impl Plan {
    /// Micro-units this flush settles in the store.
    pub(crate) fn settle_micros(&self) -> u64 {
        self.entries.iter().map(|e| e.settle_micros).sum()
    }

    /// Micro-units this flush gives back to the store.
    pub(crate) fn give_back_micros(&self) -> u64 {
        self.entries.iter().map(|e| e.give_back_micros).sum()
    }
}

/// What a committed flush did to the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Committed {
    pub(crate) settled_micros: u64,
    pub(crate) given_back_micros: u64,
    /// Micro-units of leases the store had reconciled (counted as spent) since.
    pub(crate) reconciled_micros: u64,
}

impl Book {
    /// A book for a ledger that has settled `settled_micros` already (not this node's to
    /// flush).
    ///
    /// `inherited_micros`: the allowance the ledger already holds that no lease of this book
    /// backs (a node ran on this engine before; its leases are counted as spent by a
    /// reconcile, at this node's start or at their expiry). It is prepaid, as a lease
    /// reconciled under a live node is: what calls settle from it is not flushed again.
    pub(crate) fn starting_at(settled_micros: u64, inherited_micros: u64) -> Self {
        Book { settled_seen_micros: settled_micros, prepaid_micros: inherited_micros, ..Book::default() }
    }

    /// Records a lease the store granted (and the ledger's allowance took in).
    pub(crate) fn add(&mut self, lease: &Lease, day: Option<u64>) {
        self.leases.push(Held { id: lease.id, day, outstanding_micros: lease.amount_micros });
    }

    /// Records `micros` withdrawn from the ledger's allowance, to give back.
    pub(crate) fn give_back(&mut self, from: GiveBackFrom, micros: u64) {
        if micros > 0 {
            self.give_back.push(Owed { id: self.next_owed_id, from, micros });
            self.next_owed_id += 1;
        }
    }

    /// Micro-units withdrawn and still to be given back.
    #[cfg(all(test, not(holon_loom)))]
    pub(crate) fn owed_micros(&self) -> u64 {
        self.give_back.iter().map(|o| o.micros).sum()
    }

    /// Lets every give-back still owed come from any lease (a drain with nothing
    /// reserved: see [`GiveBackFrom::Any`]).
    pub(crate) fn owe_anywhere(&mut self) {
        for owed in &mut self.give_back {
            owed.from = GiveBackFrom::Any;
        }
    }

    /// Lets every give-back owed from leases of days before some day come from leases of
    /// days before `day` instead (a later day: more leases qualify, none less safely).
    pub(crate) fn owe_before(&mut self, day: u64) {
        for owed in &mut self.give_back {
            if let GiveBackFrom::Before(d) = &mut owed.from
                && *d < day
            {
                *d = day;
            }
        }
    }

    /// What the node holds in open leases.
    pub(crate) fn outstanding_micros(&self) -> u64 {
        self.leases.iter().map(|l| l.outstanding_micros).sum()
    }

    /// What the node holds in leases of days before `day`.
    pub(crate) fn outstanding_before(&self, day: u64) -> u64 {
        self.leases.iter().filter(|l| l.day.is_some_and(|d| d < day)).map(|l| l.outstanding_micros).sum()
    }

    pub(crate) fn lease_count(&self) -> usize {
        self.leases.len()
    }

    #[cfg(all(test, not(holon_loom)))]
    pub(crate) fn prepaid_micros(&self) -> u64 {
        self.prepaid_micros
    }

    /// What this node may let its calls use: its open leases' outstanding amounts, and what
    /// reconciled leases (its own, or a predecessor's on this engine) prepaid: counted as
    /// spent by the store, not yet settled here.
    pub(crate) fn holds_micros(&self) -> u64 {
        checked_sum(self.outstanding_micros(), self.prepaid_micros, "holding")
    }

    /// Whether a flush has anything to do for this mandate (`settled_now` from the
    /// ledger).
    pub(crate) fn has_work(&self, settled_now_micros: u64) -> bool {
        settled_now_micros != self.settled_seen_micros || !self.give_back.is_empty()
    }

    /// Plans the next flush: what was settled since the last one, the give-backs, and a
    /// renewal of every lease's time to live when `renew_ttl_s` is given. A lease left
    /// with nothing outstanding is closed.
    pub(crate) fn plan(&self, settled_now_micros: u64, renew_ttl_s: Option<u64>) -> Plan {
        let mut rest: Vec<Held> = self.leases.clone();
        let mut entries: Vec<FlushEntry> = rest
            .iter()
            .map(|l| FlushEntry {
                lease: l.id,
                renew_ttl_s,
                expect_outstanding_micros: Some(l.outstanding_micros),
                ..FlushEntry::default()
            })
            .collect();
        // Settled since the last flush; a reconciled lease already counted the first part.
        // On in release: settled spend never goes down (the ledger only adds to it), so a
        // figure below the one seen is an accounting error that stops the node's step
        // rather than being clamped to nothing.
        assert!(
            settled_now_micros >= self.settled_seen_micros,
            "the ledger's settled figure {settled_now_micros} micro-units is below the {} this book has seen: settled spend never goes down",
            self.settled_seen_micros
        );
        let fresh = settled_now_micros - self.settled_seen_micros;
        let prepaid_used = fresh.min(self.prepaid_micros);
        let mut to_settle = fresh - prepaid_used;
        // Give-backs first (they were withdrawn from the allowance: no call can use them),
        // newest lease first, so settles (oldest first) and give-backs meet in the middle.
        let mut give_back_taken = Vec::new();
        for owed in &self.give_back {
            let mut left = owed.micros;
            for (held, entry) in rest.iter_mut().zip(entries.iter_mut()).rev() {
                if left == 0 {
                    break;
                }
                if !owed.from.takes(held.day) {
                    continue;
                }
                let take = left.min(held.outstanding_micros);
                held.outstanding_micros -= take;
                entry.give_back_micros += take;
                left -= take;
            }
            if left < owed.micros {
                give_back_taken.push((owed.id, owed.micros - left));
            }
        }
        for (held, entry) in rest.iter_mut().zip(entries.iter_mut()) {
            let take = to_settle.min(held.outstanding_micros);
            held.outstanding_micros -= take;
            entry.settle_micros += take;
            to_settle -= take;
        }
        for (held, entry) in rest.iter().zip(entries.iter_mut()) {
            entry.close = held.outstanding_micros == 0;
        }
        // Leases with nothing to do are left out unless they are renewed or closed.
        entries.retain(|e| e.settle_micros > 0 || e.give_back_micros > 0 || e.close || e.renew_ttl_s.is_some());
        Plan {
            entries,
            settled_now_micros,
            prepaid_used_micros: prepaid_used,
            give_back_taken,
            unassigned_micros: to_settle,
        }
    }

    /// Applies a plan the store committed, with the store's outcome for each entry.
    pub(crate) fn commit(&mut self, plan: Plan, outcomes: &[FlushOutcome]) -> Committed {
        let mut done = Committed::default();
        for entry in &plan.entries {
            let Some(pos) = self.leases.iter().position(|l| l.id == entry.lease) else { continue };
            let state = outcomes.iter().find(|o| o.lease == entry.lease).map_or(LeaseState::Open, |o| o.state);
            let Some(held) = self.leases.get_mut(pos) else { continue };
            // On in release: a book that disagrees with the store stops the node's step
            // (its thread ends, the engine admits no more than its leases hold, and the
            // node reports it) rather than being clamped into agreement.
            let taken = entry.settle_micros + entry.give_back_micros;
            assert!(
                taken <= held.outstanding_micros,
                "lease {}: the plan settles {} and gives back {} micro-units but the lease holds {}: a plan never takes more than a lease holds",
                entry.lease,
                entry.settle_micros,
                entry.give_back_micros,
                held.outstanding_micros
            );
            if state == LeaseState::Reconciled {
                // The store counted the lease's whole remainder as spent and applied
                // nothing of this entry: what this entry settled is inside that count, and
                // so is whatever the node settles next from it. (A give-back in the entry
                // is lost to the budget: the store counted it as spent.)
                let before = held.outstanding_micros;
                self.prepaid_micros = checked_sum(self.prepaid_micros, before - taken, "prepaid");
                done.reconciled_micros = checked_sum(done.reconciled_micros, before, "reconciled");
                self.leases.remove(pos);
                continue;
            }
            held.outstanding_micros -= taken;
            done.settled_micros += entry.settle_micros;
            done.given_back_micros += entry.give_back_micros;
            if entry.close || state == LeaseState::Closed {
                assert_eq!(held.outstanding_micros, 0, "lease {}: a closed lease holds nothing", entry.lease);
                self.leases.remove(pos);
            }
        }
        self.prepaid_micros -= plan.prepaid_used_micros.min(self.prepaid_micros);
        // What no lease could take stays to be flushed: the settled figure seen moves only
        // by what was assigned.
        assert!(plan.unassigned_micros <= plan.settled_now_micros, "a plan leaves unassigned only what was settled");
        self.settled_seen_micros = plan.settled_now_micros - plan.unassigned_micros;
        // Only what this plan gave back is paid: a give-back recorded after the plan was
        // made (while its flush waited to be sent again) is still owed.
        for (id, taken) in plan.give_back_taken {
            let owed = self.give_back.iter_mut().find(|o| o.id == id);
            assert!(owed.as_ref().is_some_and(|o| o.micros >= taken), "give-back {id}: a plan pays only what is owed");
            if let Some(owed) = owed {
                owed.micros -= taken;
            }
        }
        self.give_back.retain(|o| o.micros > 0);
        done
    }
}

/// `a + b` for a book's running sums of micro-units: on in release, an overflow (more than
/// 2^64 micro-units, which no budget holds) stops the node's step instead of wrapping or
/// being clamped.
fn checked_sum(a: u64, b: u64, what: &str) -> u64 {
    let sum = a.checked_add(b);
    assert!(sum.is_some(), "the book's {what} sum overflows u64 micro-units ({a} + {b}): an accounting error");
    sum.unwrap_or(u64::MAX) // never reached: the assertion above stops the step first
}

#[cfg(all(test, not(holon_loom)))]
mod tests {
    use super::*;

    fn lease(id: u64, amount: u64) -> Lease {
        Lease { id, amount_micros: amount, expires_unix: 100 }
    }

    fn open(plan: &Plan) -> Vec<FlushOutcome> {
        plan.entries
            .iter()
            .map(|e| FlushOutcome {
                lease: e.lease,
                state: if e.close { LeaseState::Closed } else { LeaseState::Open },
                outstanding_micros: 0,
            })
            .collect()
    }

    #[test]
    fn settles_go_to_the_oldest_lease_and_give_backs_to_the_newest_of_their_day() {
        let mut book = Book::default();
        book.add(&lease(1, 100), Some(9));
        book.add(&lease(2, 100), Some(10));
        book.add(&lease(3, 100), Some(10));
        book.give_back(GiveBackFrom::Day(Some(10)), 150);
        book.give_back(GiveBackFrom::Before(10), 30);
        let plan = book.plan(120, Some(30));
        let by_id = |id| plan.entries.iter().find(|e| e.lease == id).copied().unwrap();
        assert_eq!((by_id(1).settle_micros, by_id(1).give_back_micros), (70, 30));
        assert!(by_id(1).close);
        assert_eq!((by_id(2).settle_micros, by_id(2).give_back_micros), (50, 50));
        assert_eq!((by_id(3).settle_micros, by_id(3).give_back_micros), (0, 100));
        let outcomes = open(&plan);
        let done = book.commit(plan, &outcomes);
        assert_eq!(done, Committed { settled_micros: 120, given_back_micros: 180, reconciled_micros: 0 });
        assert_eq!(book.lease_count(), 0, "every lease was emptied and closed");
        assert!(!book.has_work(120));
    }

    #[test]
    fn a_failed_flush_changes_nothing_and_the_next_plan_carries_it() {
        let mut book = Book::default();
        book.add(&lease(1, 100), None);
        let first = book.plan(40, None);
        assert_eq!(first.settle_micros(), 40);
        drop(first); // the store refused it
        let second = book.plan(60, None);
        assert_eq!(second.settle_micros(), 60, "the unflushed 40 is still there");
        let outcomes = open(&second);
        book.commit(second, &outcomes);
        assert_eq!(book.outstanding_micros(), 40);
    }

    #[test]
    fn a_reconciled_lease_prepays_what_the_node_settles_next() {
        let mut book = Book::default();
        book.add(&lease(1, 100), None);
        book.add(&lease(2, 100), None);
        let plan = book.plan(30, None);
        let outcomes = vec![FlushOutcome { lease: 1, state: LeaseState::Reconciled, outstanding_micros: 0 }];
        let done = book.commit(plan, &outcomes);
        assert_eq!(done.reconciled_micros, 100);
        assert_eq!(book.prepaid_micros(), 70, "100 counted, 30 of it was this flush's settle");
        // The next 70 settled are already counted; only what is beyond goes to lease 2.
        let plan = book.plan(130, None);
        assert_eq!(plan.settle_micros(), 30);
        let outcomes = open(&plan);
        book.commit(plan, &outcomes);
        assert_eq!(book.prepaid_micros(), 0);
        assert_eq!(book.outstanding_micros(), 70);
    }

    /// A flush whose answer was lost is committed later, as it was planned: the give-back
    /// withdrawn after it was planned is still owed. Before the fix the late commit replaced
    /// the owed list with what was left at its planning, and the later give-back was lost
    /// (withdrawn from the allowance, never given back: stranded until a reconcile counted
    /// it as spent; `gateway_nodes_on_postgres` left 120 of a lease so, 3 runs of 3).
    #[test]
    fn a_late_committed_plan_pays_only_what_it_planned() {
        let mut book = Book::default();
        book.add(&lease(1, 100), Some(10));
        book.give_back(GiveBackFrom::Day(Some(10)), 30);
        let late = book.plan(20, None);
        book.give_back(GiveBackFrom::Day(Some(10)), 25);
        book.owe_anywhere();
        let outcomes = open(&late);
        book.commit(late, &outcomes);
        assert_eq!(book.outstanding_micros(), 50);
        assert_eq!(book.owed_micros(), 25, "the give-back recorded after the plan is still owed");
        let next = book.plan(20, None);
        assert_eq!(next.give_back_micros(), 25);
        let outcomes = open(&next);
        book.commit(next, &outcomes);
        assert_eq!((book.outstanding_micros(), book.owed_micros()), (25, 0));
    }

    #[test]
    fn a_give_back_with_no_lease_of_its_day_waits() {
        let mut book = Book::default();
        book.add(&lease(1, 100), Some(10));
        book.give_back(GiveBackFrom::Before(10), 50);
        let plan = book.plan(0, None);
        assert_eq!(plan.give_back_micros(), 0, "a past day's give-back never takes today's lease");
        let outcomes = open(&plan);
        book.commit(plan, &outcomes);
        assert!(book.has_work(0), "the give-back is still owed");
    }

    /// Settled spend never goes down: a book shown a settled figure below the one it has
    /// seen stops (on in release) instead of clamping the difference to nothing, which
    /// hid the error and planned a flush of 0.
    #[test]
    #[should_panic(expected = "settled spend never goes down")]
    fn a_settled_figure_below_the_seen_one_stops_the_step() {
        let mut book = Book::starting_at(50, 0);
        book.add(&lease(1, 100), None);
        let _ = book.plan(40, None);
    }

    /// A reconciled lease whose plan took more than it held is an accounting error: it
    /// stops the step instead of clamping the prepaid figure to 0.
    #[test]
    #[should_panic(expected = "a plan never takes more than a lease holds")]
    fn a_reconciled_lease_planned_beyond_its_holding_stops_the_step() {
        let mut book = Book::default();
        book.add(&lease(1, 100), None);
        let mut plan = book.plan(30, None);
        plan.entries[0].settle_micros = 130;
        let outcomes = vec![FlushOutcome { lease: 1, state: LeaseState::Reconciled, outstanding_micros: 0 }];
        let _ = book.commit(plan, &outcomes);
    }
}
