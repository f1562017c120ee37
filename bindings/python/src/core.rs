//! One loaded engine: the documents it published, its node on a ledger store (when it has
//! one), the idempotency keys it answered. `Engine` is the Python class; `Core` what every
//! open reservation keeps alive (its `Arc`), so that an engine dropped in Python while
//! reservations are open still settles them.

use std::path::PathBuf;
use std::sync::Arc;

use holon::documents::directory::{self, TrustFiles};
use holon::engine::{Admission, Call, EngineConfig};
use holon::node::{Node, NodeConfig};
use holon::store::LedgerStore;
use holon::time::Timestamp;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::decision::{self, About, Decision};
use crate::errors::{DocumentsError, PendingError, StoreError, UnknownNameError};
use crate::keys::Keys;
use crate::money;

pub(crate) struct Core {
    pub engine: Arc<holon::engine::Engine>,
    pub node: Option<Node>,
    pub store: Option<Arc<dyn LedgerStore>>,
    documents: PathBuf,
    trust: TrustFiles,
    pub keys: Keys,
    reload_lock: parking_lot::Mutex<()>,
}

impl Core {
    /// The gateway protocol's lease wait (`holon::gateway::lease_wait_blocking`) on this
    /// engine's node; without a node, once.
    pub(crate) fn waiting_for_lease<'a>(
        &'a self,
        ask: impl FnMut() -> PyResult<Admission<'a>>,
    ) -> PyResult<Admission<'a>> {
        holon::gateway::lease_wait_blocking(self.node.as_ref(), ask)
    }

    /// The id a held call is approved by: the node's (unique across the store) or, without
    /// a store, the engine's number.
    pub(crate) fn held_id(&self, local: u64) -> String {
        self.node.as_ref().map_or_else(|| local.to_string(), |n| n.held_id(local))
    }

    /// The call held under `id`, as the engine can admit it again.
    fn held_call(&self, id: &str) -> PyResult<Call> {
        let Some(store) = &self.store else {
            let n = local_id(id)?;
            return self
                .engine
                .held_locally()
                .into_iter()
                .find(|h| h.id == n)
                .map(|h| h.call)
                .ok_or_else(|| no_held(id));
        };
        // A call held here a moment ago may not be in the store yet: the protocol waits.
        let list = || store.held_calls(None, Timestamp::now().unix()).map_err(|e| StoreError::new_err(e.to_string()));
        let call = holon::gateway::find_held_blocking(self.node.as_ref(), id, list)?.ok_or_else(|| no_held(id))?;
        // As the engine judges it: its `max_cost` and capability as held.
        holon::gateway::held_call(&self.engine, &call, Timestamp::now()).ok_or_else(|| {
            PendingError::new_err(format!(
                "held call `{id}` names mandate `{}` or agent `{}`, which this engine did not load",
                call.mandate, call.agent
            ))
        })
    }

    fn mandate(&self, id: &str) -> PyResult<holon::engine::MandateIx> {
        self.engine.mandate_ix(id).ok_or_else(|| {
            UnknownNameError::new_err(format!(
                "no mandate `{id}` in the documents this engine loaded ({} mandates): check the id, or reload after adding it",
                self.engine.stats().mandates
            ))
        })
    }

    fn agent(&self, id: &str) -> PyResult<holon::engine::AgentIx> {
        self.engine.agent_ix(id).ok_or_else(|| {
            UnknownNameError::new_err(format!(
                "no agent `{id}` in the documents this engine loaded: give a manifest's `id` (`publisher/name`)"
            ))
        })
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            // What the last flush missed goes to the store; a failure leaves the node's
            // leases for `holon ledger reconcile` (counted as spent, never lost).
            let _drained = node.drain();
        }
    }
}

/// holon's engine in this process: the documents of a directory, compiled; with a store,
/// a node whose budgets every other process on that store shares.
#[pyclass(frozen, module = "holon")]
pub struct Engine {
    pub(crate) core: Arc<Core>,
}

#[pymethods]
impl Engine {
    /// Loads and publishes every document below `path`. With `store` (`sqlite:PATH`,
    /// `postgres://…`, `memory`), runs a node named `node` on it.
    #[staticmethod]
    #[pyo3(signature = (path, store=None, node=None, keys=None, revocations=None))]
    fn from_documents(
        py: Python<'_>,
        path: PathBuf,
        store: Option<String>,
        node: Option<String>,
        keys: Option<PathBuf>,
        revocations: Option<PathBuf>,
    ) -> PyResult<Engine> {
        if node.is_some() && store.is_none() {
            return Err(PyValueError::new_err(
                "`node` names this process in a ledger store: give `store` too (sqlite:PATH or postgres://…), or leave both out for budgets in this process only",
            ));
        }
        let trust = TrustFiles { keys, revocations };
        py.detach(move || start(path, trust, store, node)).map(|core| Engine { core: Arc::new(core) })
    }

