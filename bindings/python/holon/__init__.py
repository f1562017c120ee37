"""holon's admission engine in this process.

Load a documents directory (manifests, mandates, agent records) and ask, for every call an
agent makes, whether it may make it: ``allowed`` with its worst case reserved, ``held``
for the mandate's human issuer, or ``denied``, with every reason. Money is exact:
``decimal.Decimal`` or decimal strings in, ``decimal.Decimal`` out; a float is refused.

>>> import holon
>>> engine = holon.Engine.from_documents("examples")
>>> decision = engine.admit("alice/m-2026-11", "acme/table-extract")
>>> with decision.reservation as r:
...     r.settle("0.003")

Every engine call releases the GIL: share one engine between threads. For asyncio,
``await asyncio.to_thread(engine.admit, ...)``, or the ``admit_async`` helper below.
See docs/python.md.
"""

import asyncio as _asyncio
from decimal import Decimal as _Decimal
from typing import Optional as _Optional
from typing import Union as _Union

from ._holon import (
    IDEMPOTENCY_KEEP_S,
    IDEMPOTENCY_KEY_BYTES_MAX,
    IDEMPOTENCY_KEYS_MAX,
    LEASE_WAIT_MS,
    Decision,
    DocumentsError,
    Engine,
    HolonError,
    IdempotencyConflictError,
    PendingError,
    Reason,
    Reservation,
    ReservationEndedError,
    Settled,
    Spend,
    Store,
    StoreError,
    UnknownNameError,
    __version__,
)

Money = _Union[_Decimal, str]

__all__ = [
    "Decision",
    "DocumentsError",
    "Engine",
    "HolonError",
    "IdempotencyConflictError",
    "IDEMPOTENCY_KEEP_S",
    "IDEMPOTENCY_KEY_BYTES_MAX",
    "IDEMPOTENCY_KEYS_MAX",
    "LEASE_WAIT_MS",
    "Money",
    "PendingError",
    "Reason",
    "Reservation",
    "ReservationEndedError",
    "Settled",
    "Spend",
    "Store",
    "StoreError",
    "UnknownNameError",
    "__version__",
    "admit_async",
]


async def admit_async(
    engine: Engine,
    mandate: str,
    agent: str,
    max_cost: _Optional[Money] = None,
    capability: _Optional[str] = None,
    idempotency_key: _Optional[str] = None,
) -> Decision:
    """``engine.admit`` from a coroutine, on a worker thread (the engine waits for a lease
    on its way from a store for up to ``LEASE_WAIT_MS``; the event loop does not)."""
    return await _asyncio.to_thread(
        engine.admit,
        mandate,
        agent,
        max_cost=max_cost,
        capability=capability,
        idempotency_key=idempotency_key,
    )
