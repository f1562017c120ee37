//! Idempotency keys in the store, next to the held calls (docs/serve.md, "Idempotency"):
//! a server that gets a state-changing request with a key claims the key here before it
//! changes anything, and keeps the answer here once it has one. So a retry, on this server
//! after a restart or on another server of the same store, finds the first request: its
//! answer to replay, or that it is still in flight, or that the key was used for another
//! request. The rule is [`judge`], once, on a plain row; each backend reads the key's row
//! inside one transaction (or under one lock), applies it, and writes the row back.
//!
//! A key is kept for `keep_s` from its claim, and a prune ([`LedgerStore::prune_keys`])
//! drops the expired ones and, past `keys_max`, the oldest answered ones (never one in
//! flight).
//!
//! [`LedgerStore::prune_keys`]: super::LedgerStore::prune_keys

use std::collections::{HashMap, VecDeque};

use super::{NODE_NAME_BYTES_MAX, StoreError, check_name};

/// Longest idempotency key, in bytes.
pub const KEY_BYTES_MAX: usize = 255;
/// Longest scope (the principal a key belongs to), in bytes.
pub const KEY_SCOPE_BYTES_MAX: usize = 200;
/// Longest answer kept with a key, in bytes (a decision is a few hundred; a longer answer
/// is not kept, and its key is forgotten).
pub const KEY_ANSWER_BYTES_MAX: usize = 16 * 1024;

/// A request claiming its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyClaim<'a> {
    /// Whose key it is (keys of two principals never meet).
    pub scope: &'a str,
    pub key: &'a str,
    /// What the request was (its method, path and body, hashed): the same key on another
    /// request is refused.
    pub digest: &'a str,
    /// The node whose request it is (its claims in flight are dropped when it restarts).
    pub node: &'a str,
    pub now_unix: i64,
    /// How long the key is kept, from now, in seconds.
    pub keep_s: u64,
}

/// The answer kept with a key: what the first request answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyAnswer {
    pub status: u16,
    pub body: String,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState {
    /// New (or expired): the key is this request's; answer it with `answer_key`.
    Claimed,
    /// The first request with this key has no answer yet.
    InFlight,
    /// The key was used for another request (another method, path or body).
    OtherRequest,
    /// The first request's answer, to replay.
    Answered(KeyAnswer),
}

/// A key's row, as every backend keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyRow {
    pub digest: String,
    pub node: String,
    pub answer: Option<KeyAnswer>,
    pub created_unix: i64,
    pub expires_unix: i64,
}

impl KeyClaim<'_> {
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        check_name("an idempotency key", self.key, KEY_BYTES_MAX)?;
        check_name("an idempotency key's scope", self.scope, KEY_SCOPE_BYTES_MAX)?;
        check_name("a node name", self.node, NODE_NAME_BYTES_MAX)
    }

    /// The row a claim writes: in flight, kept `keep_s`.
    pub(crate) fn row(&self) -> KeyRow {
        KeyRow {
            digest: self.digest.to_owned(),
            node: self.node.to_owned(),
            answer: None,
            created_unix: self.now_unix,
            expires_unix: self.now_unix.saturating_add_unsigned(self.keep_s),
        }
    }
}

/// The rule, once: what a claim finds in the key's row (`None`: no row). `Claimed` means
/// the caller writes [`KeyClaim::row`] in place of what it found (nothing, or an expired
/// key).
pub(crate) fn judge(row: Option<&KeyRow>, claim: &KeyClaim<'_>) -> KeyState {
    match row {
        None => KeyState::Claimed,
        Some(r) if r.expires_unix < claim.now_unix => KeyState::Claimed,
        Some(r) if r.digest != claim.digest => KeyState::OtherRequest,
        Some(KeyRow { answer: Some(a), .. }) => KeyState::Answered(a.clone()),
        Some(_) => KeyState::InFlight,
    }
}

/// Whether an answer may be kept (short enough).
pub fn keepable(answer: &KeyAnswer) -> Result<(), StoreError> {
    check_name("an idempotency key's answer", &answer.body, KEY_ANSWER_BYTES_MAX)
}

/// The `memory` store's keys: the rows by (scope, key), and their claims in order.
#[derive(Debug, Default)]
pub(crate) struct KeyBook {
    rows: HashMap<(String, String), KeyRow>,
    /// Claims oldest first (an entry whose row was replaced or removed is skipped).
    order: VecDeque<((String, String), i64)>,
}