    /// Decides one call: allowed (its worst case reserved: `.reservation`), held for the
    /// mandate's issuer (`.pending`) or denied, with every reason.
    #[pyo3(signature = (mandate, agent, max_cost=None, capability=None, idempotency_key=None))]
    fn admit(
        &self,
        py: Python<'_>,
        mandate: &str,
        agent: &str,
        max_cost: Option<&Bound<'_, PyAny>>,
        capability: Option<&str>,
        idempotency_key: Option<&str>,
    ) -> PyResult<Py<Decision>> {
        let max_cost = money::optional("max_cost", max_cost)?;
        let core = &self.core;
        let mandate_ix = core.mandate(mandate)?;
        let agent_ix = core.agent(agent)?;
        if let Some(class) = capability {
            holon::gateway::capability_offered(&core.engine, agent_ix, class).map_err(PyValueError::new_err)?;
        }
        let fingerprint = crate::keys::fingerprint(mandate, agent, max_cost, capability);
        let claim = match idempotency_key {
            Some(key) => Some(core.keys.claim(py, key, &fingerprint)?),
            None => None,
        };
        if let Some(crate::keys::Claim::Replay(answer)) = claim {
            return Ok(answer);
        }
        let call =
            Call { max_cost, by_capability: capability.is_some(), ..Call::new(mandate_ix, agent_ix, Timestamp::now()) };
        let about = About { mandate: mandate_ix, agent: agent_ix, currency: None };
        let made = py.detach(|| {
            decision::made(
                core,
                &about,
                |c| c.waiting_for_lease(|| Ok(c.engine.admit(&call))),
                |codes, worst, spent| core.engine.reasons(&call, codes, worst, spent),
            )
        });
        let made = match made {
            Ok(made) => made,
            Err(e) => {
                if let (Some(key), Some(crate::keys::Claim::New)) = (idempotency_key, &claim) {
                    core.keys.forget(key);
                }
                return Err(e);
            }
        };
        let keep = made.keep();
        let answer = match made.into_decision(py).and_then(|d| Py::new(py, d)) {
            Ok(answer) => answer,
            Err(e) => {
                if let (Some(key), Some(crate::keys::Claim::New)) = (idempotency_key, &claim) {
                    core.keys.forget(key);
                }
                return Err(e);
            }
        };
        if let (Some(key), Some(crate::keys::Claim::New)) = (idempotency_key, claim) {
            core.keys.answer(key, fingerprint, answer.clone_ref(py), keep);
        }
        Ok(answer)
    }

    /// Approves a held call as `approver` (the mandate's issuer, `account:NAME` or
    /// `NAME`): the call is admitted again, with the approval, and its worst case reserved
    /// if it fits. Anyone else raises `PendingError` and the call stays held.
    fn approve(&self, py: Python<'_>, pending: &str, approver: &str) -> PyResult<Py<Decision>> {
        let approver = holon::gateway::account(approver).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let core = &self.core;
        let made = py.detach(|| -> PyResult<decision::Made> {
            let call = core.held_call(pending)?;
            check_issuer(core, call.mandate, &approver)?;
            let about = About { mandate: call.mandate, agent: call.agent, currency: None };
            let mut made = decision::made(
                core,
                &about,
                |c| {
                    c.waiting_for_lease(|| match &c.node {
                        Some(node) => node.approve(pending, &approver, Timestamp::now()).map_err(node_error),
                        None => local_id(pending)
                            .and_then(|n| c.engine.approve(n, &approver, Timestamp::now()).map_err(engine_error)),
                    })
                },
                |codes, worst, spent| core.engine.reasons(&call, codes, worst, spent),
            )?;
            made.still_held_as(pending);
            Ok(made)
        })?;
        Py::new(py, made.into_decision(py)?)
    }

