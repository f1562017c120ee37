//! The `memory` store: the escrow rules on rows in this process, under one lock. For unit
//! tests, benches and a single process; it forgets everything when the process ends.

use std::collections::BTreeMap;

use super::escrow::{self, DayRow, EscrowError, LeaseRow, MandateRow};
use super::keys::{KeyAnswer, KeyBook, KeyClaim, KeyState};
use super::steps::{self, NewLease, OpenLeases, RowTx};
use super::{
    FlushEntry, FlushOutcome, GrantRequest, HELD_KEEP_S, HeldCall, Lease, LeaseState, LedgerStore,
    MANDATE_ID_BYTES_MAX, MandateStatus, NODE_NAME_BYTES_MAX, NodeLeases, Reconciled, StoreError, StoreLimits,
    check_flush, check_name,
};

#[derive(Debug, Default)]
struct Rows {
    mandates: BTreeMap<String, MandateRow>,
    days: BTreeMap<(String, u64), DayRow>,
    leases: BTreeMap<u64, LeaseRow>,
    next_lease: u64,
    /// Closed leases, apart (nothing counts them; a repeated flush finds them), purged
    /// `CLOSED_LEASE_KEEP_S` after their expiry.
    closed: BTreeMap<u64, LeaseRow>,
    /// Held calls, and whether each was taken (a tombstone until `HELD_KEEP_S` after its
    /// expiry: a copy sent again cannot bring it back).
    held: BTreeMap<String, (HeldCall, bool)>,
}

/// One step's transaction: reads see the step's own writes, then the stored rows; the
/// writes are copies, written back whole ([`Tx::commit`]) only when the step returns `Ok`
/// (all or none, as the SQL backends' transactions).
struct Tx<'r> {
    rows: &'r mut Rows,
    mandates: BTreeMap<String, MandateRow>,
    days: BTreeMap<(String, u64), DayRow>,
    leases: BTreeMap<u64, LeaseRow>,
    next_lease: Option<u64>,
    /// Closed leases that expired before this are purged at the commit.
    purge_before_unix: Option<i64>,
}

impl<'r> Tx<'r> {
    fn new(rows: &'r mut Rows) -> Self {
        Tx {
            rows,
            mandates: BTreeMap::new(),
            days: BTreeMap::new(),
            leases: BTreeMap::new(),
            next_lease: None,
            purge_before_unix: None,
        }
    }

    /// Every lease as the step sees it, except those stored closed (apart, in
    /// `rows.closed`); a lease the step closed stays here until the commit moves it.
    fn leases(&self) -> impl Iterator<Item = &LeaseRow> {
        let stored = self.rows.leases.values().filter(|l| !self.leases.contains_key(&l.id));
        self.leases.values().chain(stored)
    }

    fn commit(self) {
        let rows = self.rows;
        rows.mandates.extend(self.mandates);
        rows.days.extend(self.days);
        if let Some(id) = self.next_lease {
            rows.next_lease = id;
        }
        if let Some(cutoff) = self.purge_before_unix {
            rows.closed.retain(|_, l| l.expires_unix >= cutoff);
        }
        // Closed and reconciled leases are kept (a late or repeated flush finds them and
        // moves nothing); closed ones apart, purged `CLOSED_LEASE_KEEP_S` after their expiry.
        for (id, lease) in self.leases {
            if lease.state == LeaseState::Closed {
                rows.leases.remove(&id);
                rows.closed.insert(id, lease);
            } else {
                rows.leases.insert(id, lease);
            }
        }
    }
}

