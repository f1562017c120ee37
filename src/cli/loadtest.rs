//! `holon loadtest`: hammer the engine from N threads over a synthetic network with a mix
//! of allowed, held, denied and delegated calls, and audit every mandate's budget.
//!
//! Latency is timed per call (admit, plus settle or sub-call or refusal) with `Instant`,
//! which itself costs ~20-40 ns per call on this kind of machine: the percentiles include
//! it. Throughput is calls over wall time.

use std::io::IsTerminal;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use holon::admission::Code;
use holon::engine::receipt::ReceiptReceiver;
use holon::engine::synthetic::{self, Kind};
use holon::engine::{Admission, BatchSink, Call, Engine, EngineConfig, ReceiptSink, SnapshotInput, SubCall, receipt};
use holon::money::Amount;
use serde::Serialize;

use super::node::{StoreOptions, StoreReport, StoreRun};

/// Most threads, mandates and agents a load test may ask for.
pub(crate) const THREADS_MAX: usize = 256;
pub(crate) const MANDATES_MAX: usize = 1_000_000;
pub(crate) const AGENTS_MAX: usize = 1_000_000;
/// Most (thread, mandate) audit slots: each thread keeps the largest amount it saw per
/// mandate, 8 bytes each, so this bounds that memory to 128 MB.
pub(super) const AUDIT_SLOTS_MAX: usize = 16_000_000;
/// What every allowed call settles, and every allowed sub-call, in micro-units of the
/// synthetic mandates' currency.
pub(super) const CALL_CHARGE_MICROS: u64 = 1_000;
pub(super) const SUB_CALL_CHARGE_MICROS: u64 = 500;
/// How long a thread told `lease_pending` waits before its next call, in microseconds (a
/// gateway waits for the refill; a thread spinning on it takes the node's CPU).
pub(super) const LEASE_WAIT_US: u64 = 50;

#[derive(Debug, Clone)]
pub(super) struct Options {
    pub threads: usize,
    pub mandates: usize,
    pub agents: usize,
    pub duration: Option<Duration>,
    pub calls: Option<u64>,
    pub hot: bool,
    /// With `hot`: each thread stops once the hot mandate's budget is spent (a leaf call,
    /// the smallest, denied `total_exceeded` or `per_day_exceeded`); `duration` bounds the
    /// run.
    pub until_exhausted: bool,
    /// With `hot`: sub-mandates of `m0` (`m0/c{i}`) the calls also go under.
    pub sub_mandates: usize,
    /// Every mandate's total (default: 5.00 when hot, so it runs out; else unlimited).
    pub total: Option<Amount>,
    /// Only calls that are allowed (leaf agents): the allowed path's latency.
    pub allowed_only: bool,
    /// Publish a fresh snapshot this often while loading (0: never).
    pub publish_every_ms: u64,
    pub progress: bool,
    /// Budgets in a ledger store, drawn in leases by a node (`--store`, `--node`).
    pub store: Option<StoreOptions>,
    /// Write every receipt here as a JSON line, losing none (`--receipts`).
    pub receipts: Option<std::path::PathBuf>,
    /// Append to the receipts file instead of starting it afresh (the demo's second run).
    pub receipts_append: bool,
    /// Time one call in this many (1: every call). The timer (two clock reads and a
    /// histogram record, 20-40 ns) would otherwise be part of every figure; throughput is
    /// always the whole run's calls over its wall time.
    pub time_every: u64,
}

/// Receipts the load test's sink holds (18.9 MB): at 12 million receipts a second, 21 ms
/// of calls, longer than the drain thread waits for a core when two callers hold both.
const LOAD_RECEIPTS_MAX: usize = 1 << 18;

/// `--time-every`: the default and the largest sampling interval.
pub(crate) const TIME_EVERY_DEFAULT: u64 = 64;
pub(crate) const TIME_EVERY_MAX: u64 = 1 << 20;

#[derive(Debug, Clone, Serialize)]
pub(super) struct Latency {
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    /// One call in this many was timed (`--time-every`), and how many were.
    pub one_in: u64,
    pub timed: u64,
    /// The timer alone, timed the same way around nothing (median of
    /// `TIMER_FLOOR_SAMPLES`, measured before the run): the part of every figure above
    /// that is the clock, not the engine.
    pub timer_floor: u64,
    /// The same figures for each kind of call in the mix that was timed (what a
    /// percentile of the whole mix comes from).
    pub by_kind: Vec<KindLatency>,
}

