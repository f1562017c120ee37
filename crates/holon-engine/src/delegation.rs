//! Delegation (docs/rulings.md, delegation; docs/admission.md "Derived sub-mandates"): the gateway derives the sub-mandate of an agent
//! that declared downstream calls, checks it with the attenuation rules, and checks every
//! sub-call of the delegated run against it.

use serde::Serialize;

use crate::attenuation::{Widening, attenuate};
use crate::lookup::AgentLookup;
use crate::mandate::{Allow, Approval, Budget, Delegation, Mandate};
use crate::manifest::{DeclaredCall, Manifest};
use crate::money::Amount;
use crate::pattern::{AgentPattern, ClassPattern, Principal};

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
        // The gateway derives it and the engine holds it: nobody signs it, and nothing
        // names it as a parent by digest.
        signature: None,
        canonical: None,
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
pub fn declared_call<'a>(
    orchestrator: &'a Manifest,
    target: &Target<'_>,
    callee: &Manifest,
) -> Option<&'a DeclaredCall> {
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
