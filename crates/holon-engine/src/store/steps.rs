//! The store's steps, once: publish, grant, flush and reconcile as sequences of row reads
//! and writes over [`RowTx`], applying the escrow rules ([`super::escrow`]) to the rows.
//! A backend implements only its row I/O and its transaction: `memory` on copies of its
//! rows under one lock (written back whole when the step returns `Ok`), `sqlite` inside one
//! `BEGIN IMMEDIATE` transaction, `postgres` inside one transaction with row locks. Every
//! step runs inside that transaction and returns an error with nothing written.
//!
//! The order of reads is the one PostgreSQL's locking needs: every step locks the mandate
//! rows it touches first, in the order of their ids, and touches a day or lease row only
//! under its mandate's lock (a grant: mandate, then day; a flush or reconcile: mandate,
//! then lease, then day), so two steps cannot deadlock. The other backends hold one lock
//! for the whole step and take the same order for free.

use super::escrow::{self, DayRow, EscrowError, LeaseRow, MandateRow};
use super::{
    CLOSED_LEASE_KEEP_S, FlushEntry, FlushOutcome, GrantRequest, Lease, Reconciled, StoreError, StoreLimits, grant_day,
};

/// Open leases of a mandate as a grant sizes a new one: how many other nodes hold some,
/// and what the asking node holds already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenLeases {
    pub(crate) other_nodes: u64,
    pub(crate) held_micros: u64,
}

/// A lease to write, before the store gives it an id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewLease<'a> {
    pub(crate) node: &'a str,
    pub(crate) mandate: &'a str,
    pub(crate) day: Option<u64>,
    pub(crate) amount_micros: u64,
    pub(crate) expires_unix: i64,
}

