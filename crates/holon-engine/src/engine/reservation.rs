//! The reservation guard a gateway holds while an allowed call runs, and the delegated run
//! an orchestrator's reservation carries.
//!
//! A [`Reservation`] is `#[must_use]`: **dropping it unsettled releases it**, so an early
//! return or a panic in the gateway never leaks budget. [`Reservation::settle`] keeps the
//! actual cost and releases the rest; [`Reservation::release`] gives everything back.
//! After the callee's hard timeout plus the engine's grace, [`Engine::reclaim_expired`]
//! may end the reservation instead. The reaper frees the slot but **keeps the worst case
//! spent** (the call may have run and billed; the spend export counts it the same way).
//! The holder's late `settle` or `release` then reconciles it exactly once: the claim goes
//! from the worst case to the actual cost ([`Settled::late`], an `End::Reconciled`
//! receipt). A reclaimed reservation that is dropped unsettled keeps its worst case.
//!
//! A delegated run admits sub-calls only while its orchestrator's reservation is active
//! (`parent_reservation_ended` otherwise). Its sub-calls' spend is bounded by the run's
//! ledger, whose total is the `sub_budget` inside the orchestrator's worst case; since
//! that worst case stays claimed until the holder settles (late or not) and the settle
//! bills what the run took, the run's spend never leaves the mandate's accounting.

use super::held::{AncestorCharges, Extra, Held};
use super::run::Run;
use super::snapshot::MandateIx;
use super::{End, Engine, Receipt, RunReport};
use crate::admission::{Code, CodeSet, Verdict};
use crate::money::Amount;
use crate::time::Timestamp;

/// Why a settle or release changed nothing.
///
/// Since a late settle reconciles (see the module), no settle or release fails today; the
/// type stays so that a gateway's error handling does not change if one ever does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    #[error("the reservation was already ended")]
    Ended,
}

/// What a settle kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub worst_case: Amount,
    /// Kept against the mandate: the bill, at most the worst case.
    pub kept: Amount,
    /// The bill asked for: own cost plus, for an orchestrator, its sub-calls (reserved or
    /// settled) — above `kept` only if it exceeded the worst case.
    pub billed: Amount,
    /// Of `billed`, what the delegated run's sub-calls took.
    pub passthrough: Amount,
    /// The engine had reclaimed the reservation (its worst case stayed spent); this settle
    /// reconciled it to `kept`.
    pub late: bool,
}

/// An allowed call's reserved worst case.
#[must_use = "dropping a Reservation releases its budget; call settle(actual) to keep the cost"]
pub struct Reservation<'e> {
    pub(super) engine: &'e Engine,
    pub(super) held: Held<'e>,
    extra: Option<Box<Extra<'e>>>,
    /// An orchestrator's delegated run, from the engine's pool and back to it at the end.
    run: Option<Box<Run>>,
    ended: bool,
}

impl std::fmt::Debug for Reservation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("receipt_id", &self.held.receipt_id)
            .field("worst_case", &self.held.worst_case)
            .field("sub_budget", &self.held.sub_budget)
            .field("delegated_run", &self.run().is_some())
            .finish()
    }
}

impl<'e> Reservation<'e> {
    /// A reservation with its extra already made (a call under a published sub-mandate:
    /// the ancestors' charges).
    pub(crate) fn with_extra(engine: &'e Engine, held: Held<'e>, extra: Option<Box<Extra<'e>>>) -> Self {
        Reservation { engine, held, extra, run: None, ended: false }
    }

    pub(crate) fn attach_run(&mut self, run: Box<Run>) {
        debug_assert!(self.run.is_none(), "one run per reservation");
        self.run = Some(run);
    }

    /// The delegated run of an orchestrator's reservation.
    #[inline]
    pub(super) fn run(&self) -> Option<&Run> {
        self.run.as_deref()
    }

