//! The part of admission that depends only on the mandate, the callee's manifest and
//! record: everything but time, spend and the caller's `max_cost`. The engine computes it
//! once per (mandate, agent) when it compiles a snapshot; the CLI computes it per check.

use crate::admission::code::{Code, CodeSet, Reason};
use crate::lookup::AgentLookup;
use crate::mandate::Mandate;
use crate::manifest::{ChargeOn, Manifest, PricingModel};
use crate::money::{Amount, Fixed6};
use crate::pattern::{AgentId, AgentPattern, ClassPattern};
use crate::record::AgentRecord;

/// Facts about one agent under one mandate that do not change from call to call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    /// Denials that hold for every call, with their sentences.
    pub reasons: Vec<Reason>,
    /// The same codes as a set.
    pub codes: CodeSet,
    /// Set when the agent is outside the issuer's namespace and `allow.published` is off:
    /// applies only to calls that name a capability rather than the agent.
    pub published: Option<Reason>,
    /// The agent's own price ceiling in the mandate's currency (rounded up).
    pub own_ceiling: Amount,
    /// The passthrough cap in the mandate's currency (0 if none).
    pub passthrough_cap: Amount,
}

impl Fit {
    /// `own_ceiling + passthrough_cap`, the worst case without a `max_cost`.
    pub fn full_worst_case(&self) -> Option<Amount> {
        self.own_ceiling.checked_add(self.passthrough_cap).ok()
    }
}

fn deny_match<'a>(patterns: &'a [AgentPattern], id: &AgentId) -> Option<&'a AgentPattern> {
    patterns.iter().find(|p| p.matches(id))
}

fn class_allowed(m: &Mandate, class: &str) -> bool {
    m.allow.capabilities.iter().any(|p| p.matches(class))
}

/// Whether the mandate's `allow` matches an agent, by id or by one of its classes.
pub fn allows_agent(m: &Mandate, agent: &Manifest) -> bool {
    m.allow.agents.iter().any(|p| p.matches(&agent.id)) || agent.classes().any(|c| class_allowed(m, c.as_str()))
}

/// Computes the fit of `agent` (with its measured `record`) under `mandate`.
pub fn fit(mandate: &Mandate, agent: &Manifest, record: Option<&AgentRecord>, lookup: &dyn AgentLookup) -> Fit {
    let mut reasons = Vec::new();
    let mut add = |code: Code, message: String| reasons.push(Reason::new(code, message));

    if let Some(p) = deny_match(&mandate.deny.agents, &agent.id) {
        add(Code::AgentDenied, format!("{} matches deny pattern `{p}`", agent.id));
    }
    if !allows_agent(mandate, agent) {
        let classes: Vec<&str> = agent.classes().map(|c| c.as_str()).collect();
        add(
            Code::NotAllowed,
            format!(
                "neither {} nor its classes [{}] match `allow.capabilities` or `allow.agents`",
                agent.id,
                classes.join(", ")
            ),
        );
    }
    check_downstream(mandate, agent, lookup, &mut add);
    check_requirements(mandate, agent, &mut add);
    check_data(mandate, agent, &mut add);
    check_record(mandate, agent, record, &mut add);

    let (own_ceiling, passthrough_cap) = convert_prices(mandate, agent, &mut add);
    if own_ceiling.checked_add(passthrough_cap).is_err() {
        add(Code::AmountOverflow, "the price plus the downstream cap overflows".into());
    }
    let published = (!mandate.allow.published && agent.id.namespace() != mandate.issuer.namespace()).then(|| {
        Reason::new(
            Code::PublishedNotAllowed,
            format!(
                "{} is published by `{}`, not by the issuer `{}`, and `allow.published` is off; name the agent to call it",
                agent.id,
                agent.id.namespace(),
                mandate.issuer.namespace()
            ),
        )
    });
    let codes = reasons.iter().fold(CodeSet::EMPTY, |set, r| set.with(r.code));
    Fit { reasons, codes, published, own_ceiling, passthrough_cap }
}

fn check_downstream(mandate: &Mandate, agent: &Manifest, lookup: &dyn AgentLookup, add: &mut impl FnMut(Code, String)) {
    if agent.calls.is_empty() {
        return;
    }
    if mandate.delegation.max_depth < 1 {
        add(
            Code::DelegationDepthExceeded,
            format!(
                "{} declares {} downstream call(s) but `delegation.max_depth` is {}",
                agent.id,
                agent.calls.len(),
                mandate.delegation.max_depth
            ),
        );
    }
    for call in &agent.calls {
        if let Some(class) = &call.capability {
            let covered =
                mandate.allow.capabilities.iter().any(|p| p.covers(&ClassPattern::Exact(class.as_str().to_owned())));
            if !covered {
                add(
                    Code::DownstreamNotAllowed,
                    format!("declared call to capability `{class}` is not within `allow.capabilities`"),
                );
            }
        }
        if let Some(target) = &call.agent {
            if let Some(p) = deny_match(&mandate.deny.agents, &target.id) {
                add(Code::DownstreamNotAllowed, format!("declared call to `{target}` matches deny pattern `{p}`"));
                continue;
            }
            let by_id = mandate.allow.agents.iter().any(|p| p.matches(&target.id));
            let by_class = lookup
                .find(&target.id, &target.range)
                .is_some_and(|m| m.classes().any(|c| class_allowed(mandate, c.as_str())));
            if !by_id && !by_class {
                add(
                    Code::DownstreamNotAllowed,
                    format!(
                        "declared call to `{target}` matches no `allow.agents` pattern, and no known manifest of it has an allowed class"
                    ),
                );
            }
        }
    }
}

