//! `holon ledger status|reconcile|raise` on a real SQLite store file written through the
//! library, as another node would have left it.
#![cfg(feature = "cli")]

use std::process::Command;

use holon::store::sqlite::SqliteStore;
use holon::store::{FlushEntry, GrantRequest, LedgerStore, StoreLimits};
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
        store.publish_limits("alice/m", StoreLimits { total_micros: 5_000_000, per_day_micros: None }, false).unwrap();
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

/// `holon ledger raise` sets what the store enforces (up or down), keeps or removes the
/// per-day limit as told, and refuses bad money, an unknown mandate and contradictory
/// flags with exit 2 and nothing written.
#[test]
fn raise_sets_the_store_limits_and_refuses_with_nothing_written() {
    let dir = temp_dir("raise");
    let path = dir.join("ledger.db");
    let url = format!("sqlite:{}", path.display());
    {
        let store = SqliteStore::open(&path).unwrap();
        let limits = StoreLimits { total_micros: 5_000_000, per_day_micros: Some(1_000_000) };
        store.publish_limits("alice/m", limits, false).unwrap();
    }
    let status = || {
        let (code, out, err) = holon(&["ledger", "status", "--store", &url, "--json"]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<Value>(&out).unwrap()
    };
    let raise = |extra: &[&str]| {
        let mut args = vec!["ledger", "raise", "--store", &url, "--mandate", "alice/m"];
        args.extend_from_slice(extra);
        holon(&args)
    };

    let (code, out, err) = raise(&["--total", "8.00", "--per-day", "2.5", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["limit"].as_str(), v["per_day"].as_str()), (Some("8.00"), Some("2.50")));
    assert_eq!((v["was"]["limit"].as_str(), v["was"]["per_day"].as_str()), (Some("5.00"), Some("1.00")));
    let m = &status()["mandates"][0];
    assert_eq!((m["limit"].as_str(), m["per_day"].as_str()), (Some("8.00"), Some("2.50")));
    // A publish from a node with the old documents lowers it again; raise is the only way up.
    SqliteStore::open(&path)
        .unwrap()
        .publish_limits("alice/m", StoreLimits { total_micros: 5_000_000, per_day_micros: Some(1_000_000) }, false)
        .unwrap();
    assert_eq!(status()["mandates"][0]["limit"].as_str(), Some("5.00"));

    // Without --per-day the store keeps its day limit; the text names both figures.
    let (code, out, err) = raise(&["--total", "9"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("now enforces total 9.00, per day 1.00 (it enforced total 5.00, per day 1.00)"), "{out}");
    // --no-per-day removes it.
    let (code, _, err) = raise(&["--total", "9", "--no-per-day"]);
    assert_eq!(code, 0, "{err}");
    assert!(status()["mandates"][0]["per_day"].is_null());

    // Refused with exit 2, a sentence, and nothing written.
    let before = status();
    for (args, says) in [
        (&["--total", "1,000"][..], "not a decimal string"),
        (&["--total", "0.1234567"][..], "more than 6 decimal places"),
        (&["--total", "99999999999999999999"][..], "too large"),
        (&["--total", "10", "--per-day", "ten"][..], "--per-day"),
        (&["--total", "10", "--per-day", "1", "--no-per-day"][..], "cannot be used with"),
        (&["--per-day", "1"][..], "--total"),
    ] {
        let (code, out, err) = raise(args);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(status(), before, "{args:?} wrote");
    }
    let (code, out, err) = holon(&["ledger", "raise", "--store", &url, "--mandate", "nope", "--total", "10"]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("`nope` is not in the store") && err.contains("nothing was written"), "{err}");
    assert_eq!(status(), before, "a raise created a mandate");
    let (code, _, err) = holon(&["ledger", "raise", "--store", "memory", "--mandate", "alice/m", "--total", "1"]);
    assert_eq!(code, 2, "{err}");

    // Every argument has its help text.
    let (code, out, _) = holon(&["ledger", "raise", "--help"]);
    assert_eq!(code, 0);
    for flag in
        ["--store <STORE>", "--mandate <MANDATE>", "--total <AMOUNT>", "--per-day <AMOUNT>", "--no-per-day", "--json"]
    {
        let line = out.lines().find(|l| l.contains(flag)).unwrap_or_else(|| panic!("{flag} missing: {out}"));
        assert!(line.trim().len() > flag.len() + 10, "{flag} has no help: {line}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
