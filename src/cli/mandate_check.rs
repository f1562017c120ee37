//! `holon mandate check`: may the grantee call these agents, judged by the engine's rules
//! on a spend given as figures (and, for a sub-mandate given `--parents`, on its chain).

use std::path::PathBuf;

use anyhow::Context;
use holon::admission::{CallContext, Verdict};
use holon::catalog::Catalog;
use holon::documents;
use holon::engine::Assessor;
use holon::time::Timestamp;
use serde_json::json;

use super::exit;
use super::flags::parent_spent;
use super::out::outln;
use super::style::Style;
use super::trust::revoked;
use holon::money::Amount;

/// `mandate check DIR MANDATE`: the agents given where the mandate goes, and the mandate
/// among the agents; said, with the order to use.
fn swapped(mandate: &std::path::Path, agents: &[PathBuf]) -> anyhow::Result<()> {
    if !mandate.is_dir() {
        return Ok(());
    }
    let is_mandate = |p: &std::path::Path| {
        p.is_file() && std::fs::read_to_string(p).is_ok_and(|t| t.lines().any(|l| l.starts_with("holon_mandate:")))
    };
    match agents.iter().find(|a| is_mandate(a)) {
        Some(m) => anyhow::bail!(
            "the mandate comes first, then the agents: swap them: holon mandate check {} {}",
            m.display(),
            mandate.display()
        ),
        None => Ok(()),
    }
}

/// `holon mandate check`'s flags.
#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// The caller mandate (a YAML file).
    pub(super) mandate: PathBuf,
    /// The agents to decide on: holon.yaml files or directories searched recursively.
    /// They are also the catalog their declared downstream calls resolve in: an agent
    /// they call must be among them (give its directory too), else the caller is denied
    /// `downstream_not_allowed` ("no known manifest of it").
    #[arg(required = true)]
    pub(super) agents: Vec<PathBuf>,
    /// The caller's ceiling for the call, in the mandate's currency.
    #[arg(long, value_name = "AMOUNT", value_parser = super::flags::money, allow_negative_numbers = true)]
    pub(super) max_cost: Option<Amount>,
    /// What the mandate has spent in all, a decimal amount in its currency (default 0).
    #[arg(long, value_name = "AMOUNT", value_parser = super::flags::money, allow_negative_numbers = true)]
    pub(super) spent_total: Option<Amount>,
    /// What it has spent today (UTC), a decimal amount in its currency (default 0).
    #[arg(long, value_name = "AMOUNT", value_parser = super::flags::money, allow_negative_numbers = true)]
    pub(super) spent_today: Option<Amount>,
    /// The decision time (RFC 3339); default now.
    #[arg(long)]
    pub(super) at: Option<String>,
    /// Agent records (files or directories): the measured figures `require` thresholds
    /// are checked against.
    #[arg(long)]
    pub(super) records: Option<PathBuf>,
    /// Print one decision per agent as JSON, with its codes and reasons.
    #[arg(long)]
    pub(super) json: bool,
    /// A revocation list (`holon_revocations`): a mandate on it, or whose parent is,
    /// gets every call denied `mandate_revoked`.
    #[arg(long)]
    pub(super) revocations: Option<PathBuf>,
    /// A trusted keys file: decide as an engine that requires signatures would, so an
    /// agent without its publisher's provenance signature is denied
    /// `provenance_unverified` (check the mandate's own signature with `mandate verify`).
    #[arg(long)]
    pub(super) keys: Option<PathBuf>,
    /// For a sub-mandate: its ancestors' documents (any order, up to the root), so the
    /// call is judged as the engine judges it, on every level (docs/admission.md, "Calls
    /// under a sub-mandate"); a denial names the level that refused it.
    #[arg(long, num_args = 1..)]
    pub(super) parents: Vec<PathBuf>,
    /// The spend of one ancestor, `ID=TOTAL` or `ID=TOTAL,TODAY` (decimal amounts in
    /// its currency; repeat per ancestor; an ancestor not named has spent nothing).
    #[arg(long = "parent-spent", value_name = "ID=TOTAL[,TODAY]")]
    pub(super) parent_spent: Vec<String>,
}

