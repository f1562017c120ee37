//! Admission outside a running engine, for the CLI, the simulator and ranking: the mandate
//! is compiled once and each agent asked about when it is asked about (microseconds), the
//! call is judged by the engine's own rules ([`judge`]) on a spend given as figures, and the
//! codes are explained in sentences (`admission::explain`). There is no second
//! implementation of the rules to drift from the engine's.

use super::EngineError;
use super::judge::{self, CallFacts, KnownSpend, Spent, Step};
use super::ledger::Ledger;
use super::registry::LedgerKey;
use super::snapshot::{AgentIx, CompiledAgent, CompiledMandate, MandateIx, Snapshot, compile_agent, compile_mandate};
use super::symbols::Names;
use crate::admission::explain::Documents;
use crate::admission::{Assessment, CallContext, Verdict};
use crate::lookup::AgentLookup;
use crate::mandate::Mandate;
use crate::manifest::Manifest;
use crate::money::Amount;
use crate::record::AgentRecord;
use crate::sync::Arc;
use crate::time::Timestamp;
use crate::trust::{TrustedKeys, provenance};

/// One mandate compiled, ready to assess calls to any agent the lookup knows.
pub struct Assessor<'a> {
    names: Names,
    mandate: CompiledMandate,
    lookup: &'a dyn AgentLookup,
    /// When set, agents need their publisher's provenance signature under these keys.
    provenance_keys: Option<&'a TrustedKeys>,
    /// Under a sub-mandate: its ancestors (parent first) with the spend given for each.
    ancestors: Vec<(CompiledMandate, KnownSpend)>,
}

impl std::fmt::Debug for Assessor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assessor").field("mandate", &self.mandate.source.id).finish_non_exhaustive()
    }
}

/// How a call names its callee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Callee<'a> {
    /// The agent itself.
    Agent,
    /// A capability: the gateway picked the agent (so `allow.published` applies).
    Capability(&'a str),
}

impl<'a> Assessor<'a> {
    /// Compiles `mandate`; `lookup` resolves the declared downstream agents of the agents
    /// assessed later. Fails where publishing the mandate to an engine would fail.
    pub fn new(mandate: &Mandate, lookup: &'a dyn AgentLookup) -> Result<Self, EngineError> {
        let names = Names::default();
        let ix = MandateIx(names.mandates.intern(&mandate.id)?);
        // A ledger that is never written: the spend is given with each call.
        let ledger = Arc::new(Ledger::new());
        let mandate = compile_mandate(ix, Arc::new(mandate.clone()), ledger, LedgerKey::Run, &names, None)?;
        Ok(Assessor { names, mandate, lookup, provenance_keys: None, ancestors: Vec::new() })
    }

    /// The same, with the mandate on a revocation list (`revoked` from
    /// [`Revocations::apply`](crate::trust::Revocations::apply)): every call is denied
    /// `mandate_revoked`, as the engine would.
    pub fn revoked(mut self, revoked: bool) -> Result<Self, EngineError> {
        if revoked != self.mandate.revoked() {
            let source = Arc::clone(&self.mandate.source);
            let ledger = Arc::clone(&self.mandate.ledger);
            let barred = revoked.then_some(crate::admission::Code::MandateRevoked);
            self.mandate = compile_mandate(self.mandate.ix, source, ledger, LedgerKey::Run, &self.names, barred)?;
        }
        Ok(self)
    }

    /// The same, requiring signatures as the engine would: an agent without its
    /// publisher's provenance signature under `keys` is denied `provenance_unverified`.
    pub fn require_provenance(mut self, keys: &'a TrustedKeys) -> Self {
        self.provenance_keys = Some(keys);
        self
    }

    /// The same, judged as the engine judges a call under a sub-mandate (docs/admission.md,
    /// "Calls under a sub-mandate"): `parents` are the documents of its ancestors (in any
    /// order; the chain is resolved by the engine's rule), `spent` the spend given for each
    /// by id as (total, today) (an ancestor not named: nothing spent). Every level is
    /// judged with its rules and its spend, and a refusal names the level. A chain that
    /// does not hold denies every call `sub_mandate_chain_broken`, with the reason.
    pub fn with_parents(
        mut self,
        parents: &[Mandate],
        spent: &[(String, Amount, Amount)],
    ) -> Result<Self, EngineError> {
        let mut all = vec![Arc::clone(&self.mandate.source)];
        all.extend(parents.iter().cloned().map(Arc::new));
        let resolved = super::snapshot::resolve_chains(&all, self.lookup);
        match resolved.into_iter().next() {
            Some(Ok(chain)) => {
                for j in chain {
                    let Some(doc) = all.get(j) else { continue };
                    let ix = MandateIx(self.names.mandates.intern(&doc.id)?);
                    let ledger = Arc::new(Ledger::new());
                    let level = compile_mandate(ix, Arc::clone(doc), ledger, LedgerKey::Run, &self.names, None)?;
                    let given = spent.iter().find(|(id, ..)| *id == doc.id);
                    let spend = given
                        .map_or(KnownSpend::default(), |(_, total, today)| KnownSpend { total: *total, today: *today });
                    self.ancestors.push((level, spend));
                }
            }
            Some(Err(why)) => {
                let source = Arc::clone(&self.mandate.source);
                let ledger = Arc::clone(&self.mandate.ledger);
                let barred = Some(crate::admission::Code::SubMandateChainBroken);
                self.mandate = compile_mandate(self.mandate.ix, source, ledger, LedgerKey::Run, &self.names, barred)?;
                self.mandate.chain_error = Some(why.as_str().into());
            }
            None => {}
        }
        Ok(self)
    }

