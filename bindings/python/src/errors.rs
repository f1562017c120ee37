//! The exceptions: one base, [`HolonError`], and a subclass for each way a call can fail
//! that a caller handles apart. Bad values (money, names) are `ValueError`, wrong types
//! `TypeError`, as Python code expects; every message is the CLI's sentence.

use pyo3::create_exception;
use pyo3::exceptions::PyException;

create_exception!(holon, HolonError, PyException, "Every error of holon's own.");
create_exception!(
    holon,
    DocumentsError,
    HolonError,
    "A documents directory (or a keys or revocations file) that cannot be loaded: the first file at fault and where in it."
);
create_exception!(
    holon,
    UnknownNameError,
    HolonError,
    "A mandate, agent or held call that the loaded documents (or the store) do not hold."
);
create_exception!(holon, StoreError, HolonError, "The ledger store cannot be opened, reached or used.");
create_exception!(
    holon,
    ReservationEndedError,
    HolonError,
    "A settle, release or sub-call of a reservation that was settled or released already."
);
create_exception!(holon, IdempotencyConflictError, HolonError, "An idempotency key reused with different arguments.");
create_exception!(
    holon,
    PendingError,
    HolonError,
    "An approval or refusal that cannot be taken: not the mandate's issuer, or the held call names a mandate no longer loaded."
);
