//! Held calls through the store (docs/store.md, "Held calls"): the node copies the calls
//! its engine holds to the store, so the mandate's issuer can approve (or refuse) one on
//! **any** node, exactly once: approving takes it out of the store in one atomic step.

use super::cycle::Runner;
use super::{Node, NodeError};
use crate::engine::{Admission, Engine};
use crate::pattern::Principal;
use crate::store::{HeldCall, LedgerStore};
use crate::time::Timestamp;

/// A held call's id in the store: the holding node's name, its run (local pending ids
/// start again at every start, so a restarted node's ids would meet its last run's), and
/// its local pending id.
pub(super) fn store_id(node: &str, run: u64, local: u64) -> String {
    format!("{node}:{run:016x}:{local}")
}

/// A number for this run of a node, unlikely to repeat: the standard library's randomly
/// seeded hasher over the time and the process id.
pub(super) fn run_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    hasher.write_u32(std::process::id());
    hasher.finish()
}

impl Runner {
    /// Copies newly held calls to the store and deletes those refused or expired here;
    /// with `prune`, forgets here the calls taken from the store elsewhere (approved or
    /// refused on another node).
    pub(super) fn mirror_held(&mut self, prune: bool) {
        let engine = std::sync::Arc::clone(self.engine());
        // Every poll: a cheap count (`stats` would scan every reservation slot).
        if engine.held_count() == 0 && self.mirrored.is_empty() {
            return;
        }
        let local = engine.held_locally();
        let snapshot = engine.snapshot();
        for h in &local {
            if self.mirrored.contains_key(&h.id) {
                continue;
            }
            let (Some(m), Some(a)) = (snapshot.mandate(h.call.mandate), snapshot.agent(h.call.agent)) else {
                continue;
            };
            let call = HeldCall {
                id: store_id(self.node_name(), self.run_id, h.id),
                mandate: m.source.id.clone(),
                agent: a.source.id.to_string(),
                at_unix: h.call.at.unix(),
                max_cost_micros: h.call.max_cost.map(|c| c.micros()),
                by_capability: h.call.by_capability,
                worst_micros: h.worst_case.micros(),
                expires_unix: h.expires_unix,
            };
            match self.store().hold(&call) {
                Ok(()) => {
                    let _ = self.answered(usize::MAX, None);
                    self.mirrored.insert(h.id, call.id);
                }
                // The store is away: try again at the next poll.
                Err(e @ crate::store::StoreError::Unavailable(_)) => {
                    let _ = self.answered(usize::MAX, Some(&e));
                    return;
                }
                // This call cannot be kept (an amount too large for the store, say): it
                // stays held here only, and the others go on.
                Err(_) => {
                    super::Counters::add(&self.shared().counters.store_errors, 1);
                    self.mirrored.insert(h.id, String::new());
                }
            }
        }
        // Refused or expired here: no longer approvable anywhere.
        let gone: Vec<(u64, String)> = self
            .mirrored
            .iter()
            .filter(|(id, _)| !local.iter().any(|h| h.id == **id))
            .map(|(id, sid)| (*id, sid.clone()))
            .collect();
        for (id, sid) in gone {
            if sid.is_empty() {
                self.mirrored.remove(&id);
                continue;
            }
            let result = self.store().take_held(&sid, self.now_unix());
            if self.answered(usize::MAX, result.as_ref().err()).is_err() {
                return;
            }
            self.mirrored.remove(&id);
        }
        if prune && !self.mirrored.is_empty() {
            let listed = self.store().held_calls(None, self.now_unix());
            let Ok(listed) = listed.map_err(|e| self.answered(usize::MAX, Some(&e))) else { return };
            let _ = self.answered(usize::MAX, None);
            let taken: Vec<u64> = self
                .mirrored
                .iter()
                .filter(|(_, sid)| !listed.iter().any(|c| &c.id == *sid))
                .map(|(id, _)| *id)
                .collect();
            for id in taken {
                engine.forget_held(id);
                self.mirrored.remove(&id);
            }
        }
    }
}

impl Node {
    /// The id in the store of a call this node's engine held (`Admission::Held`'s id): the
    /// one to approve or refuse it by, on any node.
    pub fn held_id(&self, local: u64) -> String {
        store_id(&self.name, self.run_id, local)
    }

    /// The mandate's issuer approves a held call (held on any node): it is taken out of the
    /// store (once: a second approval finds nothing) and admitted again here, every
    /// condition checked anew. Anyone but the issuer is refused, and the call stays held. A
    /// call refused only for want of a lease (`lease_pending`, `store_unavailable`) stays
    /// held too, so the approval can be given again. A call copied to the store within the
    /// last poll may not be there yet: [`NodeError::UnknownHeld`], retry.
    pub fn approve(&self, held_id: &str, approver: &Principal, at: Timestamp) -> Result<Admission<'_>, NodeError> {
        let now = (self.clock)().unix();
        let Some(held) = self.store.take_held(held_id, now)? else {
            return Err(NodeError::UnknownHeld(held_id.to_owned()));
        };
        let engine: &Engine = &self.engine;
        let Some(call) = engine.held_call(&held, at) else {
            self.store.release_held(&held.id)?;
            return Err(NodeError::HeldNotHere(held_id.to_owned()));
        };
        match engine.admit_approved(&call, approver) {
            Err(e) => {
                self.store.release_held(&held.id)?;
                Err(NodeError::Engine(e))
            }
            Ok(admission) => {
                if let Admission::Denied(d) = &admission
                    && d.codes.only_for_want_of_lease_or_store()
                {
                    self.store.release_held(&held.id)?;
                }
                // Not forgotten here at once (as a refusal is): an approval nobody heard is
                // undone by putting the call back in the store, and the thread's copy would
                // then take it out again as "gone here". The next prune forgets it.
                Ok(admission)
            }
        }
    }

    /// Refuses a held call (held on any node): it is taken out of the store; `false` when
    /// no such call is held (taken already, expired, or never held).
    pub fn refuse(&self, held_id: &str) -> Result<bool, NodeError> {
        let taken = self.store.take_held(held_id, (self.clock)().unix())?.is_some();
        if taken {
            self.forget_here(held_id);
        }
        Ok(taken)
    }

    /// A call this node held, taken out of the store here: forgotten by the engine at
    /// once (its count of held calls is right now, not a flush later).
    fn forget_here(&self, held_id: &str) {
        if let Some(local) = self.local_held(held_id) {
            self.engine.forget_held(local);
        }
    }

    /// The engine's number of a call this run of this node holds, by its store id.
    fn local_held(&self, held_id: &str) -> Option<u64> {
        let prefix = store_id(&self.name, self.run_id, 0);
        held_id
            .strip_prefix(prefix.strip_suffix('0').unwrap_or(&prefix))
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|n| store_id(&self.name, self.run_id, *n) == held_id)
    }

    /// Whether `held_id` names a call this node's engine holds now: one held a moment ago
    /// may not be in the store yet (the thread copies it at its next poll).
    pub fn is_held_here(&self, held_id: &str) -> bool {
        self.local_held(held_id).is_some_and(|n| self.engine.held_locally().iter().any(|h| h.id == n))
    }
}

/// The store, for [`Node`]'s approvals (shared with its thread).
pub(super) type SharedStore = std::sync::Arc<dyn LedgerStore>;
