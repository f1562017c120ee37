"""holon budgets for a LiteLLM proxy (docs/litellm.md).

Before each request the callback admits it with holon under the mandate mapped from the
request's end user, API key alias, team or user (``mandate_from``): the model's worst case
is reserved on the mandate's ledger (shared by every worker and replica on the same
``store``), or the request is refused with LiteLLM's own budget error. On success the
reservation is settled with LiteLLM's ``response_cost`` (rounded up to a micro-unit: never
billed below what the provider charges); on failure it is released.

Each model the proxy serves is a holon agent (a manifest with ``pricing: per_unit``, its
``max`` the most one request to that deployment may cost): ``models`` maps LiteLLM's model
name to the agent id. holon reserves that ceiling (the rule for per-unit prices). Before
admitting, the callback also computes the request's own worst case from LiteLLM's price
table (input tokens plus ``max_tokens`` at the model's prices); a request whose worst case
is above the agent's ceiling, or whose worst case cannot be computed while it sets no
``max_tokens`` bound that the ceiling covers, is refused: holon never reserves less than a
request can cost.

    # proxy_config.yaml
    litellm_settings:
      callbacks: holon_callbacks.budget

    # holon_callbacks.py, beside the config
    from holon_litellm import HolonBudget
    budget = HolonBudget(documents="holon-docs", store="sqlite:/var/lib/holon/ledger.db",
                         models={"gpt-4o-mini": "openai/gpt-4o-mini"})
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
import uuid
from decimal import ROUND_CEILING, Decimal
from typing import Any, Dict, Optional

import holon

try:  # the proxy's types; the module imports without the proxy for its unit tests
    import litellm
    from litellm.integrations.custom_logger import CustomLogger
    from litellm.proxy._types import ProxyErrorTypes, ProxyException
except ImportError:  # pragma: no cover - litellm is an optional dependency
    litellm = None  # type: ignore[assignment]
    CustomLogger = object  # type: ignore[misc,assignment]

__all__ = ["HolonBudget", "request_worst_case_usd", "MANDATE_SOURCES"]

#: Where the callback logs: a settle that fails is logged here at ERROR with its mandate.
logger = logging.getLogger("holon_litellm")
#: The request metadata key the callback's own request id is kept under. The id is made by
#: the callback for each request; never one a client can send (LiteLLM takes
#: ``litellm_call_id`` from the client's ``x-litellm-call-id`` header when present).
REQUEST_KEY = "holon_request"

#: Where a request's mandate id comes from.
MANDATE_SOURCES = ("end_user", "key_alias", "team", "user")
MICRO = Decimal("0.000001")
#: Most requests one worker holds a reservation for at once (admitted, not yet logged as a
#: success or a failure), in requests; past it new requests are refused until some end.
OPEN_RESERVATIONS_MAX = 100_000
#: Longest a request may hold its reservation without the proxy calling a hook for it, in
#: seconds; past it the next request's sweep settles it at its worst case.
OPEN_RESERVATION_S_MAX = 3_600


def _usd(value: Any) -> Optional[Decimal]:
    """A LiteLLM cost (a float in USD) as an exact decimal, rounded up to a micro-unit."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number) or number < 0:
        return None
    return Decimal(repr(number)).quantize(MICRO, rounding=ROUND_CEILING)


def request_worst_case_usd(model: str, data: Dict[str, Any]) -> Optional[Decimal]:
    """The most this request can cost by LiteLLM's price table: its input tokens at the
    input price plus ``max_tokens`` (or ``max_completion_tokens``) at the output price,
    rounded up. ``None`` when the price or the output bound is unknown."""
    import litellm

    info = litellm.model_cost.get(model) or litellm.model_cost.get(model.split("/", 1)[-1])
    if not info:
        return None
    input_price = info.get("input_cost_per_token")
    output_price = info.get("output_cost_per_token")
    bound = data.get("max_tokens") or data.get("max_completion_tokens")
    if input_price is None or output_price is None or not isinstance(bound, int) or bound <= 0:
        return None
    messages = data.get("messages") or []
    tokens = litellm.token_counter(model=model, messages=messages)
    worst = Decimal(repr(float(input_price))) * tokens + Decimal(repr(float(output_price))) * bound
    return worst.quantize(MICRO, rounding=ROUND_CEILING)


