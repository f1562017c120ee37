//! Attenuation: a sub-mandate may narrow everything and widen nothing (docs/rulings.md:
//! caller mandate §4, and "Attenuation": fx, runtimes, published). Every widening is reported with its
//! code and the two values side by side.

use serde::Serialize;

use crate::lookup::AgentLookup;
use crate::mandate::{Mandate, Require};
use crate::pattern::{AgentPattern, ClassPattern};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Widening {
    pub code: &'static str,
    pub message: String,
    pub parent: String,
    pub child: String,
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "(none)".to_owned(), |v| v.to_string())
}

struct Report(Vec<Widening>);
impl Report {
    fn add(
        &mut self,
        code: &'static str,
        message: impl Into<String>,
        parent: impl Into<String>,
        child: impl Into<String>,
    ) {
        self.0.push(Widening { code, message: message.into(), parent: parent.into(), child: child.into() });
    }
}

/// Checks that `child` only narrows `parent`. `lookup` lets an exact agent in the child's
/// `allow.agents` be covered by the parent's class patterns through the agent's known
/// manifest (derived sub-mandates allow exactly the declared agents).
pub fn attenuate(parent: &Mandate, child: &Mandate, lookup: &dyn AgentLookup) -> Vec<Widening> {
    let mut r = Report(Vec::new());
    if !child.names_as_parent(parent) {
        let expected = parent.digest().map_or_else(|| parent.id.clone(), |d| format!("{} or {d}", parent.id));
        r.add(
            "parent_mismatch",
            "`parent` must be the parent's id or the sha256 of its canonical form",
            expected,
            opt(&child.parent),
        );
    }
    if child.issuer != parent.grantee {
        r.add(
            "issuer_mismatch",
            "the issuer must be the parent's grantee",
            parent.grantee.as_str(),
            child.issuer.as_str(),
        );
    }
    if child.valid.from < parent.valid.from || child.valid.until > parent.valid.until {
        r.add(
            "validity_outside_parent",
            "the validity window must sit inside the parent's",
            format!("{} .. {}", parent.valid.from, parent.valid.until),
            format!("{} .. {}", child.valid.from, child.valid.until),
        );
    }
    check_budget(parent, child, &mut r);
    check_allow(parent, child, lookup, &mut r);
    for p in &parent.deny.agents {
        if !child.deny.agents.iter().any(|c| c.covers(p)) {
            r.add(
                "deny_dropped",
                format!("the parent's deny pattern `{p}` must be kept"),
                p.to_string(),
                list(&child.deny.agents),
            );
        }
    }
    check_require(&parent.require, &child.require, &mut r);
    check_data(parent, child, &mut r);
    let allowed_depth = parent.delegation.max_depth.saturating_sub(1);
    if parent.delegation.max_depth == 0 || child.delegation.max_depth > allowed_depth {
        r.add(
            "delegation_depth_not_reduced",
            "each hop consumes one level: the child's max_depth must be at most the parent's minus one (a parent at 0 cannot delegate)",
            parent.delegation.max_depth.to_string(),
            child.delegation.max_depth.to_string(),
        );
    }
    r.0
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    format!("[{}]", items.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "))
}

/// A bound the parent sets must exist in the child and not be higher (budgets, approval,
/// latency).
fn ceiling<T: PartialOrd + std::fmt::Display>(
    r: &mut Report,
    code: &'static str,
    what: &str,
    parent: Option<T>,
    child: Option<T>,
) {
    match (parent, child) {
        (Some(p), Some(c)) if c > p => {
            r.add(code, format!("`{what}` may not be higher than the parent's"), p.to_string(), c.to_string())
        }
        (Some(p), None) => {
            r.add(code, format!("the parent sets `{what}`, so the child must set it too"), p.to_string(), "(none)")
        }
        _ => {}
    }
}

fn check_budget(parent: &Mandate, child: &Mandate, r: &mut Report) {
    let (p, c) = (&parent.budget, &child.budget);
    if p.currency != c.currency {
        r.add(
            "currency_mismatch",
            "the budget currency must be the parent's",
            p.currency.to_string(),
            c.currency.to_string(),
        );
    }
    r.0.extend(total_widening(parent, c.total));
    ceiling(r, "per_call_widened", "budget.per_call", p.per_call, c.per_call);
    ceiling(r, "per_day_widened", "budget.per_day", p.per_day, c.per_day);
    ceiling(
        r,
        "approval_widened",
        "approval.above",
        parent.approval.as_ref().map(|a| a.above),
        child.approval.as_ref().map(|a| a.above),
    );
    for (cur, rate) in &c.fx {
        match p.fx.get(cur) {
            None => r.add(
                "fx_currency_added",
                format!("the parent has no rate for {cur}"),
                "(none)",
                format!("{cur}: {rate}"),
            ),
            Some(prate) if rate < prate => r.add(
                "fx_rate_lowered",
                format!("a lower {cur} rate would undervalue prices and widen the budget"),
                prate.to_string(),
                rate.to_string(),
            ),
            Some(_) => {}
        }
    }
}

/// The one budget rule that depends on the figure a derived sub-mandate gets per call
/// (`delegation::run_figures`): its total may not be above the parent's.
pub(crate) fn total_widening(parent: &Mandate, total: crate::money::Amount) -> Option<Widening> {
    let mut r = Report(Vec::new());
    ceiling(&mut r, "total_widened", "budget.total", Some(parent.budget.total), Some(total));
    r.0.pop()
}

fn check_allow(parent: &Mandate, child: &Mandate, lookup: &dyn AgentLookup, r: &mut Report) {
    for c in &child.allow.capabilities {
        if !parent.allow.capabilities.iter().any(|p| p.covers(c)) {
            r.add(
                "allow_capability_widened",
                format!("`{c}` is not covered by any parent class pattern"),
                list(&parent.allow.capabilities),
                c.to_string(),
            );
        }
    }
    for c in &child.allow.agents {
        let by_pattern = parent.allow.agents.iter().any(|p| p.covers(c));
        let by_class = match c {
            AgentPattern::Exact(id) => lookup.find(id, &semver::VersionReq::STAR).is_some_and(|m| {
                m.classes().any(|cls| {
                    parent.allow.capabilities.iter().any(|p| p.covers(&ClassPattern::Exact(cls.as_str().to_owned())))
                })
            }),
            _ => false,
        };
        if !by_pattern && !by_class {
            r.add(
                "allow_agent_widened",
                format!("`{c}` is not covered by any parent agent pattern"),
                list(&parent.allow.agents),
                c.to_string(),
            );
        }
    }
    if child.allow.published && !parent.allow.published {
        r.add("published_widened", "`allow.published` may be set only if the parent sets it", "false", "true");
    }
}

/// A minimum the parent sets must exist in the child and not be lower (thresholds).
fn min_kept<T: PartialOrd + std::fmt::Display>(
    r: &mut Report,
    code: &'static str,
    what: &str,
    parent: Option<T>,
    child: Option<T>,
) {
    match (parent, child) {
        (Some(p), Some(c)) if c < p => {
            r.add(code, format!("`{what}` may not be lower than the parent's"), p.to_string(), c.to_string())
        }
        (Some(p), None) => {
            r.add(code, format!("the parent requires `{what}`; the child must keep it"), p.to_string(), "(none)")
        }
        _ => {}
    }
}

fn check_require(p: &Require, c: &Require, r: &mut Report) {
    if p.charge_on_success && !c.charge_on_success {
        r.add("charge_on_success_dropped", "the parent requires `charge_on_success`", "true", "false");
    }
    match (&p.runtimes, &c.runtimes) {
        (Some(pr), Some(cr)) if !cr.iter().all(|k| pr.contains(k)) => {
            let show = |v: &[crate::manifest::RuntimeKind]| {
                format!("[{}]", v.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", "))
            };
            r.add("runtimes_widened", "`require.runtimes` must be a subset of the parent's", show(pr), show(cr));
        }
        (Some(_), None) => {
            r.add("runtimes_widened", "the parent restricts runtimes; the child must too", "restricted", "(any)")
        }
        _ => {}
    }
    min_kept(r, "min_success_rate_lowered", "require.min_success_rate", p.min_success_rate, c.min_success_rate);
    min_kept(r, "min_eval_score_lowered", "require.min_eval_score", p.min_eval_score, c.min_eval_score);
    ceiling(r, "max_latency_p95_raised", "require.max_latency_p95_s", p.max_latency_p95_s, c.max_latency_p95_s);
    min_kept(r, "min_runs_lowered", "require.min_runs_30d", p.min_runs_30d, c.min_runs_30d);
}

fn check_data(parent: &Mandate, child: &Mandate, r: &mut Report) {
    let (p, c) = (&parent.data, &child.data);
    if let Some(pr) = &p.max_retention {
        let kept =
            c.max_retention.as_ref().is_some_and(|cr| cr.is_none() || cr == pr || cr.seconds_max() <= pr.seconds_min());
        if !kept {
            r.add(
                "retention_widened",
                "`data.max_retention` may not be longer than the parent's",
                pr.to_string(),
                opt(&c.max_retention),
            );
        }
    }
    if p.forbids_training() && !c.forbids_training() {
        r.add(
            "training_use_widened",
            "the parent says `training_use: false`; the child must too",
            "false",
            opt(&c.training_use),
        );
    }
    if p.forbids_egress() && !c.forbids_egress() {
        r.add(
            "egress_widened",
            "the parent says `allow_egress: false`; the child must too",
            "false",
            opt(&c.allow_egress),
        );
    }
}
