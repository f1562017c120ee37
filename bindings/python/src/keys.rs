//! Idempotency keys for `Engine.admit`: a retried admission with the same key and the same
//! arguments gets the first answer again (the same `Decision`, the same reservation) while
//! that reservation is open: a retry never reserves twice, and a replay never authorises a
//! call whose reservation ended (it gets a denial, `replay_reservation_ended`). The rules
//! are the gateway protocol's (`holon::gateway::keys`): the key's written form, which
//! answers are kept (not a denial only for want of a lease or of the store), how long (
//! [`holon::gateway::KEEP_S`]) and how many ([`IDEMPOTENCY_KEYS_MAX`], the oldest answered
//! dropped first, never one in flight). The same key with other arguments raises
//! `IdempotencyConflictError` and changes nothing. Keys belong to one engine in one process;
//! across processes, retries go through `holon serve`, whose keys live in the store.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use holon::money::Amount;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::decision::Decision;
use crate::errors::IdempotencyConflictError;

/// Most idempotency keys one engine remembers, in keys: the protocol's bound.
pub const IDEMPOTENCY_KEYS_MAX: u64 = holon::gateway::KEYS_MAX;

/// What a key was first used for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint(String);

pub(crate) fn fingerprint(
    mandate: &str,
    agent: &str,
    max_cost: Option<Amount>,
    capability: Option<&str>,
) -> Fingerprint {
    let max_cost = max_cost.map(|a| a.micros().to_string()).unwrap_or_default();
    Fingerprint(format!("{mandate}\u{0}{agent}\u{0}{max_cost}\u{0}{}", capability.unwrap_or_default()))
}

/// A key's state when an admission claims it.
pub(crate) enum Claim {
    /// Not seen: admit, then [`Keys::answer`] (or [`Keys::forget`]).
    New,
    /// Answered before with the same arguments: this answer, as a retry gets it.
    Replay(Py<Decision>),
}

enum Slot {
    /// Claimed by an admission still deciding (another thread's retry waits for nothing:
    /// it is refused as a conflict in flight).
    InFlight(Fingerprint),
    Answered(Fingerprint, Py<Decision>),
}

/// Every key with its slot and when it was claimed.
type Table = HashMap<String, (Slot, Instant)>;

#[derive(Default)]
pub(crate) struct Keys {
    /// The table, and its keys in the order claimed.
    table: parking_lot::Mutex<(Table, VecDeque<String>)>,
}

impl Keys {
    pub(crate) fn claim(&self, py: Python<'_>, key: &str, fingerprint: &Fingerprint) -> PyResult<Claim> {
        holon::gateway::key(key.as_bytes()).map_err(|e| PyValueError::new_err(format!("`idempotency_key`: {e}")))?;
        let mut guard = self.table.lock();
        let (table, order) = &mut *guard;
        let now = Instant::now();
        forget_expired(table, order, now);
        match table.get(key) {
            Some((Slot::Answered(first, answer), _)) if first == fingerprint => {
                Ok(Claim::Replay(Decision::replayed(py, answer)?))
            }
            Some((Slot::InFlight(first), _)) if first == fingerprint => {
                Err(IdempotencyConflictError::new_err(format!(
                    "idempotency key `{key}` is in flight: its first admission has not answered yet; retry in a moment"
                )))
            }
            Some(_) => Err(IdempotencyConflictError::new_err(format!(
                "idempotency key `{key}` was used for another call (another mandate, agent, max_cost or capability): use a new key for a new call"
            ))),
            None => {
                make_room(table, order);
                // Tombstones of forgotten keys: at most as many as live keys (amortized).
                if order.len() > table.len().saturating_mul(2).max(1_024) {
                    order.retain(|k| table.contains_key(k));
                }
                table.insert(key.to_owned(), (Slot::InFlight(fingerprint.clone()), now));
                order.push_back(key.to_owned());
                Ok(Claim::New)
            }
        }
    }

    /// Keeps the answer of a claimed key, or lets the key go when the protocol says the
    /// same key must ask again (`keep` false).
    pub(crate) fn answer(&self, key: &str, fingerprint: Fingerprint, answer: Py<Decision>, keep: bool) {
        if !keep {
            self.forget(key);
            return;
        }
        let mut guard = self.table.lock();
        if let Some((slot, _)) = guard.0.get_mut(key) {
            *slot = Slot::Answered(fingerprint, answer);
        }
    }

    /// An admission that raised or was not kept: its key is free again. Its place in the
    /// order stays behind, a tombstone the next walks step over (no scan of the order).
    pub(crate) fn forget(&self, key: &str) {
        let mut guard = self.table.lock();
        if matches!(guard.0.get(key), Some((Slot::InFlight(_), _))) {
            guard.0.remove(key);
        }
    }
}

/// Drops the keys claimed more than [`holon::gateway::KEEP_S`] ago that have answered
/// (oldest first; one in flight is never dropped).
fn forget_expired(table: &mut Table, order: &mut VecDeque<String>, now: Instant) {
    let keep = Duration::from_secs(holon::gateway::KEEP_S);
    while let Some(oldest) = order.front() {
        match table.get(oldest) {
            // Expired, answered or (a claim whose admission never came back) in flight.
            Some((_, at)) if now.duration_since(*at) >= keep => {
                table.remove(oldest);
                order.pop_front();
            }
            // A tombstone (a key forgotten) or a key claimed again since: its place was here.
            None => {
                order.pop_front();
            }
            _ => break,
        }
    }
}

/// Below [`IDEMPOTENCY_KEYS_MAX`]: the oldest answered keys dropped first, never one in
/// flight (a table of nothing but keys in flight grows past the bound by those alone).
fn make_room(table: &mut Table, order: &mut VecDeque<String>) {
    let mut looked = 0;
    while u64::try_from(table.len()).unwrap_or(u64::MAX) >= IDEMPOTENCY_KEYS_MAX && looked < order.len() {
        let Some(oldest) = order.pop_front() else { break };
        if matches!(table.get(&oldest), Some((Slot::InFlight(_), _))) {
            order.push_back(oldest);
            looked += 1;
        } else {
            table.remove(&oldest);
        }
    }
}