impl KeyBook {
    pub(crate) fn claim(&mut self, claim: &KeyClaim<'_>) -> Result<KeyState, StoreError> {
        claim.check()?;
        let id = (claim.scope.to_owned(), claim.key.to_owned());
        let state = judge(self.rows.get(&id), claim);
        if state == KeyState::Claimed {
            self.order.push_back((id.clone(), claim.now_unix));
            self.rows.insert(id, claim.row());
        }
        Ok(state)
    }

    pub(crate) fn answer(&mut self, scope: &str, key: &str, answer: &KeyAnswer) -> Result<(), StoreError> {
        keepable(answer)?;
        if let Some(row) = self.rows.get_mut(&(scope.to_owned(), key.to_owned()))
            && row.answer.is_none()
        {
            row.answer = Some(answer.clone());
        }
        Ok(())
    }

    /// Drops a claim in flight (its request changed nothing); an answered key stays.
    pub(crate) fn forget(&mut self, scope: &str, key: &str) {
        let id = (scope.to_owned(), key.to_owned());
        if self.rows.get(&id).is_some_and(|r| r.answer.is_none()) {
            self.rows.remove(&id);
        }
    }

    /// Drops `node`'s claims in flight (its previous run's: it restarted).
    pub(crate) fn forget_node(&mut self, node: &str) -> u64 {
        let before = self.rows.len();
        self.rows.retain(|_, r| r.answer.is_some() || r.node != node);
        (before - self.rows.len()) as u64
    }

    /// Drops expired keys, then the oldest answered ones past `keys_max`.
    pub(crate) fn prune(&mut self, now_unix: i64, keys_max: u64) -> u64 {
        let before = self.rows.len();
        self.rows.retain(|_, r| r.expires_unix >= now_unix);
        let max = usize::try_from(keys_max).unwrap_or(usize::MAX);
        let mut kept = VecDeque::with_capacity(self.order.len());
        while let Some((id, created)) = self.order.pop_front() {
            let live = self.rows.get(&id).is_some_and(|r| r.created_unix == created);
            if !live {
                continue;
            }
            let in_flight = self.rows.get(&id).is_some_and(|r| r.answer.is_none());
            if self.rows.len() > max && !in_flight {
                self.rows.remove(&id);
                continue;
            }
            kept.push_back((id, created));
        }
        self.order = kept;
        (before.saturating_sub(self.rows.len())) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim<'a>(key: &'a str, digest: &'a str, now_unix: i64) -> KeyClaim<'a> {
        KeyClaim { scope: "gateway", key, digest, node: "a", now_unix, keep_s: 60 }
    }

    #[test]
    fn a_key_is_claimed_once_answered_once_and_replayed_for_its_own_request_only() {
        let mut book = KeyBook::default();
        assert_eq!(book.claim(&claim("k", "d1", 0)).unwrap(), KeyState::Claimed);
        assert_eq!(book.claim(&claim("k", "d1", 1)).unwrap(), KeyState::InFlight);
        assert_eq!(book.claim(&claim("k", "d2", 1)).unwrap(), KeyState::OtherRequest);
        let answer = KeyAnswer { status: 200, body: "{}".into() };
        book.answer("gateway", "k", &answer).unwrap();
        book.answer("gateway", "k", &KeyAnswer { status: 500, body: "x".into() }).unwrap();
        assert_eq!(book.claim(&claim("k", "d1", 2)).unwrap(), KeyState::Answered(answer.clone()));
        book.forget("gateway", "k");
        assert_eq!(book.claim(&claim("k", "d1", 3)).unwrap(), KeyState::Answered(answer), "an answered key stays");
        let other_scope = KeyClaim { scope: "account:alice", ..claim("k", "d9", 3) };
        assert_eq!(book.claim(&other_scope).unwrap(), KeyState::Claimed, "scopes never meet");
        assert_eq!(book.claim(&claim("k", "d2", 61)).unwrap(), KeyState::Claimed, "an expired key is new again");
    }

    #[test]
    fn a_prune_drops_the_expired_and_the_oldest_answered_past_the_bound_never_one_in_flight() {
        let mut book = KeyBook::default();
        for n in 0..10 {
            let key = format!("k{n}");
            book.claim(&claim(&key, "d", n)).unwrap();
            if n != 0 {
                book.answer("gateway", &key, &KeyAnswer { status: 200, body: String::new() }).unwrap();
            }
        }
        assert_eq!(book.prune(5, 4), 6);
        assert!(book.rows.contains_key(&("gateway".into(), "k0".into())), "in flight, kept");
        for n in 7..10 {
            assert!(book.rows.contains_key(&("gateway".into(), format!("k{n}"))), "k{n} is among the newest");
        }
        assert_eq!(book.prune(100, 4), 4, "all expired");
        assert_eq!(book.forget_node("a"), 0);
    }
}
