//! Codes into sentences. The decision is made once, by the compiled rules
//! (`engine::judge`); this module only says, from the source documents, *why* each code
//! holds for this call, for people: the CLI, the simulator, `Engine::explain`, logs.
//!
//! Every code gets at least one sentence. Where the documents name a culprit (the deny
//! pattern that matched, the declared call that is refused, the threshold and the measured
//! value) the sentence quotes it; where a detail cannot be found the sentence still names
//! the rule, so a code is never reported without words.

use crate::admission::CallContext;
use crate::admission::budget::BudgetLimits;
use crate::admission::code::{Code, CodeSet, Reason};
use crate::lookup::AgentLookup;
use crate::mandate::Mandate;
use crate::manifest::Manifest;
use crate::money::{Amount, Fixed6};
use crate::pattern::{AgentPattern, ClassPattern};
use crate::record::AgentRecord;

/// The documents a sentence may quote.
#[derive(Clone, Copy)]
pub struct Documents<'a> {
    pub mandate: &'a Mandate,
    pub agent: &'a Manifest,
    pub record: Option<&'a AgentRecord>,
    /// Resolves the agent's declared downstream agents.
    pub lookup: &'a dyn AgentLookup,
    /// For a sub-call of a delegated run: the orchestrator that declared the calls.
    pub orchestrator: Option<&'a Manifest>,
}

/// The figures of the judgement a sentence may quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    pub worst: Amount,
    /// The agent's own price ceiling in the mandate's currency.
    pub own_ceiling: Amount,
}

/// One sentence per code (several for `downstream_not_allowed`, one per refused declared
/// call), in the codes' order.
pub fn reasons(codes: CodeSet, docs: &Documents<'_>, ctx: &CallContext, figures: Figures) -> Vec<Reason> {
    let mut out = Vec::new();
    for code in codes.iter() {
        let culprits = if code == Code::DownstreamNotAllowed { refused_calls(docs) } else { Vec::new() };
        if culprits.is_empty() {
            out.push(Reason::new(code, sentence(code, docs, ctx, figures)));
        }
        out.extend(culprits.into_iter().map(|message| Reason::new(code, message)));
    }
    out
}

/// The sentence of a code whose documents are not at hand (a mandate or agent no longer
/// published): the code, and where it is explained.
pub fn without_documents(code: Code) -> String {
    format!(
        "`{}`: the documents this decision was made on are no longer published; see docs/admission.md for this code",
        code.as_str()
    )
}