/// One kind of call's timed percentiles (ns).
#[derive(Debug, Clone, Serialize)]
pub(super) struct KindLatency {
    pub kind: &'static str,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub timed: u64,
}

/// The kinds of call in the mix, named in the order of `kind_slot`.
const KINDS: [&str; 4] = ["leaf", "orchestrator", "held", "denied"];

/// Where a kind's histogram is in `Worker::hist`.
fn kind_slot(kind: Kind) -> usize {
    match kind {
        Kind::Leaf => 0,
        Kind::Orchestrator => 1,
        Kind::Held => 2,
        Kind::Denied => 3,
    }
}

/// Empty intervals timed for `Latency::timer_floor`.
const TIMER_FLOOR_SAMPLES: usize = 10_001;

#[derive(Debug, Clone, Serialize)]
pub(super) struct Decisions {
    pub allowed: u64,
    pub held: u64,
    /// Every denial, those for want of a lease (`lease_pending`) included.
    pub denied: u64,
    /// Of `denied`, the calls told `lease_pending` (a refill on its way: a gateway waits
    /// and asks again, as these threads do).
    pub lease_pending: u64,
    /// Of `denied`, the leaf calls (the smallest) denied for the budget (`total_exceeded`,
    /// `per_day_exceeded`): it is spent.
    pub budget: u64,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct Report {
    pub threads: usize,
    pub calls: u64,
    pub ops_per_sec: u64,
    pub latency_ns: Latency,
    pub decisions: Decisions,
    /// Calls inside delegated runs (counted in `decisions` too).
    pub sub_calls: u64,
    pub overrun: bool,
    pub mandates_audited: usize,
    /// The largest claimed amount (reserved + settled + leased, an upper bound of what is
    /// reserved and settled) observed on any mandate, and that mandate's limit. Its JSON
    /// name, `max_used_micros`, is kept for the readers of the report.
    #[serde(rename = "max_used_micros")]
    pub max_claimed_micros: u64,
    pub limit_micros: u64,
    pub publishes: u64,
    pub receipts: u64,
    pub receipts_dropped: u64,
    pub elapsed_ms: u64,
    /// With `--store`: the store's kind and round trips.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreReport>,
    /// With `--store`: everything this process settled and flushed to the store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled_micros: Option<u64>,
    /// With `--store`: what the store counts as spent at the end (every node's, on the
    /// mandates of this run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_spent_micros: Option<u64>,
    /// With `--hot`: what this process had settled on the hot mandate (its own view of the
    /// store's spent, exact for a single node) when a call was first denied for the budget,
    /// and whether every thread stopped so (`--until-exhausted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled_at_first_budget_denial_micros: Option<u64>,
    pub exhausted: bool,
    /// The currency of every amount in the report (the synthetic mandates').
    pub currency: &'static str,
    /// What the calls were, in words (`load_report::mix`).
    pub mix: String,
    /// Where the receipts were written (`--receipts`); without it they are counted only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipts_file: Option<String>,
}

struct Worker {
    /// Timed calls, one histogram per kind of call (`KINDS`).
    hist: [Histogram<u64>; 4],
    /// Calls before the next timed one: counts down (no division per call) from a gap drawn
    /// at random with mean `time_every`, so the timed calls fall on every position of the
    /// call mix's cycle (a fixed 64 would time only the even ones of a cycle of 10).
    until_timed: u64,
    /// xorshift64 state for those gaps (seeded per thread; never zero).
    gap_seed: u64,
    decisions: [u64; 3],
    /// Denials for want of a lease, and for the budget.
    lease_pending: u64,
    budget: u64,
    /// The hot mandate's settled amount (this process's) at this thread's first denial for
    /// the budget, and whether it stopped then.
    settled_at_budget_denial: Option<u64>,
    exhausted: bool,
    sub_calls: u64,
    calls: u64,
    /// Max observed claimed per mandate.
    max_claimed: Vec<u64>,
}

/// Runs a load test. Errors only on impossible options.
pub(super) fn run(opts: &Options) -> anyhow::Result<Report> {
    check(opts)?;
    // A hot mandate's budget runs out during the test: about 5,000 leaf calls.
    let default = if opts.hot { Amount::from_micros(5_000_000) } else { Amount::from_micros(10_000_000_000_000) };
    let total = opts.total.unwrap_or(default);
    let (net, engine, rx) = synthetic_engine(opts, total)?;
    let receipts_out = receipts_file(opts)?;
    let store = opts.store.as_ref().map(|o| StoreRun::start(&engine, o)).transpose()?;
    let (mandates, agents) = indices(&engine, opts)?;
    let ledgers: Vec<_> = mandates.iter().filter_map(|m| engine.ledger_view(*m)).collect();
    let drained = drain_receipts(rx, receipts_out, engine.names(), engine.snapshot());

    let stop = AtomicBool::new(false);
    let signalled = on_signals()?;
    let done_calls = AtomicU64::new(0);
    let publishes = AtomicU64::new(0);
    let per_thread = opts.calls.map(|c| c.div_ceil(opts.threads as u64));
    let timer_floor = timer_floor_ns();
    let start = Instant::now();
    let hists = (0..opts.threads).map(|_| kind_histograms()).collect::<Result<Vec<_>, _>>()?;
    let workers: Vec<Worker> = std::thread::scope(|s| {
        let handles: Vec<_> = hists
            .into_iter()
            .enumerate()
            .map(|(t, hist)| {
                let (engine, mandates, ledgers, agents) = (&*engine, &mandates, &ledgers, &agents);
                let (stop, done_calls, at) = (&stop, &done_calls, net.at);
                s.spawn(move || {
                    work(engine, mandates, ledgers, agents, t, opts, per_thread, at, stop, done_calls, hist)
                })
            })
            .collect();
        if opts.publish_every_ms > 0 {
            let (engine, input, stop, publishes) = (&*engine, &net.input, &stop, &publishes);
            s.spawn(move || republish(engine, input, opts.publish_every_ms, stop, publishes));
        }
        watch(handles, opts, start, (&stop, &signalled, &done_calls))
    });
    let elapsed = start.elapsed();
    let receipts_dropped = engine.stats().receipts_dropped;
    let limit = total.micros();
    let Totals { hist, kinds, decisions, sub_calls, calls, lease_pending, budget, max_claimed } =
        totals(&workers, &ledgers, opts.mandates)?;
    let first_budget_denial = workers.iter().filter_map(|w| w.settled_at_budget_denial).min();
    let exhausted = opts.until_exhausted && !workers.is_empty() && workers.iter().all(|w| w.exhausted);
    let mut overrun = max_claimed.iter().any(|m| *m > limit);
    let (store, settled_micros, store_spent_micros) = match store {
        None => (None, None, None),
        Some(run) => {
            let (report, settled, spent, over) = finish_store(run, decisions[0], opts.hot, limit)?;
            overrun |= over;
            (Some(report), Some(settled), Some(spent))
        }
    };
    drop(ledgers);
    drop(engine);
    let receipts = match drained.join() {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => anyhow::bail!("writing the receipts: {e}"),
        Err(_) => anyhow::bail!("the receipts writer stopped"),
    };
    let max = max_claimed.iter().copied().max().unwrap_or(0);
    let [allowed, held, denied] = decisions;
    Ok(Report {
        threads: opts.threads,
        calls,
        // A float-to-int `as` saturates: a rate beyond u64 (never reached) reads u64::MAX.
        #[allow(clippy::cast_possible_truncation)]
        ops_per_sec: (calls as f64 / elapsed.as_secs_f64().max(1e-9)) as u64,
        latency_ns: latency(&hist, &kinds, opts.time_every, timer_floor),
        decisions: Decisions { allowed, held, denied, lease_pending, budget },
        sub_calls,
        overrun,
        mandates_audited: max_claimed.len(),
        max_claimed_micros: max,
        limit_micros: limit,
        // Relaxed: read after the scope joined the publisher thread.
        publishes: publishes.load(Ordering::Relaxed),
        receipts,
        receipts_dropped,
        elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        store,
        settled_micros,
        store_spent_micros,
        settled_at_first_budget_denial_micros: first_budget_denial.filter(|_| opts.hot),
        exhausted,
        currency: synthetic::CURRENCY,
        mix: mix(opts.allowed_only, opts.hot),
        receipts_file: opts.receipts.as_ref().map(|p| p.display().to_string()),
    })
}

/// The synthetic network (with the hot mandate's sub-mandates), published on an engine
/// whose receipts go to a sink: lossless with a receipts file (records are built from it:
/// the calls wait for the writer), else one that counts what it drops.
fn synthetic_engine(
    opts: &Options,
    total: Amount,
) -> anyhow::Result<(synthetic::Network, Arc<Engine>, ReceiptReceiver)> {
    let shape = synthetic::Shape { agents: opts.agents, mandates: opts.mandates, total };
    let mut net = synthetic::network(&shape)?;
    let root = net.input.mandates.first().cloned();
    for (c, parent) in (0..opts.sub_mandates).filter_map(|c| Some((c, root.as_ref()?))) {
        net.input.mandates.push(Arc::new(synthetic::sub_mandate(parent, &format!("m0/c{c}"), total)?));
    }
    // Batched (engine::batch): the callers hand receipts over 64 at a time, and the drain
    // reads whole batches; it kept up where a channel slot per receipt did not.
    let (sink, rx) = match &opts.receipts {
        Some(_) => BatchSink::lossless(LOAD_RECEIPTS_MAX),
        None => BatchSink::new(LOAD_RECEIPTS_MAX),
    };
    let sink: Arc<dyn ReceiptSink> = Arc::new(sink);
    let config = EngineConfig { store_backed: opts.store.is_some(), ..EngineConfig::default() };
    let engine = Arc::new(Engine::with_sink(config, sink));
    engine.publish(&net.input)?;
    Ok((net, engine, rx))
}

/// The `--receipts` file, opened for this run (appended to, or started afresh).
fn receipts_file(opts: &Options) -> anyhow::Result<Option<std::io::BufWriter<std::fs::File>>> {
    Ok(match &opts.receipts {
        Some(path) => {
            let mut options = std::fs::OpenOptions::new();
            options.create(true);
            if opts.receipts_append {
                options.append(true)
            } else {
                options.write(true).truncate(true)
            };
            let file = options.open(path).map_err(|e| anyhow::anyhow!("--receipts {}: {e}", path.display()))?;
            Some(std::io::BufWriter::new(file))
        }
        None => None,
    })
}

/// The thread that drains the receipts: into the file if there is one (each line with its
/// facts: names, version, currency), else counted only. It returns how many it drained.
fn drain_receipts(
    rx: ReceiptReceiver,
    out: Option<std::io::BufWriter<std::fs::File>>,
    names: Arc<holon::engine::Names>,
    snapshot: Arc<holon::engine::Snapshot>,
) -> std::thread::JoinHandle<std::io::Result<u64>> {
    std::thread::spawn(move || match out {
        None => receipt::drain(&rx, |_| Ok::<_, std::io::Error>(()), || Ok(())),
        Some(out) => {
            let out = std::cell::RefCell::new(out);
            receipt::drain(
                &rx,
                |r| {
                    let line = receipt::receipt_json_with_facts(r, &names, &snapshot);
                    writeln!(out.borrow_mut(), "{line}")
                },
                || out.borrow_mut().flush(),
            )
        }
    })
}

/// A bar on a terminal only (`progress`), hidden when piped or under --json: the run's
/// length is its calls, or its seconds.
fn progress_bar(opts: &Options) -> indicatif::ProgressBar {
    let bar = match (opts.progress, opts.calls, opts.duration) {
        (false, _, _) => indicatif::ProgressBar::hidden(),
        (true, Some(calls), _) => indicatif::ProgressBar::new(calls),
        (true, None, Some(d)) => indicatif::ProgressBar::new(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        (true, None, None) => indicatif::ProgressBar::new_spinner(),
    };
    let template = if opts.calls.is_some() {
        "  {bar:30} {pos}/{len} calls  {elapsed}"
    } else {
        "  {bar:30} {elapsed} of the run  {msg}"
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}

/// What the workers counted, summed, and the most each mandate's ledger held.
struct Totals {
    hist: Histogram<u64>,
    kinds: [Histogram<u64>; 4],
    decisions: [u64; 3],
    sub_calls: u64,
    calls: u64,
    lease_pending: u64,
    budget: u64,
    max_claimed: Vec<u64>,
}

/// The workers' counts summed; each mandate's most claimed is the largest any worker saw
/// or the ledger holds now (read once more after the threads stopped).
fn totals(workers: &[Worker], ledgers: &[holon::engine::LedgerView], mandates: usize) -> anyhow::Result<Totals> {
    let mut t = Totals {
        hist: new_histogram()?,
        kinds: kind_histograms()?,
        decisions: [0; 3],
        sub_calls: 0,
        calls: 0,
        lease_pending: 0,
        budget: 0,
        max_claimed: vec![0; mandates],
    };
    for w in workers {
        for (kind, h) in t.kinds.iter_mut().zip(&w.hist) {
            t.hist.add(h)?;
            kind.add(h)?;
        }
        for (d, x) in t.decisions.iter_mut().zip(w.decisions) {
            *d += x;
        }
        t.sub_calls += w.sub_calls;
        t.calls += w.calls;
        t.lease_pending += w.lease_pending;
        t.budget += w.budget;
        for (m, x) in t.max_claimed.iter_mut().zip(&w.max_claimed) {
            *m = (*m).max(*x);
        }
    }
    for (m, ledger) in t.max_claimed.iter_mut().zip(ledgers) {
        *m = (*m).max(ledger.used_micros());
    }
    Ok(t)
}

/// Waits for the workers, with a progress bar, until the run's time or calls are done (or
/// SIGTERM/SIGINT came), then stops them and collects their counts.
fn watch(
    handles: Vec<std::thread::ScopedJoinHandle<'_, Worker>>,
    opts: &Options,
    start: Instant,
    (stop, signalled, done_calls): (&AtomicBool, &AtomicBool, &AtomicU64),
) -> Vec<Worker> {
    let bar = progress_bar(opts);
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let finished = handles.iter().all(|h| h.is_finished());
        // Relaxed: a stop request only.
        let signalled = signalled.load(Ordering::Relaxed);
        if opts.duration.is_some_and(|d| start.elapsed() >= d) || finished || signalled {
            // Relaxed: a stop request only; the workers' results come back by join.
            stop.store(true, Ordering::Relaxed);
            break;
        }
        // Relaxed: a progress figure, allowed to lag.
        let calls = done_calls.load(Ordering::Relaxed);
        if opts.calls.is_some() {
            bar.set_position(calls);
        } else {
            bar.set_position(u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX));
            bar.set_message(format!("{calls} calls"));
        }
    }
    let workers = handles.into_iter().filter_map(|h| h.join().ok()).collect();
    bar.finish_and_clear();
    workers
}

/// Publishes the same documents every `every_ms` until `stop`, counting the publishes: the
/// calls meet snapshot swaps while they run.
fn republish(engine: &Engine, input: &SnapshotInput, every_ms: u64, stop: &AtomicBool, publishes: &AtomicU64) {
    // Relaxed: the stop flag publishes no data (the scope's join does), and the publish
    // count is a statistic read after that join.
    while !stop.load(Ordering::Relaxed) {
        if engine.publish(input).is_ok() {
            // Relaxed: as above.
            publishes.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(every_ms));
    }
}

/// The flags' ranges that clap cannot check alone.
fn check(opts: &Options) -> anyhow::Result<()> {
    anyhow::ensure!((1..=THREADS_MAX).contains(&opts.threads), "--threads must be 1 to {THREADS_MAX}");
    anyhow::ensure!((1..=MANDATES_MAX).contains(&opts.mandates), "--mandates must be 1 to {MANDATES_MAX}");
    anyhow::ensure!((10..=AGENTS_MAX).contains(&opts.agents), "--agents must be 10 to {AGENTS_MAX}");
    anyhow::ensure!(
        opts.threads.saturating_mul(opts.mandates) <= AUDIT_SLOTS_MAX,
        "--threads times --mandates must be at most {AUDIT_SLOTS_MAX} (each thread audits every mandate); lower one of them"
    );
    anyhow::ensure!((1..=TIME_EVERY_MAX).contains(&opts.time_every), "--time-every must be 1 to {TIME_EVERY_MAX}");
    Ok(())
}

/// The node's end: it drains (flushes and gives back), and the store says what every node
/// spent on these mandates: (the node's report, what it settled, the store's spend, whether
/// any mandate's spend in the store is above `limit_micros`).
fn finish_store(
    run: StoreRun,
    allowed: u64,
    hot: bool,
    limit_micros: u64,
) -> anyhow::Result<(StoreReport, u64, u64, bool)> {
    let (report, stats, statuses) = run.finish(allowed, hot.then_some("m0"))?;
    let over = statuses.iter().any(|s| s.spent_micros > limit_micros);
    let spent = statuses.iter().map(|s| s.spent_micros).sum();
    Ok((report, stats.settled_micros, spent, over))
}

/// The synthetic network's mandates (`m0`…, then the hot mandate's `m0/c0`…) and agents
/// (`syn/a0`…) as the engine numbers them.
fn indices(
    engine: &Engine,
    opts: &Options,
) -> anyhow::Result<(Vec<holon::engine::MandateIx>, Vec<holon::engine::AgentIx>)> {
    let ids = (0..opts.mandates).map(|j| format!("m{j}")).chain((0..opts.sub_mandates).map(|c| format!("m0/c{c}")));
    let mandates: Vec<_> = ids.map(|id| engine.mandate_ix(&id)).collect::<Option<Vec<_>>>().unwrap_or_default();
    let agents: Vec<_> =
        (0..opts.agents).map(|i| engine.agent_ix(&format!("syn/a{i}"))).collect::<Option<Vec<_>>>().unwrap_or_default();
    anyhow::ensure!(
        mandates.len() == opts.mandates + opts.sub_mandates && agents.len() == opts.agents,
        "the synthetic network is incomplete"
    );
    Ok((mandates, agents))
}

/// Nanoseconds from 1 to 60 s, 3 significant digits.
fn kind_histograms() -> Result<[Histogram<u64>; 4], hdrhistogram::CreationError> {
    Ok([new_histogram()?, new_histogram()?, new_histogram()?, new_histogram()?])
}

fn new_histogram() -> Result<Histogram<u64>, hdrhistogram::CreationError> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3)
}

