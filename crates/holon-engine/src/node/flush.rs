//! The node's group commit: one flush of every mandate's settled amounts and give-backs
//! (sent again exactly as it was when its commit's answer was lost), and the drain at the
//! end.

use std::time::Instant;

use super::Counters;
use super::NodeError;
use super::book::{GiveBackFrom, Plan};
use super::cycle::Runner;
use crate::engine::inside::StoreState;
use crate::store::{FLUSH_ENTRIES_MAX, FlushOutcome, LeaseState, StoreError};

impl Runner {
    /// One group commit of every mandate's settled amounts and give-backs, renewing every
    /// lease's time to live when `renew`.
    pub(super) fn flush(&mut self, renew: bool) -> bool {
        // A flush whose commit failed goes again first, exactly as it was: the store may
        // have committed it (the answer was lost), and its entries say what each lease held
        // before, so a second application moves nothing (`expect_outstanding_micros`).
        if let Some(batch) = self.replay.take()
            && !self.commit(batch, true)
        {
            return false;
        }
        let ttl = renew.then_some(self.config.lease_ttl_s);
        let plans: Vec<(usize, Plan)> = self
            .mandates
            .iter()
            .enumerate()
            .filter_map(|(ix, t)| {
                let settled = t.ledger.settled_micros();
                (renew || t.book.has_work(settled)).then(|| (ix, t.book.plan(settled, ttl)))
            })
            .filter(|(_, plan)| !plan.entries.is_empty())
            .collect();
        self.flushed_at = Instant::now();
        // Batches of whole mandates, each within the store's limit per flush; a batch that
        // fails stops the flush (the rest is planned again next time).
        let mut batch: Vec<(usize, Plan)> = Vec::new();
        let mut entries = 0usize;
        let mut committed = true;
        for (ix, plan) in plans {
            if entries + plan.entries.len() > FLUSH_ENTRIES_MAX && !batch.is_empty() {
                committed = self.commit(std::mem::take(&mut batch), false);
                entries = 0;
                if !committed {
                    break;
                }
            }
            entries += plan.entries.len();
            batch.push((ix, plan));
        }
        if committed && !batch.is_empty() {
            committed = self.commit(batch, false);
        }
        // A renewal that failed is tried again at the next flush, not a third of a time to
        // live later.
        if renew && committed {
            self.renewed_at = self.flushed_at;
        }
        let (leases, leased) = self.mandates.iter().fold((0u64, 0u64), |(n, m), t| {
            let count = u64::try_from(t.book.lease_count()).unwrap_or(u64::MAX);
            (n.saturating_add(count), m.saturating_add(t.book.outstanding_micros()))
        });
        Counters::set(&self.shared.counters.leases, leases);
        Counters::set(&self.shared.counters.leased_micros, leased);
        committed
    }

    /// Sends one batch (`replay`: a batch sent before, whose answer was lost) and applies
    /// it to the books once the store committed it.
    fn commit(&mut self, batch: Vec<(usize, Plan)>, replay: bool) -> bool {
        // Leases this batch closed when it was first sent, which the store has purged since
        // (a closed lease is kept `CLOSED_LEASE_KEEP_S` after its close): only a closing
        // entry of this node removes a lease from the store, and the node still holds the
        // lease, so the closing entry is this one. They are left out and taken as closed.
        let mut purged: Vec<u64> = Vec::new();
        let result = loop {
            let entries: Vec<_> = batch
                .iter()
                .flat_map(|(_, plan)| plan.entries.iter().copied())
                .filter(|e| !purged.contains(&e.lease))
                .collect();
            let result = if entries.is_empty() {
                Ok(Vec::new())
            } else {
                self.store.flush(&self.config.node, &entries, self.unix())
            };
            match result {
                Err(StoreError::UnknownLease(id)) if replay && entries.iter().any(|e| e.lease == id && e.close) => {
                    purged.push(id);
                }
                other => break other,
            }
        };
        let outcomes = match result {
            Ok(mut outcomes) => {
                let _ = self.answered(usize::MAX, None);
                outcomes.extend(purged.iter().map(|&lease| FlushOutcome {
                    lease,
                    state: LeaseState::Closed,
                    outstanding_micros: 0,
                }));
                outcomes
            }
            // Maybe written, maybe not (the answer to a commit can be lost): the same batch
            // goes again first in the next flush.
            Err(e) => {
                let _ = self.answered(usize::MAX, Some(&e));
                self.replay = Some(batch);
                return false;
            }
        };
        Counters::add(&self.shared.counters.flushes, 1);
        for (ix, plan) in batch {
            let Some(t) = self.mandates.get_mut(ix) else { continue };
            let done = t.book.commit(plan, &outcomes);
            Counters::add(&self.shared.counters.settled_micros, done.settled_micros);
            Counters::add(&self.shared.counters.given_back_micros, done.given_back_micros);
            Counters::add(&self.shared.counters.reconciled_micros, done.reconciled_micros);
            if t.ledger.store_state() == StoreState::Unavailable {
                t.ledger.set_store_state(StoreState::Leasing);
            }
        }
        true
    }

    /// The end: withdraws every unused allowance, flushes everything, gives it back and
    /// closes what is left with nothing outstanding.
    pub(super) fn drain(mut self) -> Result<(), NodeError> {
        let today = self.today();
        for t in &mut self.mandates {
            let ledger = &t.ledger;
            ledger.refund_all_leases();
            let day = t.documents.per_day_micros.map(|_| today);
            let taken = ledger.withdraw_allowance(u64::MAX, day);
            t.book.give_back(GiveBackFrom::Day(day), taken);
            let rest = ledger.withdraw_allowance(u64::MAX, None);
            t.book.give_back(if day.is_some() { GiveBackFrom::Before(today) } else { GiveBackFrom::Day(None) }, rest);
            // Nothing reserved any more: no call will spend through any lease, so what is
            // owed may come from any of them. Not with a `per_day`: settled amounts go to
            // leases oldest first, whatever their day, so a give-back from any lease could
            // free a day's capacity its calls used; what cannot go back stays leased until
            // the lease's time to live passes and a reconcile counts it (under-use only).
            if day.is_none() && ledger.used_micros() == ledger.settled_micros() {
                t.book.owe_anywhere();
            }
        }
        if self.flush(false) {
            Ok(())
        } else {
            Err(NodeError::Store(StoreError::Unavailable(
                "the drain's last flush failed; the leases stay open until their time to live passes".to_owned(),
            )))
        }
    }
}
