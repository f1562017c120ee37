//! `holon loadtest --receipts` then `holon records build` as a user runs them.
#![cfg(feature = "cli")]

use std::process::{Command, Output};

fn holon(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_holon")).args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn loadtest_receipts_build_valid_records_and_a_used_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let receipts = dir.path().join("receipts.jsonl");
    let r = receipts.to_str().unwrap();
    let out = holon(&[
        "loadtest",
        "--threads",
        "2",
        "--calls",
        "20000",
        "--agents",
        "20",
        "--mandates",
        "4",
        "--receipts",
        r,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lines = std::fs::read_to_string(&receipts).unwrap().lines().count() as u64;
    assert_eq!(report["receipts"], lines, "every receipt written");
    assert_eq!(report["receipts_dropped"], 0, "the receipts file is lossless");
    let records = dir.path().join("records");
    let out = holon(&[
        "records",
        "build",
        "--receipts",
        r,
        "--at",
        "2026-11-30T00:00:00Z",
        "--out",
        records.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let built: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(built["counts"]["lines"], lines);
    assert!(built["records"].as_array().unwrap().len() >= 10, "{built}");
    let valid = holon(&["validate", records.to_str().unwrap()]);
    assert_eq!(valid.status.code(), Some(0), "{}", text(&valid));
    // Written afresh only: a directory with files in it is refused, and left alone.
    let again = holon(&[
        "records",
        "build",
        "--receipts",
        r,
        "--at",
        "2026-11-30T00:00:00Z",
        "--out",
        records.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again).contains("not an empty directory"), "{}", text(&again));
    // Bad input: a window past 30 days, a file that is not receipts.
    let out = holon(&[
        "records",
        "build",
        "--receipts",
        r,
        "--at",
        "2026-11-30T00:00:00Z",
        "--window",
        "60d",
        "--out",
        dir.path().join("x").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = holon(&[
        "records",
        "build",
        "--receipts",
        "examples/mandates/alice-root.yaml",
        "--at",
        "2026-11-30T00:00:00Z",
        "--out",
        dir.path().join("y").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("line 1"), "{}", text(&out));
}
