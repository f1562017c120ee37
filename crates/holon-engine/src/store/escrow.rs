//! The escrow rules of the ledger store, once, on plain rows: every backend reads the rows
//! a step touches (inside one transaction, or under one lock), applies these functions, and
//! writes the rows back. The method is escrow (O'Neil, "The Escrow Transactional Method",
//! ACM TODS 11(4), 1986) as generalised to demarcation (Barbará and Garcia-Molina, "The
//! Demarcation Protocol", EDBT 1992): a node may spend only what it holds in leases, and the
//! store grants a lease only while `spent + leased <= limit` holds after the grant.
//!
//! Every amount is micro-units (`_micros`) with checked arithmetic; a step that would
//! overflow or underflow is refused whole ([`EscrowError`]) and the caller writes nothing.

use super::{FlushEntry, FlushOutcome, LeaseState, StoreLimits};

/// One mandate's totals in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MandateRow {
    pub limits: StoreLimits,
    /// Settled and flushed by nodes, or counted spent by a reconcile. Never lowered.
    pub spent_micros: u64,
    /// Granted to nodes in open leases, not yet settled or given back.
    pub leased_micros: u64,
}

/// One mandate's totals on one UTC day (only for mandates with `per_day`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DayRow {
    pub spent_micros: u64,
    pub leased_micros: u64,
}

/// One lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseRow {
    pub id: u64,
    pub node: String,
    pub mandate: String,
    /// The UTC day number it also draws on, when the mandate has `per_day`.
    pub day: Option<u64>,
    /// Granted and not yet settled or given back.
    pub outstanding_micros: u64,
    /// Settled through this lease so far (flushed, or counted by a reconcile).
    pub settled_micros: u64,
    pub expires_unix: i64,
    pub state: LeaseState,
}

/// A step the escrow rules refuse; nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EscrowError {
    #[error(
        "lease {lease}: settling {settle_micros} and giving back {give_back_micros} micro-units is more than the {outstanding_micros} it holds"
    )]
    MoreThanOutstanding { lease: u64, settle_micros: u64, give_back_micros: u64, outstanding_micros: u64 },
    #[error("lease {lease} belongs to node `{owner}`, not `{node}`")]
    NotOwner { lease: u64, owner: String, node: String },
    #[error("a store total would overflow a u64 of micro-units")]
    Overflow,
    #[error(
        "the mandate has a per_day limit, so a lease must name the UTC day it draws on (the node's request left it out)"
    )]
    DayRequired,
    #[error(
        "the store's totals are inconsistent: {0}; run `holon ledger status` and restore the store from its backup"
    )]
    Inconsistent(&'static str),
    #[error(
        "lease {lease} holds {found} outstanding, not the {expected} its node expected; its node and the store disagree: reconcile the node (`holon ledger reconcile`) or restart it"
    )]
    NotExpected { lease: u64, expected: u64, found: u64 },
    #[error("lease {lease} is closed: nothing more can be settled or given back through it")]
    LeaseClosed { lease: u64 },
}

impl MandateRow {
    /// What a new lease may still take against `total`.
    pub(crate) fn available_micros(&self) -> u64 {
        self.limits.total_micros.saturating_sub(self.spent_micros.saturating_add(self.leased_micros))
    }
}

impl DayRow {
    fn available_micros(&self, per_day_micros: u64) -> u64 {
        per_day_micros.saturating_sub(self.spent_micros.saturating_add(self.leased_micros))
    }
}

/// A node's leases on a mandate together hold at most `1 / (LEASE_SHARE_DIVISOR × nodes)`
/// of its **limit** (the smaller of `total` and `per_day`), plus one asker's minimum: so
/// when the budget runs out, what other nodes hold unused in leases is at most about
/// `1 / LEASE_SHARE_DIVISOR` (1%) of the limit, plus one minimum per node. A grant is also
/// never more than what is left, so leases shrink as the last of the budget goes.
pub const LEASE_SHARE_DIVISOR: u64 = 100;

