//! What `holon serve` does for a request, whatever the protocol: the engine, its node,
//! the table of open reservations, the tokens, the reload status. The HTTP layer
//! (`http.rs`) only maps these results to status codes and JSON.
//!
//! The engine, the node and this service live as long as the process (they are leaked
//! once at start): a reservation is held across requests as `Reservation<'static>`, and
//! an open reservation is never dropped, because dropping one releases its budget while
//! the call may have run. At shutdown the ones still open stay spent at their worst case
//! (the node's drain leaves their leases for `holon ledger reconcile`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use dashmap::DashMap;
use holon::admission::Code;
use holon::engine::{Admission, Call, Engine, Reservation, SubCall};
use holon::node::Node;
use holon::store::LedgerStore;
use holon::time::Timestamp;
use serde::Serialize;

mod decision;
mod held;
pub(crate) mod idempotency;
mod reads;
mod reload;

use crate::serve::auth::{Role, Tokens};
use crate::serve::loader::LoadFailure;
use crate::serve::metrics::Metrics;
use crate::serve::wire::{self, DecisionBody, ErrorBody, SettledBody};
use decision::Asked;

/// An error answer: HTTP status and body.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub status: u16,
    pub body: ErrorBody,
}

impl Refusal {
    pub(crate) fn new(status: u16, error: impl Into<String>) -> Refusal {
        Refusal { status, body: ErrorBody::new(error) }
    }
}

impl From<ErrorBody> for Refusal {
    fn from(body: ErrorBody) -> Refusal {
        Refusal { status: 400, body }
    }
}

pub(super) struct Open {
    pub(super) reservation: Reservation<'static>,
    /// The idempotency key (scope, key) whose request opened it: a replay of that key's
    /// answer is given only while this very reservation is open (ids restart with the
    /// process and are reused across nodes: the id alone names nobody's call for sure).
    pub(super) key: Option<(String, String)>,
    /// When the reaper first found it reclaimed (its callee's timeout plus the grace had
    /// passed); kept [`LATE_SETTLE_S`] more for a late settle to reconcile.
    pub(super) reclaimed_at: Option<std::time::Instant>,
}

/// How long a reclaimed reservation waits for its late settle, in seconds. The reaper
/// kept its worst case spent; a settle within this window brings it to the actual cost
/// (the engine reconciles exactly once). After it, or without a settle, the worst case
/// stays spent.
pub(crate) const LATE_SETTLE_S: u64 = 3_600;
/// Most reclaimed reservations kept for a late settle; past it the reaper forgets the
/// ones it meets after the first this many (in the table's order, not by age; their worst
/// case stays spent), so a gateway that never settles cannot grow the table without bound.
pub(crate) const RECLAIMED_KEPT_MAX: usize = 65_536;

/// The last reload, for `/v1/status`.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ReloadStatus {
    pub reloads: u64,
    pub failures: u64,
    pub ignored_files: Vec<String>,
    /// The last reload's error, until a reload succeeds.
    pub last_error: Option<LoadFailure>,
    pub last_error_at: Option<String>,
    /// The tokens file as last read.
    pub tokens: TokensStatus,
}

/// The tokens file as the last reload read it (`/v1/status`'s `tokens`).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct TokensStatus {
    /// Tokens accepted now (0: every token withdrawn, nobody authenticates).
    pub accepted: usize,
    /// `read`, `missing` (deleted: no token accepted) or `kept_old` (it cannot be parsed:
    /// the tokens read before keep serving).
    pub file: &'static str,
    /// Why the file could not be parsed, while `kept_old`.
    pub error: Option<LoadFailure>,
}

impl TokensStatus {
    pub(crate) fn read(accepted: usize, missing: bool) -> TokensStatus {
        TokensStatus { accepted, file: if missing { "missing" } else { "read" }, error: None }
    }
}

