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

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

use siphasher::sip128::{Hasher128, SipHasher13};

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
    /// The most keys the store keeps. The `memory` store holds its book to it as keys
    /// come (a claim drops at most [`TRIM_PER_CLAIM`] of the oldest that a prune would
    /// drop), so that no prune has a second's worth of keys to drop at once; the stores
    /// behind a database leave it to [`LedgerStore::prune_keys`].
    ///
    /// [`LedgerStore::prune_keys`]: super::LedgerStore::prune_keys
    pub keys_max: u64,
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

/// A (scope, key) pair as the `memory` store's book knows it: its 128-bit SipHash-1-3 (the
/// rounds std's `HashMap` uses against hash flooding) under a key drawn at random when the
/// book is made, held inline. A book of (String,
/// String) pairs chased two heap strings at every probe and copied both into its order:
/// with 100,000 keys its lookups were a third of a keyed request's cost in the server.
/// (Two 64-bit SipHashes, as first, hashed each pair twice: 1,500 instructions a keyed
/// request.) Two pairs share an id with a chance of 2^-128, which nobody outside the
/// process can steer (the key is secret); the second would then be refused as another
/// request (or, for the very same request, get the first's answer).
type KeyId = u128;

/// The secret key of the ids' SipHash: 128 bits drawn from the process's random hash keys
/// (std's `RandomState`, seeded by the operating system) when a book is made.
#[derive(Clone, Copy)]
struct IdKey(u64, u64);

/// Never shown: a store's `Debug` must not print the secret.
impl std::fmt::Debug for IdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdKey(secret)")
    }
}

impl Default for IdKey {
    fn default() -> Self {
        IdKey(RandomState::new().hash_one(0x6b30_u64), RandomState::new().hash_one(0x6b31_u64))
    }
}

/// Hashes a [`KeyId`] by its low 64 bits, already uniform (a keyed hash).
#[derive(Debug, Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u128(&mut self, id: u128) {
        // The low half of an id (the cast keeps it, by design).
        #[allow(clippy::cast_possible_truncation)]
        let low = id as u64;
        self.0 = low;
    }
}

/// The `memory` store's keys: the rows by (scope, key) id, and their claims in order.
#[derive(Debug, Default)]
pub(crate) struct KeyBook {
    /// Each row with the number of the claim that wrote it.
    rows: HashMap<KeyId, (u64, KeyRow), BuildHasherDefault<IdHasher>>,
    /// Claims oldest first, by number (an entry whose row was replaced or removed since is
    /// stale, and skipped).
    order: VecDeque<(KeyId, u64)>,
    /// The next claim's number.
    claims: u64,
    /// The SipHash key of the ids, drawn once ([`KeyBook::id`]).
    id_key: IdKey,
}

/// Keys a claim to the `memory` store may drop, at most: more than the one it adds, so a
/// book past its bound comes back to it.
pub const TRIM_PER_CLAIM: usize = 2;

/// What a walk from the oldest claim (a prune's, or a claim's trim) does with a live one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Expired, or answered while the book is past its bound.
    Drop,
    /// In flight while the book is past its bound: never dropped, stepped over.
    StepOver,
    /// Within the bound and not expired: the walk ends here.
    Keep,
}

/// The rule of both walks, once.
fn fate(row: &KeyRow, now_unix: i64, over: bool) -> Fate {
    if row.expires_unix < now_unix || (over && row.answer.is_some()) {
        Fate::Drop
    } else if over {
        Fate::StepOver
    } else {
        Fate::Keep
    }
}

/// Stale claims the order may hold beyond as many as there are rows before a prune sweeps
/// them all at once.
const STALE_SLACK: usize = 1_024;

impl KeyBook {
    /// The id of `scope`'s `key`.
    fn id(&self, scope: &str, key: &str) -> KeyId {
        let IdKey(k0, k1) = self.id_key;
        let mut hash = SipHasher13::new_with_keys(k0, k1);
        // The scope's length first: ("ab", "c") and ("a", "bc") are two pairs.
        hash.write_u64(scope.len() as u64);
        hash.write(scope.as_bytes());
        hash.write(key.as_bytes());
        hash.finish128().as_u128()
    }

