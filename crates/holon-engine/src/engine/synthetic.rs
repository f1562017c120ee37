//! A synthetic network of agents and mandates, for benchmarks, `holon loadtest`, the demo
//! and tests: every kind of decision appears in a known proportion.
//!
//! Agent `syn/a{i}` by `i % 10`:
//! - 5: an orchestrator (`syn.orchestrate`) with a passthrough cap of 0.01 and a declared
//!   call to capability `syn.leaf` (allowed, with a delegated run);
//! - 8: trains on data, which every mandate forbids (denied `training_use_not_allowed`);
//! - 9: costs 0.90, above every mandate's approval threshold 0.50 (held);
//! - otherwise a leaf (`syn.leaf`) at 0.001, priced in EUR or, for odd `i`, USD
//!   (converted at 0.92); 6 keeps data 30 days and 7 sends it to a collector, which the
//!   synthetic mandates allow (they vary the data facts for the equivalence tests).
//!
//! Mandate `m{j}` (issuer `acct{j}`) allows `syn.*` in EUR with the shape's total.
//!
//! How a call that ran went ([`report`], what `holon loadtest --receipts` settles with, so
//! records can be built from its receipts): agents with `i % 4 == 3` are flaky (about 80%
//! success), the others about 98%; about 1 in 50 calls of any agent ends in a declared
//! failure; latency is 40 ms plus 10 ms per `i % 20`, plus up to 99 ms more.

use serde_json::{Value, json};

use super::receipt::{Outcome, RunReport};
use super::snapshot::SnapshotInput;
use crate::mandate::Mandate;
use crate::manifest::Manifest;
use crate::money::Amount;
use crate::sync::Arc;
use crate::time::Timestamp;

/// The currency of every synthetic mandate, so of every amount a load test reports.
pub const CURRENCY: &str = "EUR";
/// The price of the agents whose calls are held (in [`CURRENCY`]).
pub const HELD_PRICE: &str = "0.90";
/// Every synthetic mandate's approval threshold (in [`CURRENCY`]).
pub const APPROVAL_ABOVE: &str = "0.50";

/// What kind of decision calls to an agent get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Leaf,
    Orchestrator,
    Held,
    Denied,
}

/// The kind of `syn/a{i}`.
pub fn kind_of(i: usize) -> Kind {
    match i % 10 {
        5 => Kind::Orchestrator,
        8 => Kind::Denied,
        9 => Kind::Held,
        _ => Kind::Leaf,
    }
}

/// The outcome and latency of call number `n` to `syn/a{i}` (deterministic: a hash of the
/// two; see the module's documentation for the proportions).
pub fn report(i: usize, n: u64) -> RunReport {
    let h = splitmix64(splitmix64(i as u64) ^ n);
    let roll = h % 1_000;
    let flaky = i % 4 == 3;
    let outcome = if roll < 20 {
        Outcome::DeclaredFailure
    } else if roll < if flaky { 220 } else { 40 } {
        Outcome::Error
    } else {
        Outcome::Success
    };
    let base_ms = 40 + 10 * (i % 20) as u64;
    let latency_ms = u32::try_from(base_ms + (h >> 32) % 100).unwrap_or(u32::MAX);
    RunReport { outcome, latency_ms }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Sizes of a synthetic network.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub agents: usize,
    pub mandates: usize,
    /// Every mandate's total (and daily) budget.
    pub total: Amount,
}

impl Default for Shape {
    fn default() -> Self {
        Shape { agents: 100, mandates: 10, total: Amount::from_micros(100_000_000_000) }
    }
}

/// A compiled-ready network and a time inside every mandate's validity.
#[derive(Debug, Clone)]
pub struct Network {
    pub input: SnapshotInput,
    pub at: Timestamp,
}

/// Midday, 2026-11-15 UTC.
pub const AT_UNIX: i64 = 1_794_744_000;

