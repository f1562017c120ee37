//! The rules of admission, written once: a pure judgement of one call on the compiled
//! forms, with no write anywhere. [`Engine::decide`](super::Engine) judges and then applies
//! the effects (claim a slot, reserve on the ledger, open a run); the CLI, the simulator and
//! [`Engine::explain`](super::Engine::explain) judge with a spend they were given
//! ([`judge_known`]) and then put the codes into sentences (`admission::explain`).
//!
//! The order of a judgement (docs/admission.md):
//! 1. the fit of the agent under the mandate ([`snapshot::fit_codes`]), the validity
//!    window, the worst case under `max_cost`, `per_call`, and for a sub-call of a
//!    delegated run the run's own checks: any code is a denial, listed with every
//!    exceeded budget limit;
//! 2. above `approval.above` and not yet approved: held (a denial inside a delegated run,
//!    where nobody can be asked), unless a budget limit is already exceeded;
//! 3. otherwise the call may be reserved; the reservation's compare-and-swap on the
//!    ledger enforces `total` and `per_day` against the spend of that instant.

use super::ledger::{DAY_NUMBER_MAX, Ledger};
use super::snapshot::{self, CompiledAgent, CompiledMandate, FitFacts, MandateIx};
use crate::admission::{CallContext, Code, CodeSet, WorstCase, budget};
use crate::manifest::Manifest;
use crate::money::Amount;
use crate::time::Timestamp;

/// What one call brings besides its mandate and agent, as the engine judges it. Where the
/// engine's three call types meet: a gateway's [`Call`](super::Call) (by index, as it asks)
/// and a sub-call (`SubCall::facts`) become these facts, and these facts with a spend become the
/// documents-level [`CallContext`] the explanations and the reference rules read (which
/// carries spend figures instead of a ledger, and no approval or run codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallFacts {
    pub at: Timestamp,
    /// The caller's ceiling for this call, in the mandate's currency.
    pub max_cost: Option<Amount>,
    /// The call names a capability (the gateway picked the agent), not the agent.
    pub by_capability: bool,
    /// The issuer approved this call (a held call admitted again): no second hold.
    pub approved: bool,
    /// A sub-call of a delegated run, with the run's own checks ([`declared_codes`]).
    pub sub_call: Option<CodeSet>,
}

impl CallFacts {
    pub(crate) fn at(at: Timestamp) -> Self {
        CallFacts { at, max_cost: None, by_capability: false, approved: false, sub_call: None }
    }

    /// A gateway's call on a root or published mandate (`approved`: the issuer approved it).
    #[inline]
    pub(crate) fn of_call(call: &super::Call, approved: bool) -> Self {
        CallFacts { at: call.at, max_cost: call.max_cost, by_capability: call.by_capability, approved, sub_call: None }
    }

    /// The call as the documents-level rules know it: its terms from `ctx` (a caller's
    /// figures), nothing approved, not in a run.
    pub(crate) fn of_context(ctx: &CallContext) -> Self {
        CallFacts { max_cost: ctx.max_cost, by_capability: ctx.by_capability, ..CallFacts::at(ctx.at) }
    }

    /// These facts with the time and ceiling of `ctx` (an assessment's own).
    pub(crate) fn with_terms_of(self, ctx: &CallContext) -> Self {
        CallFacts { at: ctx.at, max_cost: ctx.max_cost, ..self }
    }

    /// The documents-level call: these facts with the spend the judgement read.
    pub(crate) fn context(&self, spent_total: Amount, spent_today: Amount) -> CallContext {
        CallContext {
            at: self.at,
            max_cost: self.max_cost,
            spent_total,
            spent_today,
            by_capability: self.by_capability,
            delegated: self.sub_call.is_some(),
        }
    }

    /// `codes` as this call reports them: inside a delegated run, the run's total is the
    /// downstream cap (`total_exceeded` reads `downstream_cap_exceeded`).
    #[inline]
    pub(crate) fn in_run(&self, mut codes: CodeSet) -> CodeSet {
        if self.sub_call.is_some() && codes.contains(Code::TotalExceeded) {
            codes = CodeSet::from_bits(codes.bits() & !CodeSet::EMPTY.with(Code::TotalExceeded).bits())
                .with(Code::DownstreamCapExceeded);
        }
        codes
    }
}

