//! `--store URL --node NAME` for the verbs that run an engine (`loadtest`, `demo`): a
//! store-backed engine supplied by a node ([`holon::node`]), and what the store saw.

use std::sync::Arc;

use holon::engine::Engine;
use holon::node::{Node, NodeConfig, NodeStats};
use holon::store::{self, LedgerStore, MandateStatus};
use serde::Serialize;

/// Where a verb keeps its budgets: `--store URL`, `--node NAME`, `--flush-ms N`.
#[derive(Debug, Clone)]
pub(super) struct StoreOptions {
    pub url: String,
    pub node: String,
    pub flush_ms: u64,
}

impl StoreOptions {
    /// The store's kind as a report names it.
    pub(super) fn kind(&self) -> &'static str {
        // The URL was checked as the flag was parsed (`flags::store_url`).
        holon::store::kind_of(&self.url).unwrap_or("unknown")
    }
}

/// The default node name: unique per process on one machine.
pub(super) fn default_node(verb: &str) -> String {
    format!("{verb}-{}", std::process::id())
}

/// What a run did with its store (`loadtest --json`'s `"store"`).
#[derive(Debug, Clone, Serialize)]
pub(super) struct StoreReport {
    pub kind: &'static str,
    pub node: String,
    pub round_trips: u64,
    /// Round trips per 1,000 allowed calls.
    pub round_trips_per_1000_admissions: f64,
    pub grants: u64,
    pub flushes: u64,
    pub store_errors: u64,
    /// Counted as spent at start: what this node's name left in leases before (a crash).
    pub recovered_micros: u64,
    /// Given back to the store, unused.
    pub given_back_micros: u64,
}

/// A node running for one verb, and a handle on its store to read it at the end.
pub(super) struct StoreRun {
    node: Node,
    reader: Arc<dyn LedgerStore>,
    options: StoreOptions,
}

impl StoreRun {
    /// Opens the store twice (the node's handle and a reader) and starts the node.
    pub(super) fn start(engine: &Arc<Engine>, options: &StoreOptions) -> anyhow::Result<StoreRun> {
        // One store, two handles: the node's and a reader's (for `memory`, the same store).
        let reader: Arc<dyn LedgerStore> = Arc::from(store::open(&options.url)?);
        let config = NodeConfig { flush_ms: options.flush_ms, ..NodeConfig::new(&options.node) };
        let node = Node::start(Arc::clone(engine), Box::new(Arc::clone(&reader)), config)?;
        Ok(StoreRun { node, reader, options: options.clone() })
    }

    /// The node (to approve held calls through the store).
    pub(super) fn node(&self) -> &Node {
        &self.node
    }

    /// Drains the node (flush, give back) and reads what the store counts as spent on
    /// the mandates it holds (every mandate when `mandate` is `None`).
    pub(super) fn finish(
        self,
        allowed: u64,
        mandate: Option<&str>,
    ) -> anyhow::Result<(StoreReport, NodeStats, Vec<MandateStatus>)> {
        let stats = self.node.drain()?;
        let statuses = self.reader.status(mandate)?;
        #[allow(clippy::cast_precision_loss)]
        let per_1000 = if allowed == 0 { 0.0 } else { stats.round_trips as f64 * 1000.0 / allowed as f64 };
        let report = StoreReport {
            kind: self.options.kind(),
            node: self.options.node,
            round_trips: stats.round_trips,
            round_trips_per_1000_admissions: (per_1000 * 1000.0).round() / 1000.0,
            grants: stats.grants,
            flushes: stats.flushes,
            store_errors: stats.store_errors,
            recovered_micros: stats.recovered_micros,
            given_back_micros: stats.given_back_micros,
        };
        Ok((report, stats, statuses))
    }
}
