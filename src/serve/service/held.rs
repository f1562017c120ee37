//! Held calls through the service: approve or refuse by the mandate's issuer only, checked
//! before the call is taken out of the store (so a refused approver disturbs nothing).

use std::sync::atomic::Ordering;

use holon::node::NodeError;
use holon::pattern::Principal;
use holon::store::HeldCall;
use holon::time::Timestamp;

use super::decision::Asked;
use super::{Refusal, Service};
use crate::serve::auth::Role;
use crate::serve::wire::{self, DecisionBody};

impl Service {
    /// `POST /v1/pending/{id}/approve`: only the mandate's issuer; anyone else changes
    /// nothing.
    pub(crate) async fn approve(&'static self, id: &str, role: &Role, at: Timestamp) -> Result<DecisionBody, Refusal> {
        // Acquire: pairs with the shutdown's Release (a flag, read alone).
        if !self.ready.load(Ordering::Acquire) {
            return Err(Refusal::new(503, "shutting down: admitting nothing more, approvals included"));
        }
        let (approver, held) = self.issuer_of_held(id, role).await?;
        // The approval takes the call out of the store: it runs to its end in a task of its
        // own, whatever happens to this request (a timeout, a closed connection). If nobody
        // is left to hear the answer, nobody learnt the reservation's id: it is released
        // and the call held again, to be approved anew.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let id = id.to_owned();
        tokio::spawn(async move {
            let outcome = self.approve_now(&id, &approver, &held, at).await;
            if let Err(Ok(unheard)) = tx.send(outcome) {
                self.undo_approval(&id, &unheard).await;
            }
        });
        rx.await.map_err(|_| Refusal::new(503, "the approval's task ended without an answer"))?
    }

    async fn approve_now(
        &'static self,
        id: &str,
        approver: &Principal,
        held: &HeldCall,
        at: Timestamp,
    ) -> Result<DecisionBody, Refusal> {
        // The call as the engine judges it (its `max_cost` and capability as held): the
        // approval's sentences are made from it.
        let call = holon::gateway::held_call(self.engine, held, at).ok_or_else(|| {
            Refusal::new(409, format!("held call `{id}` names a mandate or agent this server does not hold"))
        })?;
        let admission = self
            .waiting_for_lease(|| {
                let (id, approver) = (id.to_owned(), approver.clone());
                // The node takes the call out of the store: I/O, off the async workers.
                async move { self.blocking(move || self.node.approve(&id, &approver, at).map_err(node_refusal)).await? }
            })
            .await?;
        let mut body = self.keep(self.decision(admission, &Asked::Root(call)));
        if !body.keep {
            // The node put the call back: it can be approved again.
            body.pending = Some(id.to_owned());
        }
        Ok(body)
    }

    /// An approval whose answer nobody received: its reservation released (the call never
    /// started: only the answer named it) and the call held again.
    async fn undo_approval(&'static self, id: &str, unheard: &DecisionBody) {
        let Some(key) = unheard.reservation.as_deref().and_then(|r| r.parse::<u64>().ok()) else { return };
        let Some((_, open)) = self.open.remove(&key) else { return };
        if let Err(e) = open.reservation.release(Timestamp::now()) {
            tracing::warn!(held = id, error = %e, "an unheard approval's reservation could not be released");
        }
        let owned = id.to_owned();
        let held_again = self
            .blocking(move || self.store.release_held(&owned).map_err(|e| e.to_string()))
            .await
            .map_err(|r| r.body.error);
        match held_again.and_then(|r| r) {
            Ok(()) => tracing::info!(held = id, "an approval nobody heard was undone: the call is held again"),
            Err(e) => tracing::warn!(held = id, error = %e, "an unheard approval's call could not be held again"),
        }
    }

    /// `POST /v1/pending/{id}/refuse`.
    pub(crate) async fn refuse(&'static self, id: &str, role: &Role) -> Result<wire::RefusedBody, Refusal> {
        self.issuer_of_held(id, role).await?;
        let owned = id.to_owned();
        let refused = self.blocking(move || self.node.refuse(&owned).map_err(node_refusal)).await??;
        if !refused {
            return Err(Refusal::new(
                404,
                format!("no held call `{id}`: it was approved or refused already, or expired"),
            ));
        }
        Ok(wire::RefusedBody { pending: id.to_owned(), refused })
    }

    /// The account's principal if it issued the held call's mandate: 403 for anyone else
    /// (nothing is taken out of the store), 404 for a call not held.
    pub(super) async fn issuer_of_held(&'static self, id: &str, role: &Role) -> Result<(Principal, HeldCall), Refusal> {
        let Role::Account(principal) = role else {
            return Err(Refusal::new(403, "only the mandate's issuer (an `account:NAME` token) approves or refuses"));
        };
        // A call held on this node a moment ago may not be in the store yet: the protocol
        // waits for that one (`holon::gateway::find_held`); any other id is looked up once.
        let list = || async move {
            let now = Timestamp::now().unix();
            self.blocking(move || self.store.held_calls(None, now).map_err(|e| Refusal::new(503, e.to_string())))
                .await?
        };
        let held = holon::gateway::find_held(Some(self.node), id, list, tokio::time::sleep).await?;
        let Some(call) = held else {
            return Err(Refusal::new(
                404,
                format!("no held call `{id}`: it was approved or refused already, it expired, or it was never held"),
            ));
        };
        let Some(mandate) = self.engine.mandate_ix(&call.mandate) else {
            return Err(Refusal::new(409, format!("held call `{id}` names a mandate this server does not hold")));
        };
        holon::gateway::check_approver(self.engine, mandate, principal)
            .map_err(|e| Refusal::new(403, e.to_string()))?;
        Ok((principal.clone(), call))
    }
}

fn node_refusal(e: NodeError) -> Refusal {
    match e {
        NodeError::UnknownHeld(_) => Refusal::new(404, e.to_string()),
        NodeError::HeldNotHere(_) => Refusal::new(409, e.to_string()),
        NodeError::Engine(holon::engine::EngineError::Approval(_)) => Refusal::new(403, e.to_string()),
        NodeError::Store(_) => Refusal::new(503, e.to_string()),
        other => Refusal::new(409, other.to_string()),
    }
}
