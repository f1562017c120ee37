//! `holon demo`: the product's main job on the bundled examples, for a newcomer.
//! 1. validates every document under `examples/`;
//! 2. replays the worked example of delegation (docs/rulings.md) through the engine (compiled
//!    snapshot, atomic ledger, approval, delegated run, receipts), not only the pure logic;
//! 3. runs a short load test on distinct mandates and one on a single hot mandate, with
//!    the budget audit.
//!
//! Budgets live in a ledger store (`--store`; by default a fresh SQLite file in a temporary
//! directory, so every run starts from the same state): the worked example runs on a
//! store-backed engine supplied by a node, then shows a restart resuming from the store.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use holon::admission::{Code, Verdict};
use holon::doc::{self, Limits};
use holon::documents;
use holon::engine::{Admission, Call, ChannelSink, Engine, EngineConfig, Receipt, SnapshotInput, SubCall};
use holon::money::Amount;
use holon::scenario;

use super::exit;
use super::loadtest;
use super::node::{StoreOptions, StoreRun};
use super::out::outln;
use super::style::Style;

/// Where the demo keeps its budgets: the `--store` given, or a fresh SQLite file in a
/// temporary directory that is removed at the end.
struct DemoStore {
    url: String,
    node: String,
    temp_dir: Option<std::path::PathBuf>,
}

