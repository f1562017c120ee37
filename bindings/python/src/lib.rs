//! `holon._holon`: holon's engine in a Python process (docs/python.md).
//!
//! The layers: `money.rs` turns `decimal.Decimal` and decimal strings into the engine's
//! micro-units and back (a float is refused); `core.rs` is one loaded engine (its
//! documents, its node on a ledger store) over the gateway protocol (`holon::gateway`: the
//! lease wait, the key rules, the written forms); `decision.rs` turns an
//! admission into a Python object with the engine's own sentences; `reservation.rs` keeps
//! an allowed call's reservation open in an owned cell beside an `Arc` of its engine;
//! `keys.rs` replays an answer for a retried idempotency key; `store.rs` reads and
//! reconciles a ledger store from Python. Every engine call runs with the GIL released.

use pyo3::prelude::*;

mod core;
mod decision;
mod errors;
mod keys;
mod money;
mod reservation;
mod store;

#[pymodule]
fn _holon(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<core::Engine>()?;
    m.add_class::<decision::Decision>()?;
    m.add_class::<decision::Reason>()?;
    m.add_class::<reservation::Reservation>()?;
    m.add_class::<reservation::Settled>()?;
    m.add_class::<core::Spend>()?;
    m.add_class::<store::Store>()?;
    m.add("HolonError", py.get_type::<errors::HolonError>())?;
    m.add("DocumentsError", py.get_type::<errors::DocumentsError>())?;
    m.add("UnknownNameError", py.get_type::<errors::UnknownNameError>())?;
    m.add("StoreError", py.get_type::<errors::StoreError>())?;
    m.add("ReservationEndedError", py.get_type::<errors::ReservationEndedError>())?;
    m.add("IdempotencyConflictError", py.get_type::<errors::IdempotencyConflictError>())?;
    m.add("PendingError", py.get_type::<errors::PendingError>())?;
    m.add("IDEMPOTENCY_KEYS_MAX", keys::IDEMPOTENCY_KEYS_MAX)?;
    // The gateway protocol's bounds (holon::gateway), as the sidecar's.
    m.add("IDEMPOTENCY_KEY_BYTES_MAX", holon::store::keys::KEY_BYTES_MAX)?;
    m.add("IDEMPOTENCY_KEEP_S", holon::gateway::KEEP_S)?;
    m.add("LEASE_WAIT_MS", holon::gateway::LEASE_WAIT_MS)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