    #[inline(always)]
    fn ancestors(&self) -> Option<&AncestorCharges<'e>> {
        self.extra.as_ref().and_then(|e| e.ancestors.as_ref())
    }

    pub fn worst_case(&self) -> Amount {
        self.held.worst_case
    }

    /// A shadow reservation's real decision: the engine would have denied or held this
    /// call (`EngineConfig::shadow`); it holds nothing of the mandate's budget, and its
    /// settlement goes into the mandate's shadow tally ([`Engine::shadow_tally`]), never into
    /// its ledger.
    pub fn shadow(&self) -> Option<&super::Shadowed> {
        self.extra.as_ref().and_then(|e| e.shadow.as_ref())
    }

    /// The root mandate of the chain this reservation draws on (a run's sub-calls tally
    /// their shadow reservations there).
    pub(super) fn root(&self) -> MandateIx {
        let snap = self.engine.cell.load();
        snap.mandate(self.held.mandate).map_or(self.held.mandate, |m| m.root)
    }

    /// What the callee's sub-calls may spend (0 without passthrough).
    pub fn sub_budget(&self) -> Amount {
        self.held.sub_budget
    }

    /// The id of the receipt this call will get; sub-calls name it as their parent.
    pub fn receipt_id(&self) -> u64 {
        self.held.receipt_id
    }

    /// Whether this is an orchestrator's call with a delegated run for its sub-calls.
    pub fn is_delegated_run(&self) -> bool {
        self.run().is_some()
    }

    /// The currency of this orchestrator's run (its parent mandate's), without making the
    /// document.
    pub fn run_currency(&self) -> Option<crate::money::Currency> {
        self.run().map(|r| r.mandate.currency)
    }

    /// The derived sub-mandate of this orchestrator's run, with the run's own budget
    /// figures. Made on each call from the run's compiled form (it allocates): for showing
    /// it or picking a callee, never needed to admit a sub-call.
    pub fn sub_mandate(&self) -> Option<crate::mandate::Mandate> {
        self.run().map(Run::derived)
    }

    /// Whether the reservation still holds its slot: `false` once the reaper reclaimed it
    /// (after the callee's timeout plus the grace; a late settle still reconciles it).
    pub fn is_active(&self) -> bool {
        self.engine.slots().is_active(self.held.ticket)
    }

    /// What the run's sub-calls have reserved or settled so far (an estimate while they
    /// run; see [`Reservation::settle`] for the figure billed).
    pub fn run_spent(&self) -> Amount {
        self.run().map_or(Amount::ZERO, |r| Amount::from_micros(r.mandate.ledger.spent_micros()))
    }

    /// What the run's sub-calls claim: reserved + settled, with the run's leases refunded
    /// first, so sub-calls still in flight count at their worst case (never below).
    fn run_claimed(&self) -> Amount {
        self.run().map_or(Amount::ZERO, |r| {
            r.mandate.ledger.refund_all_leases();
            Amount::from_micros(r.mandate.ledger.claimed_micros())
        })
    }

    /// Keeps `actual` (at most the worst case) and releases the rest. For an
    /// orchestrator the bill is `actual` (its own price) plus what its sub-calls took:
    /// settle it after they have ended; one still in flight counts at its worst case.
    ///
    /// After the engine reclaimed the reservation, a settle still reconciles it, once (the
    /// guard is consumed): the worst case the reaper kept becomes the actual cost, and
    /// [`Settled::late`] says so.
    pub fn settle(self, actual: Amount, at: Timestamp) -> Result<Settled, ReservationError> {
        self.settle_reported(actual, at, RunReport::default())
    }

    /// [`settle`](Self::settle) with what the call's outcome and latency were: its receipt
    /// carries them, and agent records are built from such receipts (docs/records.md).
    #[inline]
    pub fn settle_reported(
        mut self,
        actual: Amount,
        at: Timestamp,
        report: RunReport,
    ) -> Result<Settled, ReservationError> {
        self.ended = true;
        let passthrough = self.run_claimed();
        let billed = actual.checked_add(passthrough).unwrap_or(Amount::MAX);
        let (kept, late) = self.finish(Some(billed), at, report)?;
        Ok(Settled { worst_case: self.held.worst_case, kept, billed, passthrough, late })
    }

    /// Gives the reservation back (the call did not happen, or costs nothing). After a
    /// reclaim it reconciles the kept worst case, once. An orchestrator's sub-calls ran and
    /// billed whatever its own call did: what they took stays billed (a release of a run
    /// that spent settles at its passthrough), or releasing the parent would erase it.
    pub fn release(mut self, at: Timestamp) -> Result<(), ReservationError> {
        self.ended = true;
        let passthrough = self.run_claimed();
        let billed = (passthrough != Amount::ZERO).then_some(passthrough);
        self.finish(billed, at, RunReport::default()).map(|_| ())
    }

    /// Releases without a receipt (an orchestrator refused before it ran). Whether the
    /// holder or a reaper ended the slot, the charge is given back: the call never ran.
    pub(crate) fn release_quietly(mut self) {
        self.ended = true;
        let _won = self.engine.slots().end(self.held.ticket);
        self.refund_charges();
    }

    /// Keeps `billed` (at most the worst case) on the own ledger and on every ancestor's,
    /// refunding the rest; returns what was kept (the same on every level).
    #[inline(always)]
    fn settle_charges(&self, billed_micros: u64) -> u64 {
        let kept = self.held.ledger.settle(self.held.charge, billed_micros);
        if let Some(ancestors) = self.ancestors() {
            ancestors.settle(billed_micros, kept);
        }
        kept
    }

    /// Gives the whole charge back, on the own ledger and on every ancestor's.
    #[inline(always)]
    fn refund_charges(&self) {
        self.held.ledger.refund(self.held.charge);
        if let Some(ancestors) = self.ancestors() {
            ancestors.refund();
        }
    }

    /// Ends the reservation with `billed` (settle) or nothing (release). Returns what was
    /// kept and whether the reaper had ended it first (then this reconciles its worst case).
    // Always inlined into `settle` and `release`: when revocation (issue #14) grew the
    // engine, LLVM stopped inlining it and the allowed path took 996 instructions per
    // admit+settle instead of 978 (`.ci/bench-gate`'s count).
    #[inline(always)]
    fn finish(
        &mut self,
        billed: Option<Amount>,
        at: Timestamp,
        report: RunReport,
    ) -> Result<(Amount, bool), ReservationError> {
        // Exactly one of the holder and the reaper wins the slot. The reaper leaves the
        // charge in the ledger, so either way the holder is the one that ends the charge,
        // exactly once (this guard is consumed or dropped).
        let late = !self.engine.slots().end(self.held.ticket);
        debug_assert!(!self.engine.slots().is_active(self.held.ticket), "the slot ended, by us or the reaper");
        let kept = match billed {
            Some(billed) => Amount::from_micros(self.settle_charges(billed.micros())),
            None => {
                self.refund_charges();
                Amount::ZERO
            }
        };
        debug_assert!(kept <= self.held.worst_case, "a settle keeps at most the worst case");
        let end = match (late, billed.is_some()) {
            (true, _) => End::Reconciled,
            (false, true) => End::Settled,
            (false, false) => End::Released,
        };
        self.engine.submit(&self.end_receipt(end, kept, at, report));
        // Here and in `drop`'s unsettled branch, not in `drop` itself: a check there kept
        // `drop` from being inlined (13 instructions per leaf admit+settle in the gate).
        if self.run.is_some() {
            self.give_back_run();
        }
        Ok((kept, late))
    }
}