fn sentence(code: Code, docs: &Documents<'_>, ctx: &CallContext, figures: Figures) -> String {
    let (m, agent) = (docs.mandate, docs.agent);
    let cur = m.budget.currency;
    let limits = BudgetLimits::of(m);
    let worst = figures.worst;
    match code {
        Code::MandateNotYetValid => format!("the mandate is valid from {}; it is now {}", m.valid.from, ctx.at),
        Code::MandateExpired => format!("the mandate expired at {}; it is now {}", m.valid.until, ctx.at),
        Code::AgentDenied => match deny_match(&m.deny.agents, agent) {
            Some(p) => format!("{} matches deny pattern `{p}`", agent.id),
            None => format!("{} is denied by `deny.agents`", agent.id),
        },
        Code::NotAllowed => {
            let classes: Vec<&str> = agent.classes().map(|c| c.as_str()).collect();
            format!(
                "neither {} nor its classes [{}] match `allow.capabilities` or `allow.agents`",
                agent.id,
                classes.join(", ")
            )
        }
        Code::PublishedNotAllowed => format!(
            "{} is published by `{}`, not by the issuer `{}`, and `allow.published` is off; name the agent to call it",
            agent.id,
            agent.id.namespace(),
            m.issuer.namespace()
        ),
        Code::DelegationDepthExceeded => format!(
            "{} declares {} downstream call(s) but `delegation.max_depth` is {}",
            agent.id,
            agent.calls.len(),
            m.delegation.max_depth
        ),
        // Said only when no refused declared call can be named (`refused_calls`).
        Code::DownstreamNotAllowed => {
            format!("a downstream call {} declares is not allowed by the mandate", agent.id)
        }
        Code::ChargeOnSuccessRequired => {
            format!("{} charges on attempt; the mandate requires `charge_on: success`", agent.id)
        }
        Code::RuntimeNotAllowed => {
            let allowed: Vec<&str> = m.require.runtimes.iter().flatten().map(|r| r.as_str()).collect();
            format!("runtime `{}` is not in `require.runtimes` [{}]", agent.runtime.kind.as_str(), allowed.join(", "))
        }
        Code::RetentionTooLong => match &m.data.max_retention {
            Some(limit) => format!(
                "{} retains data for {}, which may be longer than `max_retention` {limit}",
                agent.id, agent.data.retention
            ),
            None => format!("{} retains data longer than the mandate allows", agent.id),
        },
        Code::TrainingUseNotAllowed => {
            format!("{} may train on the data; the mandate says `training_use: false`", agent.id)
        }
        Code::EgressNotAllowed => format!(
            "{} sends data to [{}]; the mandate says `allow_egress: false`",
            agent.id,
            agent.data.egress.join(", ")
        ),
        Code::RecordMissing => {
            format!("no measured record for {}@{}; an unmeasured agent is not trusted", agent.id, agent.version)
        }
        Code::SuccessRateBelowMin => {
            at_least(m.require.min_success_rate, docs.record.and_then(|r| r.effective_success_rate()), "success rate")
        }
        Code::EvalScoreBelowMin => {
            at_least(m.require.min_eval_score, docs.record.and_then(|r| r.eval_score), "eval score")
        }
        Code::LatencyP95AboveMax => {
            let max = m.require.max_latency_p95_s.unwrap_or_default();
            match docs.record.and_then(|r| r.latency_p95_s) {
                Some(v) => format!("p95 latency {v}s is above the allowed {max}s"),
                None => format!("no p95 latency measured; the mandate allows at most {max}s"),
            }
        }
        Code::RunsBelowMin => {
            let min = m.require.min_runs_30d.unwrap_or_default();
            match docs.record.and_then(|r| r.runs_30d) {
                Some(v) => format!("{v} runs in 30 days, below the required {min}"),
                None => format!("no run count measured; the mandate requires {min} runs in 30 days"),
            }
        }
        Code::CurrencyWithoutRate => currency_without_rate(docs),
        Code::AmountOverflow => {
            format!("the worst case of {} in {cur} overflows: its price converted, plus its downstream cap", agent.id)
        }
        Code::MaxCostBelowPrice => format!(
            "max_cost {} {cur} is below the agent's own price ceiling {} {cur}",
            ctx.max_cost.unwrap_or_default(),
            figures.own_ceiling
        ),
        Code::PerCallExceeded => format!(
            "worst case {worst} {cur} is above the per-call limit {} {cur}",
            limits.per_call.unwrap_or_default()
        ),
        Code::TotalExceeded => format!(
            "spent {} {cur} + worst case {worst} {cur} would exceed the total budget {} {cur}",
            ctx.spent_total, limits.total
        ),
        Code::DownstreamCapExceeded => format!(
            "worst case {worst} {cur} is more than the {} {cur} left of the downstream cap",
            limits.total.saturating_sub(ctx.spent_total)
        ),
        Code::PerDayExceeded => format!(
            "spent today {} {cur} + worst case {worst} {cur} would exceed the daily budget {} {cur}",
            ctx.spent_today,
            limits.per_day.unwrap_or_default()
        ),
        Code::ApprovalUnavailableInDelegation => format!(
            "worst case {worst} {cur} is above the approval threshold {} {cur}, and inside a delegated run there is no one to ask",
            limits.approval_above.unwrap_or_default()
        ),
        Code::ApprovalRequired => format!(
            "worst case {worst} {cur} is above the approval threshold {} {cur}; the issuer {} must approve",
            limits.approval_above.unwrap_or_default(),
            m.issuer
        ),
        Code::CallNotDeclared => match docs.orchestrator {
            Some(o) => format!("{} did not declare a call that {} satisfies", o.id, agent.id),
            None => format!("{} is called inside a run whose orchestrator declared no such call", agent.id),
        },
        Code::CallMaxCostExceeded => format!("worst case {worst} {cur} is above the declared max_cost"),
        Code::InternalError => format!("the call's time {} is outside what the engine can decide", ctx.at),
        Code::SubMandateWidens => {
            format!("the sub-mandate derived for {} would widen its parent, so the call does not run", agent.id)
        }
        Code::MandateRevoked => format!(
            "the mandate {} is on the revocation list, or a mandate it is chained to is: nothing more is admitted under it",
            m.id
        ),
        Code::ProvenanceUnverified => format!(
            "{}@{} has no valid signature of its publisher `{}` over its manifest, and signatures are required",
            agent.id,
            agent.version,
            agent.id.namespace()
        ),
        Code::MandateUntrusted => format!(
            "signatures are required and the chain of {} does not hold (the publish reported why); sign it with a trusted key",
            m.id
        ),
        Code::SubMandateChainBroken => format!(
            "{} is a sub-mandate of {} whose chain does not hold, so it admits nothing until its chain is fixed and published again",
            m.id,
            m.parent.as_deref().unwrap_or("its parent")
        ),
        Code::UnknownMandate => "the mandate is not in the live snapshot".to_owned(),
        Code::UnknownAgent => "the agent is not in the live snapshot".to_owned(),
        Code::InFlightLimitReached => {
            "every place for calls in flight is taken; retry when calls have finished".to_owned()
        }
        Code::ParentReservationEnded => {
            "the orchestrator's reservation has ended (its deadline passed), so its run admits nothing more".to_owned()
        }
        Code::LeasePending => format!(
            "this gateway node holds too little of the budget in leases for worst case {worst} {cur}; it is asking the ledger store for more, so retry shortly"
        ),
        Code::StoreUnavailable => format!(
            "this gateway node holds too little of the budget in leases for worst case {worst} {cur}, and the ledger store cannot be reached to grant more"
        ),
        Code::ReplayReservationEnded => {
            "this idempotency key's first answer allowed a call whose reservation is no longer open here: a replay never authorises a call, and nothing was reserved; a new call takes a new key".to_owned()
        }
        Code::NodeStopped => "this gateway's node was stopped (or never started), so no budget reaches it from the ledger store and it admits nothing; start a node (a new engine on the store), do not retry".to_owned(),
    }
}

