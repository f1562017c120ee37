//! `holon mandate simulate`: replays a delegated call tree described in a small YAML
//! scenario through the decision logic, producing decisions, bills and the receipt tree.
//! The format is in docs/scenario.md, its shape in `schema/holon-scenario.schema.json`.
//!
//! ```yaml
//! holon_scenario: "0.1"
//! mandate: ../mandates/alice-root.yaml   # paths relative to the scenario file
//! agents: ../agents                      # manifests (with record.yaml beside them)
//! at: "2026-11-20T10:00:00Z"             # the clock of the simulation
//! calls:                                 # top-level calls, in order (at most 100)
//!   - agent: holon-labs/invoice-pipeline
//!     max_cost: "0.60"                   # optional, in the mandate's currency
//!     approve_as: alice                  # optional: who approves if the call is held
//!     outcome: success                   # success | invalid_output | error:CODE | gateway:CODE
//!     charge: "0.10"                     # optional own charge; default its price ceiling
//!     sub_calls:                         # optional, at most 100
//!       - { capability: extraction.table, cost: "0.004" }   # or `agent: ns/name`
//! ```
//! Sub-call costs are in the mandate's currency. A capability sub-call goes to the
//! admissible implementer with the lowest worst case (then id).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::admission::{self, CallContext, Code, Reason, Verdict};
use crate::catalog::{Catalog, Entry};
use crate::delegation;
use crate::doc::{self, LoadError};
use crate::documents;
use crate::engine::{Assessor, Callee, EngineError};
use crate::mandate::Mandate;
use crate::money::Amount;
use crate::pattern::{AgentId, ClassName, Principal};
use crate::settlement::{self, RunOutcome};
use crate::time::Timestamp;

