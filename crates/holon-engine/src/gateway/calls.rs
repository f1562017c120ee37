//! A call as the engine judges it, built the same way by every surface: the capability a
//! caller names checked against the agent, a held call rebuilt with everything it was held
//! with (its `max_cost` and whether a capability named it) for its approval and for the
//! sentences that explain the approval's decision; and a mandate's spend as a gateway
//! reports it, read without touching any ledger.

use crate::engine::{AgentIx, Call, Engine, MandateIx};
use crate::money::Amount;
use crate::pattern::Principal;
use crate::store::HeldCall;
use crate::time::Timestamp;

/// Whether `agent` offers capability `class`: the sentence to answer with when it does not.
pub fn capability_offered(engine: &Engine, agent: AgentIx, class: &str) -> Result<(), String> {
    let snap = engine.snapshot();
    let Some(a) = snap.agent(agent) else {
        return Err("the agent is not in the live snapshot".to_owned());
    };
    if a.source().classes().any(|c| c.as_str() == class) {
        return Ok(());
    }
    Err(format!("agent `{}` does not offer capability `{class}`: pick one of its implementers", a.source().id))
}

/// Someone who did not issue a held call's mandate asked to approve or refuse it. The
/// sentence names the asker only: a stranger learns nothing about whose call it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` did not issue this held call's mandate; only its issuer may approve or refuse it")]
pub struct NotTheIssuer(pub String);

/// Whether `approver` may approve or refuse a call held under `mandate`: its issuer, or
/// under a sub-mandate the issuer of its chain's root (`Engine::approver_of`). Checked
/// before the call is taken out of the store, so a refused asker disturbs nothing.
pub fn check_approver(engine: &Engine, mandate: MandateIx, approver: &Principal) -> Result<(), NotTheIssuer> {
    if engine.approver_of(mandate).as_ref() == Some(approver) {
        return Ok(());
    }
    Err(NotTheIssuer(approver.as_str().to_owned()))
}

/// A held call (as the store keeps it) as the engine judges it at `at`: `None` when this
/// engine does not hold its mandate or agent. (The node's approval builds it the same way.)
pub fn held_call(engine: &Engine, held: &HeldCall, at: Timestamp) -> Option<Call> {
    engine.held_call(held, at)
}

/// A mandate's spend on this engine: what its calls hold and kept, never what a store-backed
/// ledger withholds or leases (that is the store's to say, [`crate::store::LedgerStore::status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpendView {
    /// Reserved by calls in flight now.
    pub reserved: Amount,
    /// Kept by settled calls.
    pub settled: Amount,
    /// Reserved + settled, as the ledger reads them together.
    pub spent: Amount,
    /// Reserved + settled on the UTC day of `at`, against `per_day`.
    pub today: Amount,
}

/// `mandate`'s spend on this engine at `at` (`None` for a mandate the live snapshot does
/// not hold). Reads only: no lease, allowance or thread share changes.
pub fn spend_view(engine: &Engine, mandate: MandateIx, at: Timestamp) -> Option<SpendView> {
    let ledger = engine.ledger_view(mandate)?;
    let (reserved, settled) = ledger.reserved_and_settled_micros();
    let today = u64::try_from(at.utc_day()).unwrap_or(0);
    Some(SpendView {
        reserved: Amount::from_micros(reserved),
        settled: Amount::from_micros(settled),
        spent: Amount::from_micros(ledger.spent_micros()),
        today: Amount::from_micros(ledger.spent_day_micros(today)),
    })
}