#[allow(clippy::too_many_arguments)]
fn work(
    engine: &Engine,
    mandates: &[holon::engine::MandateIx],
    ledgers: &[holon::engine::LedgerView],
    agents: &[holon::engine::AgentIx],
    t: usize,
    opts: &Options,
    per_thread: Option<u64>,
    at: holon::time::Timestamp,
    stop: &AtomicBool,
    done_calls: &AtomicU64,
    hist: [Histogram<u64>; 4],
) -> Worker {
    let mut w = Worker {
        hist,
        until_timed: 1,
        gap_seed: 0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1),
        decisions: [0; 3],
        lease_pending: 0,
        budget: 0,
        settled_at_budget_denial: None,
        exhausted: false,
        sub_calls: 0,
        calls: 0,
        max_claimed: vec![0; mandates.len()],
    };
    let leaf = agents.get(1).copied();
    // Threads take disjoint mandates unless the test is hot (all on mandate 0).
    let mut m_cursor = t;
    let mut a_cursor = t * 7;
    loop {
        // Relaxed: the stop flag publishes no data; a late look costs at most 1024 calls.
        if per_thread.is_some_and(|n| w.calls >= n) || (w.calls.is_multiple_of(1024) && stop.load(Ordering::Relaxed)) {
            break;
        }
        // Hot: the hot mandate and its sub-mandates in turn (all on `m0`'s budget).
        // (the sub-mandates follow the `opts.mandates` roots in `mandates`).
        let mi = match m_cursor % (1 + opts.sub_mandates) {
            _ if !opts.hot => m_cursor % mandates.len(),
            0 => 0,
            child => opts.mandates + child - 1,
        };
        let ai = a_cursor % agents.len();
        if opts.allowed_only && synthetic::kind_of(ai) != Kind::Leaf {
            a_cursor += 1;
            continue;
        }
        m_cursor += opts.threads;
        a_cursor += 1;
        let (Some(&mandate), Some(&agent)) = (mandates.get(mi), agents.get(ai)) else { break };
        let call = Call::new(mandate, agent, at);
        w.until_timed -= 1;
        let started = (w.until_timed == 0).then(|| {
            w.until_timed = next_gap(&mut w.gap_seed, opts.time_every);
            Instant::now()
        });
        let admission = engine.admit(&call);
        match admission {
            Admission::Allowed(r) => w.allowed(r, (mi, ai), ledgers, leaf, at),
            Admission::Held(p) => {
                w.decisions[1] += 1;
                let _ = engine.refuse(p.id);
            }
            Admission::Denied(d) => {
                if w.denied(&d, (mi, ai), ledgers, opts) {
                    break;
                }
            }
        }
        if let Some(started) = started {
            let ns = u64::try_from(started.elapsed().as_nanos().max(1)).unwrap_or(u64::MAX);
            if let Some(h) = w.hist.get_mut(kind_slot(synthetic::kind_of(ai))) {
                let _ = h.record(ns);
            }
        }
        w.calls += 1;
        if w.calls.is_multiple_of(1024) {
            // Relaxed: a progress figure only.
            done_calls.fetch_add(1024, Ordering::Relaxed);
        }
    }
    w
}

