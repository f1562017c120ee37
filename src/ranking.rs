//! Ranking under a mandate (docs/rulings.md, caller mandate §5 and cold start): drop the agents the
//! mandate denies (each with its first reason), then order the rest by
//! 1. relevance to the query (higher first),
//! 2. cost per successful run = worst case / success rate (lower first; unknown last),
//! 3. p95 latency (lower first; unknown last), then id for a stable order.
//!
//! Relevance is an integer so that ties are common and cost decides among equally
//! relevant agents: for each distinct query word (lower-cased, split on non-alphanumerics,
//! compared by its English stem so plurals and word forms match),
//! 3 points if it is a word of the agent's id or one of its capability classes, else 2 if
//! it is a word of its name, else 1 if it occurs in its description. No query: all 0.
//! With a query, only agents it matches are listed, ranked or excluded.
//! The success rate is the measured one, or for an agent with no runs, its eval score.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::admission::{CallContext, Reason, Verdict};
use crate::engine::{Assessor, EngineError};
use crate::lookup::AgentCandidates;
use crate::mandate::Mandate;
use crate::money::{Amount, Fixed6, MICROS_PER_UNIT};
use crate::pattern::AgentId;
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ranked {
    pub agent: AgentId,
    pub relevance: u32,
    pub worst_case: Amount,
    pub cost_per_success: Option<Amount>,
    pub latency_p95_s: Option<Fixed6>,
    pub held: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Excluded {
    pub agent: AgentId,
    pub reason: Reason,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Ranking {
    pub ranked: Vec<Ranked>,
    pub excluded: Vec<Excluded>,
}

/// Most bytes of one word stemmed; longer words are compared whole (no English word is
/// this long, and the stemmer's work stays bounded).
const STEM_WORD_BYTES_MAX: usize = 64;

/// The distinct word stems of `text`: split on non-alphanumerics, lower-cased, each
/// reduced by the Snowball English stemmer, so "tables", "table" and "tabled" are one
/// word, as are "converting" and "convert".
fn words(text: &str) -> BTreeSet<String> {
    let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .map(|w| if w.len() > STEM_WORD_BYTES_MAX { w } else { stemmer.stem(&w).into_owned() })
        .collect()
}

pub fn relevance(query: &str, entry: &crate::manifest::Manifest) -> u32 {
    relevance_of(&words(query), entry)
}

/// [`relevance`] for a query already split into stems (a search stems it once, not once
/// per agent).
fn relevance_of(query: &BTreeSet<String>, entry: &crate::manifest::Manifest) -> u32 {
    let strong: BTreeSet<String> =
        words(entry.id.as_str()).into_iter().chain(entry.classes().flat_map(|c| words(c.as_str()))).collect();
    let name = words(entry.name.as_deref().unwrap_or(""));
    let description = words(entry.description.as_deref().unwrap_or(""));
    query
        .iter()
        .map(|w| {
            if strong.contains(w) {
                3
            } else if name.contains(w) {
                2
            } else if description.contains(w) {
                1
            } else {
                0
            }
        })
        .sum()
}

/// `worst / rate`, rounded up; `None` for an unknown or zero rate.
pub fn cost_per_success(worst: Amount, rate: Option<Fixed6>) -> Option<Amount> {
    let rate = rate.filter(|r| r.millionths() > 0)?.millionths();
    let num = u128::from(worst.micros()) * u128::from(MICROS_PER_UNIT);
    let v = num.div_ceil(u128::from(rate));
    u64::try_from(v).ok().map(Amount::from_micros)
}

/// Ranks the agents (the CLI's catalog) under a mandate for a capability search. Fails
/// only where the mandate could not be published to an engine either.
pub fn rank(
    mandate: &Mandate,
    agents: &impl AgentCandidates,
    query: &str,
    at: Timestamp,
) -> Result<Ranking, EngineError> {
    rank_with(Assessor::new(mandate, agents)?, agents, query, at)
}

/// [`rank`] with an assessor built by the caller (a revoked mandate, provenance required).
pub fn rank_with(
    assessor: Assessor<'_>,
    agents: &impl AgentCandidates,
    query: &str,
    at: Timestamp,
) -> Result<Ranking, EngineError> {
    let mut out = Ranking::default();
    let ctx = CallContext { by_capability: true, ..CallContext::at(at) };
    let query_words = words(query);
    for (manifest, record) in agents.candidates() {
        let relevance = if query.is_empty() { 0 } else { relevance_of(&query_words, manifest) };
        // An agent the query does not match is not a result: neither ranked nor excluded.
        if !query.is_empty() && relevance == 0 {
            continue;
        }
        let a = assessor.assess(manifest, record, &ctx)?;
        if a.verdict == Verdict::Denied {
            if let Some(first) = a.reasons.into_iter().next() {
                out.excluded.push(Excluded { agent: manifest.id.clone(), reason: first });
            }
            continue;
        }
        let rate = record.and_then(|r| r.effective_success_rate());
        out.ranked.push(Ranked {
            agent: manifest.id.clone(),
            relevance,
            worst_case: a.worst_case,
            cost_per_success: cost_per_success(a.worst_case, rate),
            latency_p95_s: record.and_then(|r| r.latency_p95_s),
            held: a.verdict == Verdict::Held,
        });
    }
    out.ranked.sort_by(|a, b| {
        b.relevance
            .cmp(&a.relevance)
            .then_with(|| cmp_unknown_last(a.cost_per_success, b.cost_per_success))
            .then_with(|| cmp_unknown_last(a.latency_p95_s, b.latency_p95_s))
            .then_with(|| a.agent.cmp(&b.agent))
    });
    Ok(out)
}

fn cmp_unknown_last<T: Ord>(a: Option<T>, b: Option<T>) -> std::cmp::Ordering {
    match (a, b) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
}
