//! The Agent Record: what the platform measured about an agent, never written by its
//! author. Admission reads its thresholds; ranking reads cost per success and latency.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::doc::Violation;
use crate::money::{Amount, Currency, Fixed6};
use crate::pattern::{AgentId, Principal};
use crate::sign::signature::SignatureBlock;

/// A record's `provenance` block: the publisher's signature over the manifest, checked by
/// `trust::provenance::verify` (docs/trust.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub publisher: Principal,
    pub signature: SignatureBlock,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentRecord {
    pub holon_record: String,
    pub agent: AgentId,
    /// Absent = applies to any version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<semver::Version>,
    /// Share of successful runs, declared failures excluded. Absent = not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_rate: Option<Fixed6>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p50_s: Option<Fixed6>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p95_s: Option<Fixed6>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_30d: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_failures: Option<u64>,
    /// Platform evaluation score (cold start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_score: Option<Fixed6>,
    /// Score per evaluation suite.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub benchmarks: BTreeMap<String, Fixed6>,
    /// The publisher's signature over the whole manifest (docs/trust.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// What callers paid per successful run, by currency: everything billed (failures
    /// too) over the successes, rounded up. Measured from receipts (docs/records.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cost_per_success: BTreeMap<Currency, Amount>,
    /// Distinct accounts that paid for a run in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_payers: Option<u64>,
    /// The share of distinct callers that are agents (the rest are people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_caller_share: Option<Fixed6>,
    /// How the record was measured, when `holon records build` wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
}

/// The window a record was measured over and how many receipts it counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    /// The end of the window.
    pub at: crate::time::Timestamp,
    /// Its length, in days (at most 30: `runs_30d` is read as runs in 30 days).
    pub window_days: u32,
    /// Runs counted (successes, errors and declared failures).
    pub receipts: u64,
}

impl AgentRecord {
    /// Success rate for thresholds and ranking: the measured one, or for an agent never
    /// run (no runs in 30 days) the evaluation score, which "feeds success rate without
    /// counting as usage" (docs/rulings.md, caller mandate §5, cold start).
    pub fn effective_success_rate(&self) -> Option<Fixed6> {
        match (self.success_rate, self.runs_30d) {
            (Some(rate), _) => Some(rate),
            (None, None | Some(0)) => self.eval_score,
            (None, Some(_)) => None,
        }
    }
}

/// Rules that relate a record's fields (shapes are the schema's job).
pub fn validate(record: &AgentRecord) -> Vec<Violation> {
    let mut out = Vec::new();
    let unit = |v: Option<Fixed6>, path: &str, out: &mut Vec<Violation>| {
        if v.is_some_and(|v| v > Fixed6::ONE) {
            out.push(Violation::new(path, "must be between 0 and 1"));
        }
    };
    unit(record.success_rate, "/success_rate", &mut out);
    unit(record.eval_score, "/eval_score", &mut out);
    unit(record.agent_caller_share, "/agent_caller_share", &mut out);
    for (suite, score) in &record.benchmarks {
        unit(Some(*score), &format!("/benchmarks/{}", crate::doc::pointer_escape(suite)), &mut out);
    }
    if let (Some(p50), Some(p95)) = (record.latency_p50_s, record.latency_p95_s)
        && p50 > p95
    {
        out.push(Violation::new(
            "/latency_p50_s",
            format!("p50 latency {p50}s is above p95 latency {p95}s; a median cannot exceed the 95th percentile"),
        ));
    }
    out
}