impl RowTx for Tx<'_> {
    fn ensure_mandate(&mut self, id: &str, limits: StoreLimits) -> Result<(), StoreError> {
        if !self.mandates.contains_key(id) && !self.rows.mandates.contains_key(id) {
            self.mandates.insert(id.to_owned(), MandateRow { limits, spent_micros: 0, leased_micros: 0 });
        }
        Ok(())
    }

    fn load_mandate(&mut self, id: &str) -> Result<MandateRow, StoreError> {
        let row = self.mandates.get(id).or_else(|| self.rows.mandates.get(id));
        row.copied().ok_or_else(|| StoreError::UnknownMandate(id.to_owned()))
    }

    fn save_mandate(&mut self, id: &str, row: &MandateRow) -> Result<(), StoreError> {
        self.mandates.insert(id.to_owned(), *row);
        Ok(())
    }

    fn load_day(&mut self, mandate: &str, day: u64) -> Result<DayRow, StoreError> {
        let key = (mandate.to_owned(), day);
        Ok(self.days.get(&key).or_else(|| self.rows.days.get(&key)).copied().unwrap_or_default())
    }

    fn save_day(&mut self, mandate: &str, day: u64, row: &DayRow) -> Result<(), StoreError> {
        self.days.insert((mandate.to_owned(), day), *row);
        Ok(())
    }

    fn purge_closed(&mut self, _mandate: &str, expired_before_unix: i64) -> Result<(), StoreError> {
        // Every mandate's (the rows keep closed leases apart, not by mandate): none of them
        // is counted anywhere, so purging another mandate's early changes no figure.
        self.purge_before_unix = Some(expired_before_unix);
        Ok(())
    }

    fn open_leases(&mut self, mandate: &str, node: &str) -> Result<OpenLeases, StoreError> {
        let mut others = std::collections::BTreeSet::new();
        let mut held_micros = 0u64;
        for l in self.leases().filter(|l| l.mandate == mandate && l.state == LeaseState::Open) {
            if l.node == node {
                held_micros = held_micros.checked_add(l.outstanding_micros).ok_or(EscrowError::Overflow)?;
            } else {
                others.insert(l.node.as_str());
            }
        }
        Ok(OpenLeases { other_nodes: others.len() as u64, held_micros })
    }

    fn insert_lease(&mut self, new: &NewLease<'_>) -> Result<u64, StoreError> {
        let id = self.next_lease.unwrap_or(self.rows.next_lease).checked_add(1).ok_or(EscrowError::Overflow)?;
        self.next_lease = Some(id);
        let lease = LeaseRow {
            id,
            node: new.node.to_owned(),
            mandate: new.mandate.to_owned(),
            day: new.day,
            outstanding_micros: new.amount_micros,
            settled_micros: 0,
            expires_unix: new.expires_unix,
            state: LeaseState::Open,
        };
        self.leases.insert(id, lease);
        Ok(id)
    }

    fn load_lease(&mut self, id: u64) -> Result<(MandateRow, LeaseRow), StoreError> {
        let lease = self.leases.get(&id).or_else(|| self.rows.leases.get(&id)).or_else(|| self.rows.closed.get(&id));
        let lease = lease.cloned().ok_or(StoreError::UnknownLease(id))?;
        Ok((self.load_mandate(&lease.mandate)?, lease))
    }

    fn save_lease(&mut self, lease: &LeaseRow) -> Result<(), StoreError> {
        self.leases.insert(lease.id, lease.clone());
        Ok(())
    }

    fn open_lease_ids(&mut self, node: &str, expired_by_unix: Option<i64>) -> Result<Vec<u64>, StoreError> {
        let mut ids: Vec<u64> = self
            .leases()
            .filter(|l| l.node == node && l.state == LeaseState::Open)
            .filter(|l| expired_by_unix.is_none_or(|at| l.expires_unix <= at))
            .map(|l| l.id)
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }
}