impl Worker {
    /// An allowed call: audited, its sub-call made for an orchestrator, settled.
    #[inline]
    fn allowed(
        &mut self,
        r: holon::engine::Reservation<'_>,
        (mi, ai): (usize, usize),
        ledgers: &[holon::engine::LedgerView],
        leaf: Option<holon::engine::AgentIx>,
        at: holon::time::Timestamp,
    ) {
        self.decisions[0] += 1;
        // The audit, right after our reservation: the claimed word (reserved + settled +
        // leased), an upper bound of reserved + settled and the word the limit is enforced
        // on. One load (the exact figure would read every lease shard, pulling the other
        // threads' lines into this core).
        if let (Some(ledger), Some(slot)) = (ledgers.get(mi), self.max_claimed.get_mut(mi)) {
            *slot = (*slot).max(ledger.used_micros());
        }
        if synthetic::kind_of(ai) == Kind::Orchestrator
            && let Some(leaf) = leaf
        {
            let sub = SubCall { agent: leaf, capability: Some("syn.leaf"), at };
            self.sub_calls += 1;
            match r.sub_call(&sub) {
                Admission::Allowed(child) => {
                    self.decisions[0] += 1;
                    let report = synthetic::report(1, self.calls);
                    let _ = child.settle_reported(Amount::from_micros(SUB_CALL_CHARGE_MICROS), at, report);
                }
                Admission::Held(_) => self.decisions[1] += 1,
                Admission::Denied(_) => self.decisions[2] += 1,
            }
        }
        let _ = r.settle_reported(Amount::from_micros(CALL_CHARGE_MICROS), at, synthetic::report(ai, self.calls));
    }

