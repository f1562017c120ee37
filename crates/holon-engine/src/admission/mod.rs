//! Admission: may this call happen? (docs/rulings.md: caller mandate §3, and "Admission").
//!
//! A call is **denied** if any condition fails (every failing condition is reported),
//! **held** for the issuer if it passes and its worst case is above `approval.above`
//! (inside a delegated run there is nobody to ask, so that is a denial), **allowed**
//! otherwise. A decision is a value, never an error.
//!
//! The rules themselves are written once, on compiled forms, in `engine::judge` (with
//! `engine::snapshot::fit_codes`); this module holds what they are made of and what they
//! are explained with:
//! - [`code`]: the stable reason codes and the allocation-free [`CodeSet`];
//! - [`budget`]: the per-call arithmetic (window, worst case under `max_cost`, limits),
//!   integer-only;
//! - [`explain`]: codes into sentences from the source documents.
//!
//! To decide and explain a call outside a running engine, use `engine::Assessor`.

pub mod budget;
pub mod code;
pub mod explain;

use serde::Serialize;

pub use budget::{BudgetLimits, WorstCase};
pub use code::{Code, CodeSet, Reason};

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
    /// The agent's own price ceiling in the mandate's currency (rounded up).
    #[serde(skip)]
    pub own_ceiling: Amount,
    pub reasons: Vec<Reason>,
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
