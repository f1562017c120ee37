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

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_at_once_and_a_failed_build_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let started = std::time::Instant::now();
    let out = holon(&[
        "records",
        "build",
        "--receipts",
        fifo.to_str().unwrap(),
        "--at",
        "2026-11-30T00:00:00Z",
        "--out",
        dir.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not a regular file"), "{}", text(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "it did not wait for a writer");
    // A bad line after good ones: nothing at --out, no staging directory left.
    let receipts = dir.path().join("r.jsonl");
    let good = std::fs::read_to_string("testdata/records/receipts.jsonl").unwrap();
    std::fs::write(&receipts, format!("{good}not a receipt\n")).unwrap();
    let out_dir = dir.path().join("records");
    let out = holon(&[
        "records",
        "build",
        "--receipts",
        receipts.to_str().unwrap(),
        "--at",
        "2026-11-30T00:00:00Z",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!out_dir.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 2, "only the fifo and the receipts: {left:?}");
}
