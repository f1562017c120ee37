//! The one table of the largest figures a mandate may carry: what the engine can hold. The
//! mandate's own rules (`validate`, so `holon validate` and every load) and the engine's
//! publish both refuse a figure above its bound, from this table, with the bound in the
//! message; the engine's words are const-asserted against it.

use super::model::Mandate;
use crate::doc::Violation;
use crate::money::Amount;

/// The largest `budget.total`, in micro-units: a store-backed ledger's allowance cap
/// (2^62, about 4.6 million million units), which its leases are withheld from.
pub const TOTAL_MICROS_MAX: u64 = 1 << 62;
/// The largest `budget.per_day`, in micro-units: what the engine's day word holds beside
/// its day number (2^48 − 1, about 281 million units).
pub const PER_DAY_MICROS_MAX: u64 = (1 << 48) - 1;

/// One bounded figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FigureLimit {
    /// The figure's place in the document (a JSON Pointer).
    pub pointer: &'static str,
    pub max_micros: u64,
    /// Why the bound is what it is.
    pub why: &'static str,
}

/// Every bound a mandate's figures meet.
pub const FIGURE_LIMITS: [FigureLimit; 2] = [
    FigureLimit {
        pointer: "/budget/total",
        max_micros: TOTAL_MICROS_MAX,
        why: "2^62 micro-units, a store-backed ledger's allowance cap",
    },
    FigureLimit {
        pointer: "/budget/per_day",
        max_micros: PER_DAY_MICROS_MAX,
        why: "2^48 − 1 micro-units, what the engine's day word holds",
    },
];

/// The figures of `m` above their bounds, each as a violation naming the bound.
pub fn figure_violations(m: &Mandate) -> Vec<Violation> {
    let b = &m.budget;
    FIGURE_LIMITS
        .iter()
        .zip([Some(b.total), b.per_day])
        .filter_map(|(limit, value)| {
            let value = value.filter(|v| v.micros() > limit.max_micros)?;
            Some(Violation::new(
                limit.pointer,
                format!(
                    "{value} is above the most the engine can hold, {} ({}); lower it",
                    Amount::from_micros(limit.max_micros),
                    limit.why
                ),
            ))
        })
        .collect()
}
