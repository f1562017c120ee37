//! `Idempotency-Key` on `holon serve` (issue #26), on real server processes and real
//! clients over loopback: a retry gets the first answer and reserves nothing more, on the
//! same server, after its restart, and on another server of the same store; another
//! request with the key is a 422, one still in flight a 409; and a retry storm of 16
//! clients on two nodes reserves each call once (Envoy's `Check`: tests/serve_grpc.rs).
#![cfg(feature = "serve")]

mod common;

use common::server::Server;
use holon::store::LedgerStore;
use serde_json::{Value, json};
use std::time::Duration;

const MANDATE: &str = "alice/m-2026-11";
const LONG: Duration = Duration::from_secs(60);

fn admit_body(agent: &str) -> Value {
    json!({ "mandate": MANDATE, "agent": agent })
}

fn status(s: &Server) -> Value {
    let (code, body) = s.get("/v1/status", Some(&s.gateway));
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Sends a keyed request until it is answered (a 409 means the first is still in flight:
/// asked again), within a generous bound.
fn answered(s: &Server, path: &str, body: &Value, key: &str) -> (u16, bool, Value) {
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let got = s.post_keyed(path, &s.gateway, body, key, LONG).expect("the server answers");
        if got.0 != 409 || std::time::Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A first admit that leases before it reserves may meet `lease_pending` (not kept: the
/// same key asks again).
fn allowed(s: &Server, agent: &str, key: &str) -> Value {
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let (code, _, a) = answered(s, "/v1/admit", &admit_body(agent), key);
        assert_eq!(code, 200, "{a}");
        if a["decision"] == "allowed" || std::time::Instant::now() > deadline {
            assert_eq!(a["decision"], "allowed", "{a}");
            return a;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_same_key_replays_the_first_answer_and_reserves_nothing_more() {
    let s = Server::start();
    let first = allowed(&s, "holon-labs/fx-convert", "k-1");
    let (code, replayed, again) =
        s.post_keyed("/v1/admit", &s.gateway, &admit_body("holon-labs/fx-convert"), "k-1", LONG).unwrap();
    assert_eq!((code, replayed), (200, true));
    assert_eq!(again, first, "the first answer, byte for byte");
    assert_eq!(status(&s)["in_flight"], 1, "one reservation for two requests");
    // The same key on another request: 422, and nothing done.
    let (code, _, other) =
        s.post_keyed("/v1/admit", &s.gateway, &admit_body("acme/table-extract"), "k-1", LONG).unwrap();
    assert_eq!(code, 422, "{other}");
    assert!(other["error"].as_str().unwrap().contains("another request"), "{other}");
    // A keyed settle, retried: the first settle's answer, not a 409.
    let id = first["reservation"].as_str().unwrap();
    let path = format!("/v1/reservations/{id}/settle");
    let (code, replayed, settled) =
        s.post_keyed(&path, &s.gateway, &json!({ "actual": "0.001" }), "s-1", LONG).unwrap();
    assert_eq!((code, replayed), (200, false), "{settled}");
    let (code, replayed, again) = s.post_keyed(&path, &s.gateway, &json!({ "actual": "0.001" }), "s-1", LONG).unwrap();
    assert_eq!((code, replayed, &again), (200, true, &settled));
    // Keys are the principal's: alice's key `k-1` is not the gateway's.
    let (code, _, held) = {
        let body = json!({ "mandate": MANDATE, "agent": "holon-labs/invoice-pipeline", "max_cost": "0.60" });
        answered(&s, "/v1/admit", &body, "h-1")
    };
    assert_eq!((code, held["decision"].as_str()), (200, Some("held")), "{held}");
    let pending = held["pending"].as_str().unwrap();
    let refuse = format!("/v1/pending/{pending}/refuse");
    let (code, replayed, _) = s.post_keyed(&refuse, &s.alice, &json!({}), "k-1", LONG).unwrap();
    assert_eq!((code, replayed), (200, false), "alice's k-1 is a key of her own");
    let (code, replayed, _) = s.post_keyed(&refuse, &s.alice, &json!({}), "k-1", LONG).unwrap();
    assert_eq!((code, replayed), (200, true), "and a retry of her refusal replays it (not 404)");
    let bad =
        s.post_keyed("/v1/admit", &s.gateway, &admit_body("holon-labs/fx-convert"), &"k".repeat(300), LONG).unwrap();
    assert_eq!(bad.0, 400, "{:?}", bad.2);
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    assert!(metrics.contains("holon_idempotent_replays_total 3\n"), "{metrics}");
}

/// A key claimed by a request still in flight (on another node of the store) is a 409;
/// once that request's answer is kept, the retry replays it.
#[test]
fn a_key_still_in_flight_is_a_409_and_then_its_answer() {
    use holon::store::{KeyAnswer, KeyClaim};
    let s = Server::start();
    let body = admit_body("holon-labs/fx-convert");
    let store_path = s.store.strip_prefix("sqlite:").unwrap().to_owned();
    let store = holon::store::sqlite::SqliteStore::open(std::path::Path::new(&store_path)).unwrap();
    // The digest as the server makes it (its method, path and body): the same request.
    let digest = digest(&[b"POST", b"/v1/admit", body.to_string().as_bytes()]);
    let now = holon::time::Timestamp::now().unix();
    let claim = KeyClaim {
        scope: "gateway",
        key: "busy",
        digest: &digest,
        node: "elsewhere",
        now_unix: now,
        keep_s: 600,
        keys_max: u64::MAX,
    };
    assert_eq!(store.claim_key(&claim).unwrap(), holon::store::KeyState::Claimed);
    let (code, _, busy) = s.post_keyed("/v1/admit", &s.gateway, &body, "busy", LONG).unwrap();
    assert_eq!(code, 409, "{busy}");
    assert!(busy["error"].as_str().unwrap().contains("still in flight"), "{busy}");
    let kept =
        KeyAnswer { status: 200, body: r#"{"decision":"denied","worst_case":"0","codes":["x"],"reasons":[]}"#.into() };
    store.answer_key("gateway", "busy", kept).unwrap();
    let (code, replayed, answer) = s.post_keyed("/v1/admit", &s.gateway, &body, "busy", LONG).unwrap();
    assert_eq!((code, replayed, answer["codes"].clone()), (200, true, json!(["x"])));
    assert_eq!(status(&s)["in_flight"], 0, "nothing reserved for it here");
}

/// The server's digest of a request (method, path, body, each length-prefixed), rebuilt.
fn digest(parts: &[&[u8]]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Keys are kept in the store, but a replay never authorises a call it cannot see open: a
/// retry that lands on another server of the same store is a 409 with the protocol's code
/// (that server cannot know whether the reservation is still open on the first), and
/// reserves nothing; on the first server it replays while the reservation is open; once
/// settled, a retry there (and after its restart) is the same 409 (issue #50).
#[test]
fn a_retry_replays_only_while_its_reservation_is_open_on_the_node_asked() {
    let a = Server::start();
    let first = allowed(&a, "holon-labs/fx-convert", "r-1");
    assert_eq!(first["node"], "serve");
    let b = Server::start_beside(&a, "serve-b", &[]);
    let (code, replayed, on_b) =
        b.post_keyed("/v1/admit", &b.gateway, &admit_body("holon-labs/fx-convert"), "r-1", LONG).unwrap();
    assert_eq!((code, replayed, on_b["code"].as_str()), (409, true, Some("replay_reservation_ended")), "{on_b}");
    let sentence = on_b["error"].as_str().unwrap();
    assert!(
        sentence.contains("on node `serve`") && sentence.contains("Retry on `serve`"),
        "names the node: {sentence}"
    );
    assert_eq!(status(&b)["in_flight"], 0, "nothing reserved on the other node");
    let (code, replayed, again) =
        a.post_keyed("/v1/admit", &a.gateway, &admit_body("holon-labs/fx-convert"), "r-1", LONG).unwrap();
    assert_eq!((code, replayed, &again), (200, true, &first), "open on its own node: the first answer");
    // Settled on its own node: the admit's retry lets nothing through, there and after a restart.
    let id = first["reservation"].as_str().unwrap();
    let (code, _, _) = a
        .post_keyed(&format!("/v1/reservations/{id}/settle"), &a.gateway, &json!({ "actual": "0.001" }), "rs-1", LONG)
        .unwrap();
    assert_eq!(code, 200);
    let (code, _, ended) =
        a.post_keyed("/v1/admit", &a.gateway, &admit_body("holon-labs/fx-convert"), "r-1", LONG).unwrap();
    assert_eq!((code, ended["code"].as_str()), (409, Some("replay_reservation_ended")), "{ended}");
    let a = a.restart(&[]);
    // Ids start again with the process: another call (no key) may now hold the same id; the
    // old key's replay must not be given its reservation (the review of issue #50's change
    // found the replay keyed by the id alone).
    let other = allowed(&a, "holon-labs/fx-convert", "r-2");
    eprintln!("after the restart: reservation {} (the replayed answer named {id})", other["reservation"]);
    let (code, replayed, after) =
        a.post_keyed("/v1/admit", &a.gateway, &admit_body("holon-labs/fx-convert"), "r-1", LONG).unwrap();
    assert_eq!((code, replayed, after["code"].as_str()), (409, true, Some("replay_reservation_ended")), "{after}");
    assert!(after["error"].as_str().unwrap().contains(id), "the sentence names the reservation: {after}");
    assert_eq!(status(&a)["in_flight"], 1, "only the other call's reservation");
    let (_, metrics) = a.get("/metrics", Some(&a.gateway));
    assert!(metrics.contains("holon_idempotent_replays_refused_total 1\n"), "{metrics}");
}

/// The retry storm: 16 clients on 2 nodes of one store (each client's retries go to its
/// node: a replay on another node lets nothing through, see above); each admit is sent and
/// its answer lost (the client timed out) 3 times before it is read. Every logical call is
/// reserved once and settled once, and the budget is never overrun: the store's spent is
/// exactly what the settles kept.
#[test]
fn a_retry_storm_on_two_nodes_reserves_each_call_once() {
    let a = Server::start();
    let b = Server::start_beside(&a, "serve-b", &[]);
    let nodes = [&a, &b];
    let (calls_per_client, clients) = (5, 16);
    let kept_micros = std::sync::atomic::AtomicU64::new(0);
    let reservations = parking_lot::Mutex::new(std::collections::BTreeSet::new());
    std::thread::scope(|scope| {
        for client in 0..clients {
            let (kept_micros, reservations, nodes, a, b) = (&kept_micros, &reservations, &nodes, &a, &b);
            scope.spawn(move || {
                for call in 0..calls_per_client {
                    let key = format!("storm-{client}-{call}");
                    let body = admit_body("holon-labs/fx-convert");
                    // Three tries that time out on the client once sent (the server has each
                    // and runs it to its end; the answer is lost), on the client's node.
                    let walked_away: Vec<_> = (0..3)
                        .map(|_| nodes[client % 2].post_and_walk_away("/v1/admit", &a.gateway, &body, &key))
                        .collect();
                    let first = allowed(nodes[client % 2], "holon-labs/fx-convert", &key);
                    drop(walked_away);
                    let holder = if first["node"] == "serve" { a } else { b };
                    let id = first["reservation"].as_str().unwrap().to_owned();
                    assert!(reservations.lock().insert((holder.node.clone(), id.clone())), "one reservation per call");
                    let path = format!("/v1/reservations/{id}/settle");
                    let (code, _, settled) =
                        answered(holder, &path, &json!({ "actual": "0.001" }), &format!("{key}-settle"));
                    assert_eq!(code, 200, "{settled}");
                    let kept = holon::money::Amount::parse(settled["kept"].as_str().unwrap()).unwrap();
                    kept_micros.fetch_add(kept.micros(), std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let logical = (clients * calls_per_client) as u64;
    assert_eq!(reservations.lock().len() as u64, logical);
    // Nothing else was reserved anywhere: no reservation is left open on either node.
    for s in nodes {
        assert_eq!(status(s)["in_flight"], 0, "{}: a retry reserved a second time", s.node);
    }
    let kept = kept_micros.into_inner();
    assert_eq!(kept, logical * 1_000);
    // The retries met their first requests (replayed, or found in flight and asked again).
    let replays: u64 = nodes
        .iter()
        .map(|s| {
            let (_, m) = s.get("/metrics", Some(&s.gateway));
            m.lines()
                .find_map(|l| l.strip_prefix("holon_idempotent_replays_total "))
                .map_or(0, |n| n.trim().parse().unwrap())
        })
        .sum();
    assert!(replays >= 1, "no retry met its first request");
    eprintln!("retry storm: {logical} calls, {replays} replays");
    let (mut a, mut b) = (a, b);
    assert!(b.stop() && a.stop(), "clean stops flush");
    let store = holon::store::sqlite::SqliteStore::open(std::path::Path::new(a.store.strip_prefix("sqlite:").unwrap()))
        .unwrap();
    let m = store.status(Some(MANDATE)).unwrap().remove(0);
    assert!(m.spent_micros <= m.limits.total_micros, "no overrun");
    assert_eq!(m.spent_micros, kept, "the store spent exactly what the settles kept");
}