    pub(crate) fn claim(&mut self, claim: &KeyClaim<'_>) -> Result<KeyState, StoreError> {
        claim.check()?;
        let id = self.id(claim.scope, claim.key);
        // One lookup: the row found is judged, and replaced in place when claimed.
        let state = match self.rows.entry(id) {
            Entry::Occupied(mut found) => {
                let state = judge(Some(&found.get().1), claim);
                if state == KeyState::Claimed {
                    self.order.push_back((*found.key(), self.claims));
                    found.insert((self.claims, claim.row()));
                }
                state
            }
            Entry::Vacant(free) => {
                self.order.push_back((*free.key(), self.claims));
                free.insert((self.claims, claim.row()));
                KeyState::Claimed
            }
        };
        self.claims += 1;
        self.trim(claim.now_unix, claim.keys_max);
        Ok(state)
    }

    /// Looks at most [`TRIM_PER_CLAIM`] of the oldest claims: drops each key a prune would
    /// drop (expired, or answered while the book is past `keys_max`), sends one in flight
    /// past the bound to the back, and stops at the first it would keep ([`fate`]). A prune
    /// that dropped a second's worth of keys at once (40,000 at the rate of
    /// `.ci/serve-bench`) took the server's core for tens of ms: its p99 was 20 ms.
    fn trim(&mut self, now_unix: i64, keys_max: u64) {
        let max = usize::try_from(keys_max).unwrap_or(usize::MAX);
        for _ in 0..TRIM_PER_CLAIM {
            let Some((id, number)) = self.order.pop_front() else { return };
            // A stale claim (its key forgotten, or claimed again since) just goes.
            let Some((_, row)) = self.rows.get(&id).filter(|(n, _)| *n == number) else { continue };
            match fate(row, now_unix, self.rows.len() > max) {
                Fate::Drop => {
                    self.rows.remove(&id);
                }
                // In flight: it must not hold back the answered ones behind it, so it goes
                // to the back (to a prune, its expiry then waits for the claims before it,
                // as [`KeyBook::prune_slice`] says).
                Fate::StepOver => self.order.push_back((id, number)),
                Fate::Keep => {
                    self.order.push_front((id, number));
                    return;
                }
            }
        }
    }

    pub(crate) fn answer(&mut self, scope: &str, key: &str, answer: KeyAnswer) -> Result<(), StoreError> {
        keepable(&answer)?;
        let id = self.id(scope, key);
        if let Some((_, row)) = self.rows.get_mut(&id)
            && row.answer.is_none()
        {
            row.answer = Some(answer);
        }
        Ok(())
    }

    /// Drops a claim in flight (its request changed nothing); an answered key stays.
    pub(crate) fn forget(&mut self, scope: &str, key: &str) {
        let id = self.id(scope, key);
        if self.rows.get(&id).is_some_and(|(_, r)| r.answer.is_none()) {
            self.rows.remove(&id);
        }
    }

    /// Drops `node`'s claims in flight (its previous run's: it restarted).
    pub(crate) fn forget_node(&mut self, node: &str) -> u64 {
        let before = self.rows.len();
        self.rows.retain(|_, (_, r)| r.answer.is_some() || r.node != node);
        (before - self.rows.len()) as u64
    }

    /// Drops expired keys, then the oldest answered ones past `keys_max` (all slices of
    /// [`KeyBook::prune_slice`] at once; the store prunes with [`prune_in_slices`]).
    #[cfg(test)]
    pub(crate) fn prune(&mut self, now_unix: i64, keys_max: u64) -> u64 {
        let mut pruning = Pruning::default();
        while !self.prune_slice(now_unix, keys_max, &mut pruning) {}
        self.end_prune(pruning, now_unix)
    }

    /// One slice of a prune: at most [`PRUNE_SLICE`] claims from the oldest, and only as far
    /// as there is something to drop, so a prune costs what it drops and the claims in
    /// flight it steps over, never a walk of the whole book. True when the prune is done.
    ///
    /// The oldest claims expire first, as a server claims every key for the same `keep_s`;
    /// a key claimed for less than one before it (or after the clock went back) waits for
    /// those before it, or for a sweep, and is new again to a claim meanwhile ([`judge`]).
    pub(crate) fn prune_slice(&mut self, now_unix: i64, keys_max: u64, pruning: &mut Pruning) -> bool {
        let max = usize::try_from(keys_max).unwrap_or(usize::MAX);
        for _ in 0..PRUNE_SLICE {
            let Some((id, number)) = self.order.pop_front() else { return true };
            let Some((_, row)) = self.rows.get(&id).filter(|(n, _)| *n == number) else { continue };
            match fate(row, now_unix, self.rows.len() > max) {
                Fate::Drop => {
                    if let Some(row) = self.rows.remove(&id) {
                        pruning.dropped.push(row);
                        pruning.pruned += 1;
                    }
                }
                // In flight: never dropped; the walk goes on past it.
                Fate::StepOver => pruning.aside.push((id, number)),
                Fate::Keep => {
                    self.order.push_front((id, number));
                    return true;
                }
            }
        }
        false
    }

