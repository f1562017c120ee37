//! `holon ledger status|reconcile` on a real SQLite store file written through the
//! library, as another node would have left it.
#![cfg(feature = "cli")]

use std::process::Command;

use holon::store::sqlite::SqliteStore;
use holon::store::{FlushEntry, GrantRequest, LedgerStore, Limits};
use serde_json::Value;

fn holon(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_holon")).args(args).env("NO_COLOR", "1").output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("holon-cli-ledger-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn status_and_reconcile_of_a_gone_node() {
    let dir = temp_dir("gone");
    let path = dir.join("ledger.db");
    let url = format!("sqlite:{}", path.display());
    {
        let store = SqliteStore::open(&path).unwrap();
        store.publish_limits("alice/m", Limits { total_micros: 5_000_000, per_day_micros: None }, false).unwrap();
        let ask = |node: &str, now_unix| GrantRequest {
            node: node.into(),
            mandate: "alice/m".into(),
            day: None,
            want_micros: 1_000_000,
            min_micros: 1_000_000,
            ttl_s: 60,
            now_unix,
        };
        // node-a flushed 0.25 of its lease, then went away long ago (its lease expired);
        // node-b's lease is live for a long time yet.
        let a = store.grant(&ask("node-a", 1_000)).unwrap().unwrap();
        store
            .flush("node-a", &[FlushEntry { lease: a.id, settle_micros: 250_000, ..FlushEntry::default() }], 1_000)
            .unwrap();
        store.grant(&ask("node-b", 4_000_000_000)).unwrap().unwrap();
    }
    let (code, out, err) = holon(&["ledger", "status", "--store", &url, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let m = &v["mandates"][0];
    assert_eq!((m["mandate"].as_str(), m["limit"].as_str()), (Some("alice/m"), Some("5.00")));
    assert_eq!((m["spent"].as_str(), m["leased"].as_str()), (Some("0.25"), Some("1.75")));
    assert_eq!(m["nodes"].as_array().unwrap().len(), 2);
    assert_eq!((m["nodes"][0]["node"].as_str(), m["nodes"][0]["leased"].as_str()), (Some("node-a"), Some("0.75")));

    // Reconciling node-b changes nothing: its lease has not expired.
    let (code, out, _) = holon(&["ledger", "reconcile", "--store", &url, "--node", "node-b"]);
    assert_eq!(code, 0);
    assert!(out.contains("nothing changed"), "{out}");
    // node-a's expired remainder (0.75) is counted as spent, and the command says so.
    let (code, out, err) = holon(&["ledger", "reconcile", "--store", &url, "--node", "node-a"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0.75") && out.contains("counted as spent"), "{out}");
    let (_, out, _) = holon(&["ledger", "status", "--store", &url, "--mandate", "alice/m", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["mandates"][0]["spent"].as_str(), v["mandates"][0]["leased"].as_str()), (Some("1.00"), Some("1.00")));
    // A second reconcile finds nothing more.
    let (_, out, _) = holon(&["ledger", "reconcile", "--store", &url, "--node", "node-a", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["counted_as_spent"].as_str(), Some("0.00"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_stores_are_clear_errors_with_exit_2() {
    let dir = temp_dir("bad");
    for (url, says) in [
        ("mysql://x", "not a store URL"),
        ("sqlite:", "not a store URL"),
        ("postgres://postgres@127.0.0.1:1/postgres", "cannot be reached"),
        (&format!("sqlite:{}", dir.join("no/such/dir/ledger.db").display()), "no store file"),
        (&format!("sqlite:{}", dir.join("typo-ledger.db").display()), "no store file"),
        ("memory", "lives inside one process"),
    ] {
        let (code, out, err) = holon(&["ledger", "status", "--store", url]);
        assert_eq!((code, out.as_str()), (2, ""), "{url}: {err}");
        assert!(err.contains(says), "{url}: {err}");
    }
    // Nothing was created by the commands above.
    assert!(!dir.join("typo-ledger.db").exists());
    // An unknown mandate in an existing store.
    drop(SqliteStore::open(&dir.join("ledger.db")).unwrap());
    let url = format!("sqlite:{}", dir.join("ledger.db").display());
    let (code, _, err) = holon(&["ledger", "status", "--store", &url, "--mandate", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("`nope` is not in the store"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}
