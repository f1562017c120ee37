//! Settlement rules and the exact-sum property; ranking under a mandate.

use holon::catalog::Catalog;
use holon::documents;
use holon::money::Amount;
use holon::pattern::AgentId;
use holon::ranking;
use holon::settlement::{RunOutcome, billable, settle};
use holon::time::Timestamp;
use proptest::prelude::*;

fn catalog() -> Catalog {
    Catalog::load(&["examples/agents".into()], None).unwrap()
}
fn id(s: &str) -> AgentId {
    AgentId::parse(s).unwrap()
}
fn a(s: &str) -> Amount {
    Amount::parse(s).unwrap()
}

#[test]
fn what_gets_billed() {
    let c = catalog();
    let table = &c.get(&id("acme/table-extract")).unwrap().manifest; // charge_on success
    let reader = &c.get(&id("holon-labs/page-reader")).unwrap().manifest; // attempt, too_many_pages billed
    assert!(billable(table, &RunOutcome::Success { output_valid: true }));
    assert!(!billable(table, &RunOutcome::Success { output_valid: false }));
    assert!(!billable(table, &RunOutcome::Error { code: "no_tables_found".into() }));
    assert!(billable(reader, &RunOutcome::Error { code: "too_many_pages".into() }));
    assert!(!billable(reader, &RunOutcome::Error { code: "undeclared_thing".into() }));
    assert!(!billable(reader, &RunOutcome::Error { code: "timeout".into() }));
    assert!(!billable(reader, &RunOutcome::Gateway { code: "timeout".into() }));
}

#[test]
fn fee_royalties_and_clamping() {
    let c = catalog();
    let summarizer = &c.get(&id("newco/table-summarizer")).unwrap().manifest; // forked from table-extract, royalty 0.15
    let s = settle(summarizer, &RunOutcome::Success { output_valid: true }, a("0.05"), Amount::ZERO, a("0.05"), &c)
        .unwrap();
    assert_eq!(s.billed, a("0.05"));
    assert_eq!(s.platform_fee, a("0.005"));
    assert_eq!(s.payouts.len(), 2);
    assert_eq!(s.payouts[1].agent, id("acme/table-extract"));
    assert_eq!(s.payouts[1].amount, a("0.00675")); // 15% of 0.045
    assert_eq!(s.payouts[0].amount, a("0.03825"));
    // Asking for more than the reservation is a gateway fault: clamped, flagged.
    let s = settle(summarizer, &RunOutcome::Success { output_valid: true }, a("0.07"), Amount::ZERO, a("0.05"), &c)
        .unwrap();
    assert!(s.clamped);
    assert_eq!(s.billed, a("0.05"));
    // Not billable: nothing, not even passthrough.
    let s = settle(summarizer, &RunOutcome::Gateway { code: "timeout".into() }, a("0.05"), a("0.01"), a("0.06"), &c)
        .unwrap();
    assert_eq!(s.billed, Amount::ZERO);
}

proptest! {
    #[test]
    fn parts_always_sum_to_the_bill(own in 0u64..10_000_000_000, down in 0u64..10_000_000_000, reserved in 0u64..20_000_000_000, which in 0usize..7) {
        let c = catalog();
        let agent = &c.entries[which % c.entries.len()].manifest;
        let s = settle(agent, &RunOutcome::Success { output_valid: true }, Amount::from_micros(own), Amount::from_micros(down), Amount::from_micros(reserved), &c).unwrap();
        let parts = s.payouts.iter().fold(s.platform_fee.checked_add(s.downstream).unwrap(), |acc, p| acc.checked_add(p.amount).unwrap());
        prop_assert_eq!(parts, s.billed);
        prop_assert!(s.billed <= Amount::from_micros(reserved));
        prop_assert_eq!(s.own.checked_add(s.downstream).unwrap(), s.billed);
    }
}

#[test]
fn ranking_removes_denied_and_orders_by_cost_per_success() {
    let m = documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap();
    let r = ranking::rank(&m, &catalog(), "", Timestamp::parse("2026-11-20T10:00:00Z").unwrap()).unwrap();
    let ranked: Vec<&str> = r.ranked.iter().map(|x| x.agent.as_str()).collect();
    // fx-convert 0.001/0.995, company-lookup 0.00184/0.93, table-extract 0.004/0.97
    assert_eq!(ranked, vec!["holon-labs/fx-convert", "acme/company-lookup", "acme/table-extract"]);
    assert!(
        r.excluded
            .iter()
            .any(|x| x.agent.as_str() == "shady/invoice-scraper" && x.reason.code.as_str() == "agent_denied")
    );
    let r = ranking::rank(&m, &catalog(), "table", Timestamp::parse("2026-11-20T10:00:00Z").unwrap()).unwrap();
    assert_eq!(r.ranked.first().map(|x| x.agent.as_str()), Some("acme/table-extract"));
    assert_eq!(
        ranking::cost_per_success(a("0.004"), Some(holon::money::Fixed6::from_millionths(970_000))),
        Some(a("0.004124"))
    );
}