/// The row I/O of one store transaction. Reads of a row the step writes take the row's
/// lock where the backend has row locks.
pub(crate) trait RowTx {
    /// Writes a mandate's row with `limits` and nothing spent or leased, unless it exists.
    fn ensure_mandate(&mut self, id: &str, limits: StoreLimits) -> Result<(), StoreError>;
    /// A mandate's row; [`StoreError::UnknownMandate`] when there is none.
    fn load_mandate(&mut self, id: &str) -> Result<MandateRow, StoreError>;
    fn save_mandate(&mut self, id: &str, row: &MandateRow) -> Result<(), StoreError>;
    /// A mandate's row for a UTC day (zeros when the day has none yet).
    fn load_day(&mut self, mandate: &str, day: u64) -> Result<DayRow, StoreError>;
    fn save_day(&mut self, mandate: &str, day: u64, row: &DayRow) -> Result<(), StoreError>;
    /// Deletes a mandate's closed leases that expired before `expired_before_unix`.
    fn purge_closed(&mut self, mandate: &str, expired_before_unix: i64) -> Result<(), StoreError>;
    /// The mandate's open leases as a grant to `node` sees them.
    fn open_leases(&mut self, mandate: &str, node: &str) -> Result<OpenLeases, StoreError>;
    /// Writes a new open lease; returns its id.
    fn insert_lease(&mut self, lease: &NewLease<'_>) -> Result<u64, StoreError>;
    /// Locks the mandate rows the leases `ids` draw on, in the order of the mandates' ids,
    /// before any other row of the step. Nothing to do for a backend whose one lock is held
    /// for the whole step.
    fn lock_mandates_of(&mut self, _ids: &[u64]) -> Result<(), StoreError> {
        Ok(())
    }
    /// A lease (closed and reconciled ones too) with its mandate's row, the mandate read
    /// first; [`StoreError::UnknownLease`] when there is none.
    fn load_lease(&mut self, id: u64) -> Result<(MandateRow, LeaseRow), StoreError>;
    /// Writes a lease's figures, expiry and state back.
    fn save_lease(&mut self, lease: &LeaseRow) -> Result<(), StoreError>;
    /// The ids of `node`'s open leases, in order, only those expired by `expired_by_unix`
    /// when given.
    fn open_lease_ids(&mut self, node: &str, expired_by_unix: Option<i64>) -> Result<Vec<u64>, StoreError>;
    /// Those of `ids` that are still `node`'s open leases (expired by `expired_by_unix`
    /// when given), read again and locked once the step holds their mandates' locks: a
    /// lease a flush renewed or closed meanwhile is no longer one of them. A backend whose
    /// one lock is held for the whole step has `ids` unchanged.
    fn still_open_lease_ids(
        &mut self,
        ids: &[u64],
        _node: &str,
        _expired_by_unix: Option<i64>,
    ) -> Result<Vec<u64>, StoreError> {
        Ok(ids.to_vec())
    }
}

/// Sets a mandate's limits as a publish (`raise`: an operator's command) leaves them
/// ([`escrow::new_limits`]), creating its row on first sight.
pub(crate) fn publish_limits(
    tx: &mut impl RowTx,
    mandate: &str,
    limits: StoreLimits,
    raise: bool,
) -> Result<StoreLimits, StoreError> {
    tx.ensure_mandate(mandate, limits)?;
    let mut row = tx.load_mandate(mandate)?;
    row.limits = escrow::new_limits(row.limits, limits, raise);
    tx.save_mandate(mandate, &row)?;
    Ok(row.limits)
}

/// Grants a lease ([`escrow::grant`]), or nothing when the budget has no room for the
/// request's minimum.
pub(crate) fn grant(tx: &mut impl RowTx, request: &GrantRequest) -> Result<Option<Lease>, StoreError> {
    let mut mandate = tx.load_mandate(&request.mandate)?;
    tx.purge_closed(&request.mandate, request.now_unix.saturating_sub(CLOSED_LEASE_KEEP_S))?;
    let (day_key, expires_unix) = grant_day(request, mandate.limits.per_day_micros.is_some())?;
    let mut day = match day_key {
        Some(d) => Some(tx.load_day(&request.mandate, d)?),
        None => None,
    };
    let open = tx.open_leases(&request.mandate, &request.node)?;
    let (want, min) = (request.want_micros, request.min_micros);
    let Some(amount) = escrow::grant(&mut mandate, day.as_mut(), want, min, open.held_micros, open.other_nodes)? else {
        return Ok(None);
    };
    tx.save_mandate(&request.mandate, &mandate)?;
    if let (Some(d), Some(row)) = (day_key, day) {
        tx.save_day(&request.mandate, d, &row)?;
    }
    let new =
        NewLease { node: &request.node, mandate: &request.mandate, day: day_key, amount_micros: amount, expires_unix };
    let id = tx.insert_lease(&new)?;
    Ok(Some(Lease { id, amount_micros: amount, expires_unix }))
}

/// Applies one node's flush ([`escrow::flush`]), all entries or none. The backend checks
/// its size ([`super::check_flush`]) before it opens the transaction.
pub(crate) fn flush(
    tx: &mut impl RowTx,
    node: &str,
    entries: &[FlushEntry],
    now_unix: i64,
) -> Result<Vec<FlushOutcome>, StoreError> {
    let ids: Vec<u64> = entries.iter().map(|e| e.lease).collect();
    tx.lock_mandates_of(&ids)?;
    let mut outcomes = Vec::with_capacity(entries.len());
    for entry in entries {
        let (outcome, _) = apply(tx, entry.lease, |m, d, l| escrow::flush(m, d, l, node, entry, now_unix))?;
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// How a reconcile treats one open lease: [`escrow::reconcile`], except in the model
/// test's deliberately broken store.
pub(crate) type ReconcileRule<'a> =
    &'a dyn Fn(&mut MandateRow, Option<&mut DayRow>, &mut LeaseRow) -> Result<u64, EscrowError>;

/// Counts the remainder of `node`'s open leases (only expired ones with `expired_only`)
/// as spent ([`escrow::reconcile`], or `rule`).
pub(crate) fn reconcile(
    tx: &mut impl RowTx,
    node: &str,
    now_unix: i64,
    expired_only: bool,
    rule: ReconcileRule<'_>,
) -> Result<Reconciled, StoreError> {
    let expired_by = expired_only.then_some(now_unix);
    let ids = tx.open_lease_ids(node, expired_by)?;
    tx.lock_mandates_of(&ids)?;
    let ids = tx.still_open_lease_ids(&ids, node, expired_by)?;
    let mut done = Reconciled::default();
    for id in ids {
        let (counted, lease) = apply(tx, id, rule)?;
        done.counted_micros = done.counted_micros.checked_add(counted).ok_or(EscrowError::Overflow)?;
        done.leases.push((lease.id, lease.mandate, counted));
    }
    Ok(done)
}

/// Applies `change` to one lease and the rows it draws on (read: mandate, lease, day) and
/// writes them back.
fn apply<T>(
    tx: &mut impl RowTx,
    id: u64,
    change: impl FnOnce(&mut MandateRow, Option<&mut DayRow>, &mut LeaseRow) -> Result<T, EscrowError>,
) -> Result<(T, LeaseRow), StoreError> {
    let (mut mandate, mut lease) = tx.load_lease(id)?;
    let mut day = match lease.day {
        Some(d) => Some(tx.load_day(&lease.mandate, d)?),
        None => None,
    };
    let out = change(&mut mandate, day.as_mut(), &mut lease)?;
    tx.save_mandate(&lease.mandate, &mandate)?;
    if let (Some(d), Some(row)) = (lease.day, day) {
        tx.save_day(&lease.mandate, d, &row)?;
    }
    tx.save_lease(&lease)?;
    Ok((out, lease))
}
