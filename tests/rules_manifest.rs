//! One failing case per manifest rule (and the passing base plus boundary variants).
//! Each case edits a valid manifest at a JSON Pointer and expects a violation there.

mod common;
use common::*;
use serde_json::json;

const BASE: &str = "examples/agents/invoice-pipeline/holon.yaml";

/// (what the rule is, edits, the pointer the violation must name)
fn failing_cases() -> Vec<(&'static str, Vec<Edit>, &'static str)> {
    let h40 = "0123456789abcdef0123456789abcdef01234567";
    vec![
        ("holon version", vec![set("/holon", json!("0.2"))], "/holon"),
        ("id shape", vec![set("/id", json!("Holon-Labs/pipeline"))], "/id"),
        ("version is semver", vec![set("/version", json!("1.4"))], "/version"),
        ("license is SPDX", vec![set("/license", json!("Apache 2"))], "/license"),
        ("license is OSI-approved", vec![set("/license", json!("CC-BY-NC-4.0"))], "/license"),
        ("authors kind", vec![set("/authors/0/kind", json!("robot"))], "/authors/0/kind"),
        ("authors not empty", vec![set("/authors", json!([]))], "/authors"),
        ("source ref is a commit", vec![set("/source/ref", json!("main"))], "/source/ref"),
        ("source ref is full", vec![set("/source/ref", json!(&h40[..12]))], "/source/ref"),
        ("source repository is a URL", vec![set("/source/repository", json!("holon-labs/x"))], "/source/repository"),
        ("input is JSON Schema", vec![set("/interface/input", json!({"type": "objekt"}))], "/interface/input/type"),
        (
            "output is JSON Schema",
            vec![set("/interface/output", json!({"minItems": -1}))],
            "/interface/output/minItems",
        ),
        (
            "uniqueItems needs maxItems",
            vec![set("/interface/output/properties/lines", json!({"type": "array", "uniqueItems": true}))],
            "/interface/output/properties/lines/uniqueItems",
        ),
        (
            "uniqueItems maxItems <= 1000",
            vec![set(
                "/interface/output/properties/lines",
                json!({"type": "array", "uniqueItems": true, "maxItems": 1001}),
            )],
            "/interface/output/properties/lines/uniqueItems",
        ),
        (
            "error codes unique",
            vec![set("/interface/errors/1/code", json!("budget_too_small"))],
            "/interface/errors/1/code",
        ),
        (
            "error codes not reserved",
            vec![set("/interface/errors/1/code", json!("timeout"))],
            "/interface/errors/1/code",
        ),
        ("billed needs attempt", vec![set("/interface/errors/0/billed", json!(true))], "/interface/errors/0/billed"),
        ("modes values", vec![set("/interface/modes", json!(["batch"]))], "/interface/modes/0"),
        (
            "clarification needs async/stream",
            vec![set("/interface/modes", json!(["sync"])), set("/interface/clarification", json!(true))],
            "/interface/clarification",
        ),
        (
            "capability class shape",
            vec![set("/capabilities/0/class", json!("Extraction.Invoice"))],
            "/capabilities/0/class",
        ),
        (
            "implements shape",
            vec![set("/capabilities/0/implements", json!("extraction.invoice"))],
            "/capabilities/0/implements",
        ),
        ("pricing model", vec![set("/pricing/model", json!("subscription"))], "/pricing/model"),
        ("money is a string", vec![set("/pricing/amount", json!(0.10))], "/pricing/amount"),
        ("money decimals", vec![set("/pricing/amount", json!("0.1000001"))], "/pricing/amount"),
        ("per_run needs amount", vec![remove("/pricing/amount")], "/pricing/amount"),
        (
            "per_unit needs unit",
            vec![set("/pricing/model", json!("per_unit")), set("/pricing/max", json!("1.00"))],
            "/pricing/unit",
        ),
        (
            "per_unit needs max",
            vec![set("/pricing/model", json!("per_unit")), set("/pricing/unit", json!("page"))],
            "/pricing/max",
        ),
        (
            "per_unit price within max",
            vec![
                set("/pricing/model", json!("per_unit")),
                set("/pricing/unit", json!("page")),
                set("/pricing/max", json!("0.05")),
            ],
            "/pricing/amount",
        ),
        ("quote needs max", vec![set("/pricing/model", json!("quote")), remove("/pricing/amount")], "/pricing/max"),
        ("free has no amount", vec![set("/pricing/model", json!("free"))], "/pricing/amount"),
        ("paid needs currency", vec![remove("/pricing/currency")], "/pricing/currency"),
        ("currency shape", vec![set("/pricing/currency", json!("eur"))], "/pricing/currency"),
        ("calls need downstream", vec![remove("/pricing/downstream")], "/pricing/downstream"),
        ("passthrough needs cap", vec![remove("/pricing/downstream/cap")], "/pricing/downstream/cap"),
        ("runtime kind", vec![set("/runtime/kind", json!("lambda"))], "/runtime/kind"),
        (
            "container image pinned",
            vec![set("/runtime/image", json!("ghcr.io/holon-labs/invoice-pipeline:latest"))],
            "/runtime/image",
        ),
        ("mcp needs endpoint", vec![set("/runtime/kind", json!("mcp")), remove("/runtime/image")], "/runtime/endpoint"),
        (
            "a2a endpoint is a URL",
            vec![
                set("/runtime/kind", json!("a2a")),
                remove("/runtime/image"),
                set("/runtime/endpoint", json!("lookup.example")),
            ],
            "/runtime/endpoint",
        ),
        ("timeout bounded", vec![set("/runtime/limits/timeout_s", json!(0))], "/runtime/limits/timeout_s"),
        ("retention none or ISO duration", vec![set("/data/retention", json!("7 days"))], "/data/retention"),
        ("egress hosts", vec![set("/data/egress", json!(["https://x.example/path"]))], "/data/egress/0"),
        ("call names capability or agent", vec![set("/calls/0", json!({"max_cost": "0.05"}))], "/calls/0"),
        ("call has max_cost", vec![remove("/calls/0/max_cost")], "/calls/0"),
        (
            "call agent has a semver range",
            vec![set("/calls/2/agent", json!("acme/company-lookup@latest"))],
            "/calls/2/agent",
        ),
        (
            "royalty in [0,1]",
            vec![set("/lineage", json!({"forked_from": "acme/table-extract@2.3.1", "royalty": 1.5}))],
            "/lineage/royalty",
        ),
        ("min_royalty <= 0.5", vec![set("/fork_policy", json!({"min_royalty": "0.6"}))], "/fork_policy/min_royalty"),
        (
            "a successful example",
            vec![set(
                "/examples",
                json!([{"input": {"document_url": "u", "currency": "EUR"}, "error": "unreadable_document"}]),
            )],
            "/examples",
        ),
        (
            "example input validates",
            vec![set("/examples/0/input/currency", json!("euro"))],
            "/examples/0/input/currency",
        ),
        ("example output validates", vec![remove("/examples/0/output/total")], "/examples/0/output"),
        ("example error declared", vec![set("/examples/1/error", json!("no_such_error"))], "/examples/1/error"),
        ("unknown keys refused", vec![set("/pricing/amout", json!("0.10"))], "/pricing"),
        ("unknown top-level keys refused", vec![set("/homepage", json!("x"))], "/"),
        ("description bounded", vec![set("/description", json!("x".repeat(5000)))], "/description"),
    ]
}