    /// Refuses a held call: it is forgotten, nothing was reserved. False when no such call
    /// is held (approved or refused already, or expired). With `approver` (the mandate's
    /// issuer, `account:NAME` or `NAME`), anyone else raises `PendingError` and the call
    /// stays held, as for `approve`.
    #[pyo3(signature = (pending, approver=None))]
    fn refuse(&self, py: Python<'_>, pending: &str, approver: Option<&str>) -> PyResult<bool> {
        let approver = approver
            .map(|a| holon::gateway::account(a).map_err(|e| PyValueError::new_err(e.to_string())))
            .transpose()?;
        let core = &self.core;
        py.detach(|| {
            if let Some(approver) = &approver {
                let call = match core.held_call(pending) {
                    Ok(call) => call,
                    // Not held (any more): nothing to refuse, as without an approver.
                    Err(e) if Python::attach(|py| e.is_instance_of::<UnknownNameError>(py)) => return Ok(false),
                    Err(e) => return Err(e),
                };
                check_issuer(core, call.mandate, approver)?;
            }
            match &core.node {
                Some(node) => node.refuse(pending).map_err(|e| StoreError::new_err(e.to_string())),
                None => Ok(local_id(pending).is_ok_and(|n| core.engine.refuse(n).is_ok())),
            }
        })
    }

    /// The spend of `mandate` as this engine sees it, and with a store, the store's figure.
    fn spend(&self, py: Python<'_>, mandate: &str) -> PyResult<Spend> {
        let core = &self.core;
        let ix = core.mandate(mandate)?;
        py.detach(|| spend(core, mandate, ix))
    }

    /// Reads the documents directory again and publishes it (all or nothing: a bad file
    /// changes nothing and raises `DocumentsError`). Returns the new generation.
    fn reload(&self, py: Python<'_>) -> PyResult<u64> {
        let core = &self.core;
        py.detach(|| {
            let _one_at_a_time = core.reload_lock.lock();
            let loaded =
                directory::load(&core.documents, &core.trust).map_err(|f| DocumentsError::new_err(f.to_string()))?;
            core.engine.publish(&loaded.input).map_err(|e| DocumentsError::new_err(e.to_string()))
        })
    }

    /// Sends what this node settled to the store now, and renews its leases; the engine
    /// goes on admitting (the end of the process flushes too). Without a store, nothing.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let core = &self.core;
        py.detach(|| match &core.node {
            Some(node) => node.flush_now().map(|_| ()).map_err(|e| StoreError::new_err(e.to_string())),
            None => Ok(()),
        })
    }

    /// Stops this engine's node: flushes, gives back every unused lease, and admits nothing
    /// more (every admit is denied `node_stopped`). Settle or release open reservations
    /// first. Without a store, nothing.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let core = &self.core;
        py.detach(|| match &core.node {
            Some(node) => node.drain_in_place().map(|_| ()).map_err(|e| StoreError::new_err(e.to_string())),
            None => Ok(()),
        })
    }

    /// The ids of the mandates loaded, sorted.
    #[getter]
    fn mandates(&self) -> Vec<String> {
        let snap = self.core.engine.snapshot();
        let mut ids: Vec<String> = snap.mandates().map(|m| m.source().id.clone()).collect();
        ids.sort();
        ids
    }

    /// The ids of the agents loaded (`publisher/name`), sorted.
    #[getter]
    fn agents(&self) -> Vec<String> {
        let snap = self.core.engine.snapshot();
        let mut ids: Vec<String> = snap.agents().map(|a| a.source().id.to_string()).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Reservations open now, calls held now, receipts the sink dropped.
    fn stats(&self) -> (usize, usize, u64) {
        let s = self.core.engine.stats();
        (s.in_flight, s.pending, s.receipts_dropped)
    }

    fn __repr__(&self) -> String {
        let s = self.core.engine.stats();
        format!(
            "<holon.Engine {} mandates, {} agents, generation {}{}>",
            s.mandates,
            s.agents,
            s.generation,
            if self.core.node.is_some() { ", on a store" } else { "" }
        )
    }
}

/// `approver` may approve or refuse a call held under `mandate` (the protocol's rule),
/// else `PendingError`.
fn check_issuer(core: &Core, mandate: holon::engine::MandateIx, approver: &holon::pattern::Principal) -> PyResult<()> {
    holon::gateway::check_approver(&core.engine, mandate, approver).map_err(|e| PendingError::new_err(e.to_string()))
}

fn no_held(id: &str) -> PyErr {
    UnknownNameError::new_err(format!(
        "no held call `{id}`: it was approved or refused already, it expired, or it was never held"
    ))
}

/// A held call's number without a store: a decimal number as the engine gave it.
fn local_id(id: &str) -> PyResult<u64> {
    holon::gateway::reservation_id(id).map_err(|_| no_held(id))
}

fn node_error(e: holon::node::NodeError) -> PyErr {
    match e {
        holon::node::NodeError::UnknownHeld(id) => no_held(&id),
        holon::node::NodeError::Store(_) => StoreError::new_err(e.to_string()),
        other => PendingError::new_err(other.to_string()),
    }
}

