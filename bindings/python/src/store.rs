//! A ledger store read from Python: what `holon ledger status` and `holon ledger
//! reconcile` do, for a supervisor that restarts workers (a worker killed with its leases
//! open leaves them counted in full until reconciled).

use holon::money::Amount;
use holon::time::Timestamp;
use pyo3::prelude::*;

use crate::errors::StoreError;
use crate::money;

#[pyclass(frozen, module = "holon")]
pub struct Store {
    store: Box<dyn holon::store::LedgerStore>,
}

#[pymethods]
impl Store {
    /// Opens an existing store (`sqlite:PATH`, `postgres://…`).
    #[new]
    fn new(py: Python<'_>, url: String) -> PyResult<Store> {
        py.detach(|| holon::store::open_existing(&url).map(|store| Store { store }))
            .map_err(|e| StoreError::new_err(e.to_string()))
    }

    /// `mandate`'s figures across every node: a dict of `total`, `spent`, `leased` (each a
    /// `decimal.Decimal`) and `nodes` (node name to what it holds in leases).
    fn status<'py>(&self, py: Python<'py>, mandate: &str) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let rows = py.detach(|| self.store.status(Some(mandate))).map_err(|e| StoreError::new_err(e.to_string()))?;
        let Some(row) = rows.into_iter().find(|r| r.mandate == mandate) else {
            return Err(crate::errors::UnknownNameError::new_err(format!(
                "mandate `{mandate}` is not in the store; a node registers it when it publishes the mandate"
            )));
        };
        let out = pyo3::types::PyDict::new(py);
        out.set_item("total", money::decimal(py, Amount::from_micros(row.limits.total_micros))?)?;
        out.set_item("spent", money::decimal(py, Amount::from_micros(row.spent_micros))?)?;
        out.set_item("leased", money::decimal(py, Amount::from_micros(row.leased_micros))?)?;
        let nodes = pyo3::types::PyDict::new(py);
        for n in row.nodes {
            nodes.set_item(n.node, money::decimal(py, Amount::from_micros(n.leased_micros))?)?;
        }
        out.set_item("nodes", nodes)?;
        Ok(out)
    }

    /// Counts what `node`'s leases still hold as spent and closes them (a node that is
    /// gone: killed, or its machine lost). `expired_only`: only leases past their time to
    /// live. Returns the amount counted.
    #[pyo3(signature = (node, expired_only=false))]
    fn reconcile(&self, py: Python<'_>, node: &str, expired_only: bool) -> PyResult<Py<PyAny>> {
        let now = Timestamp::now().unix();
        let done = py
            .detach(|| self.store.reconcile(node, now, expired_only))
            .map_err(|e| StoreError::new_err(e.to_string()))?;
        money::decimal(py, Amount::from_micros(done.counted_micros))
    }
}
