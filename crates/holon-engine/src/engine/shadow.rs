//! The end of a decision that is not an allowed reservation: the denial (or, in shadow
//! mode, the hold) and its receipt, and **shadow mode** ([`EngineConfig::shadow`]): every
//! call is decided as usual and its receipt says what was decided; a call the engine would
//! deny or hold is then allowed on a *shadow reservation* instead. A shadow reservation
//! holds a slot (so it ends once, and the reaper reclaims it like any other) and its worst
//! case on the mandate's **shadow ledger**, never on the ledger that enforces the budget,
//! which the node supplies and the store counts: its settlement goes into the mandate's
//! shadow tally ([`Engine::shadow_tally`]), and the ledgers stay exact. Shadow reservations
//! open no delegated run. Allowed calls reserve and settle as usual.
//!
//! [`EngineConfig::shadow`]: super::EngineConfig

use super::held::{Held, HeldLedger, Shadowed};
use super::ledger::{ALLOWANCE_CAP_MICROS, Ledger, LedgerLimits};
use super::receipt::{End, Outcome, Receipt};
use super::slots::SlotRecord;
use super::{Admission, AgentIx, Denial, Engine, MandateIx, Reservation, Spent, judge};
use crate::admission::{CodeSet, Verdict};
use crate::money::Amount;
use crate::sync::{self, Arc};
use crate::time::Timestamp;

/// How long a shadow reservation for an agent the snapshot does not hold (it has no
/// `timeout_s`) may stay open, before the grace, in seconds.
pub const SHADOW_UNKNOWN_TIMEOUT_S: u64 = 600;

/// A mandate's shadow tally: what its shadow reservations hold now and what they settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShadowTally {
    pub reserved: Amount,
    pub settled: Amount,
}

/// Who a decision is about, for its receipt and, in shadow mode, its shadow reservation.
pub(crate) struct Decided {
    mandate: MandateIx,
    agent: AgentIx,
    /// The root mandate whose shadow tally a shadow reservation counts in.
    root: MandateIx,
    parent: u64,
    at: Timestamp,
}

impl Decided {
    pub(crate) fn new(mandate: MandateIx, agent: AgentIx, root: MandateIx, parent: u64, at: Timestamp) -> Decided {
        Decided { mandate, agent, root, parent, at }
    }
}

impl Engine {
    /// A denial (or, shadowed, a hold) and its receipt; in shadow mode, the call allowed
    /// on a shadow reservation instead, when one can be made (a full reservation table
    /// leaves the real decision standing).
    pub(crate) fn deny_ids(
        &self,
        d: &Decided,
        verdict: Verdict,
        codes: CodeSet,
        (worst, spent): (Amount, Spent),
    ) -> Admission<'_> {
        // With the id space exhausted the denial's receipt has id 0 ("none").
        let denial = Denial { codes, worst_case: worst, receipt_id: sync::next_id().unwrap_or(0), spent };
        self.sink.submit(&Receipt {
            id: denial.receipt_id,
            parent: d.parent,
            mandate: d.mandate,
            agent: d.agent,
            decision: verdict,
            end: End::Decided,
            codes,
            worst_case: worst,
            actual: Amount::ZERO,
            at: d.at,
            ended_at: d.at,
            outcome: Outcome::Unreported,
            latency_ms: 0,
            shadow: self.config.shadow,
        });
        if self.config.shadow
            && denial.receipt_id != 0
            && let Some(r) = self.shadow_reservation(d, &denial, Shadowed { verdict, codes, spent })
        {
            return Admission::Allowed(r);
        }
        Admission::Denied(denial)
    }

    /// The shadow reservation of a call the engine would deny or hold: its worst case on
    /// the root mandate's shadow ledger, a slot, the decision's receipt id. A slow path (the
    /// first one on a mandate allocates its shadow ledger).
    #[cold]
    #[inline(never)]
    fn shadow_reservation(&self, d: &Decided, denial: &Denial, shadowed: Shadowed) -> Option<Reservation<'_>> {
        let ledger = Arc::clone(&*self.shadow_ledgers.entry(d.root.0).or_insert_with(|| Arc::new(Ledger::new())));
        let limits = LedgerLimits {
            total_micros: ALLOWANCE_CAP_MICROS,
            day_micros_max: None,
            epoch: ledger.epoch_for(ALLOWANCE_CAP_MICROS, None),
        };
        let ticket = self.slots().claim()?;
        let today = judge::day_number(d.at).unwrap_or(0);
        let clock_day = || u64::try_from(self.now().utc_day()).unwrap_or(0);
        let worst = denial.worst_case;
        let Ok(charge) = ledger.reserve_clocked(sync::lease_shard(), worst.micros(), today, limits, clock_day) else {
            self.slots().unclaim(ticket);
            return None;
        };
        let timeout_s = self.snapshot().agent(d.agent).map_or(SHADOW_UNKNOWN_TIMEOUT_S, |a| a.timeout_s);
        let deadline = d.at.unix().saturating_add_unsigned(timeout_s.saturating_add(self.config.grace_s));
        let record = SlotRecord {
            worst_micros: charge.worst_micros,
            deadline,
            ids: (u64::from(d.mandate.0) << 32) | u64::from(d.agent.0),
            receipt_id: denial.receipt_id,
            parent_id: d.parent,
            at: d.at.unix(),
            shadow: true,
        };
        self.slots().activate(ticket, &record);
        let held = Held {
            ledger: HeldLedger::Run(ledger),
            ticket,
            charge,
            receipt_id: denial.receipt_id,
            parent: d.parent,
            mandate: d.mandate,
            agent: d.agent,
            at: d.at,
            worst_case: worst,
            sub_budget: Amount::ZERO,
        };
        let extra = Box::new(super::held::Extra { ancestors: None, shadow: Some(shadowed) });
        Some(Reservation::with_extra(self, held, Some(extra)))
    }

    /// What `mandate`'s shadow reservations hold now and settled (zero for a mandate that
    /// had none): the tally shadow mode keeps beside its ledger, never in it.
    pub fn shadow_tally(&self, mandate: MandateIx) -> ShadowTally {
        self.shadow_ledgers.get(&mandate.0).map_or_else(ShadowTally::default, |l| tally(&l))
    }

    /// The shadow tally of every mandate that had a shadow reservation.
    pub fn shadow_tallies(&self) -> Vec<(MandateIx, ShadowTally)> {
        self.shadow_ledgers.iter().map(|l| (MandateIx(*l.key()), tally(&l))).collect()
    }
}

fn tally(ledger: &Ledger) -> ShadowTally {
    let (reserved, settled) = ledger.reserved_and_settled_micros();
    ShadowTally { reserved: Amount::from_micros(reserved), settled: Amount::from_micros(settled) }
}
