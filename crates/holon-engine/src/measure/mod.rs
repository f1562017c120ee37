//! Agent records measured from settled receipts (`holon records build`, docs/records.md).
//!
//! A [`Builder`] reads receipts as JSON lines (the receipts file of `holon serve`,
//! `loadtest --receipts`, `demo --receipts`) one at a time and keeps, per agent version,
//! only counters, a latency histogram and the sets of distinct payers and callers: memory
//! is bounded by the number of agent versions and distinct callers (each with a limit),
//! never by the number of receipts. Every figure is a sum, a count or a histogram, so the
//! same receipts in any order give the same records, byte for byte.
//!
//! A run is an allowed call whose receipt ended `settled` or `reconciled` with a reported
//! outcome, ended within the window. Declared failures are counted apart and left out of
//! the success rate (the manifest document, section 9: they are the agent saying "not
//! for me", not the agent failing).

mod line;

use std::collections::{BTreeMap, BTreeSet};

use hdrhistogram::Histogram;
use thiserror::Error;

use crate::money::{Amount, Currency, Fixed6, MICROS_PER_UNIT};
use crate::pattern::AgentId;
use crate::record::{AgentRecord, Measured};
use crate::time::Timestamp;

pub use line::LINE_BYTES_MAX;

/// The longest window, in days: a record's `runs_30d` is read as runs in 30 days, so a
/// longer window would overstate it.
pub const WINDOW_DAYS_MAX: u32 = 30;
/// Most agent versions one build measures (each keeps a histogram: about 15 KB).
pub const AGENT_VERSIONS_MAX: usize = 10_000;
/// Most distinct (agent version, payer) and (agent version, caller) pairs in one build.
pub const DISTINCT_MAX: usize = 1_000_000;
/// The largest latency a histogram holds, in ms (an hour); longer runs count as an hour.
pub const LATENCY_MS_MAX: u64 = 3_600_000;
/// Significant digits the latency histogram keeps: a percentile is within 1% of the
/// exact value, and never below it (the highest value of its bucket is reported).
pub const LATENCY_SIGNIFICANT_DIGITS: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MeasureError {
    #[error("line {line}: {message}")]
    BadLine { line: u64, message: String },
    #[error("the window must be 1 to {WINDOW_DAYS_MAX} days")]
    Window,
    #[error(
        "more than {AGENT_VERSIONS_MAX} agent versions: build records for fewer agents at a time (split the receipts by agent)"
    )]
    TooManyAgents,
    #[error("more than {DISTINCT_MAX} distinct payers and callers in all: build records for fewer agents at a time")]
    TooManyDistinct,
    #[error("the latency histogram: {0}")]
    Histogram(String),
    #[error(
        "{agent}: the cost per success does not fit in 64-bit micro-units; the receipts bill more than any budget could"
    )]
    Overflow { agent: String },
}

/// What one agent version's runs come to.
struct Tally {
    success: u64,
    error: u64,
    declared: u64,
    latency_ms: Histogram<u64>,
    /// Billed over every run, by currency, in micro-units.
    billed_micros: BTreeMap<Currency, u128>,
    /// Some run billed without saying in which currency: no cost per success is given
    /// (one left out would make it too low).
    billed_unknown: bool,
    payers: BTreeSet<String>,
    /// Distinct callers and whether each is an agent.
    callers: BTreeMap<String, bool>,
    /// Evaluation scores (millionths) summed, and how many.
    eval_millionths: u128,
    evals: u64,
}

impl Tally {
    fn new() -> Result<Self, MeasureError> {
        let latency_ms = Histogram::new_with_bounds(1, LATENCY_MS_MAX, LATENCY_SIGNIFICANT_DIGITS)
            .map_err(|e| MeasureError::Histogram(e.to_string()))?;
        Ok(Tally {
            success: 0,
            error: 0,
            declared: 0,
            latency_ms,
            billed_micros: BTreeMap::new(),
            billed_unknown: false,
            payers: BTreeSet::new(),
            callers: BTreeMap::new(),
            eval_millionths: 0,
            evals: 0,
        })
    }