impl DemoStore {
    fn new(store: Option<String>, node: Option<String>) -> anyhow::Result<DemoStore> {
        let node = node.unwrap_or_else(|| super::node::default_node("demo"));
        if let Some(url) = store {
            return Ok(DemoStore { url, node, temp_dir: None });
        }
        let dir = std::env::temp_dir().join(format!("holon-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let url = format!("sqlite:{}", dir.join("ledger.db").display());
        Ok(DemoStore { url, node, temp_dir: Some(dir) })
    }

    fn options(&self, suffix: &str) -> StoreOptions {
        StoreOptions { url: self.url.clone(), node: format!("{}{suffix}", self.node), flush_ms: 200 }
    }
}

impl DemoStore {
    /// What the report calls the store: the temporary SQLite file, or the URL given.
    fn kind(&self) -> String {
        if self.temp_dir.is_some() { "a fresh SQLite file".to_owned() } else { self.url.clone() }
    }
}

impl Drop for DemoStore {
    fn drop(&mut self) {
        if let Some(dir) = &self.temp_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

pub(crate) struct DemoArgs<'a> {
    pub examples: &'a Path,
    pub seconds: f64,
    pub revocations: Option<&'a Path>,
    pub receipts: Option<&'a Path>,
}

pub(crate) fn run(
    args: &DemoArgs<'_>,
    store: Option<String>,
    node: Option<String>,
    style: &Style,
) -> anyhow::Result<u8> {
    let (examples, seconds, revocations, receipts) = (args.examples, args.seconds, args.revocations, args.receipts);
    // Started afresh: the worked example and both loads append to it.
    if let Some(path) = receipts {
        std::fs::File::create(path).map_err(|e| anyhow::anyhow!("--receipts {}: {e}", path.display()))?;
    }
    if !examples.join("worked-example/scenario.yaml").is_file() {
        anyhow::bail!(
            "no bundled examples at `{}` (the demo needs its worked-example/scenario.yaml): run `holon demo` from the repository's root, or pass `--examples DIR` with the repository's examples directory",
            examples.display()
        );
    }
    let store = DemoStore::new(store, node)?;
    let mut ok = validate_all(examples, style)?;
    let revocations = revocations.map(documents::load_revocations).transpose()?.unwrap_or_default();
    ok &= worked_example(examples, &store, &revocations, receipts, style)?;
    ok &= super::demo_chain::run(examples, style)?;
    // The flag is checked by clap; this guards callers of `run` (NaN would panic below).
    let (min, max) = (super::range::DEMO_LOAD_S_MIN, super::range::DEMO_LOAD_S_MAX);
    anyhow::ensure!((min..=max).contains(&seconds), "--seconds must be a finite number from {min} to {max}");
    let duration = Duration::try_from_secs_f64(seconds)?;
    let progress = loadtest::progress_wanted();
    for (title, opts) in [
        (
            "4. load: 2 threads on distinct mandates (1,000 mandates, 1,000 agents; budgets in memory)",
            loadtest::Options {
                total: None,
                threads: 2,
                mandates: 1_000,
                agents: 1_000,
                duration: Some(duration),
                calls: None,
                hot: false,
                until_exhausted: false,
                sub_mandates: 0,
                allowed_only: false,
                publish_every_ms: 0,
                progress,
                // The engine alone: budgets in this process (the hot run below uses the store).
                store: None,
                receipts: receipts.map(Path::to_path_buf),
                receipts_append: true,
                time_every: loadtest::TIME_EVERY_DEFAULT,
            },
        ),
        (
            "5. load: 2 threads on one hot mandate whose budget runs out (budget in the store, drawn in leases)",
            loadtest::Options {
                total: None,
                threads: 2,
                mandates: 1,
                agents: 100,
                // Until its budget is spent (a generous bound, waited for as an event): a
                // window cut short on a loaded machine left most of it unspent.
                duration: Some(Duration::from_secs(HOT_RUN_S_MAX)),
                calls: None,
                hot: true,
                until_exhausted: true,
                sub_mandates: 0,
                allowed_only: false,
                publish_every_ms: 0,
                progress,
                store: Some(store.options("-hot")),
                receipts: receipts.map(Path::to_path_buf),
                receipts_append: true,
                time_every: loadtest::TIME_EVERY_DEFAULT,
            },
        ),
    ] {
        outln!("\n{}", style.bold(title))?;
        let report = loadtest::run(&opts)?;
        super::load_report::print(&report, false, style)?;
        ok &= !report.overrun;
        // The hot mandate's budget is spent, to within 1%, before any call is denied for it
        // (a call told `lease_pending` waits for the refill, as a gateway would).
        if opts.until_exhausted {
            let spent = report.settled_at_first_budget_denial_micros.unwrap_or(0);
            ok &= report.exhausted && spent.saturating_mul(100) >= report.limit_micros.saturating_mul(99);
        }
    }
    outln!()?;
    if ok {
        outln!("{}", style.good("demo passed: documents valid, worked example reproduced, no budget overrun"))?;
        Ok(exit::OK)
    } else {
        outln!("{}", style.bad("demo FAILED: see above"))?;
        Ok(exit::FAILED)
    }
}

fn validate_all(examples: &Path, style: &Style) -> anyhow::Result<bool> {
    outln!("{}", style.bold(&format!("1. documents under {}", examples.display())))?;
    let limits = Limits::default();
    let (mut valid, mut total) = (0, 0);
    for path in doc::yaml_files(examples)? {
        total += 1;
        // Every file counts: one that cannot be read is a failure, not someone else's YAML;
        // the scenario is checked as `mandate simulate` loads it.
        let problem = match doc::read_text(&path, &limits).and_then(|t| documents::check_str(&t, &limits)) {
            Ok(checked) => checked.result.err().map(|v| format!("{} problem(s)", v.len())),
            Err(holon::doc::DocError::UnknownKind) => scenario::load(&path, None).err().map(|e| e.to_string()),
            Err(e) => Some(e.to_string()),
        };
        match problem {
            None => valid += 1,
            Some(p) => outln!("  {} {} ({p}; `holon validate` shows each)", style.bad("invalid"), path.display())?,
        }
    }
    outln!("  {valid} of {total} documents valid (manifests, records, mandates, keys, revocations and the scenario)")?;
    Ok(valid == total && total > 0)
}

fn worked_example(
    examples: &Path,
    store: &DemoStore,
    revocations: &holon::trust::Revocations,
    receipts_file: Option<&Path>,
    style: &Style,
) -> anyhow::Result<bool> {
    let scenario_path = examples.join("worked-example/scenario.yaml");
    let (s, mandate, catalog) = scenario::load(&scenario_path, Some(&examples.join("mandates/alice-root.yaml")))
        .with_context(|| format!("loading {}", scenario_path.display()))?;
    outln!(
        "\n{} {}",
        style.bold("2. the worked example through the engine, under"),
        style.bold(&format!("{} ({} {} total)", mandate.id, mandate.budget.total, mandate.budget.currency))
    )?;
    let cur = mandate.budget.currency;
    let revoked = revocations.revoking(&mandate).map(|r| r.reason.clone());
    if let Some(reason) = &revoked {
        outln!("  {} ({reason}): every call is denied mandate_revoked, and nothing is billed", style.bad("revoked"))?;
    }
    let input = SnapshotInput {
        mandates: vec![Arc::new(mandate)],
        agents: catalog
            .entries
            .iter()
            .map(|e| (Arc::new(e.manifest.clone()), e.record.clone().map(Arc::new)))
            .collect(),
        revocations: revocations.clone(),
        ..SnapshotInput::default()
    };
    let (sink, rx) = ChannelSink::new(1024);
    let engine =
        Arc::new(Engine::with_sink(EngineConfig { store_backed: true, ..EngineConfig::default() }, Arc::new(sink)));
    engine.publish(&input)?;
    let run = StoreRun::start(&engine, &store.options(""))?;
    let mandate_ix = engine.mandate_ix(&input.mandates.first().map(|m| m.id.clone()).unwrap_or_default());
    let mandate_ix = mandate_ix.context("the mandate is not in the snapshot")?;
    for (n, top) in s.calls.iter().enumerate() {
        example_call(&engine, &run, mandate_ix, (n, top), s.at, &catalog, style)?;
    }
    let ledger = engine.ledger_view(mandate_ix).context("no ledger")?;
    let (reserved, settled) = ledger.reserved_and_settled_micros();
    let spent = Amount::from_micros(settled);
    outln!("  ledger: {spent} {cur} settled, {} {cur} in flight", Amount::from_micros(reserved))?;
    drop(ledger);
    let (names, snapshot) = (engine.names(), engine.snapshot());
    let resumed = restart(engine, run, &input, store, style)?;
    let receipts: Vec<Receipt> = rx.try_iter().collect();
    if let Some(path) = receipts_file {
        append_receipts(path, &receipts, &names, &snapshot)?;
    }
    outln!("  receipts: {} (one per call; sub-calls name their orchestrator's receipt as parent)", receipts.len())?;
    // The worked example's bill (docs/mandate.md), or nothing under a revoked mandate.
    let expected = if revoked.is_some() { Amount::ZERO } else { Amount::parse("0.118")? };
    let reproduced = spent == expected && resumed == expected;
    if !reproduced {
        outln!("  {} expected {expected} {cur} billed, got {spent}", style.bad("mismatch:"))?;
    }
    Ok(reproduced)
}

/// One top-level call of the worked example: admitted (held ones approved through the
/// node when the scenario says who approves), its sub-calls, its settlement, each printed.
fn example_call(
    engine: &Engine,
    run: &StoreRun,
    mandate_ix: holon::engine::MandateIx,
    (n, top): (usize, &scenario::TopCall),
    at: holon::time::Timestamp,
    catalog: &holon::catalog::Catalog,
    style: &Style,
) -> anyhow::Result<()> {
    let cur = engine.snapshot().mandate(mandate_ix).map(|m| m.source().budget.currency).context("no mandate")?;
    let agent = engine.agent_ix(top.agent.as_str()).with_context(|| format!("unknown agent {}", top.agent))?;
    let call = Call { max_cost: top.max_cost, ..Call::new(mandate_ix, agent, at) };
    let max = top.max_cost.map(|m| format!(" max_cost {m} {cur}")).unwrap_or_default();
    outln!("  {} {}{max}", style.bold(&format!("call {}", n + 1)), top.agent)?;
    let mut admission = retrying(|| Ok(engine.admit(&call)))?;
    if let Admission::Held(p) = &admission {
        outln!("    {} worst case {} {cur} is above the approval threshold", style.warn("held"), p.worst_case)?;
        let Some(who) = &top.approve_as else { return Ok(()) };
        // Through the node: the held call is in the store, approvable on any node.
        let held = run.node().held_id(p.id);
        admission = retrying(|| run.node().approve(&held, who, at))?;
        outln!("    approved by {who}")?;
    }
    match admission {
        Admission::Denied(d) => {
            outln!("    {} worst case {} {cur}", style.bad("denied"), d.worst_case)?;
            for r in engine.explain(&call).map(|a| a.reasons).unwrap_or_default() {
                outln!("      {} {}", style.dim(r.code.as_str()), r.message)?;
            }
        }
        Admission::Held(_) => outln!("    {}", style.warn("still held"))?,
        Admission::Allowed(r) => {
            outln!(
                "    {} reserved {} {cur}; its sub-calls may spend {} {cur}",
                style.good("allowed"),
                r.worst_case(),
                r.sub_budget()
            )?;
            for sc in &top.sub_calls {
                sub_call(engine, &r, sc, at, style, &cur.to_string())?;
            }
            let own = top.charge.or(catalog.get(&top.agent).and_then(|e| e.manifest.pricing.ceiling()));
            let settled = r.settle(own.unwrap_or(Amount::ZERO), at)?;
            outln!(
                "    {} own {} + sub-calls {} = {} {cur}",
                style.bold("billed"),
                own.unwrap_or(Amount::ZERO),
                settled.passthrough,
                settled.billed
            )?;
        }
    }
    Ok(())
}

/// Appends the worked example's receipts to `--receipts`, one JSON line each.
fn append_receipts(
    path: &Path,
    receipts: &[Receipt],
    names: &holon::engine::Names,
    snapshot: &holon::engine::Snapshot,
) -> anyhow::Result<()> {
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map(std::io::BufWriter::new)
        .map_err(|e| anyhow::anyhow!("--receipts {}: {e}", path.display()))?;
    for r in receipts {
        writeln!(out, "{}", holon::engine::receipt::receipt_json_with_facts(r, names, snapshot))?;
    }
    out.flush()?;
    Ok(())
}

fn sub_call(
    engine: &Engine,
    r: &holon::engine::Reservation<'_>,
    sc: &scenario::PlannedSubCall,
    at: holon::time::Timestamp,
    style: &Style,
    cur: &str,
) -> anyhow::Result<()> {
    let snap = engine.snapshot();
    let sub = r.sub_mandate().context("not a delegated run")?;
    // The gateway's pick for a capability: the cheapest implementer the sub-mandate admits.
    let (agent, capability) = match (&sc.capability, &sc.agent) {
        (Some(class), _) => {
            (holon::engine::cheapest_implementer(&sub, &snap, class.as_str(), at, None)?, Some(class.as_str()))
        }
        (None, Some(id)) => (engine.agent_ix(id.as_str()), None),
        _ => (None, None),
    };
    let label = capability.map(str::to_owned).or(sc.agent.as_ref().map(|a| a.to_string())).unwrap_or_default();
    let Some(agent) = agent else {
        outln!("      {} {label}: no admissible implementer", style.bad("denied"))?;
        return Ok(());
    };
    let name = snap.agent(agent).map(|a| a.source().id.to_string()).unwrap_or_default();
    match r.sub_call(&SubCall { agent, capability, at }) {
        Admission::Allowed(child) => {
            let settled = child.settle(sc.cost, at)?;
            outln!(
                "      {} {label} -> {name}: reserved {} {cur}, settled {} {cur}",
                style.good("allowed"),
                settled.worst_case,
                settled.kept
            )?;
        }
        other => {
            let verdict = if other.verdict() == Verdict::Held { style.warn("held") } else { style.bad("denied") };
            let codes = match &other {
                Admission::Denied(d) => d.codes.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", "),
                _ => String::new(),
            };
            outln!("      {verdict} {label} -> {name} {}", style.dim(&codes))?;
        }
    }
    Ok(())
}

/// Asks again while the only reason to refuse is a lease on its way (`lease_pending`: the
/// node is refilling), for up to `DEMO_LEASE_WAIT_MS`, as a gateway would retry. For an approval
/// through the node also while the held call is not in the store yet (it gets there within
/// a poll); a call refused for want of a lease stays held.
fn retrying<'e>(
    mut ask: impl FnMut() -> Result<Admission<'e>, holon::node::NodeError>,
) -> anyhow::Result<Admission<'e>> {
    let deadline = std::time::Instant::now() + Duration::from_millis(DEMO_LEASE_WAIT_MS);
    loop {
        let waiting = std::time::Instant::now() < deadline;
        match ask() {
            Err(holon::node::NodeError::UnknownHeld(_)) if waiting => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => return Err(e.into()),
            Ok(Admission::Denied(d)) if d.codes.iter().all(|c| c == Code::LeasePending) && waiting => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(admission) => return Ok(admission),
        }
    }
}

