#!/usr/bin/env python3
"""holon against LiteLLM's own budget, on a real LiteLLM proxy on loopback.

Each configuration starts `litellm --config …` (mocked model responses: no network), sends
CLIENTS concurrent clients x REQUESTS requests on one small budget (end user `team/small`,
BUDGET USD), and reports what was spent (the successful requests times their cost, which
LiteLLM prices at COST_USD for the mocked usage) against the budget: the overspend, to the
cent. Then the added latency per request (median, p99) against a proxy with no budget at
all, measured in the same run.

  - litellm: LiteLLM's own proxy budget without a database (`litellm_settings.max_budget`),
    1 and WORKERS workers. As measured it stops nothing: the proxy reads it only with a
    Prisma client (PostgreSQL through Prisma's engines, which Prisma downloads at run time
    from outside the package registries), and the SDK's counter grows only for results
    that are dicts with "content" (docs/litellm.md has the lines);
  - check_then_increment: the design LiteLLM's end-user and session budgets use, with its
    own callback interface and error: check the running cost before the call, add the
    response's cost after it, per worker;
  - holon: the holon_litellm callback, the budget in holon's mandate on one SQLite ledger
    store shared by every worker, 1 and WORKERS workers.

  python3 benches/litellm_head_to_head.py [--clients 16] [--requests 8] [--workers 2]

Needs `holon` (bindings/python) and `litellm[proxy]` importable; `.ci/python` sets up both.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from decimal import Decimal
from typing import Optional

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "bindings" / "python" / "tests" / "litellm" / "docs"
BUDGET = Decimal("0.010")
# The mocked response's usage (10 prompt, 20 completion tokens) at the config's prices.
COST_USD = Decimal("0.0005")
MODEL = """\
model_list:
  - model_name: gpt-4o-mini
    litellm_params:
      model: openai/gpt-4o-mini
      api_key: sk-mock
      mock_response: "hello from the mock"
      input_cost_per_token: 0.00001
      output_cost_per_token: 0.00002
general_settings:
  master_key: sk-master
"""
CALLBACK = """\
import os
from holon_litellm import HolonBudget
budget = HolonBudget(
    documents=os.environ["HOLON_DOCUMENTS"],
    store=os.environ["HOLON_STORE"],
    models={"gpt-4o-mini": "openai/gpt-4o-mini"},
    mandate_from="end_user",
)
"""


# LiteLLM's budget design where it works without a database (its end-user and session
# budgets): check the running cost before the call, add the response's cost after it (in
# the success callback), per worker process. Reproduced with LiteLLM's own callback
# interface and error type.
CHECK_THEN_INCREMENT = """\
from litellm import BudgetExceededError
from litellm.integrations.custom_logger import CustomLogger

MAX_BUDGET = %(budget)s


class CheckThenIncrement(CustomLogger):
    def __init__(self):
        self.spent = {}
        super().__init__()

    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        user = data.get("user")
        if self.spent.get(user, 0.0) >= MAX_BUDGET:
            raise BudgetExceededError(current_cost=self.spent[user], max_budget=MAX_BUDGET)
        return data

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        user = (kwargs.get("litellm_params") or {}).get("proxy_server_request", {}).get("body", {}).get("user")
        user = user or kwargs.get("user")
        self.spent[user] = self.spent.get(user, 0.0) + float(kwargs.get("response_cost") or 0.0)