    /// A denied call, counted by why; true when the worker stops (`--until-exhausted` and
    /// the budget spent).
    #[inline]
    fn denied(
        &mut self,
        d: &holon::engine::Denial,
        (mi, ai): (usize, usize),
        ledgers: &[holon::engine::LedgerView],
        opts: &Options,
    ) -> bool {
        self.decisions[2] += 1;
        if d.codes.contains(Code::LeasePending) {
            self.lease_pending += 1;
            // A gateway waits for the refill; spinning would take the node's CPU.
            std::thread::sleep(Duration::from_micros(LEASE_WAIT_US));
        } else if (d.codes.contains(Code::TotalExceeded) || d.codes.contains(Code::PerDayExceeded))
            && synthetic::kind_of(ai) == Kind::Leaf
        {
            // The smallest call (a leaf's 0.001) denied for the budget: it is spent. A larger
            // call denied so (0.90 with 0.89 left) is only too large for it.
            self.budget += 1;
            let settled = ledgers.get(mi).map_or(0, |l| l.settled_micros());
            self.settled_at_budget_denial.get_or_insert(settled);
            if opts.until_exhausted {
                self.exhausted = true;
                return true;
            }
        }
        false
    }
}

pub(super) fn progress_wanted() -> bool {
    std::io::stderr().is_terminal()
}

