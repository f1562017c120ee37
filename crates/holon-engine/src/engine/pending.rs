//! Held calls: a call above `approval.above` waits for its mandate's issuer. Nothing is
//! reserved while it waits; approving admits it again (every condition checked anew) and
//! reserves. At most `pending_max` wait at once (a hard bound, reserved by an RMW before
//! the insert), each for at most `pending_ttl_s` by the engine's clock.

use super::receipt::{End, Outcome, Receipt};
use super::{Admission, Ask, Call, Engine, EngineError};
use crate::admission::{self, Code, CodeSet, Verdict};
use crate::money::Amount;
use crate::pattern::Principal;
use crate::sync;
use crate::time::Timestamp;

/// A call waiting for its mandate's issuer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingApproval {
    pub id: u64,
    pub worst_case: Amount,
}

/// A held call and when it expires (unix seconds, by the engine's clock).
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) call: Call,
    pub(super) expires: i64,
    pub(super) worst: Amount,
}

/// A held call as a node copies it to the ledger store (so it can be approved on any
/// node): its local id, the call, its worst case when held, its expiry (unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLocally {
    pub id: u64,
    pub call: Call,
    pub worst_case: Amount,
    pub expires_unix: i64,
}

impl Engine {
    /// A slow path (it allocates): kept out of line so that `decide` stays small enough
    /// for the allowed path's helpers to be inlined into it.
    #[cold]
    #[inline(never)]
    pub(super) fn hold<'e>(&'e self, ask: &Ask<'_>, worst: Amount) -> Admission<'e> {
        let full = || self.deny(ask, CodeSet::EMPTY.with(Code::InFlightLimitReached), worst);
        // A hard bound: a place is reserved by an RMW before the insert, so parallel holds
        // can never together pass `pending_max` (a `len()` check could be passed by all).
        if !self.take_pending_place() {
            // Full: drop the expired ones (a slow path, only when full), then try once more.
            self.expire_pending(self.now());
            if !self.take_pending_place() {
                return full();
            }
        }
        let Some(id) = sync::next_id() else {
            self.give_pending_place();
            return self.deny(ask, CodeSet::EMPTY.with(Code::InternalError), worst);
        };
        let call = Call {
            mandate: ask.mandate.ix,
            agent: ask.agent.ix,
            at: ask.call.at,
            max_cost: ask.call.max_cost,
            by_capability: ask.call.by_capability,
        };
        // The time to live runs on the engine's clock (a call's `at` is the caller's word).
        let expires = self.now().unix().saturating_add_unsigned(self.config.pending_ttl_s);
        self.pending.insert(id, Pending { call, expires, worst });
        self.sink.submit(&Receipt {
            id,
            parent: 0,
            mandate: ask.mandate.ix,
            agent: ask.agent.ix,
            decision: Verdict::Held,
            end: End::Decided,
            codes: CodeSet::EMPTY.with(Code::ApprovalRequired),
            worst_case: worst,
            actual: Amount::ZERO,
            at: ask.call.at,
            ended_at: ask.call.at,
            outcome: Outcome::Unreported,
            latency_ms: 0,
            shadow: false,
        });
        Admission::Held(PendingApproval { id, worst_case: worst })
    }

    /// Reserves one of the `pending_max` places, or says there is none.
    fn take_pending_place(&self) -> bool {
        // Relaxed: a counter bounding the map, a single-location RMW; the map's own locks
        // order the entries. The RMW reads the latest count, so the bound is exact.
        let before = self.pending_places.fetch_add(1, sync::Ordering::Relaxed);
        if before >= self.config.pending_max as u64 {
            self.give_pending_place();
            return false;
        }
        debug_assert!(before < self.config.pending_max as u64);
        true
    }

    /// Gives a place back: exactly once per place taken (by whoever removed its entry).
    fn give_pending_place(&self) {
        // Relaxed: as in `take_pending_place`.
        let before = self.pending_places.fetch_sub(1, sync::Ordering::Relaxed);
        debug_assert!(before > 0, "a pending place given back twice");
    }

    /// Removes a pending call; its place goes back only if this call removed it.
    fn remove_pending(&self, id: u64) -> Option<Pending> {
        let removed = self.pending.remove(&id).map(|(_, p)| p);
        if removed.is_some() {
            self.give_pending_place();
        }
        removed
    }

