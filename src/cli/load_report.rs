//! How a load test's figures are printed, each with what it counts and in which currency
//! (issue #15: the call mix, the currency and "leased" were left for the reader to guess).

use holon::money::Amount;

use super::loadtest::Report;
use super::out::outln;

pub(crate) fn print(report: &Report, json: bool, style: &super::style::Style) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(report)?)?;
        return Ok(());
    }
    let d = &report.decisions;
    outln!(
        "{} {} calls on {} thread(s) in {:.2} s: {} calls/s",
        style.bold("load"),
        grouped(report.calls),
        report.threads,
        report.elapsed_ms as f64 / 1000.0,
        grouped(report.ops_per_sec)
    )?;
    outln!(
        "  latency   p50 {} ns   p99 {} ns   p99.9 {} ns  {}",
        grouped(report.latency_ns.p50),
        grouped(report.latency_ns.p99),
        grouped(report.latency_ns.p999),
        style.dim(&timed(&report.latency_ns))
    )?;
    if report.latency_ns.by_kind.len() > 1 {
        let kinds: Vec<String> =
            report.latency_ns.by_kind.iter().map(|k| format!("{} {} ns", k.kind, grouped(k.p99))).collect();
        outln!("  p99 by kind  {}", kinds.join("   "))?;
    }
    outln!("  mix       {}", style.dim(&report.mix))?;
    outln!(
        "  decisions {} allowed  {} held  {} denied  ({} sub-calls in delegated runs, counted in these)",
        grouped(d.allowed),
        grouped(d.held),
        grouped(d.denied),
        grouped(report.sub_calls)
    )?;
    if d.lease_pending > 0 || d.budget > 0 {
        outln!(
            "  denials   {} for want of a lease (lease_pending: the node refilling; each waited {} µs and asked again, as a gateway would), {} of the smallest calls for the budget",
            grouped(d.lease_pending),
            super::loadtest::LEASE_WAIT_US,
            grouped(d.budget)
        )?;
    }
    if let Some(spent) = report.settled_at_first_budget_denial_micros {
        let share = spent.saturating_mul(10_000) / report.limit_micros.max(1);
        outln!(
            "  budget    {} {} of {} {} settled here ({}.{:02}%) when the smallest call was first denied for the budget{}",
            Amount::from_micros(spent),
            report.currency,
            Amount::from_micros(report.limit_micros),
            report.currency,
            share / 100,
            share % 100,
            if report.exhausted { "; every thread stopped then" } else { "" }
        )?;
    }
    print_budgets(report, style)?;
    print_receipts(report)
}

/// The audit of every mandate's claims against its limit, and the store's figures.
fn print_budgets(report: &Report, style: &super::style::Style) -> anyhow::Result<()> {
    let audit = if report.overrun { style.bad("OVERRUN") } else { style.good("within limits") };
    let cur = report.currency;
    outln!(
        "  budgets   {} mandate(s) audited: {audit}; largest claimed (reserved+settled+leased) {} {cur} of limit {} {cur}",
        grouped(report.mandates_audited as u64),
        Amount::from_micros(report.max_claimed_micros),
        Amount::from_micros(report.limit_micros)
    )?;
    outln!(
        "            {}",
        style.dim(if report.store.is_some() {
            "claimed: reserved for calls in flight + settled + leased, where leased is budget this node drew from the store ahead of its calls and has not yet used (returned when it stops)"
        } else {
            "claimed: reserved for calls in flight + settled (+ leased, budget a node draws ahead from a store: none here, the budgets are in memory)"
        })
    )?;
    if let (Some(store), Some(settled), Some(spent)) = (&report.store, report.settled_micros, report.store_spent_micros)
    {
        outln!(
            "  store     {} (node {}): {} round trips, {} per 1,000 allowed calls; this node settled {} {cur}, the store counts {} {cur} spent{}",
            store.kind,
            store.node,
            store.round_trips,
            store.round_trips_per_1000_admissions,
            Amount::from_micros(settled),
            Amount::from_micros(spent),
            if store.store_errors > 0 { format!("; {} store errors", store.store_errors) } else { String::new() }
        )?;
    }
    Ok(())
}

/// What became of the receipts.
fn print_receipts(report: &Report) -> anyhow::Result<()> {
    let kept = match &report.receipts_file {
        Some(file) => format!("written to {file}"),
        None => "made and counted, not kept (--receipts FILE writes them)".to_owned(),
    };
    outln!(
        "  receipts  {} {kept}, {} dropped{}{}",
        grouped(report.receipts),
        grouped(report.receipts_dropped),
        // Why they may drop, and how not to.
        if report.receipts_dropped > 0 {
            " (the sink drops rather than slow a call when its writer falls behind; --receipts FILE loses none)"
        } else {
            ""
        },
        if report.publishes > 0 {
            format!("; {} snapshots published meanwhile", report.publishes)
        } else {
            String::new()
        }
    )?;
    Ok(())
}

/// `1234567` as `1,234,567`: the figures are read by people.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What the latency figures are: which calls were timed, and that the timer is in them.
fn timed(l: &super::loadtest::Latency) -> String {
    match l.one_in {
        1 => format!("(every call timed: admit + settle, the timer's {} ns included)", l.timer_floor),
        n => format!(
            "(1 call in {n} timed, {} in all: admit + settle, the timer's {} ns included)",
            grouped(l.timed),
            l.timer_floor
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn figures_are_grouped_by_thousands() {
        for (n, shown) in [
            (0, "0"),
            (999, "999"),
            (1_000, "1,000"),
            (1_234_567, "1,234,567"),
            (u64::MAX, "18,446,744,073,709,551,615"),
        ] {
            assert_eq!(super::grouped(n), shown);
        }
    }
}
