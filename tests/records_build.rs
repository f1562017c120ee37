//! Agent records measured from receipts (docs/records.md): golden output for a fixture that
//! holds every kind of receipt, the same bytes in any order, hostile lines, and the loop
//! closed: a synthetic workload through the engine, records built from its receipts, and
//! a mandate's `min_success_rate` admitting and refusing agents by them.
#![cfg(feature = "records")]

use std::collections::BTreeMap;
use std::sync::Arc;

use holon::admission::{CallContext, Code, Verdict};
use holon::catalog::{Catalog, Entry};
use holon::doc;
use holon::engine::receipt::{self, LosslessSink};
use holon::engine::{Admission, Assessor, Call, Engine, EngineConfig, synthetic};
use holon::measure::{Builder, MeasureError};
use holon::money::{Amount, Fixed6};
use holon::record::AgentRecord;
use holon::time::Timestamp;

fn at() -> Timestamp {
    Timestamp::parse("2026-11-30T00:00:00Z").unwrap()
}

/// The records `lines` give, as the files `holon records build` writes: path to bytes.
fn build(lines: &[&str], evals: &[&str]) -> BTreeMap<String, String> {
    let mut b = Builder::new(at(), 30).unwrap();
    for (n, l) in lines.iter().enumerate() {
        b.add_receipt(l, n as u64 + 1).unwrap();
    }
    for (n, l) in evals.iter().enumerate() {
        b.add_eval(l, n as u64 + 1).unwrap();
    }
    b.finish()
        .unwrap()
        .into_iter()
        .map(|r| {
            let (ns, name) = r.agent.as_str().split_once('/').unwrap();
            (format!("{ns}/{name}@{}.yaml", r.version.as_ref().unwrap()), doc::to_yaml(&r).unwrap())
        })
        .collect()
}

fn fixture() -> (String, String) {
    (
        std::fs::read_to_string("testdata/records/receipts.jsonl").unwrap(),
        std::fs::read_to_string("testdata/records/evals.jsonl").unwrap(),
    )
}

#[test]
fn the_fixture_builds_the_golden_records() {
    let (receipts, evals) = fixture();
    let lines: Vec<&str> = receipts.lines().collect();
    let evals: Vec<&str> = evals.lines().collect();
    let built = build(&lines, &evals);
    let mut expected = BTreeMap::new();
    for ns in std::fs::read_dir("testdata/records/expected").unwrap() {
        let ns = ns.unwrap();
        for file in std::fs::read_dir(ns.path()).unwrap() {
            let file = file.unwrap();
            let key = format!("{}/{}", ns.file_name().to_string_lossy(), file.file_name().to_string_lossy());
            expected.insert(key, std::fs::read_to_string(file.path()).unwrap());
        }
    }
    assert_eq!(built, expected);
    // Every record is a valid document, as `validate` reads it.
    for text in built.values() {
        let checked = holon::documents::check_str(text, &doc::Limits::default()).unwrap();
        assert!(checked.result.is_ok(), "{text}: {:?}", checked.result.err());
    }
}

#[test]
fn the_same_receipts_in_any_order_give_the_same_bytes() {
    let (receipts, evals) = fixture();
    let lines: Vec<&str> = receipts.lines().collect();
    let evals: Vec<&str> = evals.lines().collect();
    let first = build(&lines, &evals);
    let mut reversed = lines.clone();
    reversed.reverse();
    let mut evals_reversed = evals.clone();
    evals_reversed.reverse();
    assert_eq!(build(&reversed, &evals_reversed), first);
    for shift in 1..lines.len() {
        let mut rotated = lines.clone();
        rotated.rotate_left(shift);
        assert_eq!(build(&rotated, &evals), first, "rotated by {shift}");
    }
}

