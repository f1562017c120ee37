//! `Idempotency-Key` on every state-changing endpoint, and Envoy's `Check` keyed by a
//! request header (docs/serve.md, "Idempotency"). A gateway whose request timed out does
//! not know whether it happened; it retries with the same key, and:
//!
//! - the same key with the same request (method, path and body) gets the first answer,
//!   status and body, with `Idempotent-Replayed: true`, and nothing is reserved again;
//! - the same key with another request: 422; while the first is still in flight: 409.
//!
//! Keys are the authenticated principal's (a gateway's and an account's never meet), kept
//! in the ledger store next to the held calls (`store::keys`): they survive a restart, and
//! a retry that lands on another server of the same store behaves the same. A key is
//! claimed in the store before anything changes, and the request then runs to its end
//! whatever happens to the connection (in a task of its own once its client has gone): its
//! answer is kept for the retry. An answer that says nothing happened and to retry (a 5xx,
//! or a decision denied only for want of a lease or of the store) is not kept: the key is
//! let go.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::http::{HeaderMap, HeaderName};
use holon::store::{KeyAnswer, KeyClaim, KeyState};
use holon::time::Timestamp;
use sha2::{Digest, Sha256};

use super::super::auth::Role;
use super::{Refusal, Service};

/// The request header that carries the key (a name made once: looked up by a `&str`, it
/// was parsed and validated again on every request).
pub(crate) static KEY_HEADER: HeaderName = HeaderName::from_static("idempotency-key");
/// The answer header that says a request was answered before.
pub(crate) const REPLAYED_HEADER: &str = "idempotent-replayed";
/// Keyed requests running at once (each to its end, whatever its client does); more get a 503.
pub(crate) const KEYED_TASKS_MAX: usize = 4_096;
/// How often the reaper prunes the store's keys, in seconds.
pub(crate) const PRUNE_S: u64 = 10;
/// How often for a store in this process (`memory`), in seconds. Its claims hold the book
/// to its bound as keys come (`KeyClaim::keys_max`), so a prune finds little to drop.
pub(crate) const PRUNE_IN_PROCESS_S: u64 = 1;
/// Tries to keep an answer in the store, and the pause between two, in ms.
const ANSWER_TRIES: u32 = 3;
const ANSWER_RETRY_MS: u64 = 100;

/// The idempotency settings (`--idempotency-keep-s`, `--idempotency-keys-max`,
/// `--check-key-header`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeySettings {
    pub keep_s: u64,
    pub keys_max: u64,
    /// The header of the checked request that keys Envoy's `Check` (lower case), when the
    /// operator named one it trusts: by default none, and every `Check` reserves (a header
    /// of the checked request is the budgeted caller's to set unless Envoy makes it).
    pub check_header: Option<String>,
}

impl Default for KeySettings {
    fn default() -> Self {
        KeySettings { keep_s: holon::gateway::KEEP_S, keys_max: holon::gateway::KEYS_MAX, check_header: None }
    }
}

/// An answer as it goes out, and as it is kept with its key.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub status: u16,
    /// The JSON body.
    pub body: String,
    /// Whether a retry should get it again (false: it says nothing happened, retry).
    pub keep: bool,
    /// The reservation an allowed decision opened (the key is bound to it, `bind_key`);
    /// known where the decision is made, so the answer's body is never read back for it.
    pub opened: Option<u64>,
}

impl Answer {
    /// The answer of an operation: its body (200) or its refusal.
    pub(crate) fn of<T: serde::Serialize>(result: Result<T, Refusal>) -> Answer {
        match result {
            Ok(body) => {
                Answer { status: 200, body: serde_json::to_string(&body).unwrap_or_default(), keep: true, opened: None }
            }
            Err(r) => Answer::refusal(r),
        }
    }

    pub(crate) fn refusal(r: Refusal) -> Answer {
        Answer {
            status: r.status,
            body: serde_json::to_string(&r.body).unwrap_or_default(),
            keep: r.status < 500,
            opened: None,
        }
    }
}

/// A decision's answer: kept for a retry unless the gateway protocol says to let its key
/// go (denied only for want of a lease or of the store: the same key must ask again).
pub(crate) fn decision_answer(result: Result<crate::serve::wire::DecisionBody, Refusal>) -> Answer {
    let keep = result.as_ref().map_or(true, |d| d.keep);
    let opened = result.as_ref().ok().and_then(|d| d.reservation.as_deref()).and_then(|r| r.parse().ok());
    let mut answer = Answer::of(result);
    answer.keep &= keep;
    answer.opened = opened;
    answer
}

