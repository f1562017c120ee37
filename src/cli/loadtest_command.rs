//! `holon loadtest`: its flags, and the command that runs the load ([`loadtest::run`]) and
//! prints its report ([`load_report::print`]).

use std::time::Duration;

use holon::money::Amount;

use super::exit;
use super::flags::{
    flush_ms, loadtest_agents, loadtest_calls, loadtest_duration_s, loadtest_mandates, loadtest_publish_every_ms,
    loadtest_sub_mandates, loadtest_threads, loadtest_time_every,
};
use super::node::{self, StoreOptions};
use super::style::Style;
use super::{load_report, loadtest};

/// `holon loadtest`'s flags (clap reads them; [`command`] turns them into [`loadtest::Options`]).
#[derive(clap::Args)]
pub(super) struct LoadtestArgs {
    /// Threads, 1 to 256.
    #[arg(long, default_value_t = 2, value_parser = loadtest_threads, allow_negative_numbers = true)]
    threads: usize,
    /// Mandates, 1 to 1,000,000.
    #[arg(long, default_value_t = 1_000, value_parser = loadtest_mandates, allow_negative_numbers = true)]
    mandates: usize,
    /// Agents, 10 to 1,000,000.
    #[arg(long, default_value_t = 1_000, value_parser = loadtest_agents, allow_negative_numbers = true)]
    agents: usize,
    /// Run this long, 0.01 to 86400 s (default 3 s unless --calls is given).
    #[arg(
        long,
        visible_alias = "seconds",
        conflicts_with = "calls",
        value_parser = loadtest_duration_s,
        allow_negative_numbers = true
    )]
    duration_s: Option<f64>,
    /// Run this many calls in all, 1 to 10,000,000,000.
    #[arg(long, value_parser = loadtest_calls, allow_negative_numbers = true)]
    calls: Option<u64>,
    /// All threads on one mandate whose budget runs out (5.00 unless --total is given).
    #[arg(long)]
    hot: bool,
    /// Every mandate's total budget, a decimal amount (e.g. 1000000 to keep a hot
    /// mandate's calls allowed for the whole run and measure its throughput).
    #[arg(long, value_name = "AMOUNT", value_parser = super::flags::money, allow_negative_numbers = true)]
    total: Option<Amount>,
    /// With --hot: each thread stops once the hot mandate's budget is spent (a leaf
    /// call, the smallest, denied `total_exceeded` or `per_day_exceeded`), --duration-s
    /// bounding the run (the run waits for the event, not for a window).
    #[arg(long, requires = "hot")]
    until_exhausted: bool,
    /// With --hot: this many sub-mandates of the hot mandate (`m0/c0`, …, each with its
    /// total), 0 to 16; the calls go round the hot mandate and its sub-mandates, so the
    /// hot budget is shared by the parent's own calls and its children's.
    #[arg(long, default_value_t = 0, requires = "hot", value_parser = loadtest_sub_mandates)]
    sub_mandates: usize,
    /// Only allowed calls (leaf agents), to measure the allowed path alone.
    #[arg(long)]
    allowed_only: bool,
    /// Publish a fresh snapshot this often during the run, 0 (never) to 10000 ms.
    #[arg(long, default_value_t = 0, value_parser = loadtest_publish_every_ms, allow_negative_numbers = true)]
    publish_every_ms: u64,
    /// Keep the budgets in a ledger store shared with other nodes: `memory`,
    /// `sqlite:PATH` or `postgres://USER@HOST:PORT/DB` (default: in this process only).
    #[arg(long, value_parser = super::flags::store_url)]
    store: Option<String>,
    /// This node's name in the store, unique among the nodes running at once
    /// (default: loadtest-PID). A restarted node counts what its name left in leases.
    #[arg(long, requires = "store", value_parser = super::flags::node_name)]
    node: Option<String>,
    /// Flush what calls settled to the store at least this often, 1 to 60000 ms.
    #[arg(long, default_value_t = 200, value_parser = flush_ms, requires = "store", allow_negative_numbers = true)]
    flush_ms: u64,
    /// Print {"threads","calls","ops_per_sec","latency_ns":{"p50","p99","p999"},"decisions":{..},"overrun","mandates_audited",..}
    /// and with --store also "store":{"kind","round_trips","round_trips_per_1000_admissions",..},
    /// "settled_micros" and "store_spent_micros".
    #[arg(long)]
    json: bool,
    /// Write every receipt to FILE as a JSON line (with the agent's version, currency,
    /// payer, caller and the synthetic outcome and latency): what `holon records build`
    /// reads. No receipt is dropped: the calls wait for the writer, so the run is slower.
    #[arg(long)]
    receipts: Option<std::path::PathBuf>,
    /// Time one call in this many, 1 to 1048576 (1: every call, the timer's own cost in
    /// every figure); throughput is always the whole run's.
    #[arg(long, default_value_t = super::loadtest::TIME_EVERY_DEFAULT, value_parser = loadtest_time_every, allow_negative_numbers = true)]
    time_every: u64,
}

/// `holon loadtest`: the run with these flags, its report printed; exit 1 on an overrun.
pub(super) fn command(a: LoadtestArgs, style: &Style) -> anyhow::Result<u8> {
    let total = a.total;
    let duration = match (a.duration_s, a.calls) {
        // In range and finite (clap checked it with `loadtest_duration_s`).
        (Some(s), _) => Some(Duration::from_secs_f64(s)),
        (None, None) => Some(Duration::from_secs(3)),
        (None, Some(_)) => None,
    };
    let opts = loadtest::Options {
        threads: a.threads,
        mandates: a.mandates,
        agents: a.agents,
        duration,
        calls: a.calls,
        hot: a.hot,
        total,
        until_exhausted: a.until_exhausted,
        sub_mandates: a.sub_mandates,
        allowed_only: a.allowed_only,
        publish_every_ms: a.publish_every_ms,
        progress: !a.json && loadtest::progress_wanted(),
        store: a.store.map(|url| StoreOptions {
            url,
            node: a.node.unwrap_or_else(|| node::default_node("loadtest")),
            flush_ms: a.flush_ms,
        }),
        receipts: a.receipts,
        receipts_append: false,
        time_every: a.time_every,
    };
    let report = loadtest::run(&opts)?;
    load_report::print(&report, a.json, style)?;
    Ok(if report.overrun { exit::FAILED } else { exit::OK })
}