pub(crate) struct Service {
    pub engine: &'static Engine,
    pub node: &'static Node,
    pub store: Arc<dyn LedgerStore>,
    pub store_kind: &'static str,
    pub documents: PathBuf,
    /// `--keys` and `--revocations` files, read with the documents.
    pub trust_files: crate::serve::loader::TrustFiles,
    pub tokens_path: PathBuf,
    pub tokens: ArcSwap<Tokens>,
    pub metrics: Metrics,
    pub status: parking_lot::Mutex<ReloadStatus>,
    /// Serializes reloads (the watcher and SIGHUP may ask at once).
    pub(super) reload_lock: parking_lot::Mutex<()>,
    pub(super) open: DashMap<u64, Open>,
    /// Reservations ended lately (a second settle is a 409, not a 404).
    pub(super) ended: crate::serve::ended::Ended,
    /// What the last successful reload published (a failed one applies the trust files to it).
    pub last_input: parking_lot::Mutex<Option<holon::engine::SnapshotInput>>,
    /// False once shutdown began.
    pub ready: AtomicBool,
    /// The engine runs in shadow mode (`--shadow`): every answer says so.
    pub shadow: bool,
    /// Idempotency keys: how long and how many are kept, and what keys `Check`.
    pub keys: idempotency::KeySettings,
    /// Keyed requests running at once ([`idempotency::KEYED_TASKS_MAX`]).
    pub(super) keyed_tasks: Arc<tokio::sync::Semaphore>,
    /// This node's name in the store, and how often it flushes, in ms.
    pub node_name: String,
    pub flush_ms: u64,
    /// Requests' store tasks at once ([`STORE_TASKS_MAX`]): a store that hangs holds at
    /// most these, and further requests get a 503 at once instead of queueing without end.
    store_tasks: Arc<tokio::sync::Semaphore>,
}

/// Most requests waiting on the store at once (approvals, refusals, reads of the store's
/// figures); more get a 503. The reaper and reloads run on threads of their own.
pub(crate) const STORE_TASKS_MAX: usize = 16;

