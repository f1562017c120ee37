//! An admission as a Python object: the verdict, every code with the engine's own
//! sentence, the worst case, and the handle to act on (an open reservation, or the id of a
//! held call). What is decided is computed with the GIL released ([`made`]); the Python
//! objects are made after ([`Made::into_decision`]).

use std::sync::Arc;

use holon::admission::{Code, CodeSet, Reason as EngineReason, Verdict};
use holon::engine::{Admission, AgentIx, Denial, MandateIx, PendingApproval, Spent};
use holon::money::Amount;
use pyo3::prelude::*;

use crate::core::Core;
use crate::money;
use crate::reservation::{Cell, Facts, Reservation};

/// What a decision is about: its mandate (the currency; a sub-call's is its run's
/// sub-mandate's, given) and agent (the name).
pub(crate) struct About {
    pub mandate: MandateIx,
    pub agent: AgentIx,
    pub currency: Option<String>,
}

/// A decision, before it meets Python.
pub(crate) struct Made {
    verdict: Verdict,
    codes: Vec<&'static str>,
    reasons: Vec<(&'static str, String)>,
    worst: Amount,
    currency: Option<String>,
    agent: Option<String>,
    pending: Option<String>,
    limited_by: Option<String>,
    open: Option<(Cell, Facts)>,
    /// The codes as the engine gave them (the gateway protocol's rules read them).
    code_set: CodeSet,
}

/// Decides with `ask` and keeps an allowed call's reservation in a cell of its own beside
/// `core`; `explain` gives the sentences of a refusal's codes.
pub(crate) fn made(
    core: &Arc<Core>,
    about: &About,
    ask: impl for<'a> FnOnce(&'a Core) -> PyResult<Admission<'a>>,
    explain: impl FnOnce(CodeSet, Amount, Spent) -> Vec<EngineReason>,
) -> PyResult<Made> {
    let mut refused: Option<Refused> = None;
    let cell = Cell::new(Arc::clone(core), |owner| match ask(owner) {
        Ok(Admission::Allowed(r)) => Some(r),
        Ok(Admission::Held(p)) => {
            refused = Some(Refused::Held(p));
            None
        }
        Ok(Admission::Denied(d)) => {
            refused = Some(Refused::Denied(d));
            None
        }
        Err(e) => {
            refused = Some(Refused::Failed(e));
            None
        }
    });
    let snap = core.engine.snapshot();
    let currency =
        about.currency.clone().or_else(|| snap.mandate(about.mandate).map(|m| m.source().budget.currency.to_string()));
    let agent = snap.agent(about.agent).map(|a| a.source().id.to_string());
    let mut made = Made {
        verdict: Verdict::Allowed,
        codes: Vec::new(),
        reasons: Vec::new(),
        worst: Amount::ZERO,
        currency,
        agent,
        pending: None,
        limited_by: None,
        open: None,
        code_set: CodeSet::EMPTY,
    };
    let (codes, spent) = match refused {
        None => {
            let facts = cell.with_dependent(|_, open| open.as_ref().map(Facts::of));
            let Some(facts) = facts else {
                return Err(crate::errors::HolonError::new_err("an allowed admission held no reservation"));
            };
            made.worst = facts.worst_case;
            made.open = Some((cell, facts));
            return Ok(made);
        }
        Some(Refused::Failed(e)) => return Err(e),
        Some(Refused::Held(p)) => {
            made.verdict = Verdict::Held;
            made.worst = p.worst_case;
            made.pending = Some(core.held_id(p.id));
            (CodeSet::EMPTY.with(Code::ApprovalRequired), Spent::default())
        }
        Some(Refused::Denied(d)) => {
            made.verdict = Verdict::Denied;
            made.worst = d.worst_case;
            (d.codes, d.spent)
        }
    };
    made.code_set = codes;
    made.codes = codes.iter().map(Code::as_str).collect();
    made.reasons = explain(codes, made.worst, spent).into_iter().map(|r| (r.code.as_str(), r.message)).collect();
    made.limited_by = spent.limited_by.and_then(|ix| snap.mandate(ix)).map(|m| m.source().id.clone());
    Ok(made)
}

/// An admission that opened no reservation, or the error that stopped it.
enum Refused {
    Held(PendingApproval),
    Denied(Denial),
    Failed(PyErr),
}

impl Made {
    /// After an approval the node put the call back (a lease on its way, the store away):
    /// it is still held, under the same id.
    pub(crate) fn still_held_as(&mut self, id: &str) {
        if self.verdict == Verdict::Denied && holon::gateway::only_for_want_of_lease_or_store(self.code_set) {
            self.pending = Some(id.to_owned());
        }
    }

