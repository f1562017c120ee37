//! The `memory` store: the escrow rules on rows in this process, under one lock. For unit
//! tests, benches and a single process; it forgets everything when the process ends.

use std::collections::BTreeMap;

use super::escrow::{self, DayRow, LeaseRow, MandateRow};
use super::keys::{KeyAnswer, KeyBook, KeyClaim, KeyState};
use super::{
    CLOSED_LEASE_KEEP_S, FlushEntry, FlushOutcome, GrantRequest, HELD_KEEP_S, HeldCall, Lease, LeaseState, LedgerStore,
    MANDATE_ID_BYTES_MAX, MandateStatus, NODE_NAME_BYTES_MAX, NodeLeases, Reconciled, StoreError, StoreLimits,
    check_flush, check_name, grant_day,
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

/// Copies of the rows one step changes, written back whole at its end.
#[derive(Default)]
struct Staged {
    mandates: BTreeMap<String, MandateRow>,
    days: BTreeMap<(String, u64), DayRow>,
    leases: BTreeMap<u64, LeaseRow>,
}

impl Staged {
    /// A lease as the step sees it.
    fn lease(&self, rows: &Rows, id: u64) -> Result<LeaseRow, StoreError> {
        self.leases
            .get(&id)
            .or_else(|| rows.leases.get(&id))
            .or_else(|| rows.closed.get(&id))
            .cloned()
            .ok_or(StoreError::UnknownLease(id))
    }

    /// Applies `change` to `lease` and copies of the rows it draws on, and stages them.
    fn apply<T>(
        &mut self,
        rows: &Rows,
        mut lease: LeaseRow,
        change: impl FnOnce(&mut MandateRow, Option<&mut DayRow>, &mut LeaseRow) -> Result<T, escrow::EscrowError>,
    ) -> Result<T, StoreError> {
        let mut mandate = *self
            .mandates
            .get(&lease.mandate)
            .or_else(|| rows.mandates.get(&lease.mandate))
            .ok_or_else(|| StoreError::UnknownMandate(lease.mandate.clone()))?;
        let day_key = lease.day.map(|d| (lease.mandate.clone(), d));
        let mut day =
            day_key.as_ref().map(|k| self.days.get(k).or_else(|| rows.days.get(k)).copied().unwrap_or_default());
        let out = change(&mut mandate, day.as_mut(), &mut lease)?;
        self.mandates.insert(lease.mandate.clone(), mandate);
        if let (Some(k), Some(row)) = (day_key, day) {
            self.days.insert(k, row);
        }
        self.leases.insert(lease.id, lease);
        Ok(out)
    }

    fn commit(self, rows: &mut Rows) {
        rows.mandates.extend(self.mandates);
        rows.days.extend(self.days);
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
        let mut rows = self.rows.lock();
        let row =
            rows.mandates.entry(mandate.to_owned()).or_insert(MandateRow { limits, spent_micros: 0, leased_micros: 0 });
        row.limits = escrow::new_limits(row.limits, limits, raise);
        Ok(row.limits)
    }

    fn grant(&self, request: &GrantRequest) -> Result<Option<Lease>, StoreError> {
        check_name("a node name", &request.node, NODE_NAME_BYTES_MAX)?;
        let mut rows = self.rows.lock();
        let cutoff = request.now_unix.saturating_sub(CLOSED_LEASE_KEEP_S);
        rows.closed.retain(|_, l| l.expires_unix >= cutoff);
        let mut mandate =
            *rows.mandates.get(&request.mandate).ok_or_else(|| StoreError::UnknownMandate(request.mandate.clone()))?;
        let (day_key, expires_unix) = grant_day(request, mandate.limits.per_day_micros.is_some())?;
        let mut day = day_key.map(|d| rows.days.get(&(request.mandate.clone(), d)).copied().unwrap_or_default());
        let open = || rows.leases.values().filter(|l| l.mandate == request.mandate && l.state == LeaseState::Open);
        let others = open()
            .filter(|l| l.node != request.node)
            .map(|l| l.node.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64;
        let held =
            open().filter(|l| l.node == request.node).fold(0u64, |sum, l| sum.saturating_add(l.outstanding_micros));
        let Some(amount) =
            escrow::grant(&mut mandate, day.as_mut(), request.want_micros, request.min_micros, held, others)?
        else {
            return Ok(None);
        };
        let id = rows.next_lease.checked_add(1).ok_or(escrow::EscrowError::Overflow)?;
        rows.next_lease = id;
        rows.mandates.insert(request.mandate.clone(), mandate);
        if let (Some(d), Some(row)) = (day_key, day) {
            rows.days.insert((request.mandate.clone(), d), row);
        }
        rows.leases.insert(
            id,
            LeaseRow {
                id,
                node: request.node.clone(),
                mandate: request.mandate.clone(),
                day: day_key,
                outstanding_micros: amount,
                settled_micros: 0,
                expires_unix,
                state: LeaseState::Open,
            },
        );
        Ok(Some(Lease { id, amount_micros: amount, expires_unix }))
    }

    fn flush(&self, node: &str, entries: &[FlushEntry], now_unix: i64) -> Result<Vec<FlushOutcome>, StoreError> {
        check_flush(entries)?;
        let mut rows = self.rows.lock();
        // All or none: the batch is applied to copies of the rows it touches, which replace
        // the stored ones only when every entry succeeded.
        let mut staged = Staged::default();
        let mut outcomes = Vec::with_capacity(entries.len());
        for entry in entries {
            let lease = staged.lease(&rows, entry.lease)?;
            let outcome = staged.apply(&rows, lease, |m, d, l| escrow::flush(m, d, l, node, entry, now_unix))?;
            outcomes.push(outcome);
        }
        staged.commit(&mut rows);
        Ok(outcomes)
    }

    fn reconcile(&self, node: &str, now_unix: i64, expired_only: bool) -> Result<Reconciled, StoreError> {
        let mut rows = self.rows.lock();
        let mut staged = Staged::default();
        let mut done = Reconciled::default();
        let ids: Vec<u64> = rows
            .leases
            .values()
            .filter(|l| l.node == node && l.state == LeaseState::Open && (!expired_only || l.expires_unix <= now_unix))
            .map(|l| l.id)
            .collect();
        for id in ids {
            let lease = staged.lease(&rows, id)?;
            let mandate = lease.mandate.clone();
            let counted = if self.reconcile_gives_back {
                let entry = FlushEntry {
                    lease: id,
                    give_back_micros: lease.outstanding_micros,
                    close: true,
                    ..FlushEntry::default()
                };
                staged.apply(&rows, lease, |m, d, l| escrow::flush(m, d, l, node, &entry, now_unix))?;
                0
            } else {
                staged.apply(&rows, lease, escrow::reconcile)?
            };
            done.counted_micros = done.counted_micros.checked_add(counted).ok_or(escrow::EscrowError::Overflow)?;
            done.leases.push((id, mandate, counted));
        }
        staged.commit(&mut rows);
        Ok(done)
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

    fn answer_key(&self, scope: &str, key: &str, answer: &KeyAnswer) -> Result<(), StoreError> {
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