#[test]
fn hostile_lines_are_errors_that_name_the_line() {
    let mut b = Builder::new(at(), 30).unwrap();
    let good = r#"{"agent":"acme/x","agent_version":"1.0.0","decision":"allowed","end":"settled","outcome":"success","latency_ms":5,"actual":"0.1","ended_at":"2026-11-20T00:00:00Z"}"#;
    b.add_receipt(good, 1).unwrap();
    for (bad, says) in [
        ("not json", "not a receipt"),
        (&good.replace("success", "maybe") as &str, "unknown outcome"),
        (&good.replace("0.1", "-1"), "actual"),
        (&good.replace("0.1", "1e3"), "actual"),
        (&good.replace("2026-11-20T00:00:00Z", "yesterday"), "ended_at"),
        (&good.replace("acme/x", "ACME"), "agent"),
        (&good.replace("1.0.0", "one"), "agent_version"),
        (&format!("{{\"pad\":\"{}\"}}", "x".repeat(70_000)), "longer than"),
    ] {
        let err = b.add_receipt(bad, 7).unwrap_err();
        assert!(
            matches!(&err, MeasureError::BadLine { line: 7, .. }) && err.to_string().contains(says),
            "{bad:.80}: {err}"
        );
    }
    assert!(b.add_eval(r#"{"agent":"acme/x","version":"1.0.0","score":1.5}"#, 2).is_err());
    assert!(b.add_eval(r#"{"agent":"acme/x","version":"1.0.0","score":"NaN"}"#, 3).is_err());
    assert!(b.add_eval(r#"{"agent":"acme/x","version":"1.0.0","score":0.5,"extra":1}"#, 4).is_err());
    assert!(matches!(Builder::new(at(), 31), Err(MeasureError::Window)));
    assert!(matches!(Builder::new(at(), 0), Err(MeasureError::Window)));
    // Errors change nothing: the one good run is all there is.
    assert_eq!(b.counts().runs, 1);
    assert_eq!(b.finish().unwrap().len(), 1);
}

#[test]
fn records_built_from_an_engines_receipts_drive_a_min_success_rate() {
    // A synthetic workload: leaf agents only, each called 400 times, settled with the
    // synthetic outcomes (agents with i % 4 == 3 succeed about 80% of the time).
    let shape = synthetic::Shape { agents: 20, mandates: 4, ..synthetic::Shape::default() };
    let net = synthetic::network(&shape).unwrap();
    let (sink, rx) = LosslessSink::new(1 << 16);
    let engine = Engine::with_sink(EngineConfig::default(), Arc::new(sink));
    engine.publish(&net.input).unwrap();
    let leaves: Vec<usize> = (0..shape.agents).filter(|i| synthetic::kind_of(*i) == synthetic::Kind::Leaf).collect();
    let mut lines = Vec::new();
    let (names, snap) = (engine.names(), engine.snapshot());
    for n in 0..400u64 {
        for &i in &leaves {
            let m = engine.mandate_ix(&format!("m{}", n % 4)).unwrap();
            let a = engine.agent_ix(&format!("syn/a{i}")).unwrap();
            let Admission::Allowed(r) = engine.admit(&Call::new(m, a, net.at)) else { panic!("syn/a{i} not allowed") };
            r.settle_reported(Amount::from_micros(1_000), net.at, synthetic::report(i, n)).unwrap();
        }
        lines.extend(rx.try_iter().map(|r| receipt::receipt_json_with_facts(&r, &names, &snap).to_string()));
    }
    let mut b = Builder::new(net.at, 30).unwrap();
    for (n, l) in lines.iter().enumerate() {
        b.add_receipt(l, n as u64 + 1).unwrap();
    }
    assert_eq!(b.counts().runs, 400 * leaves.len() as u64);
    let records: Vec<AgentRecord> = b.finish().unwrap();
    assert_eq!(records.len(), leaves.len());
    // A mandate that wants 90% success, checked against the catalog with those records.
    let mut mandate = (*net.input.mandates[0]).clone();
    mandate.require.min_success_rate = Some(Fixed6::parse("0.90").unwrap());
    let catalog = Catalog {
        entries: net
            .input
            .agents
            .iter()
            .map(|(m, _)| Entry {
                manifest: (**m).clone(),
                record: records.iter().find(|r| r.agent == m.id).cloned(),
                path: Default::default(),
            })
            .collect(),
    };
    let assessor = Assessor::new(&mandate, &catalog).unwrap();
    let ctx = CallContext::at(net.at);
    for &i in &leaves {
        let entry = catalog.entries.iter().find(|e| e.manifest.id.as_str() == format!("syn/a{i}")).unwrap();
        let rate = entry.record.as_ref().unwrap().success_rate.unwrap();
        let decided = assessor.assess(&entry.manifest, entry.record.as_ref(), &ctx).unwrap();
        if i % 4 == 3 {
            assert!(rate < Fixed6::parse("0.85").unwrap(), "syn/a{i}: {rate}");
            assert_eq!(decided.verdict, Verdict::Denied, "syn/a{i} at {rate}");
            assert!(decided.reasons.iter().any(|r| r.code == Code::SuccessRateBelowMin));
        } else {
            assert!(rate > Fixed6::parse("0.95").unwrap(), "syn/a{i}: {rate}");
            assert_eq!(decided.verdict, Verdict::Allowed, "syn/a{i} at {rate}: {:?}", decided.reasons);
        }
    }
}

#[test]
fn a_caller_seen_both_as_an_agent_and_as_a_person_counts_the_same_in_any_order() {
    let line = |kind: &str, id: u32| {
        format!(
            r#"{{"id":{id},"agent":"acme/x","agent_version":"1.0.0","decision":"allowed","end":"settled","outcome":"success","latency_ms":5,"actual":"0.1","ended_at":"2026-11-20T00:00:00Z","currency":"EUR","payer":"alice","caller":"alice/bot","caller_kind":"{kind}"}}"#
        )
    };
    let (a, p) = (line("agent", 1), line("person", 2));
    assert_eq!(build(&[&a, &p], &[]), build(&[&p, &a], &[]));
}

#[test]
fn a_cost_that_cannot_be_told_whole_is_left_out_and_one_that_overflows_is_an_error() {
    let run = |actual: &str, currency: Option<&str>, outcome: &str, id: u32| {
        let c = currency.map(|c| format!(r#","currency":"{c}""#)).unwrap_or_default();
        format!(
            r#"{{"id":{id},"agent":"acme/x","agent_version":"1.0.0","decision":"allowed","end":"settled","outcome":"{outcome}","latency_ms":5,"actual":"{actual}","ended_at":"2026-11-20T00:00:00Z"{c}}}"#
        )
    };
    // A run billed 100 without a currency: a cost per success of 0.50 EUR would be far
    // too low, so none is given.
    let lines = [run("1", Some("EUR"), "success", 1), run("100", None, "success", 2)];
    let built = build(&lines.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert!(!built.values().next().unwrap().contains("cost_per_success"), "{built:?}");
    // The largest amounts, added: more than 64-bit micro-units per success.
    let mut b = Builder::new(at(), 30).unwrap();
    for (n, l) in
        [run("18446744073709.551615", Some("EUR"), "success", 1), run("18446744073709.551615", Some("EUR"), "error", 2)]
            .iter()
            .enumerate()
    {
        b.add_receipt(l, n as u64 + 1).unwrap();
    }
    assert!(matches!(b.finish(), Err(MeasureError::Overflow { .. })));
}
