//! `holon search [QUERY] --mandate M --agents DIR`: rank only what the mandate permits.

use std::path::{Path, PathBuf};

use holon::catalog::Catalog;
use holon::documents;
use holon::engine::Assessor;
use holon::ranking;
use holon::time::Timestamp;
use serde_json::json;

use super::exit;
use super::out::outln;
use super::style::Style;

pub(super) struct SearchArgs<'a> {
    pub query: &'a str,
    pub mandate: &'a Path,
    pub agents: &'a Path,
    pub records: Option<&'a Path>,
    pub at: Option<&'a str>,
    pub revocations: Option<&'a Path>,
    pub json: bool,
}

pub(super) fn run(args: &SearchArgs<'_>, style: &Style) -> anyhow::Result<u8> {
    let (query, json) = (args.query, args.json);
    let mandate = documents::load_mandate(args.mandate)?;
    let catalog = Catalog::load(&[PathBuf::from(args.agents)], args.records)?;
    // An expired mandate ranks nothing: every agent is excluded with `mandate_expired`.
    let at = match args.at {
        Some(t) => Timestamp::parse(t)?,
        None => Timestamp::now(),
    };
    let revoked = super::trust::revoked(&mandate, args.mandate, args.revocations)?;
    let r = ranking::rank_with(Assessor::new(&mandate, &catalog)?.revoked(revoked)?, &catalog, query, at)?;
    let cur = mandate.budget.currency;
    if json {
        let out = json!({
            "ranked": r.ranked.iter().map(|x| json!({
                "agent": x.agent,
                "worst_case": x.worst_case.to_string(),
                "cost_per_success": x.cost_per_success.map(|c| c.to_string()),
                "latency_p95_s": x.latency_p95_s.map(|l| l.to_string()),
            })).collect::<Vec<_>>(),
            "excluded": r.excluded.iter().map(|x| json!({"agent": x.agent, "reason": x.reason})).collect::<Vec<_>>(),
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(exit::OK);
    }
    let width = r
        .ranked
        .iter()
        .map(|x| x.agent.as_str().len())
        .chain(r.excluded.iter().map(|x| x.agent.as_str().len()))
        .max()
        .unwrap_or(0);
    outln!("{} {}", style.bold("ranked under"), mandate.id)?;
    if !r.ranked.is_empty() {
        outln!(
            "  {}",
            style.dim(&format!(
                "most relevant first, then the lowest cost per success (worst case ÷ success rate, in {cur}), then p95 latency"
            ))
        )?;
    } else if !r.excluded.is_empty() {
        outln!("  nothing ranked: every agent that matches is excluded by the mandate, each for the reason below")?;
    }
    if r.ranked.is_empty() && r.excluded.is_empty() {
        outln!(
            "  no agent matches `{query}`: each word is matched by its stem against the agents' ids, capability classes, names and descriptions; without a query every agent the mandate permits is listed"
        )?;
    }
    for (i, x) in r.ranked.iter().enumerate() {
        let cps = x.cost_per_success.map_or_else(|| "unknown".to_owned(), |c| format!("{c} {cur}"));
        let p95 = x.latency_p95_s.map_or_else(|| "unknown".to_owned(), |l| format!("{l}s"));
        let held = if x.held { style.warn(" (held for approval)") } else { String::new() };
        outln!(
            "  {:>2}. {:<width$}  worst {} {cur}  per success {cps}  p95 {p95}{held}",
            i + 1,
            x.agent.as_str(),
            x.worst_case
        )?;
    }
    if !r.excluded.is_empty() {
        let why = if query.is_empty() { "excluded by the mandate" } else { "matching, but excluded by the mandate" };
        outln!("{}", style.bold(why))?;
        for x in &r.excluded {
            outln!("      {:<width$}  {} {}", x.agent.as_str(), style.bad(x.reason.code.as_str()), x.reason.message)?;
        }
    }
    Ok(exit::OK)
}
