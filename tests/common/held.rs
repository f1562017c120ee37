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
