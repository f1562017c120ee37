//! A sub-call of an orchestrator's delegated run: admitted against the run's ledger under
//! its derived sub-mandate, only while the orchestrator's reservation is active and its
//! root mandate still stands (revoked, removed or replaced after the run opened: no new
//! sub-call).

use super::reservation::Reservation;
use super::snapshot::AgentIx;
use super::{Admission, Ask, Engine};
use crate::admission::{Code, CodeSet, Verdict};
use crate::money::Amount;
use crate::time::Timestamp;

/// A sub-call inside a delegated run.
#[derive(Debug, Clone, Copy)]
pub struct SubCall<'a> {
    pub agent: AgentIx,
    /// The capability the orchestrator asked for (the gateway picked `agent`), or `None`
    /// when the orchestrator named the agent.
    pub capability: Option<&'a str>,
    pub at: Timestamp,
}

impl SubCall<'_> {
    /// The sub-call as the engine judges it: with the run's own codes for it (`run_codes`).
    #[inline]
    pub(crate) fn facts(&self, max_cost: Option<Amount>, run_codes: CodeSet) -> super::judge::CallFacts {
        super::judge::CallFacts {
            at: self.at,
            max_cost,
            by_capability: self.capability.is_some(),
            approved: false,
            sub_call: Some(run_codes),
        }
    }
}

impl<'e> Reservation<'e> {
    /// Admits one sub-call of this orchestrator's delegated run against the run's ledger.
    /// A reservation without a run denies every sub-call (`call_not_declared`).
    ///
    /// Only while this reservation is active: once the reaper (or nothing else: settling
    /// consumes the guard) has ended it, every sub-call is denied `parent_reservation_ended`.
    /// (A reaper racing this check changes no money: the run stays inside the worst case the
    /// reaper keeps claimed; the check stops work past the callee's deadline.)
    pub fn sub_call(&self, call: &SubCall<'_>) -> Admission<'e> {
        self.sub_call_within(call, None)
    }

    /// [`Reservation::sub_call`] with the caller's ceiling for it, in the run's currency: a
    /// callee whose own price ceiling (converted) is above `max_cost` is denied
    /// `max_cost_below_price`, as a root call would be.
    pub fn sub_call_within(&self, call: &SubCall<'_>, max_cost: Option<Amount>) -> Admission<'e> {
        self.sub_call_on(self.engine, call, max_cost)
    }

    /// [`Reservation::sub_call_within`], the sub-call's reservation borrowing `engine` for
    /// as long as the caller holds that borrow: for a holder that keeps its engine and its
    /// reservations in owned cells (the Python package keeps each beside an `Arc` of its
    /// engine), where the parent's borrow ends before the sub-call's. `engine` must be the
    /// one that made this reservation: another engine admits nothing
    /// (`parent_reservation_ended`, as for a run that ended).
    pub fn sub_call_on<'f>(&self, engine: &'f Engine, call: &SubCall<'_>, max_cost: Option<Amount>) -> Admission<'f> {
        if !std::ptr::eq(engine, self.engine) || !engine.slots().is_active(self.held.ticket) {
            // The receipt names the orchestrator's, like every sub-call's.
            let codes = CodeSet::EMPTY.with(Code::ParentReservationEnded);
            let mandate = self.run().map_or(self.held.mandate, |r| r.mandate.ix);
            return {
                let decided =
                    super::shadow::Decided::new(mandate, call.agent, self.root(), self.held.receipt_id, call.at);
                engine.deny_ids(&decided, Verdict::Denied, codes, (Amount::ZERO, super::Spent::default()))
            };
        }
        let snap = engine.cell.load();
        let (Some(run), Some(callee)) = (self.run(), snap.agent(call.agent)) else {
            return engine.deny_unknown(
                &super::Call::new(self.held.mandate, call.agent, call.at),
                if self.run().is_none() { Code::CallNotDeclared } else { Code::UnknownAgent },
            );
        };
        // Revoked (or removed, or replaced by another document) after the run opened: the
        // run may finish what it reserved, but opens no new sub-call (docs/trust.md).
        let root_gone = match snap.mandate(run.mandate.root) {
            None => Some(Code::UnknownMandate),
            Some(root) if root.barred.is_some() => root.barred,
            Some(root) if root.source.digest() != run.mandate.root_digest => Some(Code::UnknownMandate),
            Some(_) => None,
        };
        if let Some(code) = root_gone {
            let codes = CodeSet::EMPTY.with(code);
            return {
                let decided = super::shadow::Decided::new(
                    run.mandate.ix,
                    call.agent,
                    run.mandate.root,
                    self.held.receipt_id,
                    call.at,
                );
                engine.deny_ids(&decided, Verdict::Denied, codes, (Amount::ZERO, super::Spent::default()))
            };
        }
        let extra = super::judge::declared_codes(&run.mandate, &run.orchestrator, call.capability, callee);
        engine.decide(&Ask {
            mandate: &run.mandate,
            agent: callee,
            snapshot: &snap,
            call: call.facts(max_cost, extra),
            parent_receipt: self.held.receipt_id,
        })
    }
}
