//! What the SQL backends (`sqlite`, `postgres`) share: amounts as SQL's signed 64-bit
//! integers, refused rather than wrapped, and a lease row from its columns.

use super::escrow::{EscrowError, LeaseRow};
use super::{HeldCall, LeaseState, StoreError};

/// The columns of a lease, in the order of [`LEASE_COLUMNS`].
pub(crate) const LEASE_COLUMNS: &str = "id, node, mandate, day, outstanding, settled, expires, state";

/// A lease as a SQL row returns it: (id, node, mandate, day, outstanding, settled, expires,
/// state).
pub(crate) type LeaseColumns = (i64, String, String, Option<i64>, i64, i64, i64, String);

/// A micro-unit amount (or an id, a day) as SQL's signed integer.
pub(crate) fn int(micros: u64) -> Result<i64, StoreError> {
    i64::try_from(micros).map_err(|_| StoreError::Escrow(EscrowError::Overflow))
}

/// A stored signed integer as an amount: a negative one means the store is damaged.
pub(crate) fn uint(value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Escrow(EscrowError::Inconsistent("a negative amount in the store")))
}

pub(crate) fn lease_row(c: LeaseColumns) -> Result<LeaseRow, StoreError> {
    let state =
        LeaseState::parse(&c.7).ok_or(StoreError::Escrow(EscrowError::Inconsistent("a lease in an unknown state")))?;
    Ok(LeaseRow {
        id: uint(c.0)?,
        node: c.1,
        mandate: c.2,
        day: c.3.map(uint).transpose()?,
        outstanding_micros: uint(c.4)?,
        settled_micros: uint(c.5)?,
        expires_unix: c.6,
        state,
    })
}

/// The columns of a held call, in the order of [`HeldColumns`].
pub(crate) const HELD_COLUMNS: &str = "id, mandate, agent, at, max_cost, by_capability, worst, expires";

/// A held call as a SQL row returns it (`by_capability` as 0 or 1).
pub(crate) type HeldColumns = (String, String, String, i64, Option<i64>, i64, i64, i64);

pub(crate) fn held_row(c: HeldColumns) -> Result<HeldCall, StoreError> {
    Ok(HeldCall {
        id: c.0,
        mandate: c.1,
        agent: c.2,
        at_unix: c.3,
        max_cost_micros: c.4.map(uint).transpose()?,
        by_capability: c.5 != 0,
        worst_micros: uint(c.6)?,
        expires_unix: c.7,
    })
}

/// A held call's columns for an insert.
pub(crate) fn held_columns(c: &HeldCall) -> Result<HeldColumns, StoreError> {
    Ok((
        c.id.clone(),
        c.mandate.clone(),
        c.agent.clone(),
        c.at_unix,
        c.max_cost_micros.map(int).transpose()?,
        i64::from(c.by_capability),
        int(c.worst_micros)?,
        c.expires_unix,
    ))
}
