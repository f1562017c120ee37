//! Settlement: what a finished run bills and who gets what (docs/rulings.md: manifest §5,
//! §8, and "Settlement").
//!
//! - `charge_on: success` bills only a run whose output validated; declared errors are
//!   billed only when `billed: true` under `charge_on: attempt`; undeclared failures and
//!   gateway codes never.
//! - Passthrough downstream costs are billed on top, only when the run itself is billable
//!   (decision: a caller does not pay for the sub-calls of a run it is not charged for).
//! - The bill never exceeds the reservation: above it is a gateway fault, clamped and flagged.
//! - Split: the platform fee (10%, rounded down) comes out of the author's own charge;
//!   royalties are shares of the creator revenue after the fee, chained upstream through
//!   `lineage` (each rounded down); the remainder stays with each creator. The parts always
//!   sum exactly to the bill.

use serde::Serialize;

use crate::lookup::AgentLookup;
use crate::manifest::{ChargeOn, Manifest, RESERVED_ERROR_CODES};
use crate::money::{Amount, MICROS_PER_UNIT, MoneyError};
use crate::pattern::AgentId;

/// Platform fee in millionths of the author's own charge.
pub const PLATFORM_FEE_MILLIONTHS: u64 = 100_000;
/// Longest royalty chain followed (and the guard against lineage cycles).
pub const LINEAGE_DEPTH_MAX: usize = 16;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// The run returned output; `output_valid` says whether it matched `interface.output`.
    Success { output_valid: bool },
    /// The agent returned an error code (declared or not).
    Error { code: String },
    /// The gateway reported a failure (timeout, crash, ...).
    Gateway { code: String },
}

/// Whether the run's own charge is billable under the manifest's rules.
pub fn billable(agent: &Manifest, outcome: &RunOutcome) -> bool {
    match outcome {
        RunOutcome::Success { output_valid } => *output_valid,
        RunOutcome::Error { code } => {
            !RESERVED_ERROR_CODES.contains(&code.as_str())
                && agent.pricing.charge_on() == ChargeOn::Attempt
                && agent.interface.errors.iter().any(|e| &e.code == code && e.billed)
        }
        RunOutcome::Gateway { .. } => false,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Payout {
    pub agent: AgentId,
    pub amount: Amount,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Settlement {
    /// What the caller pays.
    pub billed: Amount,
    /// The agent's own charge within the bill.
    pub own: Amount,
    /// Passthrough sub-call costs within the bill (paid to the sub-agents' own settlements).
    pub downstream: Amount,
    pub platform_fee: Amount,
    /// The creator first, then each upstream author through lineage.
    pub payouts: Vec<Payout>,
    /// The gateway asked for more than was reserved; the bill was clamped to the reservation.
    pub clamped: bool,
}

/// `amount * millionths / 10^6`, rounded down.
fn share(amount: Amount, millionths: u64) -> Amount {
    let v = u128::from(amount.micros()) * u128::from(millionths) / u128::from(MICROS_PER_UNIT);
    Amount::from_micros(u64::try_from(v).unwrap_or(u64::MAX))
}

/// Settles a run. `own_charge` is the agent's claimed charge (its price, or units times
/// unit price, or the quote), `downstream` the settled passthrough sub-calls, `reserved`
/// the worst case reserved for the call. All amounts in the caller's currency.
pub fn settle(
    agent: &Manifest,
    outcome: &RunOutcome,
    own_charge: Amount,
    downstream: Amount,
    reserved: Amount,
    lookup: &dyn AgentLookup,
) -> Result<Settlement, MoneyError> {
    let (mut own, mut downstream) =
        if billable(agent, outcome) { (own_charge, downstream) } else { (Amount::ZERO, Amount::ZERO) };
    let mut clamped = false;
    let wanted = own.checked_add(downstream)?;
    if wanted > reserved {
        clamped = true;
        // Sub-agents were paid from their own reservations: keep downstream first.
        downstream = downstream.min(reserved);
        own = reserved.saturating_sub(downstream);
    }
    let billed = own.checked_add(downstream)?;
    let platform_fee = share(own, PLATFORM_FEE_MILLIONTHS);
    let mut revenue = own.checked_sub(platform_fee)?;
    // Walk the lineage: each holder keeps its revenue minus the royalty it owes upstream;
    // the upstream author's revenue from this run is that royalty (chained).
    let mut payouts = Vec::new();
    let mut holder = agent.id.clone();
    let mut lineage = agent.lineage.as_ref();
    let mut seen = vec![agent.id.clone()];
    while let Some(l) = lineage {
        if seen.len() > LINEAGE_DEPTH_MAX {
            break;
        }
        let upstream = share(revenue, l.royalty.millionths());
        payouts.push(Payout { agent: holder, amount: revenue.checked_sub(upstream)? });
        revenue = upstream;
        holder = l.forked_from.id.clone();
        lineage = if seen.contains(&holder) {
            None // a cycle: stop; the last holder keeps the rest
        } else {
            seen.push(holder.clone());
            lookup.find(&holder, &semver::VersionReq::STAR).and_then(|m| m.lineage.as_ref())
        };
    }
    payouts.push(Payout { agent: holder, amount: revenue });
    Ok(Settlement { billed, own, downstream, platform_fee, payouts, clamped })
}