/// A future polled in place, by the request's own task, that finishes in a task of its own
/// if it is dropped before its end (the request timed out, its connection closed). A task
/// of its own from the start cost every keyed request a spawn and, with the runtime's
/// workers on one core, a wait for the worker that stole it to be scheduled.
struct ToItsEnd<T: Send + 'static>(Option<Pin<Box<dyn Future<Output = T> + Send>>>);

impl<T: Send + 'static> Future for ToItsEnd<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(future) = self.0.as_mut() else { return Poll::Pending };
        let out = ready!(future.as_mut().poll(cx));
        self.0 = None;
        Poll::Ready(out)
    }
}

impl<T: Send + 'static> Drop for ToItsEnd<T> {
    fn drop(&mut self) {
        // Not while unwinding: a future that panicked cannot go on.
        if let Some(future) = self.0.take()
            && !std::thread::panicking()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            drop(runtime.spawn(future));
        }
    }
}

/// An answer and whether it was the first request's, replayed.
#[derive(Debug, Clone)]
pub(crate) struct Answered {
    pub answer: Answer,
    pub replayed: bool,
}

/// The reservation a kept answer allowed a call under, and the node that made it, if it is
/// an allowed decision.
fn allowed_reservation(kept: &Answer) -> Option<(String, Option<String>)> {
    if kept.status != 200 {
        return None;
    }
    let body: serde_json::Value = serde_json::from_str(&kept.body).ok()?;
    if body["decision"] != "allowed" {
        return None;
    }
    let reservation = body["reservation"].as_str()?.to_owned();
    Some((reservation, body["node"].as_str().map(str::to_owned)))
}

/// The request's key, if it has one: visible ASCII, 1 to [`KEY_BYTES_MAX`] bytes, else a 400.
pub(crate) fn key_of(headers: &HeaderMap, header: &HeaderName) -> Result<Option<String>, Refusal> {
    key_in(header.as_str(), headers.get(header).map(|v| v.as_bytes()))
}

/// The rule for a key, once (HTTP's `Idempotency-Key` and the checked request's header of
/// Envoy's `Check` alike): `value`, the header `header`'s, if it was sent.
pub(crate) fn key_in(header: &str, value: Option<&[u8]>) -> Result<Option<String>, Refusal> {
    let Some(value) = value else { return Ok(None) };
    match holon::gateway::keys::key(value) {
        Ok(key) => Ok(Some(key.to_owned())),
        Err(e) => Err(Refusal::new(400, format!("the `{header}` header: {e}"))),
    }
}

/// A keyed request as its key's store knows it.
#[derive(Debug)]
pub(crate) struct Keyed {
    /// The authenticated principal the key belongs to ([`Role::name`]).
    pub scope: String,
    pub key: String,
    /// What the request was ([`digest`]).
    pub digest: String,
}

impl Keyed {
    /// `role`'s request under `key`, whose parts (`request`: method or kind, then what the
    /// answer depends on) its digest covers.
    pub(crate) fn new(role: &Role, key: String, request: &[&[u8]]) -> Keyed {
        Keyed { scope: role.name(), key, digest: digest(request) }
    }
}

/// What a request was, for its key: SHA-256 over its method, path and body.
fn digest(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    holon::hex::lower(&hash.finalize())
}

