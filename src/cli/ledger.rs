//! `holon ledger status|reconcile --store URL`: what the ledger store holds, and counting
//! a gone node's expired leases as spent (docs/store.md).

use holon::money::Amount;
use holon::store::{self, MandateStatus};
use holon::time::Timestamp;
use serde_json::json;

use super::exit;
use super::out::outln;
use super::style::Style;

fn money(micros: u64) -> String {
    Amount::from_micros(micros).to_string()
}

fn when(unix: i64) -> String {
    Timestamp::from_unix(unix).to_string()
}

fn status_json(s: &MandateStatus) -> serde_json::Value {
    json!({
        "mandate": s.mandate,
        "limit": money(s.limits.total_micros),
        "per_day": s.limits.per_day_micros.map(money),
        "spent": money(s.spent_micros),
        "leased": money(s.leased_micros),
        "nodes": s.nodes.iter().map(|n| json!({
            "node": n.node,
            "leased": money(n.leased_micros),
            "lease_expires": when(n.lease_expires_unix),
        })).collect::<Vec<_>>(),
    })
}

pub(crate) fn status(url: &str, mandate: Option<&str>, json: bool, style: &Style) -> anyhow::Result<u8> {
    let store = store::open_existing(url)?;
    let all = store.status(mandate)?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({ "mandates": all.iter().map(status_json).collect::<Vec<_>>() }))?
        )?;
        return Ok(exit::OK);
    }
    if all.is_empty() {
        outln!("the store holds no mandate yet: a node registers a mandate when it publishes it")?;
    }
    for s in &all {
        let per_day = s.limits.per_day_micros.map(|d| format!(", per day {}", money(d))).unwrap_or_default();
        outln!(
            "{}  limit {}{per_day}  spent {}  leased {} (granted to nodes, not yet settled or given back)",
            style.bold(&s.mandate),
            money(s.limits.total_micros),
            money(s.spent_micros),
            money(s.leased_micros)
        )?;
        for n in &s.nodes {
            outln!("  {}  leased {}  until {}", n.node, money(n.leased_micros), when(n.lease_expires_unix))?;
        }
    }
    Ok(exit::OK)
}

pub(crate) fn reconcile(url: &str, node: &str, json: bool) -> anyhow::Result<u8> {
    let store = store::open_existing(url)?;
    let now = Timestamp::now();
    let done = store.reconcile(node, now.unix(), true)?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "node": node,
                "counted_as_spent": money(done.counted_micros),
                "leases": done.leases.iter().map(|(id, mandate, micros)| json!({
                    "lease": id, "mandate": mandate, "counted_as_spent": money(*micros),
                })).collect::<Vec<_>>(),
            }))?
        )?;
        return Ok(exit::OK);
    }
    if done.leases.is_empty() {
        outln!("{node} holds no lease whose time to live has passed by {now}; nothing changed")?;
        return Ok(exit::OK);
    }
    for (id, mandate, micros) in &done.leases {
        outln!("lease {id} of {node} on {mandate}: its remainder {} is now counted as spent", money(*micros))?;
    }
    outln!(
        "{} counted as spent in all: whatever {node} admitted against these leases may have been billed, so it stays spent",
        money(done.counted_micros)
    )?;
    Ok(exit::OK)
}
