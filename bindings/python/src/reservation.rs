//! An allowed call's open reservation, held from Python. The engine's `Reservation<'e>`
//! borrows its engine; here it lives in a [`Cell`] beside an `Arc` of the engine's
//! [`Core`] (self_cell: no unsafe code of ours), so that it outlives the call that made it
//! and keeps its engine alive. Settling or releasing takes it out of the cell, once; a
//! reservation dropped by Python while open is released (the engine's `Drop`), and a
//! `with` block releases it on the way out unless it was settled.

use std::sync::Arc;

use holon::engine::{RunReport, SubCall};
use holon::money::Amount;
use holon::time::Timestamp;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use self_cell::self_cell;

use crate::core::Core;
use crate::decision::{self, About, Decision};
use crate::errors::{ReservationEndedError, UnknownNameError};
use crate::money;

/// The engine's reservation while open; `None` once settled or released.
pub(crate) type Open<'a> = Option<holon::engine::Reservation<'a>>;

self_cell!(
    pub(crate) struct Cell {
        owner: Arc<Core>,
        #[not_covariant]
        dependent: Open,
    }
);

/// What a reservation is, read once when it was made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts {
    pub id: u64,
    pub worst_case: Amount,
    pub sub_budget: Amount,
    pub delegated: bool,
}

impl Facts {
    pub(crate) fn of(r: &holon::engine::Reservation<'_>) -> Facts {
        Facts {
            id: r.receipt_id(),
            worst_case: r.worst_case(),
            sub_budget: r.sub_budget(),
            delegated: r.is_delegated_run(),
        }
    }
}

/// An allowed call's reserved worst case: settle it with what the call cost, or release
/// it if the call did not happen. As a context manager it is released on the way out of
/// the block unless settled (an exception inside the block releases it too).
#[pyclass(frozen, module = "holon")]
pub struct Reservation {
    cell: parking_lot::Mutex<Cell>,
    facts: Facts,
}

impl Reservation {
    pub(crate) fn new(cell: Cell, facts: Facts) -> Reservation {
        Reservation { cell: parking_lot::Mutex::new(cell), facts }
    }

    /// Whether it is still open (neither settled nor released nor reclaimed).
    pub(crate) fn is_open(&self) -> bool {
        self.cell.lock().with_dependent(|_, open| open.as_ref().is_some_and(|r| r.is_active()))
    }

    pub(crate) fn reservation_id(&self) -> u64 {
        self.facts.id
    }

    fn ended(&self) -> PyErr {
        ReservationEndedError::new_err(format!(
            "reservation {} was settled or released already; it ends once",
            self.facts.id
        ))
    }
}

/// What a settle kept: never a bill above the reservation. `clamped` says the cost asked
/// for was above it (a gateway fault: the budget kept the worst case, never more).
#[pyclass(frozen, module = "holon")]
pub struct Settled {
    reservation: u64,
    worst_case: Amount,
    kept: Amount,
    actual: Amount,
    passthrough: Amount,
    clamped: bool,
    late: bool,
}

#[pymethods]
impl Settled {
    #[getter]
    fn reservation(&self) -> u64 {
        self.reservation
    }
    #[getter]
    fn worst_case(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.worst_case)
    }
    /// What the budget keeps: the bill, at most the worst case.
    #[getter]
    fn kept(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.kept)
    }
    /// The bill: what was kept (never above the reservation; see `clamped`).
    #[getter]
    fn billed(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.kept)
    }
    /// The cost the settle was given.
    #[getter]
    fn actual(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.actual)
    }
    /// Of the bill, what a delegated run's sub-calls took.
    #[getter]
    fn passthrough(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.passthrough)
    }
    #[getter]
    fn clamped(&self) -> bool {
        self.clamped
    }
    /// The engine had reclaimed the reservation (its callee's timeout passed); this
    /// settle brought its kept worst case to the cost.
    #[getter]
    fn late(&self) -> bool {
        self.late
    }
    fn __repr__(&self) -> String {
        format!(
            "<holon.Settled {} kept={} of worst_case={}{}>",
            self.reservation,
            self.kept,
            self.worst_case,
            if self.clamped { " clamped" } else { "" }
        )
    }
}

#[pymethods]
impl Reservation {
    /// The reservation's id (its receipt's).
    #[getter]
    fn id(&self) -> u64 {
        self.facts.id
    }

