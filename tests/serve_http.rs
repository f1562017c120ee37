//! `holon serve` end to end: a real server process, a real HTTP client, loopback.
#![cfg(feature = "serve")]

mod common;

use common::server::Server;
use serde_json::{Value, json};

const MANDATE: &str = "alice/m-2026-11";

fn admit(s: &Server, agent: &str, max_cost: Option<&str>) -> Value {
    let mut body = json!({ "mandate": MANDATE, "agent": agent });
    if let Some(m) = max_cost {
        body["max_cost"] = json!(m);
    }
    let (status, answer) = s.post("/v1/admit", &s.gateway, body);
    assert_eq!(status, 200, "{answer}");
    answer
}

#[test]
fn the_worked_example_through_http_number_for_number() {
    let mut s = Server::start();
    // 0.10 + passthrough cap 3.00 = 3.10 > per_call 2.00.
    let first = admit(&s, "holon-labs/invoice-pipeline", None);
    assert_eq!((first["decision"].as_str(), first["worst_case"].as_str()), (Some("denied"), Some("3.10")), "{first}");
    assert_eq!(first["codes"], json!(["per_call_exceeded"]));
    assert!(first["reasons"][0]["message"].as_str().unwrap().contains("2.00"), "{first}");
    // With max_cost 0.60: held for alice.
    let held = admit(&s, "holon-labs/invoice-pipeline", Some("0.60"));
    assert_eq!(held["decision"], "held", "{held}");
    let pending = held["pending"].as_str().unwrap().to_owned();
    let approve = format!("/v1/pending/{pending}/approve");
    // The agent's gateway may not approve, nor may bob: 403, and the call stays held.
    let (status, _) = s.post(&approve, &s.gateway, json!({}));
    assert_eq!(status, 403);
    let (status, answer) = s.post(&approve, &s.bob, json!({}));
    assert_eq!(status, 403, "{answer}");
    let (status, approved) = s.post(&approve, &s.alice, json!({}));
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["decision"], "allowed", "{approved}");
    assert_eq!((approved["worst_case"].as_str(), approved["sub_budget"].as_str()), (Some("0.60"), Some("0.50")));
    let run = approved["reservation"].as_str().unwrap().to_owned();
    // A second approval finds nothing.
    assert_eq!(s.post(&approve, &s.alice, json!({})).0, 404);
    // Six sub-calls by capability: the gateway's pick is the cheapest admissible one.
    for (capability, cost) in [
        ("extraction.table", "0.004"),
        ("extraction.table", "0.004"),
        ("extraction.table", "0.004"),
        ("extraction.table", "0.004"),
        ("finance.fx", "0.001"),
        ("finance.fx", "0.001"),
    ] {
        let (status, sub) =
            s.post(&format!("/v1/reservations/{run}/calls"), &s.gateway, json!({ "capability": capability }));
        assert_eq!((status, sub["decision"].as_str()), (200, Some("allowed")), "{sub}");
        let id = sub["reservation"].as_str().unwrap();
        let (status, settled) = s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": cost }));
        assert_eq!((status, settled["kept"].as_str()), (200, Some(cost)), "{settled}");
    }
    let (status, settled) = s.post(
        &format!("/v1/reservations/{run}/settle"),
        &s.gateway,
        json!({ "actual": "0.10", "outcome": "success", "latency_ms": 850 }),
    );
    assert_eq!(status, 200, "{settled}");
    assert_eq!(
        (settled["billed"].as_str(), settled["passthrough"].as_str()),
        (Some("0.118"), Some("0.018")),
        "{settled}"
    );
    // Settled once: a second settle changes nothing, and says the reservation ended (409).
    assert_eq!(s.post(&format!("/v1/reservations/{run}/settle"), &s.gateway, json!({ "actual": "0" })).0, 409);
    let (status, m) = s.get(&format!("/v1/mandates/{}", MANDATE.replace('/', "%2F")), Some(&s.alice));
    assert_eq!(status, 200, "{m}");
    let m: Value = serde_json::from_str(&m).unwrap();
    assert_eq!(
        (m["limits"]["total"].as_str(), m["this_node"]["reserved"].as_str()),
        (Some("100.00"), Some("0.00")),
        "{m}"
    );
    assert_eq!(m["this_node"]["settled"], "0.118", "{m}");
    // Bob did not issue it: the same 404 as for a mandate that does not exist.
    let (status, foreign) = s.get(&format!("/v1/mandates/{}", MANDATE.replace('/', "%2F")), Some(&s.bob));
    let (_, missing) = s.get("/v1/mandates/alice%2Fno-such-mandate", Some(&s.bob));
    assert_eq!(status, 404, "{foreign}");
    assert_eq!(foreign.replace(MANDATE, "ID"), missing.replace("alice/no-such-mandate", "ID"));
    // Stopped, the node flushes: the store counts 0.118 spent.
    assert!(s.stop(), "a clean shutdown");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(["ledger", "status", "--json", "--store"])
        .arg(format!("sqlite:{}", s.dir.path().join("ledger.db").display()))
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let spent = status.to_string();
    assert!(spent.contains("\"spent\":\"0.118\"") || spent.contains("118000"), "{spent}");
    let receipts = std::fs::read_to_string(s.dir.path().join("receipts.jsonl")).unwrap();
    assert!(receipts.lines().count() >= 9, "{receipts}");
}