impl Drop for Reservation<'_> {
    /// An unsettled reservation is released: no early return leaks budget.
    fn drop(&mut self) {
        if !self.ended {
            self.drop_unsettled();
        }
    }
}

impl Reservation<'_> {
    /// The receipt of this reservation's end, one rule for every way it ends (`finish`,
    /// `drop_unsettled`): ended after its mandate was revoked, it says so (docs/trust.md).
    #[inline(always)]
    fn end_receipt(&self, end: End, actual: Amount, ended_at: Timestamp, report: RunReport) -> Receipt {
        Receipt {
            id: self.held.receipt_id,
            parent: self.held.parent,
            mandate: self.held.mandate,
            agent: self.held.agent,
            decision: Verdict::Allowed,
            end,
            codes: if self.held.ledger.is_revoked() {
                CodeSet::EMPTY.with(Code::MandateRevoked)
            } else {
                CodeSet::EMPTY
            },
            worst_case: self.held.worst_case,
            actual,
            at: self.held.at,
            ended_at,
            outcome: report.outcome,
            latency_ms: report.latency_ms,
            shadow: self.shadow().is_some(),
        }
    }

    /// `drop` of a reservation neither settled nor released, out of line (cold). While the
    /// holder still owns its slot, it ends as `release` would and its receipt says so
    /// (`Settled` when an orchestrator's sub-calls ran and what they took stays billed,
    /// `mandate_revoked` after a revocation). One the reaper reclaimed keeps the worst case
    /// the reaper kept, without a receipt of its own (the call may have run: never less).
    #[cold]
    #[inline(never)]
    fn drop_unsettled(&mut self) {
        self.ended = true;
        // Only if the holder still owns the slot: a reclaimed reservation dropped
        // without a word keeps the worst case the reaper kept (the call may have run).
        if self.engine.slots().end(self.held.ticket) {
            // An orchestrator's sub-calls ran: what they took stays billed (as in
            // `release`); the rest goes back.
            let passthrough = self.run_claimed().micros();
            let (kept, end) = if passthrough > 0 {
                (self.settle_charges(passthrough), End::Settled)
            } else {
                self.refund_charges();
                (0, End::Released)
            };
            let now = self.engine.now();
            self.engine.submit(&self.end_receipt(end, Amount::from_micros(kept), now, RunReport::default()));
        }
        if self.run.is_some() {
            self.give_back_run();
        }
    }
}

impl Reservation<'_> {
    /// The run goes back to the engine's pool (its sub-calls' spend is in the bill by now,
    /// or stays claimed by the reaper on the orchestrator's own ledger).
    #[cold]
    #[inline(never)]
    fn give_back_run(&mut self) {
        if let Some(run) = self.run.take() {
            self.engine.runs.give_back(run);
        }
    }
}