/// Most calls (top-level, and sub-calls per top call) a scenario may describe.
pub const CALLS_MAX: usize = 100;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub holon_scenario: String,
    /// Optional here: `holon mandate simulate MANDATE SCENARIO` names it.
    #[serde(default)]
    pub mandate: Option<PathBuf>,
    pub agents: PathBuf,
    #[serde(default)]
    pub records: Option<PathBuf>,
    pub at: Timestamp,
    pub calls: Vec<TopCall>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopCall {
    pub agent: AgentId,
    #[serde(default)]
    pub max_cost: Option<Amount>,
    #[serde(default)]
    pub approve_as: Option<Principal>,
    #[serde(default = "success")]
    pub outcome: String,
    #[serde(default)]
    pub charge: Option<Amount>,
    #[serde(default)]
    pub sub_calls: Vec<PlannedSubCall>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedSubCall {
    #[serde(default)]
    pub capability: Option<ClassName>,
    #[serde(default)]
    pub agent: Option<AgentId>,
    pub cost: Amount,
    #[serde(default = "success")]
    pub outcome: String,
}

fn success() -> String {
    "success".into()
}

fn parse_outcome(s: &str) -> Option<RunOutcome> {
    match s {
        "success" => Some(RunOutcome::Success { output_valid: true }),
        "invalid_output" => Some(RunOutcome::Success { output_valid: false }),
        _ => match s.split_once(':') {
            Some(("error", code)) => Some(RunOutcome::Error { code: code.into() }),
            Some(("gateway", code)) => Some(RunOutcome::Gateway { code: code.into() }),
            _ => None,
        },
    }
}

/// One node of the receipt tree.
#[derive(Debug, Clone, Serialize)]
pub struct ReceiptNode {
    pub agent: String,
    pub mandate: String,
    pub decision: Verdict,
    pub worst_case: Amount,
    pub billed: Amount,
    pub reasons: Vec<Reason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settlement: Option<settlement::Settlement>,
    pub children: Vec<ReceiptNode>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub mandate: String,
    pub currency: String,
    pub receipts: Vec<ReceiptNode>,
    /// Total billed to the mandate over the scenario.
    pub billed: Amount,
}

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Reads and checks a scenario from its text (the files it names are not read);
/// `origin` names it in errors.
pub fn parse_str(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
    let s: Scenario = doc::parse_scenario(text, origin)?;
    if s.holon_scenario != "0.1" {
        return Err(ScenarioError::Invalid(format!("{origin}: `holon_scenario` must be \"0.1\"")));
    }
    if s.calls.len() > CALLS_MAX || s.calls.iter().any(|c| c.sub_calls.len() > CALLS_MAX) {
        return Err(ScenarioError::Invalid(format!("{origin}: at most {CALLS_MAX} calls per level")));
    }
    Ok(s)
}

/// Loads a scenario and everything it names; `mandate` overrides the scenario's own.
pub fn load(path: &Path, mandate: Option<&Path>) -> Result<(Scenario, Mandate, Catalog), ScenarioError> {
    let text = doc::read_text(path, &doc::Limits::default())
        .map_err(|source| LoadError::Unreadable { path: path.display().to_string(), error: source })?;
    let s = match parse_str(&text, &path.display().to_string()) {
        Err(ScenarioError::Load(LoadError::WrongKind { path, found, .. })) => {
            return Err(ScenarioError::Invalid(format!(
                "{path}: expected a scenario (`holon_scenario: \"0.1\"`), found a {found}: the mandate comes first, `holon mandate simulate MANDATE SCENARIO`"
            )));
        }
        other => other?,
    };
    let base = path.parent().unwrap_or(Path::new("."));
    let mandate_path = match (mandate, &s.mandate) {
        (Some(m), _) => m.to_path_buf(),
        (None, Some(m)) => base.join(m),
        (None, None) => return Err(ScenarioError::Invalid(format!("{}: no mandate named", path.display()))),
    };
    let mandate = documents::load_mandate(&mandate_path)?;
    let records = s.records.as_ref().map(|r| base.join(r));
    let catalog = Catalog::load(&[base.join(&s.agents)], records.as_deref())?;
    Ok((s, mandate, catalog))
}

/// Runs the scenario. Spend accumulates across the top-level calls.
pub fn run(s: &Scenario, mandate: &Mandate, catalog: &Catalog) -> Result<Report, ScenarioError> {
    run_revoked(s, mandate, catalog, false)
}

/// [`run`] with the mandate on a revocation list when `revoked` (every call denied
/// `mandate_revoked`, and no run opens).
pub fn run_revoked(s: &Scenario, mandate: &Mandate, catalog: &Catalog, revoked: bool) -> Result<Report, ScenarioError> {
    run_under(s, mandate, (&[], &[]), catalog, revoked)
}

/// [`run_revoked`] for a sub-mandate with its ancestors' documents (`parents`): every
/// top-level call is judged on the whole chain as the engine judges it, and what each bills
/// counts on every level (docs/admission.md, "Calls under a sub-mandate").
/// `parent_spent` is each ancestor's spend before the first call, by id, as (total, today).
pub fn run_under(
    s: &Scenario,
    mandate: &Mandate,
    (parents, parent_spent): (&[Mandate], &[(String, Amount, Amount)]),
    catalog: &Catalog,
    revoked: bool,
) -> Result<Report, ScenarioError> {
    let mut spent = Amount::ZERO;
    let mut receipts = Vec::new();
    // The mandate compiled once for every top-level call.
    let mut assessor = Assessor::new(mandate, catalog)?.revoked(revoked)?;
    if !parents.is_empty() {
        assessor = assessor.with_parents(parents, parent_spent)?;
    }
    let invalid = |e: crate::money::MoneyError| ScenarioError::Invalid(e.to_string());
    for call in &s.calls {
        let receipt = run_top(s, &assessor, catalog, call, spent)?;
        spent = spent.checked_add(receipt.billed).map_err(invalid)?;
        assessor.add_parent_spend(receipt.billed).map_err(invalid)?;
        receipts.push(receipt);
    }
    Ok(Report { mandate: mandate.id.clone(), currency: mandate.budget.currency.to_string(), receipts, billed: spent })
}

impl ReceiptNode {
    /// A receipt at decision time: nothing billed, approved, settled or called yet.
    fn decided(agent: String, mandate: String, decision: Verdict, worst_case: Amount, reasons: Vec<Reason>) -> Self {
        ReceiptNode {
            agent,
            mandate,
            decision,
            worst_case,
            billed: Amount::ZERO,
            reasons,
            approved_by: None,
            settlement: None,
            children: vec![],
        }
    }
}

fn denied(agent: &str, mandate: &str, code: Code, message: String) -> ReceiptNode {
    ReceiptNode::decided(agent.into(), mandate.into(), Verdict::Denied, Amount::ZERO, vec![Reason::new(code, message)])
}

fn run_top(
    s: &Scenario,
    assessor: &Assessor<'_>,
    catalog: &Catalog,
    call: &TopCall,
    spent: Amount,
) -> Result<ReceiptNode, ScenarioError> {
    let mandate = assessor.mandate();
    let Some(entry) = catalog.get(&call.agent) else {
        return Ok(denied(
            call.agent.as_str(),
            &mandate.id,
            Code::UnknownAgent,
            format!("no manifest for {} under the scenario's `agents`", call.agent),
        ));
    };
    let outcome = parse_outcome(&call.outcome)
        .ok_or_else(|| ScenarioError::Invalid(format!("unknown outcome `{}`", call.outcome)))?;
    let ctx = CallContext { max_cost: call.max_cost, spent_total: spent, spent_today: spent, ..CallContext::at(s.at) };
    let a = assessor.assess(&entry.manifest, entry.record.as_ref(), &ctx)?;
    let mut receipt = ReceiptNode::decided(
        entry.manifest.id.to_string(),
        mandate.id.clone(),
        a.verdict,
        a.worst_case,
        a.reasons.clone(),
    );
    match a.verdict {
        Verdict::Denied => return Ok(receipt),
        Verdict::Held => {
            let Some(approver) = &call.approve_as else { return Ok(receipt) };
            if let Err(e) = admission::check_approver(mandate, approver) {
                receipt.reasons.push(Reason::new(Code::ApprovalRequired, format!("approval refused: {e}")));
                return Ok(receipt);
            }
            // Approving re-admits the call; the held reason stays on the receipt.
            receipt.decision = Verdict::Allowed;
            receipt.approved_by = Some(approver.to_string());
        }
        Verdict::Allowed => {}
    }
    // The worst case is now reserved on the mandate; the children spend the sub-budget.
    let mut downstream = Amount::ZERO;
    if !entry.manifest.calls.is_empty() {
        let sub = match delegation::derive(mandate, &entry.manifest, a.sub_budget, catalog) {
            Ok(sub) => sub,
            Err(refusal) => {
                receipt.decision = Verdict::Denied;
                for w in refusal.reasons {
                    receipt.reasons.push(Reason::new(
                        Code::SubMandateWidens,
                        format!("{}: {} (parent {}, derived {})", w.code, w.message, w.parent, w.child),
                    ));
                }
                return Ok(receipt);
            }
        };
        // The derived sub-mandate compiled once for the run's sub-calls (if it has any).
        if !call.sub_calls.is_empty() {
            let sub_assessor = Assessor::new(&sub, catalog)?;
            for sc in &call.sub_calls {
                let child = run_sub(s, &sub_assessor, entry, catalog, sc, downstream)?;
                downstream = downstream.checked_add(child.billed).map_err(|e| ScenarioError::Invalid(e.to_string()))?;
                receipt.children.push(child);
            }
        }
    } else if !call.sub_calls.is_empty() {
        for sc in &call.sub_calls {
            let name = sc
                .agent
                .as_ref()
                .map(|a| a.to_string())
                .or(sc.capability.as_ref().map(|c| c.to_string()))
                .unwrap_or_default();
            receipt.children.push(denied(
                &name,
                &mandate.id,
                Code::CallNotDeclared,
                format!("{} declares no downstream calls", entry.manifest.id),
            ));
        }
    }
    let own_charge = call.charge.unwrap_or(a.own_ceiling);
    let st = settlement::settle(&entry.manifest, &outcome, own_charge, downstream, a.worst_case, catalog)
        .map_err(|e| ScenarioError::Invalid(e.to_string()))?;
    receipt.billed = st.billed;
    receipt.settlement = Some(st);
    Ok(receipt)
}

fn run_sub(
    s: &Scenario,
    assessor: &Assessor<'_>,
    orchestrator: &Entry,
    catalog: &Catalog,
    sc: &PlannedSubCall,
    sub_spent: Amount,
) -> Result<ReceiptNode, ScenarioError> {
    let outcome = parse_outcome(&sc.outcome)
        .ok_or_else(|| ScenarioError::Invalid(format!("unknown outcome `{}`", sc.outcome)))?;
    let sub = assessor.mandate();
    let ctx = CallContext { spent_total: sub_spent, spent_today: sub_spent, delegated: true, ..CallContext::at(s.at) };
    let assess = |target: Callee<'_>, callee: &Entry| {
        assessor.assess_sub_call(&orchestrator.manifest, target, &callee.manifest, callee.record.as_ref(), &ctx)
    };
    let (callee, a) = match (&sc.capability, &sc.agent) {
        (Some(cap), None) => {
            let target = Callee::Capability(cap.as_str());
            let mut assessed = Vec::new();
            for e in catalog.entries.iter().filter(|e| e.manifest.classes().any(|c| c == cap)) {
                assessed.push((e, assess(target, e)?));
            }
            let best =
                assessed.into_iter().filter(|(_, a)| a.verdict == Verdict::Allowed).min_by(|(e1, a1), (e2, a2)| {
                    a1.worst_case.cmp(&a2.worst_case).then_with(|| e1.manifest.id.cmp(&e2.manifest.id))
                });
            match best {
                Some(found) => found,
                None => {
                    return Ok(denied(
                        cap.as_str(),
                        &sub.id,
                        Code::NotAllowed,
                        format!("no implementer of `{cap}` is admissible under {}", sub.id),
                    ));
                }
            }
        }
        (None, Some(id)) => match catalog.get(id) {
            Some(e) => (e, assess(Callee::Agent, e)?),
            None => {
                let why = format!("no manifest for {id} under the scenario's `agents`");
                return Ok(denied(id.as_str(), &sub.id, Code::UnknownAgent, why));
            }
        },
        _ => return Err(ScenarioError::Invalid("a sub-call names exactly one of `capability` or `agent`".into())),
    };
    let mut receipt =
        ReceiptNode::decided(callee.manifest.id.to_string(), sub.id.clone(), a.verdict, a.worst_case, a.reasons);
    if a.verdict == Verdict::Allowed {
        let st = settlement::settle(&callee.manifest, &outcome, sc.cost, Amount::ZERO, a.worst_case, catalog)
            .map_err(|e| ScenarioError::Invalid(e.to_string()))?;
        receipt.billed = st.billed;
        receipt.settlement = Some(st);
    }
    Ok(receipt)
}
