"""Many threads, a released GIL, and processes sharing a store (one killed with SIGKILL)."""

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
from decimal import Decimal

import holon
from conftest import hot_documents

THREADS = 8
CALLS_PER_THREAD = 400


def test_eight_threads_on_one_hot_mandate_never_overrun(hot):
    engine = holon.Engine.from_documents(str(hot))
    allowed, denied = [], []
    start = threading.Barrier(THREADS)

    def hammer():
        start.wait()
        mine_allowed = mine_denied = 0
        for _ in range(CALLS_PER_THREAD):
            d = engine.admit("test/hot", "holon-labs/fx-convert")
            if d.allowed:
                mine_allowed += 1
                d.reservation.settle("0.001")
            else:
                assert d.codes == ["total_exceeded"], d.codes
                mine_denied += 1
        allowed.append(mine_allowed)
        denied.append(mine_denied)

    threads = [threading.Thread(target=hammer) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 0.050 EUR at 0.001 a call: exactly 50 calls, whatever the interleaving.
    assert sum(allowed) == 50 and sum(denied) == THREADS * CALLS_PER_THREAD - 50
    spend = engine.spend("test/hot")
    assert spend.spent == spend.total == Decimal("0.050")
    assert engine.stats()[0] == 0


GIL_PROBE = """
import socket, threading, holon
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(4)  # the kernel completes the handshake; nobody ever answers
port = listener.getsockname()[1]
returned = threading.Event()
outcome = []

def open_the_store():
    try:
        outcome.append(holon.Store(f"postgres://holon@127.0.0.1:{port}/holon"))
    except holon.StoreError as e:
        outcome.append(e)
    returned.set()

t = threading.Thread(target=open_the_store, daemon=True)
t.start()
threading.Event().wait(0.3)  # the call is waiting for the server now (or soon)
ran_meanwhile = not returned.is_set()
listener.close()  # the server goes away: the call fails at once
t.join()
print("ran-while-waiting" if ran_meanwhile else "ran-after", type(outcome[0]).__name__, flush=True)
"""


def test_a_blocking_engine_call_releases_the_gil():
    """A store that accepts the connection and never answers keeps the engine call waiting
    (up to the store's CONNECT_TIMEOUT_S, 5 s); while it waits, another thread must run and
    end it at once by closing the listener. Were the GIL held, the main thread would come
    back from its 0.3 s sleep only after the call gave up: "ran-after". The probe runs in a
    process of its own, killed after a minute whatever happens."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    try:
        probe = subprocess.run(
            [sys.executable, "-c", GIL_PROBE], capture_output=True, text=True, timeout=60, env=env
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("the engine call held the GIL: the thread that would end it never ran") from None
    assert probe.stdout.split() == ["ran-while-waiting", "StoreError"], (probe.stdout, probe.stderr)


WORKER = """
import sys, holon
engine = holon.Engine.from_documents(sys.argv[1], store=sys.argv[2], node=sys.argv[3])
print("ready", flush=True)
kept = 0
while True:
    d = engine.admit("test/hot", "holon-labs/fx-convert")
    if d.allowed:
        kept += 1
        d.reservation.settle("0.001")
        print("kept", kept, flush=True)
    elif d.codes != ["lease_pending"]:
        print("stop", ",".join(d.codes), flush=True)
        break
engine.flush()
print("done", kept, flush=True)
"""


def test_two_processes_share_a_sqlite_store_and_a_killed_one_loses_nothing(tmp_path):
    docs = hot_documents(tmp_path, total="0.200")
    url = f"sqlite:{tmp_path / 'store.db'}"
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def worker(name):
        return subprocess.Popen(
            [sys.executable, str(script), str(docs), url, name], stdout=subprocess.PIPE, text=True, env=env
        )

    victim, survivor = worker("victim"), worker("survivor")
    assert victim.stdout.readline().strip() == "ready"
    victim_kept = 0
    for line in victim.stdout:
        victim_kept = int(line.split()[1]) if line.startswith("kept") else victim_kept
        if victim_kept >= 20:
            break
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    lines = survivor.communicate(timeout=120)[0].split("\n")
    assert survivor.returncode == 0, lines
    done = [l for l in lines if l.startswith("done")]
    survivor_kept = int(done[0].split()[1])
    store = holon.Store(url)
    status = store.status("test/hot")
    total = Decimal("0.200")
    assert status["spent"] + status["leased"] <= total, status
    assert set(status["nodes"]) <= {"victim"}, "the survivor closed its leases"
    leased = status["leased"]
    counted = store.reconcile("victim")
    after = store.status("test/hot")
    assert counted == leased and after["leased"] == 0
    assert after["spent"] == status["spent"] + leased, "reconcile counts the killed node's leases exactly"
    assert after["spent"] <= total
    assert after["spent"] >= Decimal("0.001") * (survivor_kept + victim_kept), "no acknowledged spend lost"