/// The calls a load test makes, in words, from the synthetic network's own figures.
pub(super) fn mix(allowed_only: bool, hot: bool) -> String {
    let cur = synthetic::CURRENCY;
    let call = Amount::from_micros(CALL_CHARGE_MICROS);
    let sub = Amount::from_micros(SUB_CALL_CHARGE_MICROS);
    let mut mix = if allowed_only {
        format!("leaf agents only, every call allowed and settled at {call} {cur}")
    } else {
        format!(
            "agents in turn, of every 10: 7 leaves (allowed), 1 orchestrator (allowed, opening a delegated run with one sub-call), 1 priced {} {cur}, above the {} {cur} approval threshold (held, then refused), 1 that trains on data (denied); an allowed call settles {call} {cur}, a sub-call {sub} {cur}",
            synthetic::HELD_PRICE,
            synthetic::APPROVAL_ABOVE,
        )
    };
    if hot {
        mix.push_str("; every thread on one mandate, so once its budget is claimed, the calls that would have been allowed are denied");
    }
    mix
}

/// SIGTERM or SIGINT ends the run early and cleanly: the workers stop, the node drains
/// (flushes and gives back) and the report is printed. The flag says a signal came.
fn on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    let signalled = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&signalled))?;
    }
    Ok(signalled)
}

