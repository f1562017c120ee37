//! Calls under a published sub-mandate (docs/admission.md, "Calls under a sub-mandate";
//! docs/engine.md, "Hierarchical reservation"): the call is judged on the sub-mandate and
//! on every ancestor up to the root, and its worst case is reserved on every one of their
//! ledgers, **all or nothing**.
//!
//! - Judged on each level with that level's rules and spend (`judge::judge`): the first
//!   level that denies names itself in the denial ([`Spent::limited_by`]), child first.
//! - Approval: a level whose `approval.above` the worst case crosses holds the call for
//!   its issuer if that issuer is an account; a sub-mandate's issuer is its parent's
//!   grantee, an agent, and an agent approves nothing, so crossing a sub-mandate's
//!   threshold is a denial (`approval_unavailable_in_delegation`). Only a chain's root can
//!   hold, and its issuer approves ([`approving_mandate`]).
//! - Reserved root first, down to the parent, then (in `Engine::decide`) on the
//!   sub-mandate's own ledger. Each reservation is one ledger's compare-and-swap, so no
//!   level can go over its limits at any instant; a level that refuses gives back the
//!   levels already reserved before the answer, and the call is denied with that level's
//!   codes. One amount (the largest worst case any level computed: the levels share a
//!   currency, their `fx` may differ) is reserved on every level, so settle, release and
//!   late settle keep the same amount on every level, exactly once (`Reservation`).
//! - A root mandate's call never comes here: its chain is empty, one branch.

use smallvec::SmallVec;

use super::judge::{self, Spent, Step};

use super::held::{AncestorCharges, Extra};
use super::registry::LedgerKey;
use super::snapshot::{CompiledMandate, MandateIx, Snapshot};
use super::{Admission, Ask, Engine, shadow};
use crate::admission::{Code, CodeSet, Verdict};
use crate::money::Amount;
use crate::sync;

/// What the chain step decided.
pub(super) enum ChainStep<'e> {
    /// Reserve `worst` on the sub-mandate's own ledger; the ancestors already hold it (in
    /// the reservation's boxed extra: on the root path only a null pointer moves).
    Reserve { worst: Amount, extra: Box<Extra<'e>> },
    /// A denial or a hold.
    Done(Admission<'e>),
}

/// The mandate whose issuer approves a held call under `m`: the root of its chain (the only
/// level whose issuer can be an account), or `m` itself for a root mandate.
pub(super) fn approving_mandate<'s>(snap: &'s Snapshot, m: &'s CompiledMandate) -> Option<&'s CompiledMandate> {
    match m.ancestors.last() {
        None => Some(m),
        Some(root) => snap.mandate(*root),
    }
}

/// What the rules say of a call under a sub-mandate, on every level (no write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChainJudgement {
    /// Refused by `level` (`None`: the sub-mandate itself) with these codes.
    Deny { level: Option<MandateIx>, codes: CodeSet, worst: Amount, spent: Spent },
    /// Held for the issuer (an account) of the level `spent.limited_by` names (`None`: the
    /// sub-mandate itself).
    Hold { worst: Amount, spent: Spent },
    /// Reserve `worst` on every level.
    Reserve { worst: Amount },
}

/// The one rule of a call under a sub-mandate across its levels, given the judgement on
/// the sub-mandate itself (`own`) and a judge of each ancestor (the engine's on its
/// ledger's spend, the CLI's on spend given as figures): the first level that refuses
/// decides, child first; crossing the threshold of a level issued by an agent is a denial;
/// the reserved amount is the largest worst case of any level.
pub(super) fn judge_chain<'m>(
    own: &judge::Judgement,
    own_issuer_is_agent: bool,
    ancestors: impl Iterator<Item = Option<&'m CompiledMandate>>,
    mut judge_level: impl FnMut(&CompiledMandate) -> judge::Judgement,
) -> ChainJudgement {
    let mut worst = own.worst.worst;
    let deny = |level, codes, worst, spent| ChainJudgement::Deny { level, codes, worst, spent };
    let unapprovable = CodeSet::EMPTY.with(Code::ApprovalUnavailableInDelegation);
    let mut hold = None;
    match own.step {
        Step::Deny => return deny(None, own.codes, worst, own.spent),
        Step::Hold if own_issuer_is_agent => return deny(None, unapprovable, worst, own.spent),
        Step::Hold => hold = Some((own.spent, None)),
        Step::Reserve => {}
    }
    for level in ancestors {
        // Compiled in the same snapshot: never missing; fail closed if it were.
        let Some(level) = level else {
            return deny(None, CodeSet::EMPTY.with(Code::InternalError), worst, Spent::default());
        };
        let judged = judge_level(level);
        let at = Some(level.ix);
        match judged.step {
            Step::Deny => return deny(at, judged.codes, judged.worst.worst, judged.spent),
            Step::Hold if level.source.issuer.is_agent() => {
                return deny(at, unapprovable, judged.worst.worst, judged.spent);
            }
            Step::Hold => hold = hold.or(Some((judged.spent, at))),
            Step::Reserve => {}
        }
        worst = worst.max(judged.worst.worst);
    }
    match hold {
        Some((spent, level)) => ChainJudgement::Hold { worst, spent: Spent { limited_by: level, ..spent } },
        None => ChainJudgement::Reserve { worst },
    }
}