/// The most one grant may take when `other_nodes` other nodes hold leases on the mandate
/// and the asker already holds `held` in open leases on it: what a node holds in all stays
/// within its share, `limit / (LEASE_SHARE_DIVISOR × nodes)`, plus at most one `min`,
/// however many grants it asks for; a node that holds less than `min` (one call's worst
/// case) may always get it, so that the last of a budget can still be spent (see
/// [`LEASE_SHARE_DIVISOR`]).
///
/// The share is of the limit, not of what is left: the 1% bound at exhaustion is on the
/// limit, and a share of what is left would shrink every lease as the budget falls, so that
/// draining its last 10% would take as many round trips as a budget 20 times larger (the
/// multi-process test measured 13% of a budget still unspent after 6 s that way).
pub(crate) fn lease_cap(limit_micros: u64, held_micros: u64, other_nodes: u64, min_micros: u64) -> u64 {
    let share = LEASE_SHARE_DIVISOR.saturating_mul(other_nodes.saturating_add(1));
    let quota = limit_micros / share;
    match quota.saturating_sub(held_micros) {
        // Room in its share: at least one minimum, so a node holds at most quota + min.
        room if room > 0 => room.max(min_micros),
        // Its share is full: only a node that cannot take one more call gets its minimum.
        _ if held_micros < min_micros => min_micros,
        _ => 0,
    }
}

/// Grants up to `want_micros` (at least `min_micros`, or nothing) against the mandate's
/// total and, with `per_day`, against the day's, capped by [`lease_cap`]. Returns the
/// amount granted.
pub(crate) fn grant(
    mandate: &mut MandateRow,
    day: Option<&mut DayRow>,
    want_micros: u64,
    min_micros: u64,
    held_micros: u64,
    other_nodes: u64,
) -> Result<Option<u64>, EscrowError> {
    let mut available = mandate.available_micros();
    let per_day = mandate.limits.per_day_micros;
    if let (Some(per_day), Some(row)) = (per_day, day.as_deref()) {
        available = available.min(row.available_micros(per_day));
    }
    let limit = per_day.map_or(mandate.limits.total_micros, |day| day.min(mandate.limits.total_micros));
    let amount = want_micros.min(lease_cap(limit, held_micros, other_nodes, min_micros)).min(available);
    if per_day.is_some() && day.is_none() {
        return Err(EscrowError::DayRequired);
    }
    if amount == 0 || amount < min_micros {
        return Ok(None);
    }
    let before = (mandate.spent_micros, mandate.leased_micros);
    mandate.leased_micros = mandate.leased_micros.checked_add(amount).ok_or(EscrowError::Overflow)?;
    if let Some(row) = day {
        row.leased_micros = row.leased_micros.checked_add(amount).ok_or(EscrowError::Overflow)?;
        assert!(
            per_day.is_none_or(|cap| row.spent_micros + row.leased_micros <= cap),
            "a grant keeps the day within per_day"
        );
    }
    assert!(
        mandate.spent_micros == before.0 && mandate.leased_micros == before.1 + amount,
        "a grant moves leased only"
    );
    assert!(
        mandate.spent_micros + mandate.leased_micros <= mandate.limits.total_micros,
        "a grant keeps spent + leased within total"
    );
    Ok(Some(amount))
}