    fn runs(&self) -> u64 {
        self.success + self.error + self.declared
    }
}

/// What a build read and counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Receipt lines read.
    pub lines: u64,
    /// Runs counted (within the window, with an outcome).
    pub runs: u64,
    /// Receipts that are not runs: decisions, releases, expiries, unreported outcomes.
    pub not_runs: u64,
    /// Runs outside the window.
    pub outside_window: u64,
    /// Runs whose receipt does not name the agent's version (it cannot be attributed).
    pub unattributed: u64,
    /// Evaluation lines read.
    pub evals: u64,
}

/// Builds records from receipts and evaluations. Feed it lines, then [`Builder::finish`].
pub struct Builder {
    at: Timestamp,
    window_days: u32,
    from_unix: i64,
    tallies: BTreeMap<(AgentId, semver::Version), Tally>,
    distinct: usize,
    counts: Counts,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder").field("at", &self.at).field("counts", &self.counts).finish_non_exhaustive()
    }
}

impl Builder {
    /// Records for the `window_days` days that end at `at`.
    pub fn new(at: Timestamp, window_days: u32) -> Result<Self, MeasureError> {
        if !(1..=WINDOW_DAYS_MAX).contains(&window_days) {
            return Err(MeasureError::Window);
        }
        let from_unix = at.unix().saturating_sub(i64::from(window_days) * 86_400);
        Ok(Builder { at, window_days, from_unix, tallies: BTreeMap::new(), distinct: 0, counts: Counts::default() })
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    fn tally(&mut self, agent: AgentId, version: semver::Version) -> Result<&mut Tally, MeasureError> {
        if !self.tallies.contains_key(&(agent.clone(), version.clone())) {
            if self.tallies.len() >= AGENT_VERSIONS_MAX {
                return Err(MeasureError::TooManyAgents);
            }
            self.tallies.insert((agent.clone(), version.clone()), Tally::new()?);
        }
        self.tallies.get_mut(&(agent, version)).ok_or(MeasureError::TooManyAgents)
    }

    /// Reads one receipt line (`number` names it in errors).
    pub fn add_receipt(&mut self, text: &str, number: u64) -> Result<(), MeasureError> {
        self.counts.lines += 1;
        let bad = |message: String| MeasureError::BadLine { line: number, message };
        let receipt = line::Receipt::parse(text).map_err(bad)?;
        let Some(run) = receipt.run().map_err(bad)? else {
            self.counts.not_runs += 1;
            return Ok(());
        };
        // The window is (at - window, at].
        if run.ended_at.unix() <= self.from_unix || run.ended_at > self.at {
            self.counts.outside_window += 1;
            return Ok(());
        }
        let Some(version) = run.version else {
            self.counts.unattributed += 1;
            return Ok(());
        };
        self.counts.runs += 1;
        let mut distinct = self.distinct;
        let tally = self.tally(run.agent, version)?;
        match run.outcome {
            line::RunOutcome::Success => tally.success += 1,
            line::RunOutcome::Error => tally.error += 1,
            line::RunOutcome::DeclaredFailure => tally.declared += 1,
        }
        // 0 is "not said" (a settle that gave no latency): not a latency of 0 ms.
        if run.latency_ms > 0 {
            tally
                .latency_ms
                .record(run.latency_ms.min(LATENCY_MS_MAX))
                .map_err(|e| MeasureError::Histogram(e.to_string()))?;
        }
        match run.currency {
            Some(currency) => {
                let sum = tally.billed_micros.entry(currency).or_insert(0);
                *sum = sum.saturating_add(u128::from(run.billed.micros()));
            }
            None if run.billed > Amount::ZERO => tally.billed_unknown = true,
            None => {}
        }
        if let Some(payer) = run.payer
            && !tally.payers.contains(&payer)
        {
            distinct += 1;
            tally.payers.insert(payer);
        }
        if let Some((caller, is_agent)) = run.caller {
            // An agent if any of its receipts says so: the same in any order.
            match tally.callers.get_mut(&caller) {
                Some(known) => *known |= is_agent,
                None => {
                    distinct += 1;
                    tally.callers.insert(caller, is_agent);
                }
            }
        }
        if distinct > DISTINCT_MAX {
            return Err(MeasureError::TooManyDistinct);
        }
        self.distinct = distinct;
        Ok(())
    }

    /// Reads one evaluation line: `{"agent", "version", "score"}`, score in [0, 1]. Several
    /// for one version are averaged (rounded down). Evaluations are not runs.
    pub fn add_eval(&mut self, text: &str, number: u64) -> Result<(), MeasureError> {
        let bad = |message: String| MeasureError::BadLine { line: number, message };
        let eval = line::Eval::parse(text).map_err(bad)?;
        self.counts.evals += 1;
        let tally = self.tally(eval.agent, eval.version)?;
        tally.eval_millionths += u128::from(eval.score.millionths());
        tally.evals += 1;
        Ok(())
    }

    /// One record per agent version, in id and version order.
    pub fn finish(self) -> Result<Vec<AgentRecord>, MeasureError> {
        let measured = |runs| Measured { at: self.at, window_days: self.window_days, receipts: runs };
        self.tallies.into_iter().map(|((agent, version), t)| record(agent, version, &t, measured(t.runs()))).collect()
    }
}

/// `num / den` in millionths, rounded down; `None` when `den` is 0.
fn ratio_down(num: u64, den: u64) -> Option<Fixed6> {
    let v = u128::from(num).checked_mul(u128::from(MICROS_PER_UNIT))?.checked_div(u128::from(den))?;
    u64::try_from(v).ok().map(Fixed6::from_millionths)
}

/// Milliseconds as seconds (exact: a millisecond is 1,000 millionths).
fn seconds(ms: u64) -> Fixed6 {
    Fixed6::from_millionths(ms.saturating_mul(1_000))
}

fn record(
    agent: AgentId,
    version: semver::Version,
    t: &Tally,
    measured: Measured,
) -> Result<AgentRecord, MeasureError> {
    let runs = t.runs();
    let percentile = |q: f64| (!t.latency_ms.is_empty()).then(|| seconds(t.latency_ms.value_at_quantile(q)));
    let mut cost_per_success = BTreeMap::new();
    if t.success > 0 && !t.billed_unknown {
        for (c, micros) in &t.billed_micros {
            let per = u64::try_from(micros.div_ceil(u128::from(t.success)))
                .map_err(|_| MeasureError::Overflow { agent: agent.to_string() })?;
            cost_per_success.insert(*c, Amount::from_micros(per));
        }
    }
    let agents = t.callers.values().filter(|is_agent| **is_agent).count();
    Ok(AgentRecord {
        holon_record: "0.1".into(),
        agent,
        version: Some(version),
        // Declared failures are left out of the rate; rounded down (the safe side of a
        // `min_success_rate`).
        success_rate: ratio_down(t.success, t.success + t.error),
        latency_p50_s: percentile(0.50),
        latency_p95_s: percentile(0.95),
        runs_30d: Some(runs),
        declared_failures: Some(t.declared),
        eval_score: if t.evals == 0 {
            None
        } else {
            u64::try_from(t.eval_millionths / u128::from(t.evals)).ok().map(Fixed6::from_millionths)
        },
        benchmarks: BTreeMap::new(),
        provenance: None,
        cost_per_success,
        distinct_payers: (runs > 0).then_some(t.payers.len() as u64),
        agent_caller_share: ratio_down(agents as u64, t.callers.len() as u64),
        measured: Some(measured),
    })
}