    /// The end of a prune: the claims in flight it stepped over go back in their place, and
    /// the stale claims the walks leave behind (keys forgotten, or claimed again) are swept,
    /// with every expired key, once they outnumber the rows by [`STALE_SLACK`]. The number
    /// of keys dropped.
    pub(crate) fn end_prune(&mut self, pruning: Pruning, now_unix: i64) -> u64 {
        for claim in pruning.aside.into_iter().rev() {
            self.order.push_front(claim);
        }
        let mut pruned = pruning.pruned;
        if self.order.len() > self.rows.len().saturating_mul(2).saturating_add(STALE_SLACK) {
            let before = self.rows.len();
            self.rows.retain(|_, (_, r)| r.expires_unix >= now_unix);
            pruned += (before - self.rows.len()) as u64;
            let rows = &self.rows;
            self.order.retain(|(id, number)| rows.get(id).is_some_and(|(n, _)| n == number));
        }
        pruned
    }
}

/// Claims one slice of a prune looks at, at most.
const PRUNE_SLICE: usize = 1_024;

/// A prune under way: the claims in flight it stepped over, the rows it dropped (to be
/// freed once the book's lock is let go) and how many.
#[derive(Debug, Default)]
pub(crate) struct Pruning {
    aside: Vec<(KeyId, u64)>,
    dropped: Vec<(u64, KeyRow)>,
    pruned: u64,
}