impl Service {
    /// Runs `run` under the request's key, or plainly for a request without one.
    pub(crate) async fn keyed<F>(&'static self, keyed: Option<Keyed>, run: F) -> Answered
    where
        F: Future<Output = Answer> + Send + 'static,
    {
        let Some(Keyed { scope, key, digest }) = keyed else { return Answered { answer: run.await, replayed: false } };
        let Ok(permit) = Arc::clone(&self.keyed_tasks).try_acquire_owned() else {
            let busy = format!("{KEYED_TASKS_MAX} requests with an Idempotency-Key are running already; retry shortly");
            return Answered { answer: Answer::refusal(Refusal::new(503, busy)), replayed: false };
        };
        // It runs to its end (and keeps its answer) even if the request that started it
        // times out or its connection closes: then in a task of its own.
        ToItsEnd(Some(Box::pin(async move {
            let _permit = permit;
            self.keyed_now(scope, key, digest, run).await
        })))
        .await
    }

    async fn keyed_now<F>(&'static self, scope: String, key: String, digest: String, run: F) -> Answered
    where
        F: Future<Output = Answer> + Send + 'static,
    {
        let claim = |store: &dyn holon::store::LedgerStore, scope: &str, key: &str, digest: &str| {
            let claim = KeyClaim {
                scope,
                key,
                digest,
                node: &self.node_name,
                now_unix: Timestamp::now().unix(),
                keep_s: self.keys.keep_s,
                keys_max: self.keys.keys_max,
            };
            store.claim_key(&claim)
        };
        // A store in this process is asked in place, with what the request holds (no copy).
        let claimed = if self.store.in_process() {
            claim(&*self.store, &scope, &key, &digest)
        } else {
            let (scope, key) = (scope.clone(), key.clone());
            self.store_step(move |store| claim(store, &scope, &key, &digest)).await
        };
        let refused =
            |status: u16, why: String| Answered { answer: Answer::refusal(Refusal::new(status, why)), replayed: false };
        match claimed {
            Err(e) => refused(503, format!("the store cannot keep this request's Idempotency-Key ({e}); nothing was done: retry")),
            Ok(KeyState::InFlight) => refused(
                409,
                "a request with this Idempotency-Key is still in flight; retry once it has answered".to_owned(),
            ),
            Ok(KeyState::OtherRequest) => refused(
                422,
                "this Idempotency-Key was used for another request (another endpoint, id or body); a new request takes a new key".to_owned(),
            ),
            Ok(KeyState::Answered(a)) => {
                let kept = Answer { status: a.status, body: a.body, keep: true, opened: None };
                Answered { answer: self.replay(&scope, &key, kept), replayed: true }
            }
            Ok(KeyState::Claimed) => {
                let answer = run.await;
                self.bind_key(&scope, &key, &answer);
                self.settle_key(scope, key, &answer).await;
                Answered { answer, replayed: false }
            }
        }
    }

    /// Marks the reservation a keyed request's answer opened as that key's, so that a
    /// replay can tell it from another call that got the same id later.
    fn bind_key(&self, scope: &str, key: &str, answer: &Answer) {
        if let Some(mut open) = answer.opened.and_then(|id| self.open.get_mut(&id)) {
            open.key = Some((scope.to_owned(), key.to_owned()));
        }
    }

    /// A kept answer as a retry gets it: an allowed call's only while the reservation that
    /// key's request opened is still open here (`holon::gateway::replay_of_allowed`), else
    /// a 409 that lets nothing through, with the protocol's code and a sentence naming the
    /// node that made it.
    fn replay(&self, scope: &str, key: &str, kept: Answer) -> Answer {
        let Some((reservation, node)) = allowed_reservation(&kept) else { return kept };
        let open = holon::gateway::reservation_id(&reservation).is_ok_and(|id| {
            self.open.get(&id).is_some_and(|o| {
                o.reservation.is_active() && o.key.as_ref().is_some_and(|(s, k)| s == scope && k == key)
            })
        });
        match holon::gateway::replay_of_allowed(open) {
            holon::gateway::Replay::Give => kept,
            holon::gateway::Replay::Ended => {
                self.metrics.replays_refused.inc();
                let elsewhere = node.filter(|n| *n != self.node_name);
                let sentence = holon::gateway::replay_ended_sentence(&reservation, elsewhere.as_deref());
                let mut body = crate::serve::wire::ErrorBody::new(sentence);
                body.code = Some(holon::gateway::REPLAY_ENDED.as_str());
                Answer::refusal(Refusal { status: 409, body })
            }
        }
    }

    /// Keeps a claimed key's answer, or lets the key go when the answer says to retry.
    async fn settle_key(&'static self, scope: String, key: String, answer: &Answer) {
        // The one copy of the answer (the response keeps the other).
        let mut kept = KeyAnswer { status: answer.status, body: answer.body.clone() };
        let keep = answer.keep && holon::store::keys::keepable(&kept).is_ok();
        let step = move |store: &dyn holon::store::LedgerStore, scope: &str, key: &str, kept: KeyAnswer| {
            if keep { store.answer_key(scope, key, kept) } else { store.forget_key(scope, key) }
        };
        // A store in this process cannot be busy or away: one step, in place.
        let tries = if self.store.in_process() { 1 } else { ANSWER_TRIES };
        for attempt in 1..=tries {
            // The last try moves the answer in; an earlier one sends a copy.
            let this = if attempt == tries {
                KeyAnswer { status: kept.status, body: std::mem::take(&mut kept.body) }
            } else {
                kept.clone()
            };
            let done = if self.store.in_process() {
                step(&*self.store, &scope, &key, this)
            } else {
                let (scope, owned) = (scope.clone(), key.clone());
                self.store_step(move |store| step(store, &scope, &owned, this)).await
            };
            match done {
                Ok(()) => return,
                Err(e) if attempt == tries => {
                    // Fail closed: the key stays claimed, and a retry gets 409 until it expires.
                    self.metrics.idempotency_store_errors.inc();
                    tracing::error!(key = %key, error = %e, "the answer of a keyed request could not be kept in the store; its retries get 409 until the key expires");
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(ANSWER_RETRY_MS)).await,
            }
        }
    }

    /// One store step for a key: in place for a store in this process, else on the
    /// blocking pool (it waits on a file or the network).
    async fn store_step<T: Send + 'static>(
        &'static self,
        step: impl FnOnce(&dyn holon::store::LedgerStore) -> Result<T, holon::store::StoreError> + Send + 'static,
    ) -> Result<T, holon::store::StoreError> {
        if self.store.in_process() {
            return step(&*self.store);
        }
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || step(&*store))
            .await
            .unwrap_or_else(|e| Err(holon::store::StoreError::Unavailable(format!("a store task failed: {e}"))))
    }