#[test]
fn base_manifest_is_valid() {
    assert_eq!(violations(&load_value(BASE)), Vec::<String>::new());
}

#[test]
fn every_rule_fails_where_it_should() {
    let base = load_value(BASE);
    let mut problems = Vec::new();
    for (rule, edits, path) in failing_cases() {
        let doc = apply(&base, &edits);
        let found = violations(&doc);
        if !found.iter().any(|v| v.starts_with(&format!("{path}: "))) {
            problems.push(format!("{rule}: expected a violation at {path}, got {found:?}"));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn boundaries_pass() {
    let base = load_value(BASE);
    let passing: Vec<(&str, Vec<Edit>)> = vec![
        (
            "uniqueItems with maxItems 1000",
            vec![set(
                "/interface/output/properties/lines",
                json!({"type": "array", "uniqueItems": true, "maxItems": 1000}),
            )],
        ),
        ("min_royalty exactly 0.5", vec![set("/fork_policy", json!({"min_royalty": 0.5}))]),
        (
            "royalty exactly 1",
            vec![set("/lineage", json!({"forked_from": "acme/table-extract@2.3.1", "royalty": "1"}))],
        ),
        (
            "billed under attempt",
            vec![set("/pricing/charge_on", json!("attempt")), set("/interface/errors/0/billed", json!(true))],
        ),
        ("clarification with async", vec![set("/interface/clarification", json!(true))]),
        (
            "per_unit at max",
            vec![
                set("/pricing/model", json!("per_unit")),
                set("/pricing/unit", json!("page")),
                set("/pricing/max", json!("0.10")),
            ],
        ),
        ("sha-256 commit", vec![set("/source/ref", json!("a".repeat(64)))]),
        ("SPDX expression of OSI licenses", vec![set("/license", json!("MIT OR Apache-2.0"))]),
        ("included downstream, no cap", vec![set("/pricing/downstream", json!({"mode": "included"}))]),
        ("six decimals", vec![set("/pricing/amount", json!("0.100001"))]),
    ];
    for (what, edits) in passing {
        let found = violations(&apply(&base, &edits));
        assert!(found.is_empty(), "{what}: {found:?}");
    }
}

#[test]
fn all_violations_are_reported_at_once() {
    let base = load_value(BASE);
    let doc = apply(
        &base,
        &[
            set("/license", json!("Proprietary")),
            set("/source/ref", json!("main")),
            set("/runtime/image", json!("x:latest")),
        ],
    );
    let found = violations(&doc);
    assert!(found.len() >= 3, "{found:?}");
    let doc = apply(&base, &[set("/pricing/amount", json!(0.1)), set("/extra", json!(1)), set("/id", json!("x"))]);
    assert!(violations(&doc).len() >= 3);
}

#[test]
fn money_number_message_names_the_field_and_the_fix() {
    let doc = apply(&load_value(BASE), &[set("/pricing/amount", json!(0.03))]);
    let found = violations(&doc);
    assert!(
        found.iter().any(|v| v.starts_with("/pricing/amount: ") && v.contains("quoted decimal string")),
        "{found:?}"
    );
}

/// `d0: anyOf [d1, d1]`, `d1: anyOf [d2, d2]`, ... : each level doubles the validation work.
fn any_of_fan_out(depth: usize) -> serde_json::Value {
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(format!("d{i}"), json!({"anyOf": [{"$ref": next}, {"$ref": next}]}));
    }
    defs.insert(format!("d{depth}"), json!({"type": "integer"}));
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

/// An `anyOf` fan-out of depth 22 in an interface schema made validating the examples
/// exponential (depth 20: 1.5 GB; depth 22: aborted on allocation failure). It is refused
/// before compiling, at once, with the reason.
#[test]
fn schema_fan_out_is_refused_in_bounded_time() {
    let doc = apply(&load_value(BASE), &[set("/interface/input", any_of_fan_out(22))]);
    let started = std::time::Instant::now();
    let found = violations(&doc);
    // Generous: the unbounded work took minutes and gigabytes; a loaded machine is slow.
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "took {:?}", started.elapsed());
    assert!(
        found
            .iter()
            .any(|v| v.starts_with("/interface/input: ") && v.contains("more than 100000 subschema applications")),
        "{found:?}"
    );
    // A small fan-out is fine.
    let doc = apply(&load_value(BASE), &[set("/interface/input", any_of_fan_out(3))]);
    assert!(!violations(&doc).iter().any(|v| v.contains("subschema")), "{:?}", violations(&doc));
}

/// What the work bound cannot follow is refused, not trusted: a `$ref` loop on the same
/// value, references outside the schema, `$id` below the root, chains past the limit.
#[test]
fn schema_references_the_bound_cannot_follow_are_refused() {
    let base = load_value(BASE);
    let mut chain = serde_json::Map::new();
    for i in 0..300 {
        chain.insert(format!("c{i}"), json!({"$ref": format!("#/$defs/c{}", i + 1)}));
    }
    chain.insert("c300".into(), json!({"type": "object"}));
    for (schema, words) in [
        (json!({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}), "refers to itself"),
        (json!({"$ref": "https://example.com/schema.json"}), "only local references"),
        (json!({"$ref": "#/$defs/missing"}), "only local references"),
        (json!({"$defs": {"a": {"$id": "urn:a", "type": "object"}}, "$ref": "urn:a"}), "`$id` below the root"),
        (json!({"$defs": chain, "$ref": "#/$defs/c0"}), "more than 256 levels"),
    ] {
        let found = violations(&apply(&base, &[set("/interface/input", schema)]));
        assert!(found.iter().any(|v| v.starts_with("/interface/input: ") && v.contains(words)), "{words}: {found:?}");
    }
    // Recursive schemas that descend into the value, local refs and anchors are fine.
    let tree = json!({
        "$defs": {"node": {"$anchor": "node", "type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#node"}}}}},
        "$ref": "#/$defs/node"
    });
    let found = violations(&apply(&base, &[set("/interface/input", tree)]));
    assert!(!found.iter().any(|v| v.starts_with("/interface/input: ")), "{found:?}");
}