/// The timed calls' percentiles, with how they were timed.
fn latency(hist: &Histogram<u64>, kinds: &[Histogram<u64>; 4], one_in: u64, timer_floor: u64) -> Latency {
    let by_kind = KINDS
        .iter()
        .zip(kinds)
        .filter(|(_, h)| !h.is_empty())
        .map(|(kind, h)| KindLatency {
            kind,
            p50: h.value_at_quantile(0.50),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            timed: h.len(),
        })
        .collect();
    Latency {
        p50: hist.value_at_quantile(0.50),
        p99: hist.value_at_quantile(0.99),
        p999: hist.value_at_quantile(0.999),
        one_in,
        timed: hist.len(),
        timer_floor,
        by_kind,
    }
}

/// The median of `TIMER_FLOOR_SAMPLES` empty intervals timed as a call is (ns).
fn timer_floor_ns() -> u64 {
    let mut samples: Vec<u64> = (0..TIMER_FLOOR_SAMPLES)
        .map(|_| {
            let started = Instant::now();
            u64::try_from(std::hint::black_box(started).elapsed().as_nanos()).unwrap_or(u64::MAX)
        })
        .collect();
    samples.sort_unstable();
    samples.get(TIMER_FLOOR_SAMPLES / 2).copied().unwrap_or(0)
}