budget = CheckThenIncrement()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """One `litellm` proxy process with a config of its own."""

    def __init__(self, kind: str, workers: int, work: pathlib.Path, docs: pathlib.Path = DOCS):
        self.dir = work / f"{kind}-{workers}"
        self.dir.mkdir(parents=True)
        config = MODEL
        if kind == "litellm":
            config += f"litellm_settings:\n  max_budget: {BUDGET}\n"
        elif kind == "check_then_increment":
            config += "litellm_settings:\n  callbacks: holon_callbacks.budget\n"
            (self.dir / "holon_callbacks.py").write_text(CHECK_THEN_INCREMENT % {"budget": float(BUDGET)})
        elif kind == "holon":
            config += "litellm_settings:\n  callbacks: holon_callbacks.budget\n"
            (self.dir / "holon_callbacks.py").write_text(CALLBACK)
        (self.dir / "config.yaml").write_text(config)
        self.port = free_port()
        env = dict(
            os.environ,
            HOLON_DOCUMENTS=str(docs),
            HOLON_STORE=f"sqlite:{self.dir / 'ledger.db'}",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            PYTHONPATH=os.pathsep.join([str(self.dir), *sys.path]),
        )
        litellm = pathlib.Path(sys.executable).with_name("litellm")
        command = [str(litellm), "--config", "config.yaml", "--port", str(self.port), "--num_workers", str(workers)]
        self.log = open(self.dir / "proxy.log", "w")
        self.process = subprocess.Popen(command, cwd=self.dir, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.wait_ready()

    def wait_ready(self, limit_s: float = 120.0) -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the proxy exited: {(self.dir / 'proxy.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health/liveliness", timeout=2):
                    return
            except OSError:
                time.sleep(0.25)
        raise RuntimeError(f"the proxy did not answer within {limit_s} s")

    def ask(self, user: str = "team/small", headers: Optional[dict] = None) -> tuple[int, float, dict]:
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50, "user": user}
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Authorization": "Bearer sk-master", "Content-Type": "application/json", **(headers or {})},
        )
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, payload = answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            status, payload = e.code, json.loads(e.read() or b"{}")
        return status, time.perf_counter() - start, payload

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def burst(proxy: Proxy, clients: int, requests: int) -> dict:
    """CLIENTS threads at once, REQUESTS each: what passed, what was refused and how."""
    results: list[tuple[int, float, dict]] = []
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client() -> None:
        start.wait()
        for _ in range(requests):
            outcome = proxy.ask()
            with lock:
                results.append(outcome)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = sum(1 for status, _, _ in results if status == 200)
    refused = [p.get("error", {}).get("type") for status, _, p in results if status != 200]
    spent = COST_USD * ok
    return {
        "ok": ok,
        "refused": len(refused),
        "refusal_types": sorted(set(map(str, refused))),
        "spent": spent,
        "overspend": max(Decimal(0), spent - BUDGET),
    }


def latency(proxy: Proxy, samples: int) -> tuple[float, float]:
    """Median and p99 of one client's sequential requests, in ms."""
    times = sorted(proxy.ask()[1] * 1000 for _ in range(samples))
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


KINDS = ("litellm", "check_then_increment", "holon")


def run(clients: int, requests: int, workers: int, samples: int, kinds: tuple = KINDS) -> dict:
    report = {"clients": clients, "requests": requests, "budget": str(BUDGET), "cost": str(COST_USD), "runs": []}
    with tempfile.TemporaryDirectory() as work:
        for kind in kinds:
            for n in sorted({1, workers}):
                proxy = Proxy(kind, n, pathlib.Path(work))
                try:
                    figures = burst(proxy, clients, requests)
                finally:
                    proxy.stop()
                figures.update(kind=kind, workers=n)
                if kind == "holon":
                    import holon

                    status = holon.Store(f"sqlite:{proxy.dir / 'ledger.db'}").status("team/small")
                    figures["store"] = {k: str(v) for k, v in status.items() if k != "nodes"}
                report["runs"].append(figures)
        if samples:
            big = pathlib.Path(work) / "latency-docs"
            big.mkdir()
            for f in DOCS.iterdir():
                text = f.read_text().replace('total: "0.010"', 'total: "100000.00"')
                (big / f.name).write_text(text)
            timings = {}
            for kind in ("none", "holon"):
                proxy = Proxy(kind, 1, pathlib.Path(work) / "latency", docs=big)
                try:
                    latency(proxy, 20)  # warm up
                    timings[kind] = latency(proxy, samples)
                finally:
                    proxy.stop()
            report["latency_ms"] = {k: {"median": round(v[0], 3), "p99": round(v[1], 3)} for k, v in timings.items()}
            report["added_ms"] = {
                "median": round(timings["holon"][0] - timings["none"][0], 3),
                "p99": round(timings["holon"][1] - timings["none"][1], 3),
            }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--samples", type=int, default=200, help="sequential requests for the latency figures (0: none)")
    args = parser.parse_args()
    report = run(args.clients, args.requests, args.workers, args.samples)
    for r in report["runs"]:
        print(
            f"{r['kind']:20} workers={r['workers']}: {r['ok']:4} ok, {r['refused']:4} refused {r['refusal_types']}, "
            f"spent {r['spent']} of {report['budget']} USD, overspend {r['overspend']} USD"
        )
    if "latency_ms" in report:
        print(f"latency ms (one client, sequential): {report['latency_ms']}; added by holon: {report['added_ms']}")
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