fn engine_error(e: holon::engine::EngineError) -> PyErr {
    PendingError::new_err(e.to_string())
}

/// Loads, publishes and, with a store, starts the node.
fn start(path: PathBuf, trust: TrustFiles, store: Option<String>, node: Option<String>) -> PyResult<Core> {
    let loaded = directory::load(&path, &trust).map_err(|f| DocumentsError::new_err(f.to_string()))?;
    let config = EngineConfig { store_backed: store.is_some(), ..EngineConfig::default() };
    let engine = Arc::new(holon::engine::Engine::new(config));
    engine.publish(&loaded.input).map_err(|e| DocumentsError::new_err(format!("compiling the documents: {e}")))?;
    let (node, store) = match store {
        None => (None, None),
        Some(url) => {
            if let Some(file) = url.strip_prefix("sqlite:").map(std::path::Path::new)
                && let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty())
            {
                std::fs::create_dir_all(dir)
                    .map_err(|e| StoreError::new_err(format!("the store's directory {}: {e}", dir.display())))?;
            }
            let store: Arc<dyn LedgerStore> =
                Arc::from(holon::store::open(&url).map_err(|e| StoreError::new_err(e.to_string()))?);
            let name = node.unwrap_or_else(|| format!("python-{}", std::process::id()));
            let started = Node::start(Arc::clone(&engine), Box::new(Arc::clone(&store)), NodeConfig::new(&name))
                .map_err(|e| StoreError::new_err(e.to_string()))?;
            (Some(started), Some(store))
        }
    };
    Ok(Core {
        engine,
        node,
        store,
        documents: path,
        trust,
        keys: Keys::default(),
        reload_lock: parking_lot::Mutex::new(()),
    })
}

/// A mandate's spend: this engine's ledger (settled plus reserved) and its limits; with a
/// store, what the store counts across every node.
#[pyclass(frozen, module = "holon")]
pub struct Spend {
    #[pyo3(get)]
    pub mandate: String,
    #[pyo3(get)]
    pub currency: String,
    pub(crate) spent: holon::money::Amount,
    pub(crate) today: holon::money::Amount,
    pub(crate) total: holon::money::Amount,
    pub(crate) per_day: Option<holon::money::Amount>,
    pub(crate) store_spent: Option<holon::money::Amount>,
    pub(crate) store_leased: Option<holon::money::Amount>,
}

fn spend(core: &Core, id: &str, ix: holon::engine::MandateIx) -> PyResult<Spend> {
    let snap = core.engine.snapshot();
    let (Some(m), Some(view)) = (snap.mandate(ix), holon::gateway::spend_view(&core.engine, ix, Timestamp::now()))
    else {
        return Err(UnknownNameError::new_err(format!("no mandate `{id}` in the documents this engine loaded")));
    };
    let budget = &m.source().budget;
    let (store_spent, store_leased) = match &core.store {
        Some(store) => {
            let rows = store.status(Some(id)).map_err(|e| StoreError::new_err(e.to_string()))?;
            let row = rows.into_iter().find(|r| r.mandate == id);
            (
                Some(holon::money::Amount::from_micros(row.as_ref().map_or(0, |r| r.spent_micros))),
                Some(holon::money::Amount::from_micros(row.map_or(0, |r| r.leased_micros))),
            )
        }
        None => (None, None),
    };
    Ok(Spend {
        mandate: id.to_owned(),
        currency: budget.currency.to_string(),
        spent: view.spent,
        today: view.today,
        total: budget.total,
        per_day: budget.per_day,
        store_spent,
        store_leased,
    })
}

#[pymethods]
impl Spend {
    /// Settled plus reserved on this engine, in the mandate's currency.
    #[getter]
    fn spent(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.spent)
    }
    /// Of it, today's (UTC), against `per_day`.
    #[getter]
    fn today(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.today)
    }
    /// The mandate's `budget.total`.
    #[getter]
    fn total(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.total)
    }
    #[getter]
    fn per_day(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.per_day.map(|a| money::decimal(py, a)).transpose()
    }
    /// With a store: what it counts as spent across every node.
    #[getter]
    fn store_spent(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.store_spent.map(|a| money::decimal(py, a)).transpose()
    }
    /// With a store: what every node holds in open leases.
    #[getter]
    fn store_leased(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.store_leased.map(|a| money::decimal(py, a)).transpose()
    }
    fn __repr__(&self) -> String {
        format!("<holon.Spend {} spent={} of total={} {}>", self.mandate, self.spent, self.total, self.currency)
    }
}
