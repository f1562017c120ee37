//! Every violation of a document in one pass (issue #15): shape problems, a value that
//! does not type, and the kind's own rules on the parts that typed correctly, each at its
//! place in the document as written, and never a problem that only the cutting caused.

mod common;
use common::*;
use serde_json::json;

fn paths(found: &[String]) -> Vec<&str> {
    found.iter().map(|v| v.split_once(": ").map_or(v.as_str(), |(p, _)| p)).collect()
}

#[test]
fn a_mandate_reports_shape_and_rule_problems_together() {
    let base = load_value("examples/mandates/alice-root.yaml");
    let bad = apply(
        &base,
        &[
            // Shape: an unknown key, a bad agent pattern, a lower-case currency key, a ratio out of range.
            set("/require/colour", json!("red")),
            set("/allow/agents", json!(["Holon-Labs/*", "holon-labs/*"])),
            set("/budget/fx", json!({"usd": "0.92"})),
            set("/require/min_success_rate", json!("1.5")),
            // Rules: limits no call could reach, and a window that ends before it starts.
            set("/budget/per_call", json!("200.00")),
            set("/budget/per_day", json!("300.00")),
            set("/valid/until", json!("2026-10-01T00:00:00Z")),
        ],
    );
    let found = violations(&bad);
    let expected = vec![
        "/allow/agents/0",
        "/budget/fx",
        "/budget/per_call",
        "/budget/per_day",
        "/require",
        "/require/min_success_rate",
        "/valid/until",
    ];
    assert_eq!(paths(&found), expected, "one violation per problem, none caused by the cuts: {found:#?}");
    // Words, not a regular expression, where words say the form.
    assert!(found.iter().all(|v| !v.contains("(pattern ")), "{found:#?}");
    // Fixing one leaves exactly the others.
    let fixed = apply(&bad, &[set("/budget/per_day", json!("20.00"))]);
    assert_eq!(violations(&fixed).len(), 6);
}

#[test]
fn a_value_that_does_not_type_is_reported_with_the_shape_problems() {
    let base = load_value("examples/mandates/alice-root.yaml");
    // The schema takes any short string as a time; typing refuses this one. `valid.from`
    // is required, so the rules wait for it (docs/documents.md), but the shape problems
    // and the typing problem come together.
    let bad = apply(
        &base,
        &[
            set("/valid/from", json!("yesterday")),
            set("/require/colour", json!("red")),
            set("/budget/fx", json!({"usd": "0.92"})),
        ],
    );
    let found = violations(&bad);
    assert_eq!(paths(&found), vec!["/budget/fx", "/require", "/valid/from"], "{found:#?}");
    assert!(found.iter().any(|v| v.contains("RFC 3339")), "{found:#?}");
}

#[test]
fn a_rule_problem_after_a_cut_list_element_keeps_its_index() {
    let base = load_value("examples/agents/invoice-pipeline/holon.yaml");
    let cap = base["capabilities"][0].clone();
    let mut bad_class = cap.clone();
    bad_class["class"] = json!("Not A Class");
    // [bad shape, ok, the same class again]: the duplicate is element 2 as written, even
    // though element 0 was cut before the rules ran.
    let bad = apply(&base, &[set("/capabilities", json!([bad_class, cap.clone(), cap]))]);
    let found = violations(&bad);
    let at = paths(&found);
    assert!(at.contains(&"/capabilities/0/class"), "{found:#?}");
    assert!(at.contains(&"/capabilities/2/class"), "the duplicate, at its written index: {found:#?}");
    assert!(found.iter().any(|v| v.contains("listed twice")), "{found:#?}");
    assert_eq!(found.len(), 2, "{found:#?}");
}

#[test]
fn a_missing_key_is_reported_once_and_the_rest_still_judged() {
    let base = load_value("examples/mandates/alice-root.yaml");
    // `approval.above` is required inside `approval`: the object cannot be typed, but
    // the budget rule elsewhere is still found.
    let bad = apply(&base, &[set("/approval", json!({})), set("/budget/per_call", json!("200.00"))]);
    let found = violations(&bad);
    assert_eq!(paths(&found), vec!["/approval", "/budget/per_call"], "{found:#?}");
    // A required key missing at the top: nothing can be typed, the shape is reported.
    let bad = apply(&base, &[remove("/budget"), set("/require/colour", json!(1))]);
    let found = violations(&bad);
    assert_eq!(paths(&found), vec!["/", "/require"], "{found:#?}");
}

#[test]
fn a_valid_document_is_untouched_by_the_one_pass() {
    for path in ["examples/mandates/alice-root.yaml", "examples/agents/invoice-pipeline/holon.yaml"] {
        assert_eq!(violations(&load_value(path)), Vec::<String>::new(), "{path}");
    }
}

/// A rule that reads a field which was cut can be wrong about the rest (a cut `parent`
/// makes a child look like a root): what the rules find after a cut is marked provisional.
#[test]
fn rule_findings_after_a_cut_are_marked_provisional() {
    let base = load_value("examples/mandates/alice-research.yaml");
    let bad = apply(&base, &[set("/parent", json!("Alice M 2026"))]);
    let found = violations(&bad);
    assert!(found.iter().any(|v| v.starts_with("/parent: ")), "{found:#?}");
    for v in found.iter().filter(|v| !v.starts_with("/parent: ")) {
        assert!(v.ends_with("check again once they are fixed)"), "{v}");
    }
    // Without a cut nothing is provisional.
    let only_rules =
        apply(&load_value("examples/mandates/alice-root.yaml"), &[set("/budget/per_day", json!("300.00"))]);
    assert!(violations(&only_rules).iter().all(|v| !v.contains("check again")), "{:#?}", violations(&only_rules));
}
