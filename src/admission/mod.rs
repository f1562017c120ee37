//! Admission: may this call happen? (docs/rulings.md: caller mandate §3, and "Admission").
//!
//! A call is **denied** if any condition fails (every failing condition is reported),
//! **held** for the issuer if it passes and its worst case is above `approval.above`
//! (inside a delegated run there is nobody to ask, so that is a denial), **allowed**
//! otherwise. A decision is a value, never an error.
//!
//! - [`fit`]: what depends only on the mandate and the callee (precomputed by the engine);
//! - [`budget`]: what depends on the call (time, `max_cost`, spend), integer-only.

pub mod budget;
pub mod code;
pub mod fit;

use serde::Serialize;

pub use budget::{BudgetLimits, WorstCase};
pub use code::{Code, CodeSet, Reason};
pub use fit::{Fit, fit};

use crate::mandate::Mandate;
use crate::money::Amount;
use crate::time::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allowed,
    Held,
    Denied,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Held => "held",
            Verdict::Denied => "denied",
        }
    }
}

/// What the caller brings to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallContext {
    pub at: Timestamp,
    /// The caller's ceiling for this call, in the mandate's currency.
    pub max_cost: Option<Amount>,
    /// Spent plus reserved against `total`.
    pub spent_total: Amount,
    /// Spent plus reserved today (UTC) against `per_day`.
    pub spent_today: Amount,
    /// The call names a capability (the gateway picks the agent), not the agent.
    pub by_capability: bool,
    /// The call is a sub-call inside a delegated run.
    pub delegated: bool,
}

impl CallContext {
    pub fn at(at: Timestamp) -> Self {
        CallContext {
            at,
            max_cost: None,
            spent_total: Amount::ZERO,
            spent_today: Amount::ZERO,
            by_capability: false,
            delegated: false,
        }
    }
}

/// The decision with its worst case and every reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assessment {
    pub verdict: Verdict,
    pub worst_case: Amount,
    /// What the callee's sub-calls may spend (0 without passthrough).
    pub sub_budget: Amount,
    pub reasons: Vec<Reason>,
}

/// Decides one call from a precomputed [`Fit`] (the per-call checks of [`budget`]).
pub fn assess(mandate: &Mandate, fit: &Fit, ctx: &CallContext) -> Assessment {
    let mut reasons = fit.reasons.clone();
    if ctx.by_capability
        && let Some(r) = &fit.published
    {
        reasons.push(r.clone());
    }
    let window = budget::check_window(mandate.valid.from, mandate.valid.until, ctx.at);
    for code in window.iter() {
        let message = match code {
            Code::MandateNotYetValid => {
                format!("the mandate is valid from {}; it is now {}", mandate.valid.from, ctx.at)
            }
            _ => format!("the mandate expired at {}; it is now {}", mandate.valid.until, ctx.at),
        };
        reasons.push(Reason::new(code, message));
    }
    let (wc, codes) = budget::worst_case(fit.own_ceiling, fit.passthrough_cap, ctx.max_cost);
    let cur = mandate.budget.currency;
    for code in codes.iter() {
        let message = match code {
            Code::MaxCostBelowPrice => format!(
                "max_cost {} {cur} is below the agent's own price ceiling {} {cur}",
                ctx.max_cost.unwrap_or_default(),
                fit.own_ceiling
            ),
            _ => "the worst case overflows".to_owned(),
        };
        reasons.push(Reason::new(code, message));
    }
    let limits = BudgetLimits::of(mandate);
    let over = budget::check_limits(&limits, wc.worst, ctx.spent_total, ctx.spent_today);
    for code in over.iter() {
        reasons.push(limit_reason(code, &limits, wc.worst, ctx, cur));
    }
    let verdict = if !reasons.is_empty() {
        Verdict::Denied
    } else if budget::needs_approval(&limits, wc.worst) {
        let above = limits.approval_above.unwrap_or_default();
        if ctx.delegated {
            reasons.push(Reason::new(
                Code::ApprovalUnavailableInDelegation,
                format!("worst case {} {cur} is above the approval threshold {above} {cur}, and inside a delegated run there is no one to ask", wc.worst),
            ));
            Verdict::Denied
        } else {
            reasons.push(Reason::new(
                Code::ApprovalRequired,
                format!(
                    "worst case {} {cur} is above the approval threshold {above} {cur}; the issuer {} must approve",
                    wc.worst, mandate.issuer
                ),
            ));
            Verdict::Held
        }
    } else {
        Verdict::Allowed
    };
    Assessment { verdict, worst_case: wc.worst, sub_budget: wc.sub_budget, reasons }
}

fn limit_reason(
    code: Code,
    limits: &BudgetLimits,
    worst: Amount,
    ctx: &CallContext,
    cur: crate::money::Currency,
) -> Reason {
    match code {
        Code::PerCallExceeded => Reason::new(
            code,
            format!(
                "worst case {worst} {cur} is above the per-call limit {} {cur}",
                limits.per_call.unwrap_or_default()
            ),
        ),
        Code::TotalExceeded if ctx.delegated => Reason::new(
            Code::DownstreamCapExceeded,
            format!(
                "worst case {worst} {cur} is more than the {} {cur} left of the downstream cap",
                limits.total.saturating_sub(ctx.spent_total)
            ),
        ),
        Code::TotalExceeded => Reason::new(
            code,
            format!(
                "spent {} {cur} + worst case {worst} {cur} would exceed the total budget {} {cur}",
                ctx.spent_total, limits.total
            ),
        ),
        _ => Reason::new(
            code,
            format!(
                "spent today {} {cur} + worst case {worst} {cur} would exceed the daily budget {} {cur}",
                ctx.spent_today,
                limits.per_day.unwrap_or_default()
            ),
        ),
    }
}

/// Why an approval was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    #[error("`{approver}` is an agent; approving spending is a human act, and no agent approves anything")]
    AgentApprover { approver: String },
    #[error("only the mandate's issuer `{issuer}` may approve this call, not `{approver}`")]
    NotIssuer { issuer: String, approver: String },
}

/// Approving a held call is the mandate issuer's act alone: any other account, and any
/// agent account, is refused.
pub fn check_approver(mandate: &Mandate, approver: &crate::pattern::Principal) -> Result<(), ApprovalError> {
    if approver.is_agent() {
        return Err(ApprovalError::AgentApprover { approver: approver.to_string() });
    }
    if approver != &mandate.issuer || mandate.issuer.is_agent() {
        return Err(ApprovalError::NotIssuer { issuer: mandate.issuer.to_string(), approver: approver.to_string() });
    }
    Ok(())
}
