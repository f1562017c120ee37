//! `holon mandate check | attenuate | derive | simulate`.

use std::path::{Path, PathBuf};

use holon::admission::{CallContext, Code, Verdict};
use holon::attenuation;
use holon::catalog::Catalog;
use holon::delegation;
use holon::doc;
use holon::documents;
use holon::engine::Assessor;
use holon::lookup::NoAgents;
use holon::money::Amount;
use holon::scenario::{self, ReceiptNode};
use serde_json::json;

use super::exit;
use super::out::{errln, out, outln};
use super::style::Style;

/// `agents`: manifests for declared agents (what `derive` resolved against); none: no
/// agent is known, so a child naming declared agents is checked against nothing.
pub(crate) fn attenuate(
    parent: &Path,
    child: &Path,
    agents: &[PathBuf],
    json: bool,
    style: &Style,
) -> anyhow::Result<u8> {
    let parent = documents::load_mandate(parent)?;
    let child = documents::load_mandate(child)?;
    let widenings = if agents.is_empty() {
        attenuation::attenuate(&parent, &child, &NoAgents)
    } else {
        let catalog = Catalog::load(agents, None)?;
        attenuation::attenuate(&parent, &child, &catalog)
    };
    if json {
        let out = json!({
            "valid": widenings.is_empty(),
            "reasons": widenings.iter().map(|w| json!({"code": w.code, "message": w.message, "parent": w.parent, "child": w.child})).collect::<Vec<_>>(),
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else if widenings.is_empty() {
        outln!("{} {} narrows {}", style.good("valid"), child.id, parent.id)?;
    } else {
        outln!("{} {} widens {}:", style.bad("invalid"), child.id, parent.id)?;
        for w in &widenings {
            outln!("  {} {}", style.bold(w.code), w.message)?;
            outln!("      parent: {}   child: {}", w.parent, w.child)?;
        }
        // Without the manifests an agent the parent allows through its capability classes
        // (as `mandate derive` lists them) cannot be seen to be covered.
        if agents.is_empty() && widenings.iter().any(|w| w.code == "allow_agent_widened") {
            outln!(
                "{}",
                style.dim(
                    "  an agent allowed through a capability class the parent allows is covered only if its manifest is known: pass --agents DIR (e.g. --agents examples/agents)"
                )
            )?;
        }
    }
    Ok(if widenings.is_empty() { exit::OK } else { exit::FAILED })
}

pub(crate) fn derive(
    parent: &Path,
    agent: &Path,
    max_cost: Option<Amount>,
    json: bool,
    style: &Style,
) -> anyhow::Result<u8> {
    let parent = documents::load_mandate(parent)?;
    let manifest_path = if agent.is_dir() { agent.join("holon.yaml") } else { agent.to_path_buf() };
    // Declared downstream agents are resolved among the manifest's siblings. If they cannot
    // be read, derive without them (unresolved agents match no class: fail closed) and say so.
    // The siblings of the agent's directory, whether the path named the directory or
    // its holon.yaml (a file path once searched only the agent's own directory).
    let siblings = manifest_path.parent().and_then(Path::parent).filter(|p| !p.as_os_str().is_empty());
    let siblings = siblings.unwrap_or(Path::new(".")).to_path_buf();
    let catalog = Catalog::load(std::slice::from_ref(&siblings), None).unwrap_or_else(|e| {
        errln!("holon: warning: the manifests beside the agent cannot be read ({e}); declared agents stay unresolved");
        Catalog::default()
    });
    let manifest = documents::load_manifest(&manifest_path)?;
    if manifest.calls.is_empty() {
        anyhow::bail!("{} declares no downstream calls: there is no sub-mandate to derive", manifest.id);
    }
    // The sub-budget is the worst case's part for sub-calls (the engine's own judgement);
    // only the codes that make it unknowable stop the derivation.
    let ctx = CallContext { max_cost, ..CallContext::at(parent.valid.from) };
    let assessed = Assessor::new(&parent, &catalog)?.assess(&manifest, None, &ctx)?;
    let unknowable = [Code::MaxCostBelowPrice, Code::AmountOverflow, Code::CurrencyWithoutRate];
    let blocking: Vec<&str> =
        assessed.reasons.iter().filter(|r| unknowable.contains(&r.code)).map(|r| r.message.as_str()).collect();
    if !blocking.is_empty() {
        anyhow::bail!("cannot compute the sub-budget of {}: {}", manifest.id, blocking.join("; "));
    }
    match delegation::derive(&parent, &manifest, assessed.sub_budget, &catalog) {
        Ok(sub) => {
            if json {
                outln!("{}", serde_json::to_string_pretty(&json!({"derived": true, "mandate": sub}))?)?;
            } else {
                out!("{}", doc::to_yaml(&sub)?)?;
            }
            Ok(exit::OK)
        }
        Err(refusal) => {
            if json {
                outln!("{}", serde_json::to_string_pretty(&json!({"derived": false, "reasons": refusal.reasons}))?)?;
            } else {
                outln!("{} the sub-mandate for {} would widen {}:", style.bad("refused"), manifest.id, parent.id)?;
                for w in &refusal.reasons {
                    outln!("  {} {} (parent {}, derived {})", style.bold(w.code), w.message, w.parent, w.child)?;
                }
            }
            Ok(exit::FAILED)
        }
    }
}

pub(crate) fn simulate(
    mandate_path: &Path,
    scenario_path: &Path,
    (revocations, parents, parent_spent): (Option<&Path>, &[PathBuf], &[String]),
    json: bool,
    style: &Style,
) -> anyhow::Result<u8> {
    let (s, mandate, catalog) = scenario::load(scenario_path, Some(mandate_path))?;
    let parents = parents.iter().map(|p| documents::load_mandate(p)).collect::<Result<Vec<_>, _>>()?;
    let revoked = super::trust::revoked(&mandate, mandate_path, revocations)?;
    let spent = super::flags::parent_spent(parent_spent)?;
    let report = scenario::run_under(&s, &mandate, (&parents, &spent), &catalog, revoked)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!("{} {} {}", style.bold("simulation under"), report.mandate, style.dim(&format!("at {}", s.at)))?;
        for (i, r) in report.receipts.iter().enumerate() {
            outln!("{}", style.bold(&format!("call {}", i + 1)))?;
            print_receipt(r, &report.currency, 1, style)?;
        }
        outln!("{} {} {}", style.bold("billed in total"), report.billed, report.currency)?;
    }
    Ok(exit::OK)
}

fn print_receipt(r: &ReceiptNode, cur: &str, depth: usize, style: &Style) -> std::io::Result<()> {
    let pad = "  ".repeat(depth);
    let verdict = match r.decision {
        Verdict::Allowed => style.good("allowed"),
        Verdict::Held => style.warn("held"),
        Verdict::Denied => style.bad("denied"),
    };
    let approved = r.approved_by.as_ref().map(|a| format!(" (approved by {a})")).unwrap_or_default();
    outln!("{pad}{verdict}{approved} {}  worst case {} {cur}  billed {} {cur}", r.agent, r.worst_case, r.billed)?;
    for reason in &r.reasons {
        outln!("{pad}    {} {}", style.dim(reason.code.as_str()), reason.message)?;
    }
    if let Some(st) = &r.settlement
        && (!r.children.is_empty() || st.downstream > Amount::ZERO)
    {
        outln!("{pad}    own {} + downstream {} = {} {cur}", st.own, st.downstream, st.billed)?;
    }
    if !r.children.is_empty() {
        outln!(
            "{pad}    {} sub-call(s) under {}:",
            r.children.len(),
            r.children.first().map_or("", |c| c.mandate.as_str())
        )?;
    }
    for c in &r.children {
        print_receipt(c, cur, depth + 3, style)?;
    }
    Ok(())
}

#[derive(clap::Subcommand)]
pub(super) enum MandateCommand {
    /// May the grantee call these agents? Exit 0 all allowed, 3 some held, 1 some denied.
    #[command(
        after_help = "EXIT CODES: 0 every agent allowed, 3 some held for the issuer and none denied, 1 some denied, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon mandate check examples/mandates/alice-root.yaml examples/agents --max-cost 0.40\n  holon mandate check examples/mandates/alice-root.yaml examples/agents --revocations examples/trust/revocations.yaml\n  holon mandate check examples/mandates/alice-research.yaml examples/agents --records examples/agents --json\n  holon mandate check examples/mandates/alice-invoices.yaml examples/agents --parents examples/mandates/alice-root.yaml --parent-spent alice/m-2026-11=19.997,19.997"
    )]
    Check(super::mandate_check::CheckArgs),
    /// Is CHILD within PARENT? Exit 0 valid, 1 not.
    #[command(
        after_help = "EXIT CODES: 0 CHILD is within PARENT, 1 it widens it somewhere (each widening printed), 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon mandate attenuate examples/mandates/alice-root.yaml examples/mandates/alice-research.yaml"
    )]
    Attenuate {
        /// The parent mandate (a YAML file).
        parent: PathBuf,
        /// The child mandate that must narrow it in every way.
        child: PathBuf,
        /// Agent manifests (files or directories) that declared `agent@range` patterns
        /// resolve against, as `mandate derive` resolves them; without, they match nothing.
        #[arg(long)]
        agents: Vec<PathBuf>,
        /// Print the verdict and every widening found as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the sub-mandate the gateway derives for AGENT's delegated run.
    #[command(
        after_help = "EXIT CODES: 0 derived, 1 refused (the sub-mandate would widen the parent), 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon mandate derive examples/mandates/alice-root.yaml examples/agents/invoice-pipeline/holon.yaml --max-cost 0.60"
    )]
    Derive {
        /// The caller's mandate the run is admitted under (a YAML file).
        parent: PathBuf,
        /// The orchestrator agent's manifest: a path to its holon.yaml (or its directory), not
        /// its id.
        agent: PathBuf,
        /// The caller's ceiling for the run, in the mandate's currency (default: the
        /// agent's price ceiling).
        #[arg(long, value_name = "AMOUNT", value_parser = super::flags::money, allow_negative_numbers = true)]
        max_cost: Option<Amount>,
        /// Print {"derived": true, "mandate": …} (or false with the reasons) instead of YAML.
        #[arg(long)]
        json: bool,
    },
    /// Replay a delegated call tree described in a scenario file.
    #[command(
        after_help = "EXIT CODES: 0 replayed, 2 bad input (an unreadable or invalid file, a bad flag, a closed output pipe).\n\nEXAMPLES:\n  holon mandate simulate examples/mandates/alice-root.yaml examples/worked-example/scenario.yaml"
    )]
    Simulate {
        /// The root caller mandate (a YAML file).
        mandate: PathBuf,
        /// The scenario file: the call tree to replay (examples/worked-example/scenario.yaml).
        scenario: PathBuf,
        /// Print every call's decision and the totals as JSON.
        #[arg(long)]
        json: bool,
        /// A revocation list (`holon_revocations`): a revoked mandate's calls are all
        /// denied `mandate_revoked`.
        #[arg(long)]
        revocations: Option<PathBuf>,
        /// For a sub-mandate: its ancestors' documents (any order, up to the root); every
        /// call is judged on the whole chain and what it bills counts on every level.
        #[arg(long, num_args = 1..)]
        parents: Vec<PathBuf>,
        /// The spend of one ancestor before the first call, `ID=TOTAL` or `ID=TOTAL,TODAY`
        /// (repeat per ancestor; an ancestor not named starts at nothing spent).
        #[arg(long = "parent-spent", value_name = "ID=TOTAL[,TODAY]", requires = "parents")]
        parent_spent: Vec<String>,
    },
    /// Print MANDATE signed by its issuer's key (docs/trust.md).
    #[command(
        after_help = "EXIT CODES: 0 signed (printed, or written to --out), 2 bad input (an unreadable or invalid mandate or key, a key that is not the issuer's, a closed output pipe).\n\nEXAMPLES:\n  holon mandate sign examples/mandates/alice-root.yaml --key examples/trust/alice.key\n  holon mandate sign my-mandate.yaml --key alice.key --out my-mandate.signed.yaml"
    )]
    Sign {
        /// The mandate to sign (a YAML file); its `issuer` must be the key's account.
        mandate: PathBuf,
        /// The issuer's private key file (`holon key new` writes it).
        #[arg(long)]
        key: PathBuf,
        /// Write the signed mandate here (replaced atomically) instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Does MANDATE's signature hold, and every link of its chain up to the root?
    #[command(
        after_help = "EXIT CODES: 0 the signature and the whole chain hold, 1 they do not (the first broken link is named), 2 bad input (an unreadable or invalid file, a closed output pipe).\n\nEXAMPLES:\n  holon mandate verify examples/trust/research-2026-12.yaml --keys examples/trust/keys.yaml\n  holon mandate verify examples/mandates/alice-root.yaml --keys examples/trust/keys.yaml --json\n  holon mandate verify child.yaml --keys keys.yaml --parents mandates/"
    )]
    Verify {
        /// The signed mandate (a YAML file).
        mandate: PathBuf,
        /// The trusted keys file (`holon_keys`): which key may sign for which issuer.
        #[arg(long)]
        keys: PathBuf,
        /// Where the parents are (files or directories searched for mandates, matched by
        /// the `parent: sha256:` digest); default MANDATE's own directory.
        #[arg(long)]
        parents: Vec<PathBuf>,
        /// Agent manifests (files or directories) that attenuation resolves declared
        /// `agent@range` patterns against, as `mandate attenuate --agents` does.
        #[arg(long)]
        agents: Vec<PathBuf>,
        /// Print {"verified", "mandate", "links" or "reason"} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the `sha256:` digest a sub-mandate names MANDATE by (`parent: sha256:...`).
    #[command(
        after_help = "EXIT CODES: 0 printed, 2 bad input (an unreadable or invalid mandate, a number with no canonical form, a closed output pipe).\n\nEXAMPLES:\n  holon mandate digest examples/mandates/alice-root.yaml"
    )]
    Digest {
        /// The mandate (a YAML file); its signature block, if any, is not part of it.
        mandate: PathBuf,
    },
}
