//! `holon ledger status|reconcile|raise --store URL`: what the ledger store holds, counting
//! a gone node's expired leases as spent, and the operator's command that sets a mandate's
//! limits in the store (docs/store.md).

use holon::money::Amount;
use holon::store::{self, MandateStatus, StoreError, StoreLimits};
use holon::time::Timestamp;
use serde_json::json;

use super::exit;
use super::out::outln;
use super::style::Style;

#[derive(clap::Subcommand)]
pub(super) enum LedgerCommand {
    /// Per mandate: its limit, what is spent and what is leased, per node. Exit 0, or 2
    /// when the store cannot be opened.
    #[command(
        after_help = "EXIT CODES: 0 printed, 2 the store cannot be opened.\n\nEXAMPLES:\n  holon ledger status --store sqlite:.holon/ledger.db\n  holon ledger status --store sqlite:.holon/ledger.db --mandate alice/m-2026-11 --json\n  holon ledger status --store sqlite:.holon/ledger.db --documents examples/mandates"
    )]
    Status {
        /// The store: `memory`, `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`.
        #[arg(long, value_parser = super::flags::store_url)]
        store: String,
        /// Only this mandate (its id).
        #[arg(long)]
        mandate: Option<String>,
        /// Print {"mandates":[{"mandate","limit","per_day","spent","leased","nodes":[{"node","leased","lease_expires"}]}]}, money as strings.
        #[arg(long)]
        json: bool,
        /// The mandates' documents (files or directories): each sub-mandate is shown under
        /// its parent (the store does not know parents), and in JSON with `parent`.
        #[arg(long)]
        documents: Option<std::path::PathBuf>,
    },
    /// Count as spent the remainder of a gone node's leases whose time to live has passed
    /// (whatever it admitted may have been billed). Exit 0, or 2 when the store cannot be
    /// opened.
    #[command(
        after_help = "EXIT CODES: 0 reconciled (or nothing to do), 2 the store cannot be opened.\n\nEXAMPLES:\n  holon ledger reconcile --store sqlite:.holon/ledger.db --node gateway-3"
    )]
    Reconcile {
        /// The store: `memory`, `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`.
        #[arg(long, value_parser = super::flags::store_url)]
        store: String,
        /// The node whose expired leases to reconcile.
        #[arg(long, value_parser = super::flags::node_name)]
        node: String,
        /// Print {"node","counted_as_spent","leases":[{"lease","mandate","counted_as_spent"}]}.
        #[arg(long)]
        json: bool,
    },
    /// Set the limits the store enforces for a mandate: the operator's explicit command,
    /// since a node's publish can only lower them (docs/store.md, "Limits that disagree").
    /// Exit 0, or 2 with nothing written when an amount is not money, the mandate is not in
    /// the store, or the store cannot be opened.
    #[command(
        after_help = "EXIT CODES: 0 raised, 2 nothing written (an amount that is not money, a mandate not in the store, a store that cannot be opened).\n\nEXAMPLES:\n  holon ledger raise --store sqlite:.holon/ledger.db --mandate alice/m-2026-11 --total 250.00"
    )]
    Raise {
        /// The store: `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`.
        #[arg(long, value_parser = super::flags::store_url)]
        store: String,
        /// The mandate (its id, as `holon ledger status` shows it); it must be in the store
        /// already: a node registers it when it first publishes it.
        #[arg(long)]
        mandate: String,
        /// The total the store enforces from now on: a decimal amount in the mandate's
        /// currency, like 250.00 (at most 6 decimals).
        #[arg(long, value_name = "AMOUNT", value_parser = super::flags::money, allow_negative_numbers = true)]
        total: Amount,
        /// The limit per UTC day from now on, a decimal amount; without it the store keeps
        /// the per-day limit it has.
        #[arg(
            long,
            value_name = "AMOUNT",
            value_parser = super::flags::money,
            conflicts_with = "no_per_day",
            allow_negative_numbers = true
        )]
        per_day: Option<Amount>,
        /// Remove the store's per-day limit (for documents that have none).
        #[arg(long)]
        no_per_day: bool,
        /// Print {"mandate","limit","per_day","was":{"limit","per_day"},"spent","leased"}, money as strings.
        #[arg(long)]
        json: bool,
    },
}

fn money(micros: u64) -> String {
    Amount::from_micros(micros).to_string()
}

fn when(unix: i64) -> String {
    Timestamp::from_unix(unix).to_string()
}

/// Each mandate's parent by id, from the documents under `path` (files that are not
/// mandates are passed over; a mandate that cannot be read is an error).
fn parents_in(path: &std::path::Path) -> anyhow::Result<std::collections::HashMap<String, String>> {
    let mut mandates = Vec::new();
    for file in holon::doc::file::yaml_files(path)? {
        match holon::documents::load_mandate(&file) {
            Ok(m) => mandates.push(m),
            Err(holon::doc::LoadError::WrongKind { .. }) => {}
            Err(e) => return Err(anyhow::anyhow!("--documents {}: {e}", file.display())),
        }
    }
    let mut parents = std::collections::HashMap::new();
    for m in &mandates {
        if let Some(parent) = mandates.iter().find(|p| m.names_as_parent(p)) {
            parents.insert(m.id.clone(), parent.id.clone());
        }
    }
    Ok(parents)
}