fn agent_doc(i: usize) -> Value {
    let kind = kind_of(i);
    let (class, price) = match kind {
        Kind::Orchestrator => ("syn.orchestrate", "0.002"),
        Kind::Held => ("syn.leaf", HELD_PRICE),
        _ => ("syn.leaf", "0.001"),
    };
    let currency = if kind == Kind::Leaf && i % 2 == 1 { "USD" } else { CURRENCY };
    let pricing = json!({ "model": "per_run", "amount": price, "currency": currency, "charge_on": "success" });
    let (pricing, calls) = match (kind, pricing) {
        (Kind::Orchestrator, Value::Object(mut p)) => {
            p.insert("downstream".into(), json!({ "mode": "passthrough", "cap": "0.01" }));
            (Value::Object(p), json!([{ "capability": "syn.leaf", "max_cost": "0.005" }]))
        }
        (_, p) => (p, json!([])),
    };
    json!({
        "holon": "0.1",
        "id": format!("syn/a{i}"),
        "version": "1.0.0",
        "name": format!("synthetic {i}"),
        "description": "A synthetic agent.",
        "license": "MIT",
        "authors": [{ "name": "holon", "kind": "organization" }],
        "source": { "repository": "https://example.com/syn", "ref": "0123456789abcdef0123456789abcdef01234567" },
        "interface": { "input": { "type": "object" }, "output": { "type": "object" }, "modes": ["sync"] },
        "capabilities": [{ "class": class }],
        "pricing": pricing,
        "runtime": { "kind": "container", "image": "example.com/syn@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "limits": { "timeout_s": 60 } },
        "data": {
            "retention": if i % 10 == 6 { "P30D" } else { "none" },
            "training_use": kind == Kind::Denied,
            "egress": if i % 10 == 7 { json!(["collector.example"]) } else { json!([]) },
        },
        "calls": calls,
        "examples": [{ "input": {}, "output": {} }],
    })
}

fn mandate_doc(j: usize, total: Amount) -> Value {
    let total = total.to_string();
    json!({
        "holon_mandate": "0.1",
        "id": format!("m{j}"),
        "issuer": format!("acct{j}"),
        "grantee": format!("acct{j}/bot"),
        "valid": { "from": "2026-11-01T00:00:00Z", "until": "2026-12-31T23:59:59Z" },
        "budget": { "currency": CURRENCY, "total": total, "per_call": "2.00", "per_day": total, "fx": { "USD": "0.92" } },
        "approval": { "above": APPROVAL_ABOVE },
        "allow": { "capabilities": ["syn.*"], "published": true },
        "data": { "training_use": false },
        "delegation": { "max_depth": 1 },
    })
}

/// Builds the network. The documents are built typed without the document pipeline (fast
/// for 10,000s); `tests/admission_reference.rs` checks them with every rule of
/// `holon validate`. An error here is a bug in this module.
pub fn network(shape: &Shape) -> Result<Network, serde_json::Error> {
    let agents = (0..shape.agents)
        .map(|i| serde_json::from_value::<Manifest>(agent_doc(i)).map(|m| (Arc::new(m), None)))
        .collect::<Result<_, _>>()?;
    let mandates = (0..shape.mandates)
        .map(|j| serde_json::from_value::<Mandate>(mandate_doc(j, shape.total)).map(Arc::new))
        .collect::<Result<_, _>>()?;
    Ok(Network {
        input: SnapshotInput { mandates, agents, ..SnapshotInput::default() },
        at: Timestamp::from_unix(AT_UNIX),
    })
}

/// A sub-mandate of `parent` for the benches, tests and loom models of calls under
/// sub-mandates: issued by the parent's grantee to `{id with '/' as '-'}/bot`, with
/// `total` as its total and its `per_day`, everything else the parent's, one level of
/// delegation less. Built without the document pipeline, like [`network`].
pub fn sub_mandate(parent: &Mandate, id: &str, total: Amount) -> Result<Mandate, crate::pattern::PatternError> {
    let mut child = parent.clone();
    child.id = id.to_owned();
    child.parent = Some(parent.id.clone());
    child.issuer = parent.grantee.clone();
    child.grantee = crate::pattern::Principal::parse(&format!("{}/bot", id.replace('/', "-")))?;
    child.budget.total = total;
    child.budget.per_day = Some(total);
    child.delegation.max_depth = parent.delegation.max_depth.saturating_sub(1);
    child.signature = None;
    // Built in code: no canonical form read, so no digest that would be its parent's.
    child.canonical = None;
    Ok(child)
}

/// Adds a chain of `levels` sub-mandates below `m0` (`m0/s1`, `m0/s1/s2`, …, each with the
/// synthetic total), `m0` allowed as many levels of delegation; returns the deepest id.
/// For the benches and tests of calls under a sub-mandate.
pub fn add_chain(net: &mut Network, levels: u32) -> Result<String, crate::pattern::PatternError> {
    let Some(root) = net.input.mandates.first_mut() else { return Ok("m0".into()) };
    let mut edited = (**root).clone();
    edited.delegation.max_depth = levels;
    *root = Arc::new(edited);
    let (mut parent, mut id) = (Arc::clone(root), String::from("m0"));
    for level in 1..=levels {
        id = format!("{id}/s{level}");
        let child = Arc::new(sub_mandate(&parent, &id, parent.budget.total)?);
        net.input.mandates.push(Arc::clone(&child));
        parent = child;
    }
    Ok(id)
}

/// The documents as JSON values (for validation in tests).
pub fn documents(shape: &Shape) -> (Vec<Value>, Vec<Value>) {
    ((0..shape.agents).map(agent_doc).collect(), (0..shape.mandates).map(|j| mandate_doc(j, shape.total)).collect())
}
