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
///
/// The engine derives the same document in two steps ([`derive_template`] once per
/// snapshot, [`run_figures`] per call); this is the whole document checked at once, with
/// every reason in the attenuation rules' order.
pub fn derive(
    parent: &Mandate,
    agent: &Manifest,
    sub_budget: Amount,
    lookup: &dyn AgentLookup,
) -> Result<Mandate, DeriveRefusal> {
    checked(parent, agent, RunFigures::lowered(parent, sub_budget), lookup)
}

/// A derived sub-mandate's budget figures for one call: the call's `sub_budget` as its
/// total, and the parent's per-call and per-day limits lowered to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunFigures {
    pub(crate) total: Amount,
    pub(crate) per_call: Option<Amount>,
    pub(crate) per_day: Option<Amount>,
}

impl RunFigures {
    /// Puts the figures into a derived sub-mandate's budget.
    pub(crate) fn put_into(self, budget: &mut Budget) {
        budget.total = self.total;
        budget.per_call = self.per_call;
        budget.per_day = self.per_day;
    }

    /// `sub_budget` as the total, the parent's per-call and per-day limits lowered to it.
    fn lowered(parent: &Mandate, sub_budget: Amount) -> Self {
        let lower = |limit: Option<Amount>| limit.map(|l| l.min(sub_budget));
        RunFigures { total: sub_budget, per_call: lower(parent.budget.per_call), per_day: lower(parent.budget.per_day) }
    }

    /// The parent's own figures: they pass every budget rule.
    fn parents(parent: &Mandate) -> Self {
        let b = &parent.budget;
        RunFigures { total: b.total, per_call: b.per_call, per_day: b.per_day }
    }
}

/// The figures of a run whose call left `sub_budget` for sub-calls, checked with the one
/// attenuation rule they can break (a total above the parent's: `total_widened`). The
/// lowered limits are at most the parent's by construction. No allocation unless refused.
pub(crate) fn run_figures(parent: &Mandate, sub_budget: Amount) -> Result<RunFigures, DeriveRefusal> {
    if let Some(widening) = crate::attenuation::total_widening(parent, sub_budget) {
        return Err(DeriveRefusal { reasons: vec![widening] });
    }
    Ok(RunFigures::lowered(parent, sub_budget))
}

/// Everything of the sub-mandate for `agent`'s runs under `parent` that does not depend on
/// the call: the document with the parent's own budget figures (which pass every budget
/// rule), checked with the attenuation rules. What [`run_figures`] puts in can only break
/// `total_widened`, which it checks itself.
pub(crate) fn derive_template(
    parent: &Mandate,
    agent: &Manifest,
    lookup: &dyn AgentLookup,
) -> Result<Mandate, DeriveRefusal> {
    checked(parent, agent, RunFigures::parents(parent), lookup)
}

/// The derived document with `figures` in its budget, checked by every attenuation rule.
fn checked(
    parent: &Mandate,
    agent: &Manifest,
    figures: RunFigures,
    lookup: &dyn AgentLookup,
) -> Result<Mandate, DeriveRefusal> {
    if parent.delegation.max_depth == 0 {
        let refusal = Widening {
            code: "delegation_depth_exceeded",
            message: format!("{} declares downstream calls but the parent's `delegation.max_depth` is 0", agent.id),
            parent: "0".into(),
            child: "-1".into(),
        };
        return Err(DeriveRefusal { reasons: vec![refusal] });
    }
    let child = Mandate {
        holon_mandate: parent.holon_mandate.clone(),
        id: format!("{}/{}", parent.id, agent.id),
        parent: Some(parent.id.clone()),
        issuer: parent.grantee.clone(),
        grantee: Principal::from(agent.id.clone()),
        valid: parent.valid.clone(),
        budget: {
            let mut b = parent.budget.clone();
            figures.put_into(&mut b);
            b
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
    let refusal = attenuate(parent, &child, lookup);
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
