//! What the SQL backends (`sqlite`, `postgres`) share: amounts as SQL's signed 64-bit
//! integers, refused rather than wrapped, and a lease row from its columns.

use super::escrow::{EscrowError, LeaseRow};
use super::{LeaseState, StoreError};

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