    /// Counts `billed` on every ancestor's given spend (total and today): a call under the
    /// sub-mandate settles on each of them too (the simulator, between top-level calls).
    pub fn add_parent_spend(&mut self, billed: Amount) -> Result<(), crate::money::MoneyError> {
        for (_, spend) in &mut self.ancestors {
            spend.total = spend.total.checked_add(billed)?;
            spend.today = spend.today.checked_add(billed)?;
        }
        Ok(())
    }

    /// The mandate as compiled.
    pub fn mandate(&self) -> &Mandate {
        &self.mandate.source
    }

    /// Compiles `agent` against this assessor's lookup.
    fn compile(&self, agent: &Manifest, record: Option<&AgentRecord>) -> Result<CompiledAgent, EngineError> {
        let ix = AgentIx(self.names.agents.intern(agent.id.as_str())?);
        let unverified = self.provenance_keys.is_some_and(|keys| provenance::verify(agent, record, keys).is_err());
        compile_agent(ix, Arc::new(agent.clone()), record.cloned().map(Arc::new), self.lookup, &self.names, unverified)
    }

    /// Decides and explains a root call to `agent` (with its measured `record`).
    /// `ctx.delegated` is ignored: a sub-call is [`Assessor::assess_sub_call`].
    pub fn assess(
        &self,
        agent: &Manifest,
        record: Option<&AgentRecord>,
        ctx: &CallContext,
    ) -> Result<Assessment, EngineError> {
        self.run(agent, record, ctx, None)
    }

    /// Decides and explains a sub-call of a delegated run whose (derived) sub-mandate this
    /// assessor compiled: the sub-mandate's rules plus the run's own (declared by
    /// `orchestrator`, within the declared `max_cost`); a call that would be held is denied.
    pub fn assess_sub_call(
        &self,
        orchestrator: &Manifest,
        callee: Callee<'_>,
        agent: &Manifest,
        record: Option<&AgentRecord>,
        ctx: &CallContext,
    ) -> Result<Assessment, EngineError> {
        self.run(agent, record, ctx, Some((orchestrator, callee)))
    }