fn check_requirements(mandate: &Mandate, agent: &Manifest, add: &mut impl FnMut(Code, String)) {
    let req = &mandate.require;
    if req.charge_on_success
        && agent.pricing.model != PricingModel::Free
        && agent.pricing.charge_on() != ChargeOn::Success
    {
        add(
            Code::ChargeOnSuccessRequired,
            format!("{} charges on attempt; the mandate requires `charge_on: success`", agent.id),
        );
    }
    if let Some(runtimes) = &req.runtimes
        && !runtimes.contains(&agent.runtime.kind)
    {
        let allowed: Vec<&str> = runtimes.iter().map(|r| r.as_str()).collect();
        add(
            Code::RuntimeNotAllowed,
            format!("runtime `{}` is not in `require.runtimes` [{}]", agent.runtime.kind.as_str(), allowed.join(", ")),
        );
    }
}

fn check_data(mandate: &Mandate, agent: &Manifest, add: &mut impl FnMut(Code, String)) {
    let rules = &mandate.data;
    if let Some(limit) = &rules.max_retention
        && !agent.data.retention.fits_within(limit)
    {
        add(
            Code::RetentionTooLong,
            format!(
                "{} retains data for {}, which may be longer than `max_retention` {limit}",
                agent.id, agent.data.retention
            ),
        );
    }
    if rules.forbids_training() && agent.data.training_use {
        add(
            Code::TrainingUseNotAllowed,
            format!("{} may train on the data; the mandate says `training_use: false`", agent.id),
        );
    }
    if rules.forbids_egress() && !agent.data.egress.is_empty() {
        add(
            Code::EgressNotAllowed,
            format!(
                "{} sends data to [{}]; the mandate says `allow_egress: false`",
                agent.id,
                agent.data.egress.join(", ")
            ),
        );
    }
}

fn check_record(mandate: &Mandate, agent: &Manifest, record: Option<&AgentRecord>, add: &mut impl FnMut(Code, String)) {
    let req = &mandate.require;
    if !req.has_thresholds() {
        return;
    }
    let applies = record.filter(|r| r.agent == agent.id && r.version.as_ref().is_none_or(|v| v == &agent.version));
    let Some(rec) = applies else {
        add(
            Code::RecordMissing,
            format!("no measured record for {}@{}; an unmeasured agent is not trusted", agent.id, agent.version),
        );
        return;
    };
    let at_least =
        |min: Option<Fixed6>, got: Option<Fixed6>, code: Code, what: &str, add: &mut dyn FnMut(Code, String)| {
            if let Some(min) = min {
                match got {
                    Some(v) if v >= min => {}
                    Some(v) => add(code, format!("{what} {v} is below the required {min}")),
                    None => add(code, format!("no {what} measured; the mandate requires at least {min}")),
                }
            }
        };
    at_least(req.min_success_rate, rec.effective_success_rate(), Code::SuccessRateBelowMin, "success rate", add);
    at_least(req.min_eval_score, rec.eval_score, Code::EvalScoreBelowMin, "eval score", add);
    if let Some(max) = req.max_latency_p95_s {
        match rec.latency_p95_s {
            Some(v) if v <= max => {}
            Some(v) => add(Code::LatencyP95AboveMax, format!("p95 latency {v}s is above the allowed {max}s")),
            None => {
                add(Code::LatencyP95AboveMax, format!("no p95 latency measured; the mandate allows at most {max}s"))
            }
        }
    }
    if let Some(min) = req.min_runs_30d {
        match rec.runs_30d {
            Some(v) if v >= min => {}
            Some(v) => add(Code::RunsBelowMin, format!("{v} runs in 30 days, below the required {min}")),
            None => {
                add(Code::RunsBelowMin, format!("no run count measured; the mandate requires {min} runs in 30 days"))
            }
        }
    }
}

/// The agent's ceiling and passthrough cap in the mandate's currency, rounded up.
/// A missing rate or an overflow is a denial and leaves the figure at 0.
fn convert_prices(mandate: &Mandate, agent: &Manifest, add: &mut impl FnMut(Code, String)) -> (Amount, Amount) {
    let pricing = &agent.pricing;
    let ceiling = pricing.ceiling().unwrap_or(Amount::ZERO);
    let cap = pricing.passthrough_cap().unwrap_or(Amount::ZERO);
    if ceiling == Amount::ZERO && cap == Amount::ZERO {
        return (Amount::ZERO, Amount::ZERO);
    }
    let Some(currency) = pricing.currency else {
        add(Code::CurrencyWithoutRate, format!("{} is priced without a currency", agent.id));
        return (Amount::ZERO, Amount::ZERO);
    };
    let Some(rate) = mandate.budget.rate(currency) else {
        add(
            Code::CurrencyWithoutRate,
            format!(
                "{} is priced in {currency} and the mandate has no `budget.fx` rate from {currency} into {}",
                agent.id, mandate.budget.currency
            ),
        );
        return (Amount::ZERO, Amount::ZERO);
    };
    match (ceiling.convert(rate), cap.convert(rate)) {
        (Ok(c), Ok(k)) => (c, k),
        _ => {
            add(
                Code::AmountOverflow,
                format!("converting {}'s price into {} overflows", agent.id, mandate.budget.currency),
            );
            (Amount::ZERO, Amount::ZERO)
        }
    }
}
