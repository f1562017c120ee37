//! Held calls in the store, the same checks on every backend (tests/node_store.rs for
//! memory and SQLite, tests/store_postgres.rs for PostgreSQL).

use holon::store::{HeldCall, LedgerStore};

pub(crate) fn call(id: &str, mandate: &str, expires_unix: i64) -> HeldCall {
    HeldCall {
        id: id.to_owned(),
        mandate: mandate.to_owned(),
        agent: "syn/a9".to_owned(),
        at_unix: 1_000,
        max_cost_micros: Some(950_000),
        by_capability: true,
        worst_micros: 900_000,
        expires_unix,
    }
}

/// A held call is listed until it expires, taken exactly once, and an id held twice keeps
/// its first call; an expired call is not taken (and is removed); bad ids are refused.
pub(crate) fn held_calls_are_taken_once_and_expire(store: &dyn LedgerStore) {
    let a = call("n1:1", "m0", 100);
    store.hold(&a).unwrap();
    store.hold(&HeldCall { agent: "other".into(), ..a.clone() }).unwrap();
    store.hold(&call("n1:2", "m1", 50)).unwrap();
    assert_eq!(store.held_calls(None, 10).unwrap(), [a.clone(), call("n1:2", "m1", 50)]);
    assert_eq!(store.held_calls(Some("m0"), 10).unwrap(), std::slice::from_ref(&a), "listed by mandate");
    assert_eq!(store.held_calls(None, 60).unwrap(), std::slice::from_ref(&a), "an expired call is not listed");
    assert_eq!(store.take_held("n1:1", 10).unwrap(), Some(a.clone()), "the first call held under the id");
    assert_eq!(store.take_held("n1:1", 10).unwrap(), None, "taken once");
    // A copy sent again after it was taken (its first answer lost) cannot bring it back.
    store.hold(&a).unwrap();
    assert!(store.held_calls(Some("m0"), 10).unwrap().is_empty(), "a taken call stays taken");
    assert_eq!(store.take_held("n1:1", 10).unwrap(), None);
    assert_eq!(store.take_held("n1:2", 60).unwrap(), None, "expired: not taken");
    assert_eq!(store.take_held("n1:2", 10).unwrap(), None, "and removed");
    assert_eq!(store.take_held("nobody:7", 10).unwrap(), None);
    assert!(store.hold(&call(&"x".repeat(1_000), "m0", 100)).is_err(), "an id above its limit is refused");
    assert!(store.held_calls(None, 0).unwrap().is_empty());
}

/// Idempotency keys, kept next to the held calls: claimed once; the first request's
/// answer kept once and replayed for that request only; a key of another scope is another
/// key; a claim in flight can be dropped (its request changed nothing), an answered one
/// cannot; a node's restart drops its claims in flight; a prune drops the expired and the
/// oldest answered past the bound. A second handle (another node) sees the same.
pub(crate) fn idempotency_keys_are_claimed_once_and_replayed(store: &dyn LedgerStore, other: &dyn LedgerStore) {
    use holon::store::{KeyAnswer, KeyClaim, KeyState};
    let claim = |key: &'static str, digest: &'static str, node: &'static str, now_unix: i64| KeyClaim {
        scope: "gateway",
        key,
        digest,
        node,
        now_unix,
        keep_s: 100,
        keys_max: u64::MAX,
    };
    assert_eq!(store.claim_key(&claim("k1", "d1", "a", 10)).unwrap(), KeyState::Claimed);
    assert_eq!(other.claim_key(&claim("k1", "d1", "b", 11)).unwrap(), KeyState::InFlight, "on another node too");
    assert_eq!(other.claim_key(&claim("k1", "d2", "b", 11)).unwrap(), KeyState::OtherRequest);
    let answer = KeyAnswer { status: 200, body: r#"{"decision":"allowed","reservation":"7"}"#.to_owned() };
    store.answer_key("gateway", "k1", answer.clone()).unwrap();
    other.answer_key("gateway", "k1", KeyAnswer { status: 500, body: "late".into() }).unwrap();
    assert_eq!(other.claim_key(&claim("k1", "d1", "b", 12)).unwrap(), KeyState::Answered(answer.clone()));
    other.forget_key("gateway", "k1").unwrap();
    assert_eq!(store.claim_key(&claim("k1", "d1", "a", 13)).unwrap(), KeyState::Answered(answer), "kept");
    let alice = KeyClaim { scope: "account:alice", ..claim("k1", "d9", "a", 13) };
    assert_eq!(store.claim_key(&alice).unwrap(), KeyState::Claimed, "another principal's key");
    // In flight, then dropped: claimed again.
    assert_eq!(store.claim_key(&claim("k2", "d1", "a", 14)).unwrap(), KeyState::Claimed);
    store.forget_key("gateway", "k2").unwrap();
    assert_eq!(other.claim_key(&claim("k2", "d1", "b", 15)).unwrap(), KeyState::Claimed);
    // Node b restarts: its claims in flight go (k2), not a's (account:alice's k1).
    assert_eq!(store.forget_node_keys("b").unwrap(), 1);
    assert_eq!(store.claim_key(&claim("k2", "d1", "a", 16)).unwrap(), KeyState::Claimed);
    assert_eq!(store.claim_key(&claim("k1", "d1", "a", 200)).unwrap(), KeyState::Claimed, "expired: new again");
    // A prune: the expired (alice's k1 and k2, claimed at 13 and 16) and, past the bound,
    // the oldest answered.
    for (n, key) in ["p1", "p2", "p3"].into_iter().enumerate() {
        store.claim_key(&claim(key, "d", "a", 201 + n as i64)).unwrap();
        store.answer_key("gateway", key, KeyAnswer { status: 200, body: "{}".into() }).unwrap();
    }
    // The `memory` store's claims drop expired keys as they come (`TRIM_PER_CLAIM`): its
    // claims of p1 to p3 dropped the two expired ones already.
    let expired_left = if store.in_process() { 0 } else { 2 };
    assert_eq!(store.prune_keys(150, 2).unwrap(), expired_left + 2, "the expired, then the two oldest answered");
    assert_eq!(
        other.claim_key(&claim("p3", "d", "b", 210)).unwrap(),
        KeyState::Answered(KeyAnswer { status: 200, body: "{}".into() })
    );
    assert_eq!(other.claim_key(&claim("p1", "d", "b", 210)).unwrap(), KeyState::Claimed, "pruned");
    assert!(
        store.claim_key(&claim(Box::leak("x".repeat(300).into_boxed_str()), "d", "a", 1)).is_err(),
        "a key above 255 bytes"
    );
    let huge = KeyAnswer { status: 200, body: "x".repeat(20_000) };
    assert!(store.answer_key("gateway", "p3", huge).is_err(), "an answer above its limit is refused");
}
