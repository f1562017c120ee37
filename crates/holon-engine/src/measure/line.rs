//! The two line formats a build reads: a receipt (`engine::receipt::receipt_json_with_facts`,
//! extra keys ignored, so receipts from newer writers still read) and an evaluation.

use serde::Deserialize;

use crate::money::{Amount, Currency, Fixed6};
use crate::pattern::AgentId;
use crate::time::Timestamp;

/// The longest line read, in bytes (a receipt is a few hundred).
pub const LINE_BYTES_MAX: usize = 64 * 1024;

#[derive(Debug, Deserialize)]
pub(super) struct Receipt {
    agent: String,
    #[serde(default)]
    agent_version: Option<String>,
    decision: String,
    end: String,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    latency_ms: Option<u64>,
    actual: String,
    ended_at: String,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    payer: Option<String>,
    #[serde(default)]
    caller: Option<String>,
    #[serde(default)]
    caller_kind: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunOutcome {
    Success,
    Error,
    DeclaredFailure,
}

/// A receipt that is a run, its fields checked.
#[derive(Debug)]
pub(super) struct Run {
    pub agent: AgentId,
    pub version: Option<semver::Version>,
    pub outcome: RunOutcome,
    pub latency_ms: u64,
    pub billed: Amount,
    pub ended_at: Timestamp,
    pub currency: Option<Currency>,
    pub payer: Option<String>,
    /// The caller and whether it is an agent.
    pub caller: Option<(String, bool)>,
}

/// Longest payer or caller name kept, in bytes (ids are at most 128).
const NAME_BYTES_MAX: usize = 256;
/// Longest agent version, in bytes (the documents' limit): it names the record's file.
const VERSION_BYTES_MAX: usize = 128;

impl Receipt {
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        if text.len() > LINE_BYTES_MAX {
            return Err(format!("longer than {LINE_BYTES_MAX} bytes: not a receipt"));
        }
        serde_json::from_str(text).map_err(|e| format!("not a receipt: {e}"))
    }

    /// The run this receipt is, `None` for one that is not a run.
    pub(super) fn run(self) -> Result<Option<Run>, String> {
        let outcome = match self.outcome.as_deref() {
            None | Some("unreported") => None,
            Some("success") => Some(RunOutcome::Success),
            Some("error") => Some(RunOutcome::Error),
            Some("declared_failure") => Some(RunOutcome::DeclaredFailure),
            Some(other) => return Err(format!("unknown outcome `{other}`")),
        };
        let ended = matches!(self.end.as_str(), "settled" | "reconciled");
        let (Some(outcome), true, "allowed") = (outcome, ended, self.decision.as_str()) else {
            return Ok(None);
        };
        let agent = AgentId::parse(&self.agent).map_err(|e| format!("agent: {e}"))?;
        if self.agent_version.as_ref().is_some_and(|v| v.len() > VERSION_BYTES_MAX) {
            return Err(format!("agent_version: longer than {VERSION_BYTES_MAX} bytes"));
        }
        let version = self
            .agent_version
            .as_deref()
            .map(semver::Version::parse)
            .transpose()
            .map_err(|e| format!("agent_version: {e}"))?;
        let billed = Amount::parse(&self.actual).map_err(|e| format!("actual: {e}"))?;
        let ended_at = Timestamp::parse(&self.ended_at).map_err(|e| format!("ended_at: {e}"))?;
        let currency =
            self.currency.as_deref().map(Currency::parse).transpose().map_err(|e| format!("currency: {e}"))?;
        let name = |field: &str, v: Option<String>| match v {
            Some(n) if n.len() > NAME_BYTES_MAX => Err(format!("{field}: longer than {NAME_BYTES_MAX} bytes")),
            other => Ok(other),
        };
        let payer = name("payer", self.payer)?;
        let caller = match (name("caller", self.caller)?, self.caller_kind.as_deref()) {
            (Some(c), Some("agent")) => Some((c, true)),
            (Some(c), Some("person")) => Some((c, false)),
            (Some(_), other) => return Err(format!("caller_kind: expected agent or person, not {other:?}")),
            (None, _) => None,
        };
        Ok(Some(Run {
            agent,
            version,
            outcome,
            latency_ms: self.latency_ms.unwrap_or(0),
            billed,
            ended_at,
            currency,
            payer,
            caller,
        }))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalLine {
    agent: String,
    version: String,
    score: serde_json::Value,
}

/// One evaluation of one agent version.
#[derive(Debug)]
pub(super) struct Eval {
    pub agent: AgentId,
    pub version: semver::Version,
    pub score: Fixed6,
}

impl Eval {
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        if text.len() > LINE_BYTES_MAX {
            return Err(format!("longer than {LINE_BYTES_MAX} bytes: not an evaluation"));
        }
        let e: EvalLine = serde_json::from_str(text)
            .map_err(|e| format!("not an evaluation ({{\"agent\", \"version\", \"score\"}}): {e}"))?;
        let score = Fixed6::from_json(&e.score).map_err(|e| format!("score: {e}"))?;
        if score > Fixed6::ONE {
            return Err("score: must be between 0 and 1".into());
        }
        if e.version.len() > VERSION_BYTES_MAX {
            return Err(format!("version: longer than {VERSION_BYTES_MAX} bytes"));
        }
        Ok(Eval {
            agent: AgentId::parse(&e.agent).map_err(|e| format!("agent: {e}"))?,
            version: semver::Version::parse(&e.version).map_err(|e| format!("version: {e}"))?,
            score,
        })
    }
}