/// The rows with each sub-mandate right under its parent, and its depth.
fn nested<'a>(
    all: &'a [MandateStatus],
    parents: &std::collections::HashMap<String, String>,
) -> Vec<(usize, &'a MandateStatus)> {
    fn under<'a>(
        parent: Option<&str>,
        depth: usize,
        all: &'a [MandateStatus],
        parents: &std::collections::HashMap<String, String>,
        out: &mut Vec<(usize, &'a MandateStatus)>,
    ) {
        // A chain is at most `CHAIN_MANDATES_MAX` long; deeper is a cycle in the documents.
        if depth >= holon::engine::CHAIN_MANDATES_MAX {
            return;
        }
        for s in all {
            let known_parent =
                parents.get(&s.mandate).map(String::as_str).filter(|p| all.iter().any(|r| r.mandate == *p));
            if known_parent == parent {
                out.push((depth, s));
                under(Some(&s.mandate), depth + 1, all, parents, out);
            }
        }
    }
    let mut out = Vec::new();
    under(None, 0, all, parents, &mut out);
    // Rows a cycle kept out are still shown, at the top level.
    for s in all {
        if !out.iter().any(|(_, r)| std::ptr::eq(*r, s)) {
            out.push((0, s));
        }
    }
    out
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

pub(crate) fn status(
    url: &str,
    mandate: Option<&str>,
    json: bool,
    documents: Option<&std::path::Path>,
    style: &Style,
) -> anyhow::Result<u8> {
    let parents = documents.map(parents_in).transpose()?.unwrap_or_default();
    let store = store::open_existing(url)?;
    let all = store.status(mandate)?;
    if json {
        let rows = all.iter().map(|s| {
            let mut row = status_json(s);
            if let Some(parent) = parents.get(&s.mandate) {
                row["parent"] = json!(parent);
            }
            row
        });
        outln!("{}", serde_json::to_string_pretty(&json!({ "mandates": rows.collect::<Vec<_>>() }))?)?;
        return Ok(exit::OK);
    }
    if all.is_empty() {
        outln!("the store holds no mandate yet: a node registers a mandate when it publishes it")?;
    }
    for (depth, s) in nested(&all, &parents) {
        let indent = "  ".repeat(depth);
        let under = if depth > 0 { "sub-mandate " } else { "" };
        let per_day = s.limits.per_day_micros.map(|d| format!(", per day {}", money(d))).unwrap_or_default();
        outln!(
            "{indent}{under}{}  limit {}{per_day}  spent {}  leased {} (granted to nodes, not yet settled or given back)",
            style.bold(&s.mandate),
            money(s.limits.total_micros),
            money(s.spent_micros),
            money(s.leased_micros)
        )?;
        for n in &s.nodes {
            outln!("{indent}  {}  leased {}  until {}", n.node, money(n.leased_micros), when(n.lease_expires_unix))?;
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

/// What `raise` does to the store's per-day limit.
pub(crate) enum PerDay {
    /// `--per-day AMOUNT`, or keep the store's when `None`.
    Set(Option<Amount>),
    /// `--no-per-day`.
    Remove,
}

fn limits_text(limits: &StoreLimits) -> String {
    let per_day = limits.per_day_micros.map_or_else(|| "none".to_owned(), money);
    format!("total {}, per day {per_day}", money(limits.total_micros))
}

pub(crate) fn raise(url: &str, mandate: &str, total: Amount, per_day: PerDay, json: bool) -> anyhow::Result<u8> {
    // The amounts were read as clap parsed them (`flags::money`): a typo opened nothing.
    let total = total.micros();
    let per_day = match per_day {
        PerDay::Set(Some(amount)) => Some(Some(amount.micros())),
        PerDay::Set(None) => None,
        PerDay::Remove => Some(None),
    };
    let store = store::open_existing(url)?;
    // A raise sets the limits of a mandate a node registered; it never creates one.
    let was = match store.status(Some(mandate)) {
        Ok(all) => all.into_iter().find(|s| s.mandate == mandate),
        Err(StoreError::UnknownMandate(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let Some(was) = was else {
        anyhow::bail!(
            "mandate `{mandate}` is not in the store, so there is nothing to raise; nothing was written. A node \
             registers a mandate when it first publishes it; `holon ledger status --store {url}` lists those the \
             store holds"
        );
    };
    let wanted = StoreLimits { total_micros: total, per_day_micros: per_day.unwrap_or(was.limits.per_day_micros) };
    let now = store.publish_limits(mandate, wanted, true)?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "mandate": mandate,
                "limit": money(now.total_micros),
                "per_day": now.per_day_micros.map(money),
                "was": { "limit": money(was.limits.total_micros), "per_day": was.limits.per_day_micros.map(money) },
                "spent": money(was.spent_micros),
                "leased": money(was.leased_micros),
            }))?
        )?;
        return Ok(exit::OK);
    }
    outln!("{mandate}: the store now enforces {} (it enforced {})", limits_text(&now), limits_text(&was.limits))?;
    let used = was.spent_micros.saturating_add(was.leased_micros);
    if used >= now.total_micros {
        outln!(
            "spent {} and leased {} already reach the new total: the store grants no new lease on {mandate} \
             while spent + leased is at or above it",
            money(was.spent_micros),
            money(was.leased_micros)
        )?;
    }
    Ok(exit::OK)
}