/// Where a judgement reads spend, only when a decision needs it (a denial lists every
/// exceeded limit; a hold is refused when a limit is already exceeded). On the allowed path
/// nothing is read: the reservation's compare-and-swap decides.
pub(super) trait SpendView {
    /// The limits (`total`, `per_day`) that `worst` more would exceed on UTC day `today`,
    /// and the spend that was read to say so.
    fn over_limits(&self, mandate: &CompiledMandate, worst: Amount, today: u64) -> (CodeSet, Spent);
}

/// The spend a decision read (reserved and settled against `total`, and on the call's UTC
/// day against `per_day`): what its sentences quote. Zero where the decision read none (an
/// allowed call's reservation is decided by the ledger's compare-and-swap alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spent {
    pub total: Amount,
    pub today: Amount,
    /// For a call under a sub-mandate refused by an ancestor's rules or budget: that
    /// ancestor, whose spend this is (the denial names it). `None`: the call's own mandate.
    pub limited_by: Option<MandateIx>,
}

/// Spend as the live ledger holds it (claimed against `total`, today against `per_day`).
pub(crate) struct LedgerSpend<'a>(pub &'a Ledger);

impl SpendView for LedgerSpend<'_> {
    #[inline]
    fn over_limits(&self, mandate: &CompiledMandate, worst: Amount, today: u64) -> (CodeSet, Spent) {
        let spent = Spent {
            total: Amount::from_micros(self.0.spent_micros()),
            today: Amount::from_micros(self.0.spent_day_micros(today)),
            limited_by: None,
        };
        (budget::check_limits(&mandate.limits, worst, spent.total, spent.today), spent)
    }
}

/// No spend at all (an assertion's judgement, which reads only the rules).
pub(super) struct NoSpend;

impl SpendView for NoSpend {
    fn over_limits(&self, _: &CompiledMandate, _: Amount, _: u64) -> (CodeSet, Spent) {
        (CodeSet::EMPTY, Spent::default())
    }
}

/// Spend given as figures (the CLI's `--spent-total`, a simulation's running total).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct KnownSpend {
    /// Spent plus reserved against `total`.
    pub total: Amount,
    /// Spent plus reserved today (UTC) against `per_day`.
    pub today: Amount,
}

impl SpendView for KnownSpend {
    fn over_limits(&self, mandate: &CompiledMandate, worst: Amount, _today: u64) -> (CodeSet, Spent) {
        let spent = Spent { total: self.total, today: self.today, limited_by: None };
        (budget::check_limits(&mandate.limits, worst, self.total, self.today), spent)
    }
}

/// What the judgement says to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    Deny,
    Hold,
    /// Reserve the worst case; the ledger's compare-and-swap may still refuse it.
    Reserve,
}

/// The judgement of one call: what to do, every code, the worst case, and the UTC day
/// number the call is charged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Judgement {
    pub step: Step,
    /// Every reason for a denial (empty for a reservation; `approval_required` when held).
    pub codes: CodeSet,
    pub worst: WorstCase,
    /// The call's UTC day number (0 when the time has none the ledger can hold: denied).
    pub today: u64,
    /// The spend read for a denial or a hold (zero when none was read).
    pub spent: Spent,
}

/// Judges one call. Pure: reads the compiled forms and, only for a denial or a hold, the
/// spend.
///
/// `inline(always)`: it is the body of the hot path (`Engine::decide`); the bench gate
/// counts its instructions.
#[inline(always)]
pub(super) fn judge(m: &CompiledMandate, a: &CompiledAgent, call: &CallFacts, spend: &impl SpendView) -> Judgement {
    judge_fit(m, snapshot::fit_codes(m, a, call.by_capability), call, spend)
}

/// [`judge`] from the agent's fit already computed (`fit_codes` of this call).
#[inline(always)]
fn judge_fit(m: &CompiledMandate, fit: FitFacts, call: &CallFacts, spend: &impl SpendView) -> Judgement {
    let mut codes = fit.codes.union(snapshot::window_codes(m, call.at.unix()));
    let (worst, worst_codes) = budget::worst_case(fit.own_ceiling, fit.passthrough_cap, call.max_cost);
    codes = codes.union(worst_codes);
    let Some(today) = day_number(call.at) else {
        let codes = codes.with(Code::InternalError);
        return Judgement { step: Step::Deny, codes, worst, today: 0, spent: Spent::default() };
    };
    let judged = |step, codes, spent| Judgement { step, codes, worst, today, spent };
    // `per_call` depends on the call alone.
    if m.limits.per_call.is_some_and(|cap| worst.worst > cap) {
        codes.insert(Code::PerCallExceeded);
    }
    if let Some(extra) = call.sub_call {
        codes = codes.union(extra);
    }
    if !codes.is_empty() {
        let (over, spent) = spend.over_limits(m, worst.worst, today);
        return judged(Step::Deny, call.in_run(codes.union(over)), spent);
    }
    if !call.approved && budget::needs_approval(&m.limits, worst.worst) {
        // Over budget is a denial, not a question for the issuer.
        let (over, spent) = spend.over_limits(m, worst.worst, today);
        if !over.is_empty() {
            return judged(Step::Deny, call.in_run(over), spent);
        }
        if call.sub_call.is_some() {
            return judged(Step::Deny, CodeSet::EMPTY.with(Code::ApprovalUnavailableInDelegation), spent);
        }
        return judged(Step::Hold, CodeSet::EMPTY.with(Code::ApprovalRequired), spent);
    }
    judged(Step::Reserve, CodeSet::EMPTY, Spent::default())
}

