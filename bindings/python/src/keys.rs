//! Idempotency keys for `Engine.admit`: a retried admission with the same key and the same
//! arguments gets the first answer again (the same `Decision`, the same reservation): a
//! retry never reserves twice. The same key with other arguments raises
//! `IdempotencyConflictError` and changes nothing. Keys belong to one engine in one
//! process; the last [`IDEMPOTENCY_KEYS_MAX`] are kept (the oldest forgotten first).
//! Across processes, retries go through `holon serve`, whose keys live in the store.

use std::collections::{HashMap, VecDeque};

use holon::money::Amount;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::decision::Decision;
use crate::errors::IdempotencyConflictError;

/// Most idempotency keys one engine remembers, in keys.
pub const IDEMPOTENCY_KEYS_MAX: usize = 65_536;
/// Longest idempotency key, in bytes (as the sidecar's `Idempotency-Key`).
pub const IDEMPOTENCY_KEY_BYTES_MAX: usize = 255;

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
    /// Not seen: admit, then [`Keys::answer`].
    New,
    /// Answered before with the same arguments: this answer.
    Replay(Py<Decision>),
}

enum Slot {
    /// Claimed by an admission still deciding (another thread's retry waits for nothing:
    /// it is refused as a conflict in flight).
    InFlight(Fingerprint),
    Answered(Fingerprint, Py<Decision>),
}

#[derive(Default)]
pub(crate) struct Keys {
    table: parking_lot::Mutex<(HashMap<String, Slot>, VecDeque<String>)>,
}

impl Keys {
    pub(crate) fn claim(&self, key: &str, fingerprint: &Fingerprint) -> PyResult<Claim> {
        if key.is_empty() || key.len() > IDEMPOTENCY_KEY_BYTES_MAX || key.chars().any(char::is_control) {
            return Err(PyValueError::new_err(format!(
                "`idempotency_key` is 1 to {IDEMPOTENCY_KEY_BYTES_MAX} bytes with no control characters"
            )));
        }
        let mut guard = self.table.lock();
        let (table, order) = &mut *guard;
        match table.get(key) {
            Some(Slot::Answered(first, answer)) if first == fingerprint => {
                Ok(Claim::Replay(Python::attach(|py| answer.clone_ref(py))))
            }
            Some(Slot::InFlight(first)) if first == fingerprint => Err(IdempotencyConflictError::new_err(format!(
                "idempotency key `{key}` is in flight: its first admission has not answered yet; retry in a moment"
            ))),
            Some(_) => Err(IdempotencyConflictError::new_err(format!(
                "idempotency key `{key}` was used for another call (another mandate, agent, max_cost or capability): use a new key for a new call"
            ))),
            None => {
                while table.len() >= IDEMPOTENCY_KEYS_MAX {
                    let Some(oldest) = order.pop_front() else { break };
                    table.remove(&oldest);
                }
                table.insert(key.to_owned(), Slot::InFlight(fingerprint.clone()));
                order.push_back(key.to_owned());
                Ok(Claim::New)
            }
        }
    }

    pub(crate) fn answer(&self, key: &str, fingerprint: Fingerprint, answer: Py<Decision>) {
        let mut guard = self.table.lock();
        if let Some(slot) = guard.0.get_mut(key) {
            *slot = Slot::Answered(fingerprint, answer);
        }
    }

    /// An admission that raised: its key is free again (nothing was decided).
    pub(crate) fn forget(&self, key: &str) {
        let mut guard = self.table.lock();
        if matches!(guard.0.get(key), Some(Slot::InFlight(_))) {
            guard.0.remove(key);
            guard.1.retain(|k| k != key);
        }
    }
}