impl Service {
    // Each part is a different thing `run` built; a struct of them would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        engine: &'static Engine,
        node: &'static Node,
        store: Arc<dyn LedgerStore>,
        store_kind: &'static str,
        documents: PathBuf,
        tokens_path: PathBuf,
        tokens: Tokens,
        ignored: Vec<String>,
    ) -> Service {
        let accepted = tokens.len();
        let metrics = Metrics::new();
        metrics.tokens.set(crate::serve::metrics::as_gauge(accepted as u64));
        Service {
            engine,
            node,
            store,
            store_kind,
            documents,
            trust_files: crate::serve::loader::TrustFiles::default(),
            tokens_path,
            tokens: ArcSwap::from_pointee(tokens),
            metrics,
            status: parking_lot::Mutex::new(ReloadStatus {
                ignored_files: ignored,
                tokens: TokensStatus::read(accepted, false),
                ..ReloadStatus::default()
            }),
            reload_lock: parking_lot::Mutex::new(()),
            open: DashMap::new(),
            ended: crate::serve::ended::Ended::default(),
            last_input: parking_lot::Mutex::new(None),
            ready: AtomicBool::new(true),
            shadow: engine.config().shadow,
            keys: idempotency::KeySettings::default(),
            keyed_tasks: Arc::new(tokio::sync::Semaphore::new(idempotency::KEYED_TASKS_MAX)),
            node_name: String::new(),
            flush_ms: 0,
            store_tasks: Arc::new(tokio::sync::Semaphore::new(STORE_TASKS_MAX)),
        }
    }

    /// The role of a bearer token, if the tokens file holds it.
    pub(crate) fn role_of(&self, token: &str) -> Option<Role> {
        self.tokens.load().role_of(token)
    }

    // ---- calls ----------------------------------------------------------------------

    /// `POST /v1/admit`.
    pub(crate) async fn admit(&self, req: wire::AdmitRequest) -> Result<DecisionBody, Refusal> {
        // Acquire: pairs with the shutdown's Release (a flag, read alone).
        if !self.ready.load(Ordering::Acquire) {
            return Err(Refusal::new(
                503,
                "shutting down: admitting nothing more; settle or release open reservations",
            ));
        }
        let max_cost = req.max_cost.as_deref().map(|m| wire::money("/max_cost", m)).transpose()?;
        let at = wire::at("/at", req.at.as_deref())?;
        let Some(mandate) = self.engine.mandate_ix(&req.mandate) else {
            return Ok(self.unknown(Code::UnknownMandate, &req.mandate, None));
        };
        let Some(agent) = self.engine.agent_ix(&req.agent) else {
            return Ok(self.unknown(Code::UnknownAgent, &req.agent, self.mandate_currency(mandate)));
        };
        if let Some(class) = &req.capability {
            holon::gateway::capability_offered(self.engine, agent, class)
                .map_err(|why| ErrorBody::field("/capability", why))?;
        }
        let call = Call { max_cost, by_capability: req.capability.is_some(), ..Call::new(mandate, agent, at) };
        // The engine never waits on the store (a node refills leases in the background).
        let admission = self.waiting_for_lease(|| std::future::ready(Ok(self.engine.admit(&call)))).await?;
        Ok(self.keep(self.decision(admission, &Asked::Root(call))))
    }

    /// Puts an allowed call's reservation in the table; never called with a guard on it.
    pub(super) fn keep(&self, (body, open): (DecisionBody, Option<(u64, Open)>)) -> DecisionBody {
        if let Some((id, open)) = open {
            self.open.insert(id, open);
        }
        body
    }

    /// `POST /v1/reservations/{id}/calls`: a sub-call of an open orchestrator's run.
    pub(crate) async fn sub_call(&self, parent: &str, req: wire::SubCallRequest) -> Result<DecisionBody, Refusal> {
        let max_cost = req.max_cost.as_deref().map(|m| wire::money("/max_cost", m)).transpose()?;
        let at = wire::at("/at", req.at.as_deref())?;
        let id = reservation_id(parent)?;
        let entry = self.open.get(&id).ok_or_else(|| self.not_open(parent, id))?;
        let r = &entry.reservation;
        let snap = self.engine.snapshot();
        let (agent, capability) = match (&req.agent, &req.capability) {
            (Some(name), None) => (self.engine.agent_ix(name), None),
            (None, Some(class)) => {
                // A sub-mandate that cannot be compiled admits nobody: no pick.
                let sub = r.sub_mandate();
                let pick = sub.and_then(|m| holon::engine::cheapest_implementer(&m, &snap, class, at, max_cost).ok());
                (pick.flatten(), Some(class.as_str()))
            }
            _ => return Err(ErrorBody::field("/agent", "give exactly one of `agent` and `capability`").into()),
        };
        let Some(agent) = agent else {
            let label = req.agent.or(req.capability).unwrap_or_default();
            let currency = r.run_currency().map(|c| c.to_string());
            return Ok(self.unknown(Code::UnknownAgent, &label, currency));
        };
        let sub = SubCall { agent, capability, at };
        // `max_cost` is the engine's to judge (`max_cost_below_price` on the converted price).
        let admission = r.sub_call_within(&sub, max_cost);
        let outcome = self.decision(admission, &Asked::Sub { run: r, call: sub, max_cost });
        // The parent's guard goes before the sub-call's reservation is put in the table.
        drop(entry);
        Ok(self.keep(outcome))
    }

    /// `POST /v1/reservations/{id}/settle`. The body is read before anything changes.
    pub(crate) fn settle(&self, id: &str, req: wire::SettleRequest) -> Result<SettledBody, Refusal> {
        let actual = wire::money("/actual", &req.actual)?;
        holon::gateway::words::latency_ms(req.latency_ms)
            .map_err(|e| ErrorBody::field("/latency_ms", e.to_string()))?;
        let outcome = req.outcome.unwrap_or_default();
        let key = reservation_id(id)?;
        let (_, open) = self.open.remove(&key).ok_or_else(|| self.not_open(id, key))?;
        let shadow = open.reservation.shadow().is_some();
        let settled = open.reservation.settle_reported(actual, Timestamp::now(), req.report());
        let settled = settled.map_err(|e| Refusal::new(409, e.to_string()))?;
        self.ended.note(key, crate::serve::ended::How::Settled);
        self.metrics
            .settlements
            .get_or_create(&crate::serve::metrics::OutcomeLabels { outcome: outcome.as_str() })
            .inc();
        // The engine asked to bill actual + passthrough and kept at most the reservation:
        // above it is a gateway fault, billed at what was kept and flagged.
        let clamped = settled.billed > settled.kept;
        if clamped {
            self.metrics.settlements_clamped.inc();
            tracing::warn!(reservation = key, actual = %actual, kept = %settled.kept, "a settlement above its reservation was billed at the reservation");
        }
        Ok(SettledBody {
            receipt: key.to_string(),
            worst_case: settled.worst_case.to_string(),
            kept: settled.kept.to_string(),
            billed: settled.kept.to_string(),
            passthrough: settled.passthrough.to_string(),
            actual: actual.to_string(),
            clamped,
            late: settled.late,
            outcome: outcome.as_str(),
            shadow: shadow.then_some(true),
        })
    }

    /// `POST /v1/reservations/{id}/release`. A reservation the reaper reclaimed cannot be
    /// released: its callee's time ran out, so the call may have run and billed; it is
    /// settled with what it cost (the engine would reconcile a release to nothing).
    pub(crate) fn release(&self, id: &str) -> Result<wire::ReleasedBody, Refusal> {
        let key = reservation_id(id)?;
        let (_, open) = self.open.remove(&key).ok_or_else(|| self.not_open(id, key))?;
        // Reclaiming cannot be undone: inactive now means reclaimed (marked by the reaper or not).
        if !open.reservation.is_active() {
            self.open.insert(key, open);
            return Err(Refusal::new(
                409,
                format!(
                    "reservation `{id}` outlived its callee's timeout and was reclaimed; the call may have run: settle it with what it cost (its worst case stays spent until then)"
                ),
            ));
        }
        open.reservation.release(Timestamp::now()).map_err(|e| Refusal::new(409, e.to_string()))?;
        self.ended.note(key, crate::serve::ended::How::Released);
        self.metrics.settlements.get_or_create(&crate::serve::metrics::OutcomeLabels { outcome: "released" }).inc();
        Ok(wire::ReleasedBody { receipt: key.to_string(), released: true })
    }

    /// Runs `f`, which waits on the store (a file or a network round trip), on tokio's
    /// blocking pool rather than on an async worker that other requests need; at most
    /// [`STORE_TASKS_MAX`] at once (the permit lives as long as the task, even when the
    /// request that started it is gone), else a 503.
    pub(super) async fn blocking<T: Send + 'static>(
        &'static self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Refusal> {
        let permit = Arc::clone(&self.store_tasks).try_acquire_owned().map_err(|_| {
            Refusal::new(503, format!("{STORE_TASKS_MAX} requests are already waiting on the store; retry shortly"))
        })?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f()
        })
        .await
        .map_err(|e| Refusal::new(503, format!("a store task failed: {e}")))
    }

    /// The gateway protocol's lease wait (`holon::gateway::lease_wait`), pausing on tokio's
    /// timer.
    pub(super) async fn waiting_for_lease<F, A>(&self, ask: F) -> Result<Admission<'static>, Refusal>
    where
        F: FnMut() -> A,
        A: std::future::Future<Output = Result<Admission<'static>, Refusal>>,
    {
        holon::gateway::lease_wait(Some(self.node), ask, tokio::time::sleep).await
    }
}

/// A reservation id in the protocol's one written form, else a 404.
fn reservation_id(text: &str) -> Result<u64, Refusal> {
    holon::gateway::reservation_id(text).map_err(|e| Refusal::new(404, e.to_string()))
}

impl Service {
    /// The refusal of an id that is not open: 409 when this server ended it lately (a
    /// second settle or release, a sub-call after the end), else 404.
    fn not_open(&self, id: &str, key: u64) -> Refusal {
        if let Some(how) = self.ended.get(key) {
            return Refusal::new(
                409,
                format!(
                    "reservation `{id}` was {} already; it ended once (retry a settle with its Idempotency-Key to read its answer again)",
                    how.as_str()
                ),
            );
        }
        Refusal::new(
            404,
            format!(
                "no open reservation `{id}` here: it was never made on this server, or it was reclaimed (after its callee's timeout plus the grace) and forgotten ({LATE_SETTLE_S} s later, or past {RECLAIMED_KEPT_MAX} reclaimed reservations; a forgotten one's worst case stays spent); a reservation is settled on the server that made it"
            ),
        )
    }
}