fn deny_match<'a>(patterns: &'a [AgentPattern], agent: &Manifest) -> Option<&'a AgentPattern> {
    patterns.iter().find(|p| p.matches(&agent.id))
}

fn at_least(min: Option<Fixed6>, got: Option<Fixed6>, what: &str) -> String {
    let min = min.unwrap_or_default();
    match got {
        Some(v) => format!("{what} {v} is below the required {min}"),
        None => format!("no {what} measured; the mandate requires at least {min}"),
    }
}

fn currency_without_rate(docs: &Documents<'_>) -> String {
    let (m, agent) = (docs.mandate, docs.agent);
    let into = m.budget.currency;
    match agent.pricing.currency {
        None if agent.pricing.ceiling().is_some_and(|c| c > Amount::ZERO) => {
            format!("{} is priced without a currency", agent.id)
        }
        Some(currency) if m.budget.rate(currency).is_none() => format!(
            "{} is priced in {currency} and the mandate has no `budget.fx` rate from {currency} into {into}",
            agent.id
        ),
        _ => match docs.orchestrator {
            Some(o) => format!("the declared max_cost of {} cannot be converted into {into}", o.id),
            None => format!("a price of {} cannot be converted into {into}", agent.id),
        },
    }
}

/// One sentence per refused declared call.
fn refused_calls(docs: &Documents<'_>) -> Vec<String> {
    let m = docs.mandate;
    let class_allowed = |class: &str| m.allow.capabilities.iter().any(|p| p.matches(class));
    let mut out = Vec::new();
    for call in &docs.agent.calls {
        if let Some(class) = &call.capability
            && !m.allow.capabilities.iter().any(|p| p.covers(&ClassPattern::Exact(class.as_str().to_owned())))
        {
            out.push(format!("declared call to capability `{class}` is not within `allow.capabilities`"));
        }
        if let Some(target) = &call.agent {
            if let Some(p) = m.deny.agents.iter().find(|p| p.matches(&target.id)) {
                out.push(format!("declared call to `{target}` matches deny pattern `{p}`"));
                continue;
            }
            let by_id = m.allow.agents.iter().any(|p| p.matches(&target.id));
            let by_class = docs
                .lookup
                .find(&target.id, &target.range)
                .is_some_and(|found| found.classes().any(|c| class_allowed(c.as_str())));
            if !by_id && !by_class {
                out.push(format!(
                    "declared call to `{target}` matches no `allow.agents` pattern, and no known manifest of it has an allowed class"
                ));
            }
        }
    }
    out
}