#[test]
fn no_token_a_wrong_token_or_a_wrong_role_changes_nothing() {
    let s = Server::start();
    let body = json!({ "mandate": MANDATE, "agent": "acme/table-extract" }).to_string();
    assert_eq!(s.post_raw("/v1/admit", None, &body).0, 401);
    assert_eq!(s.post_raw("/v1/admit", Some("holon_not_a_token"), &body).0, 401);
    let (status, answer) = s.post_raw("/v1/admit", Some(&s.alice), &body);
    assert_eq!(status, 403, "{answer}");
    assert!(answer["error"].is_string());
    assert_eq!(s.get("/v1/status", None).0, 401);
    assert_eq!(s.get("/metrics", None).0, 401);
    assert_eq!(s.get("/healthz", None).0, 200);
    // Nothing was admitted by any of them.
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    assert!(!metrics.contains("decision=\"allowed\""), "{metrics}");
    // Bad input: a 400 naming the field, never a 5xx.
    for (body, field) in [
        (r#"{"mandate":"alice/m-2026-11","agent":"acme/table-extract","max_cost":"NaN"}"#, "/max_cost"),
        (r#"{"mandate":"alice/m-2026-11","agent":"acme/table-extract","max_cost":1}"#, "/max_cost"),
        (r#"{"mandate":"alice/m-2026-11","agent":"acme/table-extract","tip":"1"}"#, "/"),
        (r#"{"mandate":"alice/m-2026-11","agent":"acme/table-extract","at":"soon"}"#, "/at"),
        (r#"{"mandate":"alice/m-2026-11""#, "/"),
        (r#"{"mandate":"alice/m-2026-11","agent":"acme/table-extract","at":"2026-11-20T10:00:00Z"}"#, "/at"),
    ] {
        let (status, answer) = s.post_raw("/v1/admit", Some(&s.gateway), body);
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer["field"].as_str().is_some_and(|f| f.starts_with(field)), "{body}: {answer}");
    }
    let huge = format!(r#"{{"mandate":"{}","agent":"a/b"}}"#, "m".repeat(100_000));
    let (status, answer) = s.post_raw("/v1/admit", Some(&s.gateway), &huge);
    assert_eq!(status, 413, "{answer}");
    // axum's own refusals carry the API's JSON error body too (they were plain text).
    assert!(answer["error"].as_str().is_some_and(|e| e.contains("65536 bytes")), "{answer}");
    let (status, text) = s.get("/v1/admit", Some(&s.gateway));
    assert_eq!(status, 405, "{text}");
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    assert!(answer["error"].is_string(), "{text}");
    // `at` is checked wherever it is taken, release and refuse included.
    for path in ["/v1/reservations/1/release", "/v1/pending/serve:0:1/refuse"] {
        let token = if path.contains("refuse") { &s.alice } else { &s.gateway };
        let (status, answer) = s.post_raw(path, Some(token), r#"{"at":"yesterday"}"#);
        assert_eq!((status, answer["field"].as_str()), (400, Some("/at")), "{path}: {answer}");
    }
    let (status, answer) = s.post_raw("/v1/reservations/%FF/settle", Some(&s.gateway), r#"{"actual":"1"}"#);
    assert!(status == 400 || status == 404, "{status} {answer}");
    assert!(answer["error"].is_string(), "{answer}");
}

#[test]
fn a_reload_applies_a_lowered_limit_and_a_broken_file_keeps_the_old_snapshot() {
    let s = Server::start();
    let allowed = admit(&s, "holon-labs/invoice-pipeline", Some("0.30"));
    assert_eq!(allowed["decision"], "allowed", "{allowed}");
    let id = allowed["reservation"].as_str().unwrap();
    assert_eq!(s.post(&format!("/v1/reservations/{id}/release"), &s.gateway, json!({})).0, 200);
    let path = s.docs().join("mandates/alice-root.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("per_call: \"2.00\"", "per_call: \"0.20\"")).unwrap();
    let denied = wait_for(|| {
        let a = admit(&s, "holon-labs/invoice-pipeline", Some("0.30"));
        (a["codes"] == json!(["per_call_exceeded"])).then_some(a)
    });
    assert_eq!(denied["codes"], json!(["per_call_exceeded"]), "{denied}");
    // A broken file: the old snapshot keeps serving, the error names the file and field.
    std::fs::write(&path, text.replace("per_call: \"2.00\"", "per_call: \"lots\"")).unwrap();
    let status = wait_for(|| {
        let (_, body) = s.get("/v1/status", Some(&s.gateway));
        let v: Value = serde_json::from_str(&body).unwrap();
        (!v["last_reload_error"].is_null()).then_some(v)
    });
    assert!(status["last_reload_error"]["file"].as_str().unwrap().ends_with("alice-root.yaml"), "{status}");
    assert_eq!(status["last_reload_error"]["pointer"], "/budget/per_call", "{status}");
    let still = admit(&s, "holon-labs/invoice-pipeline", Some("0.30"));
    assert_eq!(still["codes"], json!(["per_call_exceeded"]), "the lowered limit still serves: {still}");
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    assert!(metrics.lines().any(|l| l.starts_with("holon_reload_failures_total") && !l.ends_with(" 0")), "{metrics}");
}

#[test]
fn concurrent_clients_on_one_hot_mandate_never_overrun() {
    let s = Server::start_with(|docs| {
        let path = docs.join("mandates/alice-root.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let text =
            text.replace("total: \"100.00\"", "total: \"0.20\"").replace("per_call: \"2.00\"", "per_call: \"0.10\"");
        std::fs::write(&path, text.replace("per_day: \"20.00\"", "per_day: \"0.20\"")).unwrap();
    });
    let kept_micros = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..40 {
                    let a = admit(&s, "acme/table-extract", None);
                    if let Some(id) = a["reservation"].as_str() {
                        let (_, settled) =
                            s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0.004" }));
                        let kept = holon::money::Amount::parse(settled["kept"].as_str().unwrap()).unwrap();
                        kept_micros.fetch_add(kept.micros(), std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let kept = kept_micros.into_inner();
    assert!(kept <= 200_000, "kept {kept} micros of a 0.20 budget");
    assert!(kept >= 100_000, "the budget was used: {kept}");
}

/// Many sub-calls on one run: before the fix, the handler held the table's guard on the
/// parent while it put the sub-call's reservation in the table, and a sub-call whose id fell
/// in the parent's shard hung the server.
#[test]
fn many_sub_calls_on_one_run_never_hang_the_server() {
    let s = Server::start();
    let run = admit(&s, "holon-labs/invoice-pipeline", Some("0.30"));
    let run = run["reservation"].as_str().unwrap().to_owned();
    for _ in 0..64 {
        let (status, sub) =
            s.post(&format!("/v1/reservations/{run}/calls"), &s.gateway, json!({ "capability": "extraction.table" }));
        assert_eq!((status, sub["decision"].as_str()), (200, Some("allowed")), "{sub}");
        let id = sub["reservation"].as_str().unwrap();
        assert_eq!(s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0" })).0, 200);
    }
    // Released, the run keeps what its sub-calls took (nothing here) and ends.
    let (status, released) = s.post(&format!("/v1/reservations/{run}/release"), &s.gateway, json!({}));
    assert_eq!(status, 200, "{released}");
    // An id written another way is not the same reservation.
    assert_eq!(s.post("/v1/reservations/+1/release", &s.gateway, json!({})).0, 404);
}

#[test]
fn a_late_settle_reconciles_a_reclaimed_reservation_once() {
    // The callee's timeout is 1 s and the grace 0: the reaper (every second) reclaims the
    // reservation, keeping its worst case spent, and a late settle brings it to the actual.
    let s = Server::start_with_args(
        |docs| {
            let path = docs.join("agents/table-extract/holon.yaml");
            let text = std::fs::read_to_string(&path).unwrap().replace("timeout_s: 60", "timeout_s: 1");
            std::fs::write(path, text).unwrap();
        },
        &["--expiry-grace-s", "0"],
    );
    let allowed = admit(&s, "acme/table-extract", None);
    assert_eq!(allowed["decision"], "allowed", "{allowed}");
    let id = allowed["reservation"].as_str().unwrap().to_owned();
    // About 3 s (the deadline's second, then a reaper tick); generous for a loaded runner.
    wait_for_s(30, || {
        let (_, status) = s.get("/v1/status", Some(&s.gateway));
        let status: Value = serde_json::from_str(&status).unwrap();
        (status["in_flight"] == 0).then_some(())
    });
    // Reclaimed: a release would give the worst case back although the call may have run.
    let (status, refused) = s.post(&format!("/v1/reservations/{id}/release"), &s.gateway, json!({}));
    assert_eq!(status, 409, "{refused}");
    let (status, settled) = s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0.002" }));
    assert_eq!(status, 200, "{settled}");
    assert_eq!((settled["late"].as_bool(), settled["kept"].as_str()), (Some(true), Some("0.002")), "{settled}");
    let (status, again) = s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0" }));
    assert_eq!(status, 409, "reconciled once: {again}");
}

fn wait_for<T>(f: impl FnMut() -> Option<T>) -> T {
    // A bound, not a window: the wait ends with the event (a loaded machine is slow).
    wait_for_s(60, f)
}

fn wait_for_s<T>(seconds: u64, mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..seconds * 40 {
        if let Some(v) = f() {
            return v;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("timed out waiting");
}

#[test]
fn a_revocation_list_beside_the_server_is_watched_and_denies_from_the_reload_on() {
    let outside = tempfile::tempdir().unwrap();
    let list = outside.path().join("revocations.yaml");
    std::fs::write(&list, "holon_revocations: \"0.1\"\nrevoked: []\n").unwrap();
    let s = Server::start_with_args(|_| {}, &["--revocations", list.to_str().unwrap()]);
    let allowed = admit(&s, "holon-labs/fx-convert", None);
    assert_eq!(allowed["decision"], "allowed", "{allowed}");
    let id = allowed["reservation"].as_str().unwrap().to_owned();
    std::fs::write(
        &list,
        "holon_revocations: \"0.1\"\nrevoked:\n  - mandate: alice/m-2026-11\n    at: \"2026-11-20T10:00:00Z\"\n    reason: laptop stolen\n",
    )
    .unwrap();
    // (A call may meet `lease_pending` while the node refills: retried like any other.)
    let denied = wait_for(|| {
        let a = admit(&s, "holon-labs/fx-convert", None);
        (a["codes"] == json!(["mandate_revoked"])).then_some(a)
    });
    assert_eq!(denied["codes"], json!(["mandate_revoked"]), "{denied}");
    // The reservation taken before the revocation still settles.
    let (status, settled) = s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0.001" }));
    assert_eq!(status, 200, "{settled}");
}

#[test]
fn require_signatures_trusts_keys_from_keys_only_and_bars_unsigned_mandates() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let token = std::process::Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(["token", "new", "--role", "gateway", "--tokens"])
        .arg(&tokens)
        .output()
        .unwrap();
    assert!(token.status.success());
    // examples/ holds examples/trust/keys.yaml: a keys document among the documents is
    // never trusted (whoever writes the documents must not trust keys), so no key at all.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", "memory", "--require-signatures", "--tokens"])
        .arg(&tokens)
        .args(["--documents", "examples"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no trusted key"), "{err}");
    // With --keys: the unsigned example mandate is barred; the signed copy beside it
    // admits fx-convert (its record carries its publisher's signature) and nothing whose
    // record does not.
    let s = Server::start_with_args(
        |_| {},
        &[
            "--require-signatures",
            "--keys",
            std::fs::canonicalize("examples/trust/keys.yaml").unwrap().to_str().unwrap(),
        ],
    );
    let denied = admit(&s, "holon-labs/fx-convert", None);
    assert_eq!(denied["codes"], json!(["mandate_untrusted"]), "{denied}");
    let body = json!({ "mandate": "alice/m-2026-12", "agent": "holon-labs/fx-convert" });
    let (status, signed) = s.post("/v1/admit", &s.gateway, body);
    assert_eq!(status, 200);
    assert_eq!(signed["decision"], "allowed", "{signed}");
    let body = json!({ "mandate": "alice/m-2026-12", "agent": "acme/table-extract" });
    let (_, unsigned_agent) = s.post("/v1/admit", &s.gateway, body);
    assert_eq!(unsigned_agent["codes"], json!(["provenance_unverified"]), "{unsigned_agent}");
}

#[test]
fn a_settles_outcome_and_latency_reach_the_receipts_file_with_what_records_need() {
    let mut s = Server::start();
    let allowed = admit(&s, "holon-labs/fx-convert", None);
    let id = allowed["reservation"].as_str().unwrap().to_owned();
    let body = json!({ "actual": "0.001", "outcome": "error", "latency_ms": 123 });
    let (status, settled) = s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, body);
    assert_eq!(status, 200, "{settled}");
    assert!(s.stop(), "a clean stop flushes the receipts");
    let receipts = std::fs::read_to_string(s.dir.path().join("receipts.jsonl")).unwrap();
    let line: Value = receipts
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["end"] == "settled")
        .unwrap_or_else(|| panic!("no settled receipt in {receipts}"));
    assert_eq!(line["outcome"], "error", "{line}");
    assert_eq!(line["latency_ms"], 123, "{line}");
    assert_eq!(line["agent_version"], "0.9.2", "{line}");
    assert_eq!(
        (&line["payer"], &line["caller"], &line["caller_kind"]),
        (&json!("alice"), &json!("alice/assistant"), &json!("agent"))
    );
    assert_eq!(line["currency"], "EUR", "{line}");
}

/// A revocations file behind a symlink that is swapped, as a Kubernetes ConfigMap mounts
/// it (`revocations.yaml -> ..data/revocations.yaml`, `..data -> ..v1`, swapped to `..v2`).
#[cfg(unix)]
#[test]
fn a_revocation_list_mounted_like_a_config_map_is_reloaded_when_its_link_is_swapped() {
    use std::os::unix::fs::symlink;
    let mount = tempfile::tempdir().unwrap();
    let m = mount.path();
    std::fs::create_dir(m.join("..v1")).unwrap();
    std::fs::create_dir(m.join("..v2")).unwrap();
    std::fs::write(m.join("..v1/revocations.yaml"), "holon_revocations: \"0.1\"\nrevoked: []\n").unwrap();
    std::fs::write(
        m.join("..v2/revocations.yaml"),
        "holon_revocations: \"0.1\"\nrevoked:\n  - mandate: alice/m-2026-11\n    at: \"2026-11-20T10:00:00Z\"\n    reason: rotated\n",
    )
    .unwrap();
    symlink("..v1", m.join("..data")).unwrap();
    symlink("..data/revocations.yaml", m.join("revocations.yaml")).unwrap();
    let s = Server::start_with_args(|_| {}, &["--revocations", m.join("revocations.yaml").to_str().unwrap()]);
    assert_eq!(admit(&s, "holon-labs/fx-convert", None)["decision"], "allowed");
    // The swap: a new link renamed over `..data`.
    symlink("..v2", m.join("..data_tmp")).unwrap();
    std::fs::rename(m.join("..data_tmp"), m.join("..data")).unwrap();
    let denied = wait_for(|| {
        let a = admit(&s, "holon-labs/fx-convert", None);
        (a["codes"] == json!(["mandate_revoked"])).then_some(a)
    });
    assert_eq!(denied["codes"], json!(["mandate_revoked"]));
}

#[test]
fn a_file_that_breaks_the_documents_does_not_hold_up_a_revocation() {
    let outside = tempfile::tempdir().unwrap();
    let list = outside.path().join("revocations.yaml");
    std::fs::write(&list, "holon_revocations: \"0.1\"\nrevoked: []\n").unwrap();
    let s = Server::start_with_args(|_| {}, &["--revocations", list.to_str().unwrap()]);
    assert_eq!(admit(&s, "holon-labs/fx-convert", None)["decision"], "allowed");
    // Junk among the documents, and a second mandate with a taken id: the reload fails...
    std::fs::write(s.docs().join("zz-junk.yaml"), "junk: 1\n").unwrap();
    std::fs::copy(s.docs().join("mandates/alice-root.yaml"), s.docs().join("zz-copy.yaml")).unwrap();
    std::fs::write(
        &list,
        "holon_revocations: \"0.1\"\nrevoked:\n  - mandate: alice/m-2026-11\n    at: \"2026-11-20T10:00:00Z\"\n    reason: stolen\n",
    )
    .unwrap();
    // ...and the revocation applies all the same.
    let denied = wait_for(|| {
        let a = admit(&s, "holon-labs/fx-convert", None);
        (a["codes"] == json!(["mandate_revoked"])).then_some(a)
    });
    assert_eq!(denied["codes"], json!(["mandate_revoked"]));
    let (_, status) = s.get("/v1/status", Some(&s.gateway));
    let status: Value = serde_json::from_str(&status).unwrap();
    assert!(!status["last_reload_error"].is_null(), "the failure is still reported: {status}");
}

/// A call under the standard's sub-mandate over HTTP, on the SQLite store: reserved and
/// settled on both levels, the mandate's answer shows its ancestor's figures, and a call that
/// fits the sub-mandate but not alice's remaining budget is denied naming alice's mandate.
#[test]
fn a_sub_mandate_admits_over_http_and_a_denial_names_the_ancestor() {
    const CHILD: &str = "alice/m-2026-11/invoices";
    // Small budgets so that the root's own calls nearly exhaust it: the root 0.01 in all,
    // the child 0.01 too (a child may not exceed its parent).
    let mut s = Server::start_with(|docs| {
        let edit = |file: &str, from: &[(&str, &str)]| {
            let path = docs.join("mandates").join(file);
            let mut text = std::fs::read_to_string(&path).unwrap();
            for (a, b) in from {
                assert!(text.contains(a), "{file}: {a}");
                text = text.replace(a, b);
            }
            std::fs::write(&path, text).unwrap();
        };
        let small = [
            ("total: \"100.00\"", "total: \"0.01\""),
            ("per_day: \"20.00\"", "per_day: \"0.01\""),
            ("per_call: \"2.00\"", "per_call: \"0.01\""),
            ("above: \"0.50\"", "above: \"0.01\""),
        ];
        edit("alice-root.yaml", &small);
        edit(
            "alice-invoices.yaml",
            &[
                ("total: \"5.00\"", "total: \"0.01\""),
                ("per_day: \"1.00\"", "per_day: \"0.01\""),
                ("per_call: \"0.10\"", "per_call: \"0.01\""),
                ("above: \"0.05\"", "above: \"0.01\""),
            ],
        );
        // The research sub-mandate no longer fits its shrunken parent: out of this test.
        std::fs::remove_file(docs.join("mandates/alice-research.yaml")).unwrap();
    });
    let admit = |mandate: &str| {
        let (status, answer) =
            s.post("/v1/admit", &s.gateway, json!({ "mandate": mandate, "agent": "acme/table-extract" }));
        assert_eq!(status, 200, "{answer}");
        answer
    };
    let settle = |answer: &Value| {
        let id = answer["reservation"].as_str().unwrap_or_else(|| panic!("allowed: {answer}"));
        let (status, settled) =
            s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0.004" }));
        assert_eq!(status, 200, "{settled}");
    };
    settle(&admit(CHILD));
    let path = format!("/v1/mandates/{}", CHILD.replace('/', "%2F"));
    let (status, read) = s.get(&path, Some(&s.alice));
    assert_eq!(status, 200, "alice, who granted the root, reads the sub-mandate: {read}");
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["ancestors"][0]["id"], MANDATE, "{read}");
    assert_eq!(read["ancestors"][0]["this_node"]["settled"], "0.004", "{read}");
    assert_eq!(read["this_node"]["settled"], "0.004", "{read}");
    assert_eq!(s.get(&path, Some(&s.bob)).0, 404);
    // The assistant's own call takes alice's budget to 0.008 of 0.01.
    settle(&admit(MANDATE));
    let denied = admit(CHILD);
    assert_eq!(denied["decision"], "denied", "{denied}");
    assert_eq!(denied["limited_by"], MANDATE, "{denied}");
    assert_eq!(denied["codes"], json!(["total_exceeded"]), "{denied}");
    let message = denied["reasons"][0]["message"].as_str().unwrap();
    assert!(message.starts_with("alice/m-2026-11 (an ancestor of alice/m-2026-11/invoices): "), "{denied}");
    s.stop();
    // `holon ledger status` with the documents shows the sub-mandate under its parent.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(["ledger", "status", "--store", &s.store, "--documents"])
        .arg(s.docs().join("mandates"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let root = text.lines().position(|l| l.starts_with("alice/m-2026-11  ")).unwrap_or_else(|| panic!("{text}"));
    let child = text
        .lines()
        .position(|l| l.starts_with("  sub-mandate alice/m-2026-11/invoices  "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(root < child, "{text}");
    assert!(text.contains("alice/m-2026-11/invoices  limit 0.01, per day 0.01  spent 0.004"), "{text}");
}