/// The number of calls until the next timed one: uniform in 1..=2n-1 (mean n), exactly 1
/// when n is 1 (every call timed). `seed` is an xorshift64 state, never zero.
fn next_gap(seed: &mut u64, n: u64) -> u64 {
    let mut x = *seed;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *seed = x;
    1 + x % (2 * n - 1)
}

#[cfg(test)]
mod tests {
    use super::next_gap;

    /// The timed calls fall on every position of the mix's cycle of 10 (a fixed gap of 64
    /// would reach only the even ones), about one in n, and every call when n is 1.
    #[test]
    fn sampled_calls_reach_every_position_of_the_mix() {
        let mut seed = 0x9E37_79B9_7F4A_7C15 ^ 1;
        let (mut at, mut seen, mut timed) = (0u64, [0u32; 10], 0u64);
        while at < 1_000_000 {
            at += next_gap(&mut seed, 64);
            seen[(at % 10) as usize] += 1;
            timed += 1;
        }
        assert!(seen.iter().all(|&n| n > 1_000), "{seen:?}");
        assert!((1_000_000 / 64 * 9 / 10..=1_000_000 / 64 * 11 / 10).contains(&timed), "{timed}");
        assert!((0..100).all(|_| next_gap(&mut seed, 1) == 1));
    }
}