/// A prune of the book behind `book`, a slice at a time with the lock let go between two
/// and the dropped rows freed outside it: the lock is the one every keyed request takes,
/// and a prune that dropped a second's worth of keys (40,000 at the rate of
/// `.ci/serve-bench`) in one hold stalled the server for about 50 ms.
pub(crate) fn prune_in_slices(book: &parking_lot::Mutex<KeyBook>, now_unix: i64, keys_max: u64) -> u64 {
    let mut pruning = Pruning::default();
    while !book.lock().prune_slice(now_unix, keys_max, &mut pruning) {
        pruning.dropped.clear();
    }
    pruning.dropped.clear();
    book.lock().end_prune(pruning, now_unix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim<'a>(key: &'a str, digest: &'a str, now_unix: i64) -> KeyClaim<'a> {
        KeyClaim { scope: "gateway", key, digest, node: "a", now_unix, keep_s: 60, keys_max: u64::MAX }
    }

    #[test]
    fn a_key_is_claimed_once_answered_once_and_replayed_for_its_own_request_only() {
        let mut book = KeyBook::default();
        assert_eq!(book.claim(&claim("k", "d1", 0)).unwrap(), KeyState::Claimed);
        assert_eq!(book.claim(&claim("k", "d1", 1)).unwrap(), KeyState::InFlight);
        assert_eq!(book.claim(&claim("k", "d2", 1)).unwrap(), KeyState::OtherRequest);
        let answer = KeyAnswer { status: 200, body: "{}".into() };
        book.answer("gateway", "k", answer.clone()).unwrap();
        book.answer("gateway", "k", KeyAnswer { status: 500, body: "x".into() }).unwrap();
        assert_eq!(book.claim(&claim("k", "d1", 2)).unwrap(), KeyState::Answered(answer.clone()));
        book.forget("gateway", "k");
        assert_eq!(book.claim(&claim("k", "d1", 3)).unwrap(), KeyState::Answered(answer), "an answered key stays");
        assert_ne!(book.id("ab", "c"), book.id("a", "bc"), "where the scope ends is part of the id");
        assert_ne!(KeyBook::default().id("gateway", "k"), book.id("gateway", "k"), "each book draws its own secret");
        let IdKey(k0, k1) = book.id_key;
        let shown = format!("{book:?}");
        assert!(
            shown.contains("IdKey(secret)") && !shown.contains(&k0.to_string()) && !shown.contains(&k1.to_string())
        );
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
                book.answer("gateway", &key, KeyAnswer { status: 200, body: String::new() }).unwrap();
            }
        }
        assert_eq!(book.prune(5, 4), 6);
        assert!(book.rows.contains_key(&book.id("gateway", "k0")), "in flight, kept");
        for n in 7..10 {
            assert!(book.rows.contains_key(&book.id("gateway", &format!("k{n}"))), "k{n} is among the newest");
        }
        assert_eq!(book.prune(100, 4), 4, "all expired");
        assert_eq!(book.forget_node("a"), 0);
    }

    #[test]
    fn claims_hold_the_book_to_its_bound_as_keys_come_and_never_drop_one_in_flight() {
        let bounded = |key: &str, now_unix: i64, book: &mut KeyBook| {
            book.claim(&KeyClaim { keys_max: 4, ..claim(key, "d", now_unix) }).unwrap();
        };
        let mut book = KeyBook::default();
        bounded("flight", 0, &mut book);
        for n in 0..100 {
            let key = format!("k{n}");
            bounded(&key, 1, &mut book);
            book.answer("gateway", &key, KeyAnswer { status: 200, body: String::new() }).unwrap();
            assert!(book.rows.len() <= 5, "{} rows after {} claims, bound 4", book.rows.len(), n + 2);
        }
        assert!(book.rows.contains_key(&book.id("gateway", "flight")), "in flight: kept");
        // Expired keys go as new ones come, whatever the bound.
        let mut book = KeyBook::default();
        for n in 0..50 {
            book.claim(&claim(&format!("e{n}"), "d", n)).unwrap();
        }
        assert_eq!(book.rows.len(), 50, "none expired yet (kept 60 s)");
        for n in 0..50 {
            book.claim(&claim(&format!("later{n}"), "d", 200 + n)).unwrap();
        }
        assert_eq!(book.rows.len(), 50, "each claim dropped expired ones, two at most");
    }

    #[test]
    fn a_prune_in_slices_steps_over_claims_in_flight_and_puts_them_back_in_order() {
        let book = parking_lot::Mutex::new(KeyBook::default());
        let n = 3 * PRUNE_SLICE;
        for i in 0..n {
            let key = format!("k{i}");
            book.lock().claim(&claim(&key, "d", 1)).unwrap();
            if i >= n / 2 {
                book.lock().answer("gateway", &key, KeyAnswer { status: 200, body: String::new() }).unwrap();
            }
        }
        assert_eq!(prune_in_slices(&book, 2, 10), (n / 2) as u64, "every answered one; none in flight");
        let book = book.into_inner();
        assert_eq!(book.rows.len(), n / 2);
        let order: Vec<_> = book.order.iter().map(|(id, _)| *id).collect();
        let expected: Vec<_> = (0..n / 2).map(|i| book.id("gateway", &format!("k{i}"))).collect();
        assert_eq!(order, expected, "in their order");
    }

    #[test]
    fn a_prune_walks_only_as_far_as_it_drops_and_sweeps_stale_claims_past_the_slack() {
        let mut book = KeyBook::default();
        book.claim(&claim("kept", "d", 0)).unwrap();
        book.answer("gateway", "kept", KeyAnswer { status: 200, body: String::new() }).unwrap();
        let forgotten = |book: &mut KeyBook, from: usize, to: usize| {
            for n in from..to {
                let key = format!("f{n}");
                book.claim(&claim(&key, "d", 1)).unwrap();
                book.forget("gateway", &key);
            }
        };
        forgotten(&mut book, 0, 500);
        assert_eq!(book.prune(2, 10), 0);
        assert_eq!(book.order.len(), 501, "the walk stopped at the oldest claim, live and within the bound");
        forgotten(&mut book, 500, 2_000);
        assert_eq!(book.prune(2, 10), 0);
        assert_eq!(book.order.len(), 1, "past the slack the stale claims are swept");
        assert_eq!(
            book.claim(&claim("kept", "d", 3)).unwrap(),
            KeyState::Answered(KeyAnswer { status: 200, body: String::new() })
        );
        // A key claimed again (expired) is one claim: its first does not drop its second.
        assert_eq!(book.claim(&claim("kept", "d", 61)).unwrap(), KeyState::Claimed);
        assert_eq!(book.prune(61, 10), 0);
        assert_eq!(book.claim(&claim("kept", "d", 62)).unwrap(), KeyState::InFlight);
    }
}