/// An ancestor's judgement on the hot path: what attenuation does not already imply. Every
/// link of the chain attenuates, checked at the publish that compiled it (a parent lowered
/// or revoked later is a new publish, which bars the child), and attenuation is sound: what
/// a child admits, its parent admits (`tests/attenuation_rules.rs`, `attenuation_is_sound`:
/// fit, window, `per_call`, the worst case, since a child's `fx` rates are at least its
/// parent's, and approval, since its threshold is at most its parent's). So the ancestor's
/// rules are read only where they are not the child's: its window (it is barred, say: fail
/// closed), and its budget, which its ledger's compare-and-swap enforces next. Built with
/// debug assertions (every test, proptest and loom model), the full judgement of the
/// ancestor is asserted to agree.
fn ancestor_judgement(ask: &Ask<'_>, level: &CompiledMandate, own: &judge::Judgement) -> judge::Judgement {
    debug_assert_eq!(
        judge::judge(level, ask.agent, &ask.call, &judge::NoSpend).step,
        Step::Reserve,
        "attenuation implies the ancestor's rules"
    );
    let codes = super::snapshot::window_codes(level, ask.call.at.unix());
    let step = if codes.is_empty() { Step::Reserve } else { Step::Deny };
    judge::Judgement { step, codes, spent: Spent::default(), ..*own }
}

impl Engine {
    /// Judges a call under a sub-mandate on every ancestor and reserves its worst case on
    /// each of their ledgers.
    #[cold]
    #[inline(never)]
    pub(super) fn chain_step<'e>(&'e self, ask: &Ask<'_>) -> ChainStep<'e> {
        let own = judge::judge(ask.mandate, ask.agent, &ask.call, &judge::LedgerSpend(&ask.mandate.ledger));
        let m = ask.mandate;
        let snap = ask.snapshot;
        let levels = m.ancestors.iter().map(|ix| snap.mandate(*ix));
        let judged =
            judge_chain(&own, m.source.issuer.is_agent(), levels, |level| ancestor_judgement(ask, level, &own));
        match judged {
            ChainJudgement::Deny { level, codes, worst, spent } => {
                let level = level.and_then(|ix| snap.mandate(ix));
                ChainStep::Done(self.deny_level(ask, level, codes, worst, spent))
            }
            ChainJudgement::Hold { worst, spent } if self.config.shadow => {
                let decided = shadow::Decided::new(m.ix, ask.agent.ix, m.root, ask.parent_receipt, ask.call.at);
                let codes = CodeSet::EMPTY.with(Code::ApprovalRequired);
                ChainStep::Done(self.deny_ids(&decided, Verdict::Held, codes, (worst, spent)))
            }
            ChainJudgement::Hold { worst, .. } => ChainStep::Done(self.hold(ask, worst)),
            ChainJudgement::Reserve { worst } => self.reserve_ancestors(ask, worst, own.today),
        }
    }

    /// Reserves `worst` on every ancestor, root first; all or nothing.
    fn reserve_ancestors<'e>(&'e self, ask: &Ask<'_>, worst: Amount, today: u64) -> ChainStep<'e> {
        let clock_day = || u64::try_from(self.now().utc_day()).unwrap_or(0);
        let ancestors = &ask.mandate.ancestors;
        // The charges taken so far; `refund` gives them back when a level refuses.
        let mut held = AncestorCharges { charges: SmallVec::with_capacity(ancestors.len()) };
        for ix in ancestors.iter().rev() {
            let level = ask.snapshot.mandate(*ix);
            let ledger = level.and_then(|level| match level.ledger_key {
                LedgerKey::Root(root) => self.ledgers.root(root),
                LedgerKey::Run => None,
            });
            let (Some(level), Some(ledger)) = (level, ledger) else {
                held.refund();
                let codes = CodeSet::EMPTY.with(Code::InternalError);
                return ChainStep::Done(self.deny_level(ask, level, codes, worst, Spent::default()));
            };
            match ledger.reserve_clocked(sync::lease_shard(), worst.micros(), today, level.ledger_limits, clock_day) {
                Ok(charge) => held.charges.push((ledger, charge)),
                Err(refused) => {
                    // Given back before the answer: a refused call holds nothing anywhere.
                    held.refund();
                    let (codes, spent) = judge::refused_codes(level, refused, worst, today);
                    return ChainStep::Done(self.deny_level(ask, Some(level), codes, worst, spent));
                }
            }
        }
        debug_assert_eq!(held.charges.len(), ancestors.len(), "every ancestor holds the worst case");
        ChainStep::Reserve { worst, extra: Box::new(Extra { ancestors: Some(held), shadow: None }) }
    }

    /// A denial of a call under a sub-mandate, naming the level whose rules refused it
    /// (`None`: the sub-mandate itself).
    fn deny_level<'e>(
        &'e self,
        ask: &Ask<'_>,
        level: Option<&CompiledMandate>,
        codes: CodeSet,
        worst: Amount,
        spent: Spent,
    ) -> Admission<'e> {
        let spent = Spent { limited_by: level.map(|l| l.ix), ..spent };
        self.deny_read(ask, codes, worst, spent)
    }
}