class HolonBudget(CustomLogger):  # type: ignore[misc]
    """A LiteLLM proxy callback that admits, settles and releases with holon."""

    def __init__(
        self,
        documents: str,
        models: Dict[str, str],
        store: Optional[str] = None,
        node: Optional[str] = None,
        mandate_from: str = "end_user",
        mandates: Optional[Dict[str, str]] = None,
        default_mandate: Optional[str] = None,
    ) -> None:
        if mandate_from not in MANDATE_SOURCES:
            raise ValueError(f"mandate_from is one of {', '.join(MANDATE_SOURCES)}, not {mandate_from!r}")
        if store is not None and node is None:
            # Every worker is a node of its own in the store.
            node = f"litellm-{os.uname().nodename}-{os.getpid()}"
        self.engine = holon.Engine.from_documents(documents, store=store, node=node)
        self.models = dict(models)
        self.mandate_from = mandate_from
        self.mandates = dict(mandates or {})
        self.default_mandate = default_mandate
        self._open: Dict[str, tuple] = {}
        self._lock = threading.Lock()
        #: Settles that failed after a request was served (each logged at ERROR): a
        #: request that went unbilled is counted here, never silent.
        self.settle_failures = 0
        super().__init__()

    # ---- which mandate, which agent -----------------------------------------------------

    def mandate_for(self, key: Any, data: Dict[str, Any]) -> Optional[str]:
        source = {
            "end_user": data.get("user") or (data.get("metadata") or {}).get("user_api_key_end_user_id"),
            "key_alias": getattr(key, "key_alias", None),
            "team": getattr(key, "team_id", None),
            "user": getattr(key, "user_id", None),
        }[self.mandate_from]
        if source is None:
            return self.default_mandate
        return self.mandates.get(str(source), str(source) if not self.mandates else self.default_mandate)

    def _refuse(self, message: str, decision: Optional[holon.Decision] = None) -> Exception:
        """LiteLLM's own budget error: `budget_exceeded`, its status code (422 by default)."""
        if decision is not None:
            message = f"{message}: " + "; ".join(f"{r.code}: {r.message}" for r in decision.reasons)
        if litellm is None:  # pragma: no cover
            return RuntimeError(message)
        return ProxyException(
            message=message,
            type=ProxyErrorTypes.budget_exceeded,
            param=None,
            code=litellm.budget_exceeded_status_code,
        )

    # ---- the proxy's hooks ---------------------------------------------------------------

    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):  # noqa: ANN001
        model = data.get("model")
        agent = self.models.get(str(model))
        if agent is None:
            raise self._refuse(f"holon: model {model!r} is not mapped to a holon agent (HolonBudget models=)")
        mandate = self.mandate_for(user_api_key_dict, data)
        if mandate is None:
            raise self._refuse(f"holon: the request names no {self.mandate_from} to find its mandate by")
        await self._sweep()
        # Each request is admitted once, here: no idempotency key (a key the client can
        # choose, as LiteLLM's call id, would replay an allowed answer to every request that
        # repeats it). The id the hooks find the reservation by is the callback's own.
        request_id = uuid.uuid4().hex
        try:
            decision = await asyncio.to_thread(self.engine.admit, mandate, agent)
        except holon.HolonError as e:
            raise self._refuse(f"holon: {e}") from e
        if not decision.allowed:
            raise self._refuse(f"holon {decision.decision} the request under mandate {mandate}", decision)
        reservation = decision.reservation
        try:
            self._check_and_keep(request_id, reservation, decision, mandate, agent, model, data)
        except BaseException:
            # Whatever stopped the request here, it did not run: nothing is kept.
            if reservation.active:
                reservation.release()
            raise
        return data

    def _check_and_keep(self, request_id, reservation, decision, mandate, agent, model, data) -> None:  # noqa: ANN001
        if decision.currency != "USD":
            raise self._refuse(f"holon: mandate {mandate} is in {decision.currency}; LiteLLM bills in USD")
        worst = request_worst_case_usd(str(model), data)
        if worst is not None and worst > reservation.worst_case:
            raise self._refuse(
                f"holon: this request can cost {worst} USD, above the {reservation.worst_case} USD ceiling of agent {agent}"
            )
        with self._lock:
            if len(self._open) >= OPEN_RESERVATIONS_MAX:
                raise self._refuse(
                    f"holon: {OPEN_RESERVATIONS_MAX} requests of this worker are in flight already; retry shortly"
                )
            self._open[request_id] = {"reservation": reservation, "mandate": mandate, "since": time.monotonic(), "failed_cost": Decimal(0)}
        # The proxy's own metadata: `litellm_metadata` on the routes where `metadata` is the
        # provider's parameter (responses, messages, batches, files), else `metadata`.
        metadata = data["litellm_metadata"] if isinstance(data.get("litellm_metadata"), dict) else data.setdefault("metadata", {})
        metadata[REQUEST_KEY] = request_id

    def _request_id(self, kwargs: Dict[str, Any]) -> Optional[str]:
        """The callback's own id in the proxy's metadata, wherever LiteLLM carries it."""
        params = kwargs.get("litellm_params") or {}
        for place in (kwargs.get("metadata"), kwargs.get("litellm_metadata"), params.get("metadata"), params.get("litellm_metadata")):
            if isinstance(place, dict) and place.get(REQUEST_KEY):
                return place[REQUEST_KEY]
        return None

    def _take(self, kwargs: Dict[str, Any]) -> Optional[dict]:
        """The open entry of the request these hook arguments are about, taken out."""
        request_id = self._request_id(kwargs)
        if not request_id:
            return None
        with self._lock:
            return self._open.pop(request_id, None)

    async def _sweep(self) -> None:
        """Entries whose request will never reach a hook (a client gone before the first
        streamed chunk calls none): one the engine reclaimed is dropped (its worst case is
        kept, spent); one open longer than OPEN_RESERVATION_S_MAX is settled at its worst
        case (the call may have run: never less) and dropped, with a warning."""
        now = time.monotonic()
        with self._lock:
            stale = [
                (rid, e) for rid, e in self._open.items()
                if not e["reservation"].active or now - e["since"] > OPEN_RESERVATION_S_MAX
            ]
            for rid, _ in stale:
                del self._open[rid]
        for _, entry in stale:
            if entry["reservation"].active:
                logger.warning(
                    "holon: reservation %s under mandate %s had no answer from the proxy in %s s: settled at its worst case",
                    entry["reservation"].id, entry["mandate"], OPEN_RESERVATION_S_MAX,
                )
                await self._end(entry, "settle", entry["reservation"].worst_case, "error")

    async def _end(self, entry: dict, how: str, *args: Any) -> None:
        """Settles or releases; a failure is logged at ERROR with the mandate and counted
        (the request was served: it must not go unbilled in silence)."""
        reservation, mandate = entry["reservation"], entry["mandate"]
        try:
            await asyncio.to_thread(getattr(reservation, how), *args)
        except holon.HolonError as e:
            with self._lock:
                self.settle_failures += 1
            logger.error(
                "holon: the %s of reservation %s under mandate %s failed after the request ran: %s",
                how, reservation.id, mandate, e,
            )

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):  # noqa: ANN001
        entry = self._take(kwargs)
        if entry is None:
            return
        reservation = entry["reservation"]
        cost = _usd(kwargs.get("response_cost"))
        latency_ms = None
        try:
            latency_ms = max(0, int((end_time - start_time).total_seconds() * 1000))
        except (TypeError, AttributeError):
            pass
        # No cost known: the worst case stays billed (never less than the call may cost).
        # Attempts that failed before this one and cost something are billed with it.
        actual = reservation.worst_case if cost is None else cost + entry["failed_cost"]
        await self._end(entry, "settle", actual, "success", latency_ms)

    async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):  # noqa: ANN001
        # Called for every failed attempt, before LiteLLM decides to retry it: the request
        # may still succeed, so nothing ends here; what the attempt cost is added up.
        request_id = self._request_id(kwargs)
        cost = _usd(kwargs.get("response_cost"))
        if request_id and cost:
            with self._lock:
                entry = self._open.get(request_id)
                if entry is not None:
                    entry["failed_cost"] += cost

    async def async_post_call_failure_hook(self, request_data, original_exception, user_api_key_dict, traceback_str=None):  # noqa: ANN001
        # The whole request failed (once, after any retries): what its attempts cost is
        # billed, else the reservation goes back.
        entry = self._take(request_data)
        if entry is not None:
            if entry["failed_cost"] > 0:
                await self._end(entry, "settle", entry["failed_cost"], "error")
            else:
                await self._end(entry, "release")
        return None

    def open_reservations(self) -> int:
        with self._lock:
            return len(self._open)