/// Judges one call against a spend given as figures: a [`Step::Reserve`] the ledger's
/// compare-and-swap would refuse (the same limits, [`budget::check_limits`]) is a denial.
/// `fit` is the agent's fit for this call (`fit_codes`), which the caller also reads.
pub(super) fn judge_known(m: &CompiledMandate, fit: FitFacts, call: &CallFacts, spend: KnownSpend) -> Judgement {
    let mut judgement = judge_fit(m, fit, call, &spend);
    if judgement.step == Step::Reserve {
        let (over, spent) = spend.over_limits(m, judgement.worst.worst, judgement.today);
        judgement.spent = spent;
        if !over.is_empty() {
            judgement.step = Step::Deny;
            judgement.codes = call.in_run(over);
        }
    }
    judgement
}

/// The call's UTC day number, if the ledger's day word can hold it.
#[inline]
pub(crate) fn day_number(at: Timestamp) -> Option<u64> {
    u64::try_from(at.utc_day()).ok().filter(|d| *d <= DAY_NUMBER_MAX)
}

/// The checks of a delegated run beyond its sub-mandate: the sub-call must be one the
/// orchestrator declared (by `capability`, or by naming the agent when `capability` is
/// `None`), and its worst case within the declared `max_cost`, converted into the run's
/// currency.
pub(super) fn declared_codes(
    sub: &CompiledMandate,
    orchestrator: &Manifest,
    capability: Option<&str>,
    callee: &CompiledAgent,
) -> CodeSet {
    let target = match capability {
        Some(class) => crate::delegation::Target::Capability(class),
        None => crate::delegation::Target::Agent(&callee.source.id),
    };
    let Some(declared) = crate::delegation::declared_call(orchestrator, &target, &callee.source) else {
        return CodeSet::EMPTY.with(Code::CallNotDeclared);
    };
    let limit = orchestrator
        .pricing
        .currency
        .and_then(|c| sub.source.budget.rate(c))
        .and_then(|rate| declared.max_cost.convert(rate).ok());
    let Some(limit) = limit else {
        return CodeSet::EMPTY.with(Code::CurrencyWithoutRate);
    };
    let fit = snapshot::fit_codes(sub, callee, capability.is_some());
    match fit.own_ceiling.checked_add(fit.passthrough_cap) {
        Ok(worst) if worst <= limit => CodeSet::EMPTY,
        _ => CodeSet::EMPTY.with(Code::CallMaxCostExceeded),
    }
}

/// The codes of a call the ledger refused: every exceeded limit; or, on a store-backed
/// ledger (which refuses what does not fit the node's leases), the code of the store's last
/// answer (its limits are enforced on its grants); and the spend read. Off the allowed path
/// (cold).
#[cold]
#[inline(never)]
pub(super) fn refused_codes(m: &CompiledMandate, refused: CodeSet, worst: Amount, today: u64) -> (CodeSet, Spent) {
    let ledger = &m.ledger;
    let (over, spent) = LedgerSpend(ledger).over_limits(m, worst, today);
    if ledger.is_store_backed() {
        // A worst case that no budget of this mandate could ever hold (above its total or
        // its daily limit by itself) is that limit's code at once, whatever the node holds:
        // never `lease_pending`, which would have the caller wait and retry for nothing.
        let alone = budget::check_limits(&m.limits, worst, Amount::ZERO, Amount::ZERO);
        let never = CodeSet::EMPTY.with(Code::TotalExceeded).with(Code::PerDayExceeded);
        let never = CodeSet::from_bits(alone.bits() & never.bits());
        if !never.is_empty() {
            return (never, spent);
        }
        (ledger.allowance_refused(worst.micros()), spent)
    } else {
        (refused.union(over), spent)
    }
}
