"""The holon_litellm callback in a real LiteLLM proxy (mocked model responses, loopback
only), against LiteLLM's own check-then-increment budget design: benches/litellm_head_to_head.py."""

import importlib.util
import pathlib
import sys
from decimal import Decimal

import pytest

if importlib.util.find_spec("litellm") is None:
    pytest.skip("LiteLLM is not installed here (pip install 'litellm[proxy]'): the proxy test cannot run", allow_module_level=True)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "benches"))
import litellm_head_to_head as h2h  # noqa: E402


def test_the_proxy_never_overspends_with_holon_on_one_or_two_workers():
    report = h2h.run(clients=8, requests=4, workers=2, samples=0, kinds=("check_then_increment", "holon"))
    runs = {(r["kind"], r["workers"]): r for r in report["runs"]}
    for workers in (1, 2):
        r = runs[("holon", workers)]
        assert r["overspend"] == 0, r
        assert r["ok"] >= 1, "a budget of 0.010 admits some of the 0.0005 requests"
        assert r["refusal_types"] in ([], ["budget_exceeded"]), "refused with LiteLLM's own budget error"
        store = {k: Decimal(v) for k, v in r["store"].items()}
        assert store["spent"] + store["leased"] <= h2h.BUDGET, store
        # Every request that passed was settled at its cost (or is still counted in full
        # in a lease of a worker that stopped without a flush): never less.
        assert store["spent"] + store["leased"] >= h2h.COST_USD * r["ok"], store
    # What the comparison is about: the design without reservation overspends under load.
    print({k: str(v["overspend"]) for k, v in runs.items()})


def test_the_request_worst_case_is_computed_from_the_price_table():
    import litellm  # noqa: F401
    from holon_litellm import request_worst_case_usd, _usd

    data = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100}
    worst = request_worst_case_usd("gpt-4o-mini", data)
    assert worst is not None and worst > 0
    assert request_worst_case_usd("gpt-4o-mini", {"messages": []}) is None, "no max_tokens: no bound"
    assert request_worst_case_usd("no-such-model-anywhere", data) is None
    assert _usd(0.0000001) == Decimal("0.000001"), "a cost rounds up to a micro-unit, never down"
    assert _usd(float("nan")) is None and _usd(-1.0) is None and _usd(True) is None


def test_a_client_set_call_id_never_buys_a_second_request(tmp_path):
    """Issue #50: LiteLLM takes ``litellm_call_id`` from the client's ``x-litellm-call-id``
    header; the callback keyed its admits by it, so on a budget that fits one request, 8
    requests with the same client-set id were all served (the later ones replays, unbilled).
    Now every request is admitted on its own: each one served is billed, the others are
    refused for the budget, and the store holds it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for f in h2h.DOCS.iterdir():
        # One request's ceiling (0.002 USD) fits, a second does not.
        (docs / f.name).write_text(f.read_text().replace('total: "0.010"', 'total: "0.003"'))
    import time

    import holon

    proxy = h2h.Proxy("holon", 1, tmp_path / "work", docs=docs)
    store = holon.Store(f"sqlite:{proxy.dir / 'ledger.db'}")
    try:
        answers = [proxy.ask(headers={"x-litellm-call-id": "client-chosen-1"}) for _ in range(8)]
        served = [a for a in answers if a[0] == 200]
        # Each request served is settled in the proxy's callback and flushed by its node
        # within a flush interval: waited for (a bound, not a verdict), then compared.
        deadline = time.monotonic() + 60
        while store.status("team/small")["spent"] < h2h.COST_USD * len(served) and time.monotonic() < deadline:
            time.sleep(0.05)
        status = store.status("team/small")
    finally:
        proxy.stop()
    refused = [payload.get("error", {}) for status_, _, payload in answers if status_ != 200]
    # Each request is its own call: a few fit (0.003 USD with 0.002 reserved each, settled
    # at 0.0005), the rest are refused for the budget; none is a replay of the first.
    assert 1 <= len(served) < 8, len(served)
    assert all("total_exceeded" in e.get("message", "") for e in refused), refused
    assert status["spent"] + status["leased"] <= Decimal("0.003"), status
    assert status["spent"] == h2h.COST_USD * len(served), ("each request served billed its cost", status, len(served))


def test_a_settle_that_fails_after_the_request_ran_is_logged_and_counted(caplog):
    """Issue #50: a settle that raised in the success hook was logged by LiteLLM and
    ignored: a free request nobody saw. Now it is an ERROR on `holon_litellm` naming the
    mandate, and counted."""
    import asyncio
    import logging

    from holon_litellm import HolonBudget

    budget = HolonBudget(documents=str(h2h.DOCS), models={"gpt-4o-mini": "openai/gpt-4o-mini"})
    data = {"model": "gpt-4o-mini", "user": "team/small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}
    data = asyncio.run(budget.async_pre_call_hook(None, None, data, "completion"))
    assert budget.open_reservations() == 1
    reservation = budget._open[data["metadata"]["holon_request"]]["reservation"]
    reservation.release()  # ended behind the callback's back
    kwargs = {"litellm_params": {"metadata": data["metadata"]}, "response_cost": 0.0005}
    with caplog.at_level(logging.ERROR, logger="holon_litellm"):
        asyncio.run(budget.async_log_success_event(kwargs, None, None, None))
    assert budget.settle_failures == 1 and budget.open_reservations() == 0
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and r.name == "holon_litellm"]
    assert len(errors) == 1 and "team/small" in errors[0].getMessage(), [r.getMessage() for r in caplog.records]


def test_a_failed_attempt_that_litellm_retries_leaves_the_reservation_for_the_retry():
    """The review of issue #50: LiteLLM calls the failure event for every failed attempt,
    before it retries; the callback released the reservation there, so a retry that then
    succeeded was served unbilled. Now only the end of the whole request ends it."""
    import asyncio

    from holon_litellm import HolonBudget

    budget = HolonBudget(documents=str(h2h.DOCS), models={"gpt-4o-mini": "openai/gpt-4o-mini"})
    data = {"model": "gpt-4o-mini", "user": "team/small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}
    data = asyncio.run(budget.async_pre_call_hook(None, None, data, "completion"))
    kwargs = {"litellm_params": {"metadata": data["metadata"]}, "response_cost": 0.0001}
    asyncio.run(budget.async_log_failure_event(kwargs, None, None, None))
    assert budget.open_reservations() == 1, "a failed attempt ends nothing"
    asyncio.run(budget.async_log_success_event({**kwargs, "response_cost": 0.0005}, None, None, None))
    assert budget.open_reservations() == 0 and budget.settle_failures == 0
    assert budget.engine.spend("team/small").spent == Decimal("0.0006"), "the retry and the failed attempt billed"
    # A request whose every attempt failed: what they cost, once the proxy gives up.
    data = asyncio.run(budget.async_pre_call_hook(None, None, dict(data, metadata={}), "completion"))
    asyncio.run(budget.async_log_failure_event({"litellm_params": {"metadata": data["metadata"]}, "response_cost": 0.0002}, None, None, None))
    asyncio.run(budget.async_post_call_failure_hook(data, RuntimeError("upstream"), None))
    assert budget.open_reservations() == 0
    assert budget.engine.spend("team/small").spent == Decimal("0.0008")