    /// Whether a retry with the same idempotency key gets this decision again
    /// (`holon::gateway::keep_answer`).
    pub(crate) fn keep(&self) -> bool {
        holon::gateway::keep_answer(self.verdict, self.code_set)
    }

    pub(crate) fn into_decision(self, py: Python<'_>) -> PyResult<Decision> {
        let reservation = match self.open {
            Some((cell, facts)) => Some(Py::new(py, Reservation::new(cell, facts))?),
            None => None,
        };
        Ok(Decision {
            decision: self.verdict.as_str(),
            codes: self.codes,
            reasons: self.reasons,
            worst: self.worst,
            currency: self.currency,
            agent: self.agent,
            reservation,
            pending: self.pending,
            limited_by: self.limited_by,
        })
    }
}

impl Decision {
    /// A kept answer as a retry gets it (`holon::gateway::replay_of_allowed`): an allowed
    /// one only while its reservation is open, else a denial that lets nothing through.
    pub(crate) fn replayed(py: Python<'_>, kept: &Py<Decision>) -> PyResult<Py<Decision>> {
        let first = kept.get();
        let Some(reservation) = &first.reservation else { return Ok(kept.clone_ref(py)) };
        let open = reservation.get().is_open();
        match holon::gateway::replay_of_allowed(open) {
            holon::gateway::Replay::Give => Ok(kept.clone_ref(py)),
            holon::gateway::Replay::Ended => {
                let code = holon::gateway::REPLAY_ENDED.as_str();
                let sentence =
                    holon::gateway::replay_ended_sentence(&reservation.get().reservation_id().to_string(), None);
                Py::new(
                    py,
                    Decision {
                        decision: "denied",
                        codes: vec![code],
                        reasons: vec![(code, sentence)],
                        worst: first.worst,
                        currency: first.currency.clone(),
                        agent: first.agent.clone(),
                        reservation: None,
                        pending: None,
                        limited_by: None,
                    },
                )
            }
        }
    }
}

/// One reason a call was denied or held: its code (an API: it never changes meaning) and
/// the sentence the CLI and the sidecar give.
#[pyclass(frozen, module = "holon", get_all)]
pub struct Reason {
    pub code: &'static str,
    pub message: String,
}

#[pymethods]
impl Reason {
    fn __repr__(&self) -> String {
        format!("<holon.Reason {}: {}>", self.code, self.message)
    }
}

/// A decision: `allowed` (`.reservation` holds the worst case), `held` for the mandate's
/// issuer (`.pending`), or `denied`; `.codes` and `.reasons` say why.
#[pyclass(frozen, module = "holon")]
pub struct Decision {
    decision: &'static str,
    codes: Vec<&'static str>,
    reasons: Vec<(&'static str, String)>,
    worst: Amount,
    currency: Option<String>,
    agent: Option<String>,
    reservation: Option<Py<Reservation>>,
    pending: Option<String>,
    limited_by: Option<String>,
}

#[pymethods]
impl Decision {
    /// `"allowed"`, `"held"` or `"denied"`.
    #[getter]
    fn decision(&self) -> &'static str {
        self.decision
    }

    #[getter]
    fn allowed(&self) -> bool {
        self.decision == "allowed"
    }

    /// Every code, in the engine's order.
    #[getter]
    fn codes(&self) -> Vec<&'static str> {
        self.codes.clone()
    }

    #[getter]
    fn reasons(&self) -> Vec<Reason> {
        self.reasons.iter().map(|(code, message)| Reason { code, message: message.clone() }).collect()
    }

    /// The call's worst case in the mandate's currency, as a `decimal.Decimal`.
    #[getter]
    fn worst_case(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        money::decimal(py, self.worst)
    }

    #[getter]
    fn currency(&self) -> Option<String> {
        self.currency.clone()
    }

    #[getter]
    fn agent(&self) -> Option<String> {
        self.agent.clone()
    }

    /// The open reservation of an allowed call (settle or release it).
    #[getter]
    fn reservation(&self, py: Python<'_>) -> Option<Py<Reservation>> {
        self.reservation.as_ref().map(|r| r.clone_ref(py))
    }

    /// The id of a held call, for `Engine.approve` and `Engine.refuse`.
    #[getter]
    fn pending(&self) -> Option<String> {
        self.pending.clone()
    }

    /// Under a sub-mandate, the ancestor whose rules or budget refused the call.
    #[getter]
    fn limited_by(&self) -> Option<String> {
        self.limited_by.clone()
    }

    fn __bool__(&self) -> bool {
        self.allowed()
    }

    fn __repr__(&self) -> String {
        let codes = if self.codes.is_empty() { String::new() } else { format!(" {}", self.codes.join(",")) };
        format!(
            "<holon.Decision {}{codes} worst_case={} {}>",
            self.decision,
            self.worst,
            self.currency.as_deref().unwrap_or("")
        )
    }
}
