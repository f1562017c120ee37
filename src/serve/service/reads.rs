//! What `holon serve` reads out for operators and issuers: a mandate's limits and spend,
//! the server's status, the metrics' gauges, the reservations open.

use std::sync::atomic::Ordering;

use holon::money::Amount;
use holon::time::Timestamp;

use super::{Refusal, Service};
use crate::serve::auth::Role;
use crate::serve::metrics::as_gauge;

impl Service {
    /// `GET /v1/mandates/{id}`: the gateway, or the mandate's issuer.
    pub(crate) async fn mandate(&'static self, id: &str, role: &Role) -> Result<serde_json::Value, Refusal> {
        let snap = self.engine.snapshot();
        let ix = self.engine.mandate_ix(id);
        // An account reading a mandate it did not issue gets the same 404 as for a mandate
        // that does not exist: the answer tells a stranger nothing about which ids exist.
        let not_found = || {
            Refusal::new(404, format!("no mandate `{id}` that this token may read (an account reads what it issued)"))
        };
        let (ix, m) = ix.and_then(|ix| Some((ix, snap.mandate(ix)?))).ok_or_else(not_found)?;
        // Its issuer, or the account at the root of its chain (a sub-mandate's issuer is an
        // agent; the human who granted the root reads every mandate under it).
        if let Role::Account(p) = role
            && p != &m.source().issuer
            && self.engine.approver_of(ix).as_ref() != Some(p)
        {
            return Err(not_found());
        }
        let b = &m.source().budget;
        let ledger = self.engine.ledger_view(ix);
        let today = u64::try_from(Timestamp::now().utc_day()).unwrap_or(0);
        let ((reserved, settled), today_spent) =
            ledger.as_ref().map_or(((0, 0), 0), |l| (l.reserved_and_settled_micros(), l.spent_day_micros(today)));
        // The store's figures: when the store cannot say, the answer is a 503 that says so,
        // never this server's own figures passed off as the store's.
        let owned = id.to_owned();
        let read_at = Timestamp::now();
        let store = self
            .blocking(move || self.store.status(Some(&owned)))
            .await?
            .map_err(|e| Refusal::new(503, format!("the store cannot say what mandate `{id}` spent: {e}")))?
            .into_iter()
            .next();
        let money = |micros: u64| Amount::from_micros(micros).to_string();
        let shadow = self.engine.shadow_tally(ix);
        let ancestors: Vec<serde_json::Value> = m
            .ancestors()
            .iter()
            .filter_map(|a| Some((snap.mandate(*a)?, self.engine.ledger_view(*a)?)))
            .map(|(a, l)| {
                let (reserved, settled) = l.reserved_and_settled_micros();
                serde_json::json!({
                    "id": a.source().id,
                    "limits": { "total": a.source().budget.total.to_string(), "per_day": a.source().budget.per_day.map(|d| d.to_string()) },
                    "this_node": { "reserved": money(reserved), "settled": money(settled), "today": money(l.spent_day_micros(today)) },
                })
            })
            .collect();
        Ok(serde_json::json!({
            "id": id,
            "issuer": m.source().issuer.as_str(),
            "currency": b.currency.to_string(),
            "limits": {
                "total": b.total.to_string(),
                "per_call": b.per_call.map(|a| a.to_string()),
                "per_day": b.per_day.map(|a| a.to_string()),
                "approval_above": m.source().approval.as_ref().map(|a| a.above.to_string()),
            },
            // Every node's, as the store counts them when read (null: not in the store yet).
            "store": {
                "spent": store.as_ref().map(|s| money(s.spent_micros)),
                "leased": store.as_ref().map(|s| money(s.leased_micros)),
                "read_at": read_at.to_string(),
            },
            // This server's own, since it started: in the store's `spent` within a flush.
            "this_node": {
                "node": self.node_name,
                "reserved": money(reserved),
                "settled": money(settled),
                "today": money(today_spent),
                "flush_ms": self.flush_ms,
            },
            "shadow": { "reserved": shadow.reserved.to_string(), "settled": shadow.settled.to_string() },
            "ancestors": ancestors,
        }))
    }

    /// `GET /v1/status`.
    pub(crate) fn status_json(&self) -> serde_json::Value {
        let stats = self.engine.stats();
        let node = self.node.stats();
        let status = self.status.lock().clone();
        serde_json::json!({
            "generation": stats.generation,
            "documents": { "directory": self.documents.display().to_string(), "mandates": stats.mandates, "agents": stats.agents, "ignored_files": status.ignored_files },
            "reloads": status.reloads,
            "reload_failures": status.failures,
            "last_reload_error": status.last_error,
            "last_reload_error_at": status.last_error_at,
            "tokens": status.tokens,
            "in_flight": self.open_count(),
            "held": self.engine.held_count(),
            "receipts_dropped": stats.receipts_dropped,
            "store": { "kind": self.store_kind, "round_trips": node.round_trips, "errors": node.store_errors },
            "shadow": self.shadow,
            // Acquire: pairs with the shutdown's Release (a flag, read alone).
            "ready": self.ready.load(Ordering::Acquire),
        })
    }

    /// `GET /metrics`: the gauges read now, then the exposition.
    pub(crate) fn metrics_text(&self) -> String {
        let stats = self.engine.stats();
        let node = self.node.stats();
        let m = &self.metrics;
        m.in_flight.set(as_gauge(self.open_count() as u64));
        m.held.set(as_gauge(self.engine.held_count() as u64));
        m.receipts_dropped.set(as_gauge(stats.receipts_dropped));
        m.store_round_trips.set(as_gauge(node.round_trips));
        m.store_errors.set(as_gauge(node.store_errors));
        m.generation.set(as_gauge(stats.generation));
        m.shadow.set(i64::from(self.shadow));
        let names = self.engine.names();
        for (mandate, tally) in self.engine.shadow_tallies() {
            let mandate = names.mandates.name(mandate.0).map_or_else(String::new, |n| n.to_string());
            let labels = crate::serve::metrics::MandateLabels { mandate };
            m.shadow_settled_micros.get_or_create(&labels).set(as_gauge(tally.settled.micros()));
        }
        m.encode()
    }

    /// Reservations open through this server.
    /// Reservations open through this server (not those reclaimed and awaiting a late
    /// settle).
    pub(crate) fn open_count(&self) -> usize {
        // A reclaimed reservation is inactive for good, whether or not the reaper marked it.
        self.open.iter().filter(|open| open.reservation.is_active()).count()
    }
}
