//! Delegation (docs/rulings.md, delegation; docs/admission.md "Derived sub-mandates"): the gateway derives the sub-mandate of an agent
//! that declared downstream calls, checks it with the attenuation rules, and checks every
//! sub-call of the delegated run against it.

use serde::Serialize;

use crate::admission::{self, Assessment, CallContext, Code, Reason, Verdict};
use crate::attenuation::{Widening, attenuate};
use crate::lookup::AgentLookup;
use crate::mandate::{Allow, Approval, Budget, Delegation, Mandate};
use crate::manifest::{Call, Manifest};
use crate::money::Amount;
use crate::pattern::{AgentPattern, ClassPattern, Principal};
use crate::record::AgentRecord;

/// Why a sub-mandate could not be derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeriveRefusal {
    pub reasons: Vec<Widening>,
}

/// Derives the sub-mandate for `agent`'s run under `parent` (the table of the delegation
/// document). `sub_budget` is what the call's worst case left for sub-calls: the converted
/// downstream cap, or `max_cost` minus the agent's own ceiling.
pub fn derive(
    parent: &Mandate,
    agent: &Manifest,
    sub_budget: Amount,
    lookup: &dyn AgentLookup,
) -> Result<Mandate, DeriveRefusal> {
    let mut refusal = Vec::new();
    if parent.delegation.max_depth == 0 {
        refusal.push(Widening {
            code: "delegation_depth_exceeded",
            message: format!("{} declares downstream calls but the parent's `delegation.max_depth` is 0", agent.id),
            parent: "0".into(),
            child: "-1".into(),
        });
        return Err(DeriveRefusal { reasons: refusal });
    }
    let clamp = |limit: Option<Amount>| limit.map(|l| l.min(sub_budget));
    let child = Mandate {
        holon_mandate: parent.holon_mandate.clone(),
        id: format!("{}/{}", parent.id, agent.id),
        parent: Some(parent.id.clone()),
        issuer: parent.grantee.clone(),
        grantee: Principal::from(agent.id.clone()),
        valid: parent.valid.clone(),
        budget: Budget {
            currency: parent.budget.currency,
            total: sub_budget,
            per_call: clamp(parent.budget.per_call),
            per_day: clamp(parent.budget.per_day),
            fx: parent.budget.fx.clone(),
        },
        approval: parent.approval.as_ref().map(|a| Approval { above: a.above }),
        allow: Allow {
            capabilities: agent
                .calls
                .iter()
                .filter_map(|c| c.capability.as_ref())
                .map(|c| ClassPattern::Exact(c.as_str().to_owned()))
                .collect(),
            agents: agent
                .calls
                .iter()
                .filter_map(|c| c.agent.as_ref())
                .map(|a| AgentPattern::Exact(a.id.clone()))
                .collect(),
            published: parent.allow.published,
        },
        deny: parent.deny.clone(),
        require: parent.require.clone(),
        data: parent.data.clone(),
        delegation: Delegation { max_depth: parent.delegation.max_depth - 1 },
    };
    refusal.extend(attenuate(parent, &child, lookup));
    if refusal.is_empty() { Ok(child) } else { Err(DeriveRefusal { reasons: refusal }) }
}

/// How a sub-call names its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<'a> {
    Capability(&'a str),
    Agent(&'a crate::pattern::AgentId),
}

/// Finds the orchestrator's declared call that covers a sub-call to `callee`.
pub fn declared_call<'a>(orchestrator: &'a Manifest, target: &Target<'_>, callee: &Manifest) -> Option<&'a Call> {
    orchestrator.calls.iter().find(|call| match (target, &call.capability, &call.agent) {
        (Target::Capability(cap), Some(declared), _) => {
            declared.as_str() == *cap && callee.classes().any(|c| c.as_str() == *cap)
        }
        (Target::Agent(id), _, Some(declared)) => {
            declared.id == **id && callee.id == **id && declared.range.matches(&callee.version)
        }
        _ => false,
    })
}

/// Admits one sub-call of a delegated run. `sub_spent` is what the run has already spent
/// or reserved of its sub-budget. Undeclared calls, calls above their declared `max_cost`
/// and calls above the remaining cap are refused; a call that would be held is denied.
#[allow(clippy::too_many_arguments)]
pub fn assess_sub_call(
    sub: &Mandate,
    orchestrator: &Manifest,
    target: &Target<'_>,
    callee: &Manifest,
    record: Option<&AgentRecord>,
    sub_spent: Amount,
    spent_today: Amount,
    at: crate::time::Timestamp,
    lookup: &dyn AgentLookup,
) -> Assessment {
    let fit = admission::fit(sub, callee, record, lookup);
    let ctx = CallContext {
        at,
        max_cost: None,
        spent_total: sub_spent,
        spent_today,
        by_capability: matches!(target, Target::Capability(_)),
        delegated: true,
    };
    let mut assessment = admission::assess(sub, &fit, &ctx);
    let cur = sub.budget.currency;
    match declared_call(orchestrator, target, callee) {
        None => assessment.reasons.push(Reason::new(
            Code::CallNotDeclared,
            format!("{} did not declare a call that {} satisfies", orchestrator.id, callee.id),
        )),
        Some(call) => {
            let declared = orchestrator
                .pricing
                .currency
                .and_then(|c| sub.budget.rate(c))
                .and_then(|rate| call.max_cost.convert(rate).ok());
            match declared {
                Some(limit) if assessment.worst_case <= limit => {}
                Some(limit) => assessment.reasons.push(Reason::new(
                    Code::CallMaxCostExceeded,
                    format!("worst case {} {cur} is above the declared max_cost {limit} {cur}", assessment.worst_case),
                )),
                None => assessment.reasons.push(Reason::new(
                    Code::CurrencyWithoutRate,
                    format!("the declared max_cost of {} cannot be converted into {cur}", orchestrator.id),
                )),
            }
        }
    }
    // `delegated: true` never yields Held, so any reason here means denied.
    if !assessment.reasons.is_empty() {
        assessment.verdict = Verdict::Denied;
    }
    assessment
}
