//! `holon demo`'s third step: the mandate standard's chain of sub-mandates, number for
//! number on the bundled examples (docs/admission.md, "Calls under a sub-mandate"): alice's
//! root mandate, her assistant's sub-mandate to the invoice pipeline, and the pipeline's
//! calls to the table extractor, reserved on both levels at once.

use std::path::Path;
use std::sync::Arc;

use holon::catalog::Catalog;
use holon::documents;
use holon::engine::{Admission, Call, Engine, EngineConfig, SnapshotInput};
use holon::money::Amount;
use holon::time::Timestamp;

use super::out::outln;
use super::style::Style;

const ROOT: &str = "alice/m-2026-11";
const CHILD: &str = "alice/m-2026-11/invoices";
/// The step's first day (the examples' mandates hold from 2026-11-10), 2026-11-20 10:00 UTC.
const FIRST_DAY_UNIX: i64 = 1_795_168_800;
const DAY_S: i64 = 86_400;

/// The engine's clock for this step: its second day, whatever today's date is.
fn clock() -> Timestamp {
    Timestamp::from_unix(FIRST_DAY_UNIX + DAY_S)
}

/// Runs the step; `true` when every figure is the one the documents imply.
pub(super) fn run(examples: &Path, style: &Style) -> anyhow::Result<bool> {
    outln!(
        "\n{}",
        style.bold("3. the standard's chain: alice/m-2026-11 -> the assistant's sub-mandate alice/m-2026-11/invoices -> the invoice pipeline's calls")
    )?;
    let catalog = Catalog::load(&[examples.join("agents")], None)?;
    let mandates = ["alice-root.yaml", "alice-invoices.yaml"]
        .iter()
        .map(|f| documents::load_mandate(&examples.join("mandates").join(f)).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let input = SnapshotInput {
        mandates,
        agents: catalog.entries.into_iter().map(|e| (Arc::new(e.manifest), e.record.map(Arc::new))).collect(),
        ..SnapshotInput::default()
    };
    let engine = Engine::new(EngineConfig { clock, ..EngineConfig::default() });
    engine.publish(&input)?;
    let ix = |id: &str| engine.mandate_ix(id).ok_or_else(|| anyhow::anyhow!("{id} is not in the snapshot"));
    let (root, child) = (ix(ROOT)?, ix(CHILD)?);
    let extract = engine.agent_ix("acme/table-extract").ok_or_else(|| anyhow::anyhow!("no acme/table-extract"))?;
    let fx = engine.agent_ix("holon-labs/fx-convert").ok_or_else(|| anyhow::anyhow!("no holon-labs/fx-convert"))?;
    let day = |n: i64| Timestamp::from_unix(FIRST_DAY_UNIX + n * DAY_S);
    let spend = |call: &Call, times: u32| -> u32 {
        let mut allowed = 0;
        for _ in 0..times {
            if let Admission::Allowed(r) = engine.admit(call) {
                let worst = r.worst_case();
                allowed += u32::from(r.settle(worst, call.at).is_ok());
            }
        }
        allowed
    };
    let spent = |m| engine.ledger_view(m).map_or(Amount::ZERO, |l| Amount::from_micros(l.spent_micros()));
    let mut ok = true;
    // Day 1: the pipeline's calls, then the assistant's own, until alice has 0.003 left.
    let under_child = Call::new(child, extract, day(0));
    ok &= spend(&under_child, 100) == 100;
    outln!(
        "  100 extractions under the sub-mandate at 0.004 EUR: {} EUR on it, {} EUR on alice's mandate too",
        spent(child),
        spent(root)
    )?;
    ok &= spend(&Call::new(root, extract, day(0)), 4_899) == 4_899 && spend(&Call::new(root, fx, day(0)), 1) == 1;
    outln!("  the assistant's own calls under alice's mandate bring her day to {} EUR of 20.00 EUR", spent(root))?;
    ok &= denial(&engine, &under_child, Some(ROOT), style)?;
    // Day 2: the pipeline's own daily budget runs out first.
    let next = Call::new(child, extract, day(1));
    ok &= spend(&next, 250) == 250;
    outln!("  the next day, 250 more extractions fill the sub-mandate's 1.00 EUR a day")?;
    ok &= denial(&engine, &next, None, style)?;
    outln!("  spent: {CHILD} {} EUR, {ROOT} {} EUR (its own calls and its sub-mandate's)", spent(child), spent(root))?;
    ok &= spent(child) == Amount::from_micros(1_400_000) && spent(root) == Amount::from_micros(20_997_000);
    Ok(ok)
}

/// Prints the denial of `call` and whether it names `level` (`None`: the sub-mandate).
fn denial(engine: &Engine, call: &Call, level: Option<&str>, style: &Style) -> anyhow::Result<bool> {
    let Admission::Denied(d) = engine.admit(call) else {
        outln!("  {} the next call was not denied", style.bad("mismatch:"))?;
        return Ok(false);
    };
    for r in engine.explain_denial(call, &d) {
        outln!("  {} {} {}", style.bad("denied"), style.dim(r.code.as_str()), r.message)?;
    }
    let named = d.spent.limited_by.and_then(|ix| engine.snapshot().mandate(ix).map(|m| m.source().id.clone()));
    Ok(named.as_deref() == level)
}