/// Applies one flushed entry of `node` to its lease: settled micro-units move from leased
/// to spent, given-back ones leave leased. On a lease that is no longer open (reconciled,
/// or closed) nothing moves: a reconcile already counted its whole remainder as spent, so a
/// late settle is inside it, and nothing may be given back from spent.
pub(crate) fn flush(
    mandate: &mut MandateRow,
    day: Option<&mut DayRow>,
    lease: &mut LeaseRow,
    node: &str,
    entry: &FlushEntry,
    now_unix: i64,
) -> Result<FlushOutcome, EscrowError> {
    if lease.node != node {
        return Err(EscrowError::NotOwner { lease: lease.id, owner: lease.node.clone(), node: node.to_owned() });
    }
    let moved = entry.settle_micros.checked_add(entry.give_back_micros).ok_or(EscrowError::Overflow)?;
    // A closed lease moves nothing more. Its closing entry sent again (the answer to its
    // commit was lost) is answered as applied; any other money through it is refused, so
    // no settlement can vanish into a closed lease.
    if lease.state == LeaseState::Closed {
        let replay = entry.close && entry.expect_outstanding_micros.and_then(|e| e.checked_sub(moved)) == Some(0);
        if moved > 0 && !replay {
            return Err(EscrowError::LeaseClosed { lease: lease.id });
        }
        return Ok(FlushOutcome { lease: lease.id, state: lease.state, outstanding_micros: 0 });
    }
    if lease.state != LeaseState::Open {
        return Ok(FlushOutcome { lease: lease.id, state: lease.state, outstanding_micros: 0 });
    }
    if let Some(expected) = entry.expect_outstanding_micros
        && lease.outstanding_micros != expected
    {
        // Applied already: the node sent this flush again because the answer to its commit
        // was lost. Nothing moves a second time.
        if moved > 0 && expected.checked_sub(moved) == Some(lease.outstanding_micros) {
            return Ok(FlushOutcome {
                lease: lease.id,
                state: lease.state,
                outstanding_micros: lease.outstanding_micros,
            });
        }
        return Err(EscrowError::NotExpected { lease: lease.id, expected, found: lease.outstanding_micros });
    }
    let Some(outstanding) = lease.outstanding_micros.checked_sub(moved) else {
        return Err(EscrowError::MoreThanOutstanding {
            lease: lease.id,
            settle_micros: entry.settle_micros,
            give_back_micros: entry.give_back_micros,
            outstanding_micros: lease.outstanding_micros,
        });
    };
    let spent_before = mandate.spent_micros;
    mandate.leased_micros =
        mandate.leased_micros.checked_sub(moved).ok_or(EscrowError::Inconsistent("leased below a lease's amount"))?;
    mandate.spent_micros = mandate.spent_micros.checked_add(entry.settle_micros).ok_or(EscrowError::Overflow)?;
    if let Some(row) = day {
        row.leased_micros =
            row.leased_micros.checked_sub(moved).ok_or(EscrowError::Inconsistent("a day's leased below a lease"))?;
        row.spent_micros = row.spent_micros.checked_add(entry.settle_micros).ok_or(EscrowError::Overflow)?;
    }
    lease.outstanding_micros = outstanding;
    lease.settled_micros = lease.settled_micros.checked_add(entry.settle_micros).ok_or(EscrowError::Overflow)?;
    if entry.close && outstanding == 0 {
        lease.state = LeaseState::Closed;
        // Kept `CLOSED_LEASE_KEEP_S` from its close, not only from its expiry: a lease
        // closed past its time to live (its node renewed nothing while the store was away)
        // was otherwise purged at once, and the closing flush, sent again because its
        // answer was lost, found no lease and stopped its node's flushes for good.
        lease.expires_unix = lease.expires_unix.max(now_unix);
    } else if let Some(ttl_s) = entry.renew_ttl_s {
        // Never shortened (a node clock that went back must not expire a live lease).
        lease.expires_unix = lease.expires_unix.max(now_unix.saturating_add_unsigned(ttl_s));
    }
    assert!(mandate.spent_micros >= spent_before, "spent is never lowered");
    assert!(mandate.spent_micros == spent_before + entry.settle_micros, "a flush counts exactly what it settles");
    Ok(FlushOutcome { lease: lease.id, state: lease.state, outstanding_micros: lease.outstanding_micros })
}

/// Counts an open lease's whole remainder as spent (its node is gone or its time to live
/// has passed: whatever it admitted against it may have been billed). Returns the
/// micro-units so counted.
pub(crate) fn reconcile(
    mandate: &mut MandateRow,
    day: Option<&mut DayRow>,
    lease: &mut LeaseRow,
) -> Result<u64, EscrowError> {
    if lease.state != LeaseState::Open {
        return Ok(0);
    }
    let remainder = lease.outstanding_micros;
    let spent_before = mandate.spent_micros;
    mandate.leased_micros = mandate
        .leased_micros
        .checked_sub(remainder)
        .ok_or(EscrowError::Inconsistent("leased below a lease's amount"))?;
    mandate.spent_micros = mandate.spent_micros.checked_add(remainder).ok_or(EscrowError::Overflow)?;
    if let Some(row) = day {
        row.leased_micros = row
            .leased_micros
            .checked_sub(remainder)
            .ok_or(EscrowError::Inconsistent("a day's leased below a lease"))?;
        row.spent_micros = row.spent_micros.checked_add(remainder).ok_or(EscrowError::Overflow)?;
    }
    lease.settled_micros = lease.settled_micros.checked_add(remainder).ok_or(EscrowError::Overflow)?;
    lease.outstanding_micros = 0;
    lease.state = LeaseState::Reconciled;
    assert!(mandate.spent_micros == spent_before + remainder, "a reconcile counts the remainder as spent");
    Ok(remainder)
}

/// The limits a publish or an operator's command leaves: a publish may only lower what
/// the store holds (a node with older documents cannot raise it back); `raise` sets them.
pub(crate) fn new_limits(stored: StoreLimits, published: StoreLimits, raise: bool) -> StoreLimits {
    if raise {
        return published;
    }
    StoreLimits {
        total_micros: stored.total_micros.min(published.total_micros),
        per_day_micros: match (stored.per_day_micros, published.per_day_micros) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (Some(a), None) => Some(a),
            (None, b) => b,
        },
    }
}
