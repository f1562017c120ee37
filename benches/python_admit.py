#!/usr/bin/env python3
"""What a decision costs a Python gateway: in process (the `holon` package) against the
sidecar (`holon serve` over HTTP on loopback, one kept-alive connection), in one run.

  - in process: admit + settle of an allowed call, timed in batches of BATCH round trips,
    ROUNDS batches: the median per round trip;
  - threads: the same loop on 1 thread and on 2 threads (each its own mandate), calls per
    second over the whole run: above 1.0x only because every engine call releases the GIL;
  - sidecar: POST /v1/admit then POST /v1/reservations/{id}/settle from Python's
    http.client, the median per round trip.

  python3 benches/python_admit.py [--holon target/release/holon]

Needs `holon` importable (bindings/python) and a built `holon` binary for the sidecar.
"""

from __future__ import annotations

import argparse
import http.client
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import holon

ROOT = pathlib.Path(__file__).resolve().parents[1]
BATCH = 2_000
ROUNDS = 15
MANDATE = """\
holon_mandate: "0.1"
id: bench/%(name)s
parent: null
issuer: bench
grantee: bench/gateway
valid: { from: "2026-01-01T00:00:00Z", until: "2099-12-31T23:59:59Z" }
budget: { currency: EUR, total: "1000000.00" }
allow: { agents: ["holon-labs/fx-convert"] }
"""


def documents(work: pathlib.Path) -> pathlib.Path:
    docs = work / "docs"
    shutil.copytree(ROOT / "examples" / "agents" / "fx-convert", docs / "fx-convert")
    for name in ("a", "b"):
        (docs / f"{name}.yaml").write_text(MANDATE % {"name": name})
    return docs


def in_process(engine: holon.Engine) -> float:
    """Median ns per admit + settle."""
    per_call = []
    for _ in range(ROUNDS):
        start = time.perf_counter_ns()
        for _ in range(BATCH):
            engine.admit("bench/a", "holon-labs/fx-convert").reservation.settle("0.001")
        per_call.append((time.perf_counter_ns() - start) / BATCH)
    return statistics.median(per_call)


def throughput(engine: holon.Engine, threads: int, calls: int) -> float:
    """Round trips per second with `threads` threads, each on its own mandate."""
    start = threading.Barrier(threads + 1)

    def loop(mandate: str) -> None:
        start.wait()
        for _ in range(calls):
            engine.admit(mandate, "holon-labs/fx-convert").reservation.settle("0.001")

    workers = [threading.Thread(target=loop, args=(f"bench/{'ab'[i % 2]}",)) for i in range(threads)]
    for w in workers:
        w.start()
    began = time.perf_counter()
    start.wait()
    for w in workers:
        w.join()
    return threads * calls / (time.perf_counter() - began)


def sidecar(binary: str, docs: pathlib.Path, work: pathlib.Path) -> float:
    """Median ns per admit + settle over HTTP."""
    tokens = work / "tokens"
    token = subprocess.run(
        [binary, "token", "new", "--role", "gateway", "--tokens", str(tokens)], capture_output=True, text=True, check=True
    ).stdout.strip().splitlines()[-1]
    server = subprocess.Popen(
        [binary, "serve", "--documents", str(docs), "--listen", "127.0.0.1:0", "--store", "memory",
         "--tokens", str(tokens), "--grace-s", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        line = server.stdout.readline()
        port = int(line.rsplit(":", 1)[1].split()[0])
        conn = http.client.HTTPConnection("127.0.0.1", port)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        admit = json.dumps({"mandate": "bench/a", "agent": "holon-labs/fx-convert"})
        settle = json.dumps({"actual": "0.001"})

        def round_trip() -> None:
            conn.request("POST", "/v1/admit", admit, headers)
            reservation = json.loads(conn.getresponse().read())["reservation"]
            conn.request("POST", f"/v1/reservations/{reservation}/settle", settle, headers)
            conn.getresponse().read()

        per_call = []
        batch = BATCH // 10
        for _ in range(ROUNDS):
            start = time.perf_counter_ns()
            for _ in range(batch):
                round_trip()
            per_call.append((time.perf_counter_ns() - start) / batch)
        return statistics.median(per_call)
    finally:
        server.terminate()
        server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--holon", default=str(ROOT / "target" / "release" / "holon"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        docs = documents(work)
        engine = holon.Engine.from_documents(str(docs))
        in_process(engine)  # warm up
        ns = in_process(engine)
        calls = BATCH * 5
        one = throughput(engine, 1, calls)
        two = throughput(engine, 2, calls)
        http_ns = sidecar(args.holon, docs, work) if pathlib.Path(args.holon).exists() else None
    print(f"in process, admit + settle from Python: median {ns / 1000:.2f} us per round trip")
    print(f"threads: 1 thread {one:,.0f}/s, 2 threads {two:,.0f}/s: {two / one:.2f}x")
    if http_ns is not None:
        print(f"sidecar over HTTP from Python (http.client): median {http_ns / 1000:.1f} us per round trip, "
              f"{http_ns / ns:.0f}x in process")
    else:
        print(f"sidecar: no binary at {args.holon} (cargo build --release --bin holon)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