    /// Drops every held call whose time to live ([`super::EngineConfig::pending_ttl_s`]) has
    /// passed by `now`; approving one later fails with
    /// [`EngineError::UnknownPending`]. Returns how many. (The engine also does this when the
    /// pending table is full.)
    pub fn expire_pending(&self, now: Timestamp) -> usize {
        let expired: Vec<u64> =
            self.pending.iter().filter(|e| e.value().expires < now.unix()).map(|e| *e.key()).collect();
        expired.into_iter().filter(|id| self.remove_pending(*id).is_some()).count()
    }

    /// The issuer approves a held call: it is admitted again at `at` (every other
    /// condition is checked anew) and, if it still fits, reserved. Anyone but the
    /// mandate's issuer is refused and the call stays pending. A call held longer than
    /// `pending_ttl_s` (by the engine's clock) is gone: [`EngineError::PendingExpired`].
    pub fn approve(&self, pending: u64, approver: &Principal, at: Timestamp) -> Result<Admission<'_>, EngineError> {
        // A store-backed engine's held calls are approved once, on any node, through the
        // store (`Node::approve`): approving here too could admit one call twice.
        if self.config.store_backed {
            return Err(EngineError::ApproveThroughNode(pending));
        }
        let held = *self.pending.get(&pending).ok_or(EngineError::UnknownPending(pending))?;
        if held.expires < self.now().unix() {
            self.remove_pending(pending);
            return Err(EngineError::PendingExpired(pending));
        }
        let snap = self.cell.load();
        // Under a sub-mandate, the chain's root's issuer approves (`chain.rs`).
        if let Some(m) = snap.mandate(held.call.mandate).and_then(|m| super::chain::approving_mandate(&snap, m)) {
            admission::check_approver(&m.source, approver)?;
        }
        if self.remove_pending(pending).is_none() {
            return Err(EngineError::UnknownPending(pending));
        }
        Ok(self.admit_inner(&Call { at, ..held.call }, true))
    }

    /// A held call as the store keeps it, as this engine judges it at `at` (its `max_cost`
    /// and capability as held): `None` when the live snapshot lacks its mandate or agent.
    pub fn held_call(&self, held: &crate::store::HeldCall, at: Timestamp) -> Option<Call> {
        Some(Call {
            mandate: self.mandate_ix(&held.mandate)?,
            agent: self.agent_ix(&held.agent)?,
            at,
            max_cost: held.max_cost_micros.map(crate::money::Amount::from_micros),
            by_capability: held.by_capability,
        })
    }

    /// Who approves a call held under `mandate`: its issuer, or under a sub-mandate the
    /// issuer of its chain's root (a sub-mandate's issuer is an agent, and an agent approves
    /// nothing). `None` for a mandate the live snapshot does not hold.
    pub fn approver_of(&self, mandate: super::MandateIx) -> Option<Principal> {
        let snap = self.cell.load();
        let m = snap.mandate(mandate)?;
        super::chain::approving_mandate(&snap, m).map(|m| m.source.issuer.clone())
    }

    /// The issuer (or the gateway on its behalf) refuses a held call.
    pub fn refuse(&self, pending: u64) -> Result<(), EngineError> {
        self.remove_pending(pending).map(|_| ()).ok_or(EngineError::UnknownPending(pending))
    }

    /// How many calls are held here now (cheap: no slot is scanned, unlike `stats`).
    pub fn held_count(&self) -> usize {
        self.pending.len()
    }

    /// The calls held here now (a node copies them to its store).
    pub fn held_locally(&self) -> Vec<HeldLocally> {
        self.pending
            .iter()
            .map(|e| HeldLocally {
                id: *e.key(),
                call: e.value().call,
                worst_case: e.value().worst,
                expires_unix: e.value().expires,
            })
            .collect()
    }

    /// Forgets a held call that was approved or refused elsewhere (through the store).
    pub fn forget_held(&self, pending: u64) -> bool {
        self.remove_pending(pending).is_some()
    }

    /// Admits again a held call its mandate's issuer approved (through the store, on any
    /// node): every condition is checked anew, without a second hold. Anyone but the
    /// issuer is refused and nothing changes.
    pub fn admit_approved(&self, call: &Call, approver: &Principal) -> Result<Admission<'_>, EngineError> {
        let snap = self.cell.load();
        let m = snap.mandate(call.mandate).ok_or(EngineError::UnknownPending(0))?;
        let m = super::chain::approving_mandate(&snap, m).ok_or(EngineError::UnknownPending(0))?;
        admission::check_approver(&m.source, approver)?;
        Ok(self.admit_inner(call, true))
    }
}