    /// The reaper's prune of the store's keys (on its own thread: it may wait on the store).
    pub(crate) fn prune_keys(&self) {
        match self.store.prune_keys(Timestamp::now().unix(), self.keys.keys_max) {
            Ok(n) if n > 0 => tracing::debug!(pruned = n, "idempotency keys pruned"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "the store's idempotency keys could not be pruned"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_request_dropped_before_its_end_finishes_in_a_task_of_its_own() {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (go, gone) = tokio::sync::oneshot::channel::<()>();
            let (done, finished) = tokio::sync::oneshot::channel();
            let mut request = ToItsEnd(Some(Box::pin(async move {
                let _ = gone.await;
                let _ = done.send("answer kept");
            })));
            let first = tokio::time::timeout(std::time::Duration::from_millis(1), &mut request).await;
            assert!(first.is_err(), "still waiting");
            drop(request);
            go.send(()).unwrap();
            let end = tokio::time::timeout(std::time::Duration::from_secs(60), finished).await;
            assert_eq!(end.unwrap().unwrap(), "answer kept");
            let answered = ToItsEnd(Some(Box::pin(async { 7 }))).await;
            assert_eq!(answered, 7, "in place when nothing drops it");
        });
    }

    #[test]
    fn a_key_is_read_strictly_and_a_request_digest_covers_every_part() {
        let mut headers = HeaderMap::new();
        assert!(key_of(&headers, &KEY_HEADER).unwrap().is_none());
        headers.insert(KEY_HEADER.clone(), "6f1e-42".parse().unwrap());
        assert_eq!(key_of(&headers, &KEY_HEADER).unwrap().as_deref(), Some("6f1e-42"));
        for bad in ["", "a b", &"k".repeat(holon::store::keys::KEY_BYTES_MAX + 1)] {
            headers.insert(KEY_HEADER.clone(), bad.parse().unwrap());
            assert_eq!(key_of(&headers, &KEY_HEADER).unwrap_err().status, 400, "{bad:?}");
        }
        let not_utf8 = axum::http::HeaderValue::from_bytes(b"k\xff").unwrap();
        headers.insert(KEY_HEADER.clone(), not_utf8);
        assert_eq!(key_of(&headers, &KEY_HEADER).unwrap_err().status, 400, "a key that is not ASCII");
        assert_ne!(digest(&[b"POST", b"/a", b"{}"]), digest(&[b"POST", b"/a{", b"}"]), "parts do not run together");
        assert_eq!(digest(&[b"x"]), digest(&[b"x"]));
    }
}