/// The longest the demo waits for a lease before it shows a call refused, in ms.
const DEMO_LEASE_WAIT_MS: u64 = 5_000;
/// The longest the hot-mandate run may take to spend its budget, in seconds (it ends when
/// the budget is spent, usually within a second or two).
const HOT_RUN_S_MAX: u64 = 300;

/// Stops the engine (its node drains: what was settled is flushed, unused leases are given
/// back), starts a new one on the same store, and shows that it resumes from what the
/// store holds. Returns the mandate's spent in the store.
fn restart(
    engine: Arc<Engine>,
    run: StoreRun,
    input: &SnapshotInput,
    store: &DemoStore,
    style: &Style,
) -> anyhow::Result<Amount> {
    let mandate = input.mandates.first().context("no mandate")?;
    let cur = mandate.budget.currency;
    let (_, _, before) = run.finish(0, Some(&mandate.id))?;
    drop(engine);
    let spent = before.first().map_or(0, |s| s.spent_micros);
    let engine = Arc::new(Engine::new(EngineConfig { store_backed: true, ..EngineConfig::default() }));
    engine.publish(input)?;
    let run = StoreRun::start(&engine, &store.options(""))?;
    let (_, stats, after) = run.finish(0, Some(&mandate.id))?;
    let resumed = after.first().map_or(0, |s| s.spent_micros);
    outln!(
        "  {} the engine stopped (its node flushed and gave its leases back) and a new one started on the same store ({}): {} spent {} {cur} of {} {cur}, as before; it admits only against what is left",
        style.bold("restart:"),
        store.kind(),
        mandate.id,
        Amount::from_micros(resumed),
        mandate.budget.total,
    )?;
    if resumed != spent || stats.recovered_micros != 0 {
        outln!("  {} the store held {} before the restart", style.bad("mismatch:"), Amount::from_micros(spent))?;
        return Ok(Amount::ZERO);
    }
    Ok(Amount::from_micros(resumed))
}