pub(crate) fn check(args: &CheckArgs, style: &Style) -> anyhow::Result<u8> {
    swapped(&args.mandate, &args.agents)?;
    let mandate = documents::load_mandate(&args.mandate)?;
    let catalog = Catalog::load(&args.agents, args.records.as_deref())?;
    if catalog.entries.is_empty() {
        anyhow::bail!("no agent manifest found in {:?}", args.agents);
    }
    let at = match &args.at {
        Some(t) => Timestamp::parse(t).context("--at")?,
        None => Timestamp::now(),
    };
    let spent_total = args.spent_total.unwrap_or_default();
    let ctx = CallContext {
        max_cost: args.max_cost,
        spent_total,
        spent_today: args.spent_today.unwrap_or_default(),
        ..CallContext::at(at)
    };
    let cur = mandate.budget.currency.to_string();
    let revoked = revoked(&mandate, &args.mandate, args.revocations.as_deref())?;
    let keys = args.keys.as_deref().map(documents::load_keys).transpose()?;
    let mut assessor = Assessor::new(&mandate, &catalog)?.revoked(revoked)?;
    if !args.parents.is_empty() {
        let parents = args.parents.iter().map(|p| documents::load_mandate(p)).collect::<Result<Vec<_>, _>>()?;
        let spent = parent_spent(&args.parent_spent)?;
        for (id, ..) in &spent {
            if !parents.iter().any(|p| &p.id == id) {
                anyhow::bail!("--parent-spent names {id}, which is not among the --parents documents");
            }
        }
        assessor = assessor.with_parents(&parents, &spent)?;
    } else if !args.parent_spent.is_empty() {
        anyhow::bail!("--parent-spent needs the ancestors' documents: give them with --parents FILE…");
    }
    if let Some(keys) = &keys {
        assessor = assessor.require_provenance(keys);
    }
    let mut results = Vec::new();
    for e in &catalog.entries {
        results.push((e, assessor.assess(&e.manifest, e.record.as_ref(), &ctx)?));
    }
    let code = if results.iter().any(|(_, a)| a.verdict == Verdict::Denied) {
        exit::FAILED
    } else if results.iter().any(|(_, a)| a.verdict == Verdict::Held) {
        exit::HELD
    } else {
        exit::OK
    };
    if args.json {
        let out = json!({
            "mandate": mandate.id,
            "results": results.iter().map(|(e, a)| json!({
                "agent": e.manifest.id,
                "version": e.manifest.version.to_string(),
                "decision": a.verdict,
                "worst_case": a.worst_case.to_string(),
                "currency": cur,
                "reasons": a.reasons,
            })).collect::<Vec<_>>(),
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(code);
    }
    outln!(
        "{} {} {}",
        style.bold("mandate"),
        mandate.id,
        style.dim(&format!("({} → {}, at {at})", mandate.issuer, mandate.grantee))
    )?;
    let width = results
        .iter()
        .map(|(e, _)| e.manifest.id.as_str().len() + e.manifest.version.to_string().len() + 1)
        .max()
        .unwrap_or(0);
    for (e, a) in &results {
        let name = format!("{}@{}", e.manifest.id, e.manifest.version);
        let verdict = match a.verdict {
            Verdict::Allowed => style.good("allowed"),
            Verdict::Held => style.warn("held   "),
            Verdict::Denied => style.bad("denied "),
        };
        outln!("  {verdict} {name:<width$}  worst case {} {cur}", a.worst_case)?;
        for r in &a.reasons {
            outln!("      {} {}", style.dim(r.code.as_str()), r.message)?;
        }
    }
    Ok(code)
}