/// Runs `step` on a transaction over `rows`, committed only when it returns `Ok`.
fn in_tx<T>(rows: &mut Rows, step: impl FnOnce(&mut Tx<'_>) -> Result<T, StoreError>) -> Result<T, StoreError> {
    let mut tx = Tx::new(rows);
    let out = step(&mut tx)?;
    tx.commit();
    Ok(out)
}

/// The in-process store.
#[derive(Debug, Default)]
pub struct MemoryStore {
    rows: parking_lot::Mutex<Rows>,
    /// Idempotency keys, under a lock of their own (never held with `rows`).
    keys: parking_lot::Mutex<KeyBook>,
    /// **Deliberately broken** (tests only): a reconcile gives a lease's remainder back
    /// instead of counting it as spent. The store's model test must catch it.
    reconcile_gives_back: bool,
}

impl MemoryStore {
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// **Deliberately broken**: see the field. For the model test only.
    #[doc(hidden)]
    pub fn broken_reconcile_gives_back() -> Self {
        MemoryStore { reconcile_gives_back: true, ..MemoryStore::default() }
    }

    /// Every day row: (mandate, UTC day, spent, leased). For the model test only, which
    /// checks each day's figures after every step.
    #[doc(hidden)]
    pub fn day_rows(&self) -> Vec<(String, u64, u64, u64)> {
        let rows = self.rows.lock();
        rows.days.iter().map(|((m, d), row)| (m.clone(), *d, row.spent_micros, row.leased_micros)).collect()
    }
}

impl LedgerStore for MemoryStore {
    fn publish_limits(&self, mandate: &str, limits: StoreLimits, raise: bool) -> Result<StoreLimits, StoreError> {
        check_name("a mandate id", mandate, MANDATE_ID_BYTES_MAX)?;
        in_tx(&mut self.rows.lock(), |tx| steps::publish_limits(tx, mandate, limits, raise))
    }

    fn grant(&self, request: &GrantRequest) -> Result<Option<Lease>, StoreError> {
        check_name("a node name", &request.node, NODE_NAME_BYTES_MAX)?;
        in_tx(&mut self.rows.lock(), |tx| steps::grant(tx, request))
    }

    fn flush(&self, node: &str, entries: &[FlushEntry], now_unix: i64) -> Result<Vec<FlushOutcome>, StoreError> {
        check_flush(entries)?;
        in_tx(&mut self.rows.lock(), |tx| steps::flush(tx, node, entries, now_unix))
    }

    fn reconcile(&self, node: &str, now_unix: i64, expired_only: bool) -> Result<Reconciled, StoreError> {
        // The deliberately broken store gives the remainder back instead of counting it.
        let gives_back = |m: &mut MandateRow, d: Option<&mut DayRow>, l: &mut LeaseRow| {
            let entry = FlushEntry {
                lease: l.id,
                give_back_micros: l.outstanding_micros,
                close: true,
                ..FlushEntry::default()
            };
            escrow::flush(m, d, l, node, &entry, now_unix).map(|_| 0)
        };
        let rule: steps::ReconcileRule<'_> = if self.reconcile_gives_back { &gives_back } else { &escrow::reconcile };
        in_tx(&mut self.rows.lock(), |tx| steps::reconcile(tx, node, now_unix, expired_only, rule))
    }

    fn status(&self, mandate: Option<&str>) -> Result<Vec<MandateStatus>, StoreError> {
        let rows = self.rows.lock();
        let mut out = Vec::new();
        for (id, row) in rows.mandates.iter().filter(|(id, _)| mandate.is_none_or(|m| m == id.as_str())) {
            let mut nodes: BTreeMap<&str, NodeLeases> = BTreeMap::new();
            for lease in rows.leases.values().filter(|l| &l.mandate == id && l.state == LeaseState::Open) {
                let entry = nodes.entry(&lease.node).or_insert(NodeLeases {
                    node: lease.node.clone(),
                    leased_micros: 0,
                    lease_expires_unix: lease.expires_unix,
                });
                entry.leased_micros = entry.leased_micros.saturating_add(lease.outstanding_micros);
                entry.lease_expires_unix = entry.lease_expires_unix.max(lease.expires_unix);
            }
            out.push(MandateStatus {
                mandate: id.clone(),
                limits: row.limits,
                spent_micros: row.spent_micros,
                leased_micros: row.leased_micros,
                nodes: nodes.into_values().collect(),
            });
        }
        if let Some(m) = mandate
            && out.is_empty()
        {
            return Err(StoreError::UnknownMandate(m.to_owned()));
        }
        Ok(out)
    }

    fn hold(&self, call: &HeldCall) -> Result<(), StoreError> {
        call.check()?;
        self.rows.lock().held.entry(call.id.clone()).or_insert_with(|| (call.clone(), false));
        Ok(())
    }

    fn take_held(&self, id: &str, now_unix: i64) -> Result<Option<HeldCall>, StoreError> {
        let mut rows = self.rows.lock();
        let cutoff = now_unix.saturating_sub(HELD_KEEP_S);
        rows.held.retain(|_, (c, _)| c.expires_unix >= cutoff);
        let Some((call, taken)) = rows.held.get_mut(id) else { return Ok(None) };
        if *taken {
            return Ok(None);
        }
        *taken = true;
        Ok(Some(call.clone()).filter(|c| c.expires_unix >= now_unix))
    }

    fn release_held(&self, id: &str) -> Result<(), StoreError> {
        if let Some((_, taken)) = self.rows.lock().held.get_mut(id) {
            *taken = false;
        }
        Ok(())
    }

    fn held_calls(&self, mandate: Option<&str>, now_unix: i64) -> Result<Vec<HeldCall>, StoreError> {
        let rows = self.rows.lock();
        let live = |c: &HeldCall| c.expires_unix >= now_unix && mandate.is_none_or(|m| m == c.mandate);
        Ok(rows.held.values().filter(|(c, taken)| !taken && live(c)).map(|(c, _)| c.clone()).collect())
    }

    fn claim_key(&self, claim: &KeyClaim<'_>) -> Result<KeyState, StoreError> {
        self.keys.lock().claim(claim)
    }

    fn answer_key(&self, scope: &str, key: &str, answer: KeyAnswer) -> Result<(), StoreError> {
        self.keys.lock().answer(scope, key, answer)
    }

    fn forget_key(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        self.keys.lock().forget(scope, key);
        Ok(())
    }

    fn forget_node_keys(&self, node: &str) -> Result<u64, StoreError> {
        Ok(self.keys.lock().forget_node(node))
    }

    fn prune_keys(&self, now_unix: i64, keys_max: u64) -> Result<u64, StoreError> {
        Ok(super::keys::prune_in_slices(&self.keys, now_unix, keys_max))
    }

    fn in_process(&self) -> bool {
        true
    }
}
