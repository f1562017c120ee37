//! Rules of a single mandate that the schema cannot express. Rules that relate a mandate
//! to its parent are attenuation (`crate::attenuation`).

use super::model::Mandate;
use crate::doc::Violation;
use crate::money::Fixed6;

pub fn validate(m: &Mandate) -> Vec<Violation> {
    let mut out = Vec::new();
    if m.valid.from >= m.valid.until {
        out.push(Violation::new(
            "/valid/until",
            format!("`until` ({}) must be after `from` ({}): mandates always expire", m.valid.until, m.valid.from),
        ));
    }
    if !m.grantee.is_agent() {
        out.push(Violation::new(
            "/grantee",
            format!("`{}` is an account; a mandate is granted to an agent (`namespace/name`)", m.grantee),
        ));
    }
    if m.parent.is_none() && m.issuer.is_agent() {
        out.push(Violation::new(
            "/issuer",
            format!(
                "a root mandate (no `parent`) is issued by a person or organization account, not by the agent `{}`",
                m.issuer
            ),
        ));
    }
    if m.parent.as_deref() == Some(m.id.as_str()) {
        out.push(Violation::new("/parent", "a mandate cannot be its own parent"));
    }
    out.extend(super::limits::figure_violations(m));
    let b = &m.budget;
    for (field, value) in [("per_call", b.per_call), ("per_day", b.per_day)] {
        if let Some(v) = value
            && v > b.total
        {
            out.push(Violation::new(
                format!("/budget/{field}"),
                format!("{v} is above `total` {}; it could never be reached", b.total),
            ));
        }
    }
    if b.fx.contains_key(&b.currency) {
        out.push(Violation::new(
            format!("/budget/fx/{}", b.currency),
            "a rate from the budget's own currency into itself is implied (1); remove it",
        ));
    }
    for (field, value) in
        [("min_success_rate", m.require.min_success_rate), ("min_eval_score", m.require.min_eval_score)]
    {
        if value.is_some_and(|v| v > Fixed6::ONE) {
            out.push(Violation::new(format!("/require/{field}"), "must be between 0 and 1"));
        }
    }
    out
}
