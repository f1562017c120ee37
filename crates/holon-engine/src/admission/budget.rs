//! The per-call part of admission: validity window, worst case under `max_cost`, and the
//! budget limits. Integer compares on micro-units only: no allocation, no decimal work,
//! so the engine's hot path runs exactly this code.

use crate::admission::code::{Code, CodeSet};
use crate::mandate::Mandate;
use crate::money::Amount;

/// A mandate's money limits, in its currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    pub total: Amount,
    pub per_call: Option<Amount>,
    pub per_day: Option<Amount>,
    /// Calls with a worst case strictly above this are held.
    pub approval_above: Option<Amount>,
}

impl BudgetLimits {
    pub fn of(m: &Mandate) -> Self {
        BudgetLimits {
            total: m.budget.total,
            per_call: m.budget.per_call,
            per_day: m.budget.per_day,
            approval_above: m.approval.as_ref().map(|a| a.above),
        }
    }
}

/// The worst case of a call and the budget its sub-calls get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorstCase {
    pub worst: Amount,
    pub sub_budget: Amount,
}

/// docs/rulings.md, "Worst case and budgets": ceiling + passthrough cap; a lower `max_cost` replaces it
/// and the sub-calls get `max_cost` minus the ceiling; a `max_cost` below the ceiling is
/// denied.
pub fn worst_case(own: Amount, cap: Amount, max_cost: Option<Amount>) -> (WorstCase, CodeSet) {
    let Ok(full) = own.checked_add(cap) else {
        return (WorstCase { worst: Amount::MAX, sub_budget: Amount::ZERO }, CodeSet::EMPTY.with(Code::AmountOverflow));
    };
    match max_cost {
        Some(mc) if mc < own => {
            (WorstCase { worst: mc, sub_budget: Amount::ZERO }, CodeSet::EMPTY.with(Code::MaxCostBelowPrice))
        }
        // `mc >= own` here, so the subtraction cannot underflow.
        Some(mc) if mc < full => (WorstCase { worst: mc, sub_budget: mc.saturating_sub(own) }, CodeSet::EMPTY),
        _ => (WorstCase { worst: full, sub_budget: cap }, CodeSet::EMPTY),
    }
}

/// `spent + worst <= limit`, where an overflow counts as exceeding.
fn fits(spent: Amount, worst: Amount, limit: Amount) -> bool {
    spent.checked_add(worst).is_ok_and(|sum| sum <= limit)
}

/// Limits are inclusive: `worst <= per_call`, `spent_total + worst <= total`,
/// `spent_today + worst <= per_day`. `spent_*` include what is reserved.
pub fn check_limits(limits: &BudgetLimits, worst: Amount, spent_total: Amount, spent_today: Amount) -> CodeSet {
    let mut codes = CodeSet::EMPTY;
    if limits.per_call.is_some_and(|cap| worst > cap) {
        codes.insert(Code::PerCallExceeded);
    }
    if !fits(spent_total, worst, limits.total) {
        codes.insert(Code::TotalExceeded);
    }
    if limits.per_day.is_some_and(|cap| !fits(spent_today, worst, cap)) {
        codes.insert(Code::PerDayExceeded);
    }
    codes
}

/// Held when the worst case is strictly above `approval.above`.
pub fn needs_approval(limits: &BudgetLimits, worst: Amount) -> bool {
    limits.approval_above.is_some_and(|above| worst > above)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Amount {
        Amount::parse(s).unwrap()
    }

    #[test]
    fn worst_case_follows_the_ruling() {
        let (w, c) = worst_case(a("0.10"), a("3.00"), None);
        assert_eq!((w.worst, w.sub_budget, c), (a("3.10"), a("3.00"), CodeSet::EMPTY));
        let (w, c) = worst_case(a("0.10"), a("3.00"), Some(a("0.60")));
        assert_eq!((w.worst, w.sub_budget, c), (a("0.60"), a("0.50"), CodeSet::EMPTY));
        let (w, _) = worst_case(a("0.10"), a("3.00"), Some(a("5")));
        assert_eq!(w.worst, a("3.10"));
        let (_, c) = worst_case(a("0.10"), a("3.00"), Some(a("0.099999")));
        assert!(c.contains(Code::MaxCostBelowPrice));
        let (w, c) = worst_case(a("0.10"), a("3.00"), Some(a("0.10")));
        assert_eq!((w.worst, w.sub_budget, c), (a("0.10"), Amount::ZERO, CodeSet::EMPTY));
        let (_, c) = worst_case(Amount::MAX, a("1"), None);
        assert!(c.contains(Code::AmountOverflow));
    }

    #[test]
    fn limits_are_inclusive_and_one_micro_over_fails() {
        let limits = BudgetLimits {
            total: a("10"),
            per_call: Some(a("2")),
            per_day: Some(a("5")),
            approval_above: Some(a("0.5")),
        };
        assert!(check_limits(&limits, a("2"), a("8"), a("3")).is_empty());
        let over = Amount::from_micros(1);
        assert_eq!(
            check_limits(&limits, a("2.000001"), Amount::ZERO, Amount::ZERO),
            CodeSet::EMPTY.with(Code::PerCallExceeded)
        );
        assert_eq!(
            check_limits(&limits, a("2"), a("8").checked_add(over).unwrap(), Amount::ZERO),
            CodeSet::EMPTY.with(Code::TotalExceeded)
        );
        assert_eq!(
            check_limits(&limits, a("2"), Amount::ZERO, a("3").checked_add(over).unwrap()),
            CodeSet::EMPTY.with(Code::PerDayExceeded)
        );
        assert!(check_limits(&limits, a("1"), Amount::MAX, Amount::ZERO).contains(Code::TotalExceeded));
        assert!(!needs_approval(&limits, a("0.5")));
        assert!(needs_approval(&limits, a("0.500001")));
    }
}