    fn run(
        &self,
        agent: &Manifest,
        record: Option<&AgentRecord>,
        ctx: &CallContext,
        run: Option<(&Manifest, Callee<'_>)>,
    ) -> Result<Assessment, EngineError> {
        let compiled = self.compile(agent, record)?;
        let mut facts = CallFacts::of_context(ctx);
        if let Some((orchestrator, callee)) = run {
            let capability = match callee {
                Callee::Agent => None,
                Callee::Capability(class) => Some(class),
            };
            facts.by_capability = capability.is_some();
            facts.sub_call = Some(judge::declared_codes(&self.mandate, orchestrator, capability, &compiled));
        }
        let docs = Documents {
            mandate: &self.mandate.source,
            agent,
            record,
            lookup: self.lookup,
            orchestrator: run.map(|(o, _)| o),
        };
        if run.is_none() && !self.ancestors.is_empty() {
            let levels: Vec<(&CompiledMandate, KnownSpend)> = self.ancestors.iter().map(|(m, s)| (m, *s)).collect();
            return Ok(judged_in_chain(&self.mandate, &levels, &compiled, &facts, ctx, &docs));
        }
        Ok(judged(&self.mandate, &compiled, &facts, ctx, &docs))
    }
}

/// A root call under a sub-mandate (`own_mandate`, its spend in `ctx`) judged on every
/// level (`levels`, parent first, each with its spend) by `chain::judge_chain`, the
/// engine's rule across the levels, and explained from the level that decided (shared by
/// [`Assessor`] and `Engine::explain`).
pub(crate) fn judged_in_chain(
    own_mandate: &CompiledMandate,
    levels: &[(&CompiledMandate, KnownSpend)],
    agent: &CompiledAgent,
    facts: &CallFacts,
    ctx: &CallContext,
    docs: &Documents<'_>,
) -> Assessment {
    let own_spend = KnownSpend { total: ctx.spent_total, today: ctx.spent_today };
    let judge_on = |m: &CompiledMandate, spend: KnownSpend| {
        judge::judge_known(m, super::snapshot::fit_codes(m, agent, facts.by_capability), facts, spend)
    };
    let own = judge_on(own_mandate, own_spend);
    let ancestors = levels.iter().map(|(m, _)| Some(*m));
    let issued_by_agent = own_mandate.source.issuer.is_agent();
    let decided = super::chain::judge_chain(&own, issued_by_agent, ancestors, |level| {
        let spend = levels.iter().find(|(m, _)| m.ix == level.ix).map_or(KnownSpend::default(), |(_, s)| *s);
        judge_on(level, spend)
    });
    let fit = super::snapshot::fit_codes(own_mandate, agent, facts.by_capability);
    let (verdict, codes, worst, spent) = match decided {
        super::chain::ChainJudgement::Deny { codes, worst, spent, level } => {
            (Verdict::Denied, codes, worst, Spent { limited_by: level, ..spent })
        }
        super::chain::ChainJudgement::Hold { worst, spent } => (
            Verdict::Held,
            crate::admission::CodeSet::EMPTY.with(crate::admission::Code::ApprovalRequired),
            worst,
            spent,
        ),
        super::chain::ChainJudgement::Reserve { worst } => {
            (Verdict::Allowed, crate::admission::CodeSet::EMPTY, worst, Spent::default())
        }
    };
    let facts = facts.with_terms_of(ctx);
    let level = spent.limited_by.and_then(|ix| levels.iter().find(|(m, _)| m.ix == ix));
    let reasons = match level {
        Some((level, spend)) => {
            let spent = Spent { total: spend.total, today: spend.today, limited_by: None };
            super::reasons::ancestor_reasons(level, own_mandate, agent, &facts, (codes, worst, spent), docs)
        }
        None => {
            let spent = Spent { total: ctx.spent_total, today: ctx.spent_today, limited_by: None };
            super::reasons::reasons_for(own_mandate, agent, &facts, (codes, worst, spent), docs)
        }
    };
    Assessment { verdict, worst_case: worst, sub_budget: own.worst.sub_budget, own_ceiling: fit.own_ceiling, reasons }
}

/// Judges a call with the engine's rules on the spend in `ctx`, and explains it from
/// `docs` (shared by [`Assessor`] and `Engine::explain`).
pub(crate) fn judged(
    mandate: &CompiledMandate,
    agent: &CompiledAgent,
    facts: &CallFacts,
    ctx: &CallContext,
    docs: &Documents<'_>,
) -> Assessment {
    let spend = KnownSpend { total: ctx.spent_total, today: ctx.spent_today };
    let fit = super::snapshot::fit_codes(mandate, agent, facts.by_capability);
    // The agent's own ceiling in the mandate's currency, for the caller.
    let own_ceiling = fit.own_ceiling;
    let judgement = judge::judge_known(mandate, fit, facts, spend);
    let spent = Spent { total: ctx.spent_total, today: ctx.spent_today, limited_by: None };
    let facts = facts.with_terms_of(ctx);
    Assessment {
        verdict: match judgement.step {
            Step::Deny => Verdict::Denied,
            Step::Hold => Verdict::Held,
            Step::Reserve => Verdict::Allowed,
        },
        worst_case: judgement.worst.worst,
        sub_budget: judgement.worst.sub_budget,
        own_ceiling,
        reasons: super::reasons::reasons_for(
            mandate,
            agent,
            &facts,
            (judgement.codes, judgement.worst.worst, spent),
            docs,
        ),
    }
}

/// The gateway's pick for a capability inside a delegated run (`holon serve`'s sub-calls by
/// capability, the demo): the implementer of `class` in `snap` that `sub_mandate` admits at
/// `at` by capability, whose price ceiling is lowest (ties by id), and at most `max_cost`
/// when one is given. `None` when none is admitted; an error when the sub-mandate cannot be
/// compiled.
pub fn cheapest_implementer(
    sub_mandate: &Mandate,
    snap: &Snapshot,
    class: &str,
    at: Timestamp,
    max_cost: Option<Amount>,
) -> Result<Option<AgentIx>, EngineError> {
    let assessor = Assessor::new(sub_mandate, snap)?;
    // Within `max_cost` by the rules' own figure (the ceiling converted into the run's
    // currency: `max_cost_below_price` otherwise), cheapest by that figure.
    let ctx = CallContext { by_capability: true, max_cost, ..CallContext::at(at) };
    let best = snap
        .agents()
        .filter(|a| a.source.classes().any(|c| c.as_str() == class))
        .filter_map(|a| {
            let assessed = assessor.assess(&a.source, a.record.as_deref(), &ctx).ok()?;
            (assessed.verdict == Verdict::Allowed).then(|| (assessed.own_ceiling, a.source.id.clone(), a.ix))
        })
        .min_by(|x, y| (x.0, &x.1).cmp(&(y.0, &y.1)));
    Ok(best.map(|(_, _, ix)| ix))
}