    #[getter]
    fn worst_case(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.facts.worst_case)
    }

    /// True for an orchestrator's delegated run (it admits sub-calls).
    #[getter]
    fn delegated(&self) -> bool {
        self.facts.delegated
    }

    /// An orchestrator's budget for its sub-calls.
    #[getter]
    fn sub_budget(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.facts.sub_budget)
    }

    /// True while neither settled nor released (nor reclaimed by the engine).
    #[getter]
    fn active(&self) -> bool {
        self.is_open()
    }

    /// Keeps `actual` (at most the worst case) and gives the rest back. `outcome` is
    /// success, error or declared_failure; `latency_ms` how long the call took.
    #[pyo3(signature = (actual, outcome=None, latency_ms=None))]
    fn settle(
        &self,
        py: Python<'_>,
        actual: &Bound<'_, PyAny>,
        outcome: Option<&str>,
        latency_ms: Option<u64>,
    ) -> PyResult<Settled> {
        let actual = money::amount("actual", actual)?;
        let word = |e: holon::gateway::WordError| PyValueError::new_err(e.to_string());
        let outcome = holon::gateway::outcome(outcome).map_err(word)?;
        let report = RunReport { outcome, latency_ms: holon::gateway::latency_ms(latency_ms).map_err(word)? };
        let settled = py.detach(|| {
            self.cell
                .lock()
                .with_dependent_mut(|_, open| open.take().map(|r| r.settle_reported(actual, Timestamp::now(), report)))
        });
        let settled = settled.ok_or_else(|| self.ended())?.map_err(|_| self.ended())?;
        Ok(Settled {
            reservation: self.facts.id,
            worst_case: settled.worst_case,
            kept: settled.kept,
            actual,
            passthrough: settled.passthrough,
            clamped: settled.billed > settled.kept,
            late: settled.late,
        })
    }

    /// Gives the whole reservation back: the call did not happen.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let released = py
            .detach(|| self.cell.lock().with_dependent_mut(|_, open| open.take().map(|r| r.release(Timestamp::now()))));
        released.ok_or_else(|| self.ended())?.map_err(|_| self.ended())
    }

    /// Admits one sub-call of this orchestrator's delegated run, by agent id or by
    /// capability (the cheapest implementer the run's sub-mandate admits).
    #[pyo3(signature = (agent=None, capability=None, max_cost=None))]
    fn sub_call(
        &self,
        py: Python<'_>,
        agent: Option<&str>,
        capability: Option<&str>,
        max_cost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Decision>> {
        let max_cost = money::optional("max_cost", max_cost)?;
        if agent.is_some() == capability.is_some() {
            return Err(PyValueError::new_err("give exactly one of `agent` and `capability`"));
        }
        let made = py.detach(|| {
            let cell = self.cell.lock();
            let core = Arc::clone(cell.borrow_owner());
            cell.with_dependent(|_, open| {
                let Some(parent) = open.as_ref() else { return Err(self.ended()) };
                let at = Timestamp::now();
                let snap = core.engine.snapshot();
                let picked = match (agent, capability) {
                    (Some(name), _) => core.engine.agent_ix(name),
                    (None, Some(class)) => parent
                        .sub_mandate()
                        .and_then(|m| holon::engine::cheapest_implementer(&m, &snap, class, at, max_cost).ok())
                        .flatten(),
                    (None, None) => None,
                };
                let Some(agent_ix) = picked else {
                    let name = agent.or(capability).unwrap_or_default();
                    return Err(UnknownNameError::new_err(format!(
                        "no agent `{name}` that this run's sub-mandate can call: give a manifest's id, or a capability one of them offers"
                    )));
                };
                let call = SubCall { agent: agent_ix, capability, at };
                let about = About {
                    mandate: holon::engine::MandateIx(u32::MAX),
                    agent: agent_ix,
                    currency: parent.run_currency().map(|c| c.to_string()),
                };
                decision::made(
                    &core,
                    &about,
                    |owner| Ok(parent.sub_call_on(&owner.engine, &call, max_cost)),
                    |codes, worst, spent| {
                        let denial = holon::engine::Denial { codes, worst_case: worst, receipt_id: 0, spent };
                        parent.explain_sub_call(&call, max_cost, &denial)
                    },
                )
            })
        })?;
        Py::new(py, made.into_decision(py)?)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Releases the reservation unless it was settled or released in the block.
    #[pyo3(signature = (_kind=None, _value=None, _traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        py.detach(|| {
            self.cell.lock().with_dependent_mut(|_, open| {
                if let Some(r) = open.take() {
                    let _released = r.release(Timestamp::now());
                }
            });
        });
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "<holon.Reservation {} worst_case={}{}>",
            self.facts.id,
            self.facts.worst_case,
            if self.active() { "" } else { " ended" }
        )
    }
}
