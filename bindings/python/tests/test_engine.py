"""Every public function of `holon`, on the bundled examples."""

import gc
from decimal import Decimal

import pytest

import holon

ROOT_MANDATE = "alice/m-2026-11"


@pytest.fixture
def engine(examples):
    return holon.Engine.from_documents(str(examples))


def test_an_allowed_call_reserves_its_worst_case_and_settles_exactly(engine):
    before = engine.spend(ROOT_MANDATE).spent
    d = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert")
    assert d.decision == "allowed" and d.allowed and bool(d)
    assert d.codes == [] and d.reasons == [] and d.pending is None
    assert d.worst_case == Decimal("0.001") and isinstance(d.worst_case, Decimal)
    assert d.currency == "EUR" and d.agent == "holon-labs/fx-convert"
    r = d.reservation
    assert r.active and r.worst_case == Decimal("0.001") and not r.delegated
    assert engine.spend(ROOT_MANDATE).spent == before + Decimal("0.001"), "the worst case is reserved"
    s = r.settle(Decimal("0.0004"), outcome="success", latency_ms=12)
    assert (s.kept, s.billed, s.actual, s.worst_case) == (Decimal("0.0004"),) * 3 + (Decimal("0.001"),)
    assert not s.clamped and not s.late and s.reservation == r.id
    assert not r.active
    assert engine.spend(ROOT_MANDATE).spent == before + Decimal("0.0004")


def test_a_bill_above_the_worst_case_is_kept_at_the_worst_case_and_flagged(engine):
    r = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert").reservation
    s = r.settle("5.00")
    assert s.clamped and s.kept == Decimal("0.001") and s.billed == Decimal("0.001"), "no bill above the reservation"
    assert s.actual == Decimal("5.00")


def test_a_denial_gives_every_code_with_the_engines_sentence(engine):
    d = engine.admit(ROOT_MANDATE, "shady/invoice-scraper")
    assert d.decision == "denied" and not d and d.reservation is None
    assert "agent_denied" in d.codes and len(d.codes) == len(d.reasons) > 3
    first = d.reasons[0]
    assert first.code == "agent_denied" and "matches deny pattern `shady/*`" in first.message
    over = engine.admit(ROOT_MANDATE, "holon-labs/invoice-pipeline")
    assert over.codes == ["per_call_exceeded"] and over.worst_case == Decimal("3.10")
    assert "3.10 EUR" in over.reasons[0].message


def test_a_held_call_is_approved_by_its_issuer_only(engine):
    d = engine.admit(ROOT_MANDATE, "holon-labs/invoice-pipeline", max_cost="1.00")
    assert d.decision == "held" and d.codes == ["approval_required"] and d.pending
    assert "the issuer alice must approve" in d.reasons[0].message
    with pytest.raises(holon.PendingError, match="did not issue"):
        engine.approve(d.pending, "bob")
    with pytest.raises(holon.PendingError, match="did not issue"):
        engine.approve(d.pending, "account:bob")
    with pytest.raises(ValueError, match="is not an account"):
        engine.approve(d.pending, "alice/assistant")
    approved = engine.approve(d.pending, "alice")
    assert approved.allowed and approved.reservation.delegated
    assert approved.reservation.sub_budget == Decimal("0.90")
    with pytest.raises(holon.UnknownNameError, match="no held call"):
        engine.approve(d.pending, "alice")
    # The form every message asks for works too (issue #50: it was refused).
    third = engine.admit(ROOT_MANDATE, "holon-labs/invoice-pipeline", max_cost="1.00")
    by_role = engine.approve(third.pending, "account:alice")
    assert by_role.allowed
    by_role.reservation.release()
    again = engine.admit(ROOT_MANDATE, "holon-labs/invoice-pipeline", max_cost="1.00")
    assert engine.refuse(again.pending) is True
    assert engine.refuse(again.pending) is False
    with pytest.raises(holon.UnknownNameError):
        engine.approve(again.pending, "alice")
    approved.reservation.release()


def test_sub_calls_of_a_delegated_run(engine):
    held = engine.admit(ROOT_MANDATE, "holon-labs/invoice-pipeline", max_cost="1.00")
    run = engine.approve(held.pending, "alice").reservation
    sub = run.sub_call(capability="finance.fx")
    assert sub.allowed and sub.agent == "holon-labs/fx-convert"
    assert run.sub_call(agent="acme/table-extract").codes == ["call_not_declared"]
    with pytest.raises(ValueError, match="exactly one"):
        run.sub_call()
    sub.reservation.settle("0.001")
    settled = run.settle("0.10")
    assert settled.passthrough == Decimal("0.001") and settled.kept == Decimal("0.101")
    with pytest.raises(holon.ReservationEndedError):
        run.sub_call(capability="finance.fx")


def test_a_reservation_ends_once(engine):
    r = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert").reservation
    r.release()
    with pytest.raises(holon.ReservationEndedError, match="ends once"):
        r.release()
    with pytest.raises(holon.ReservationEndedError):
        r.settle("0.001")


def test_a_with_block_releases_on_an_exception_and_keeps_a_settle(engine):
    before = engine.spend(ROOT_MANDATE).spent
    with pytest.raises(RuntimeError):
        with engine.admit(ROOT_MANDATE, "holon-labs/fx-convert").reservation as r:
            assert engine.spend(ROOT_MANDATE).spent == before + Decimal("0.001")
            raise RuntimeError("the call failed")
    assert not r.active and engine.spend(ROOT_MANDATE).spent == before
    with engine.admit(ROOT_MANDATE, "holon-labs/fx-convert").reservation as r:
        r.settle("0.0007")
    assert engine.spend(ROOT_MANDATE).spent == before + Decimal("0.0007")


def test_a_reservation_python_drops_unsettled_is_released(engine):
    before = engine.spend(ROOT_MANDATE).spent
    engine.admit(ROOT_MANDATE, "holon-labs/fx-convert")
    gc.collect()
    assert engine.spend(ROOT_MANDATE).spent == before
    assert engine.stats()[0] == 0, "nothing in flight"


def test_an_open_reservation_outlives_its_engine_object(examples):
    engine = holon.Engine.from_documents(str(examples))
    r = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert").reservation
    del engine
    gc.collect()
    assert r.settle("0.001").kept == Decimal("0.001")


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (0.5, TypeError, "is a float"),
        (1, TypeError, "not int"),
        (True, TypeError, "not bool"),
        (Decimal("NaN"), ValueError, "finite"),
        (Decimal("Infinity"), ValueError, "finite"),
        ("0.1234567", ValueError, "at most 6 decimals"),
        ("-1", ValueError, "decimal string"),
        ("1e3", ValueError, "decimal string"),
        ("", ValueError, "decimal string"),
        ([], TypeError, "not list"),
    ],
)
def test_bad_money_raises_a_clear_error_and_changes_nothing(engine, bad, error, words):
    before = (engine.spend(ROOT_MANDATE).spent, engine.stats())
    with pytest.raises(error, match=words):
        engine.admit(ROOT_MANDATE, "holon-labs/fx-convert", max_cost=bad)
    r = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert").reservation
    with pytest.raises(error, match=words):
        r.settle(bad)
    assert r.active, "a refused settle leaves the reservation open"
    r.release()
    assert (engine.spend(ROOT_MANDATE).spent, engine.stats()) == before


def test_an_exponent_decimal_is_read_exactly(engine):
    d = engine.admit(ROOT_MANDATE, "holon-labs/invoice-pipeline", max_cost=Decimal("1E+0"))
    assert d.worst_case == Decimal("1.00")


def test_unknown_names_and_bad_arguments_raise_and_change_nothing(engine):
    before = (engine.spend(ROOT_MANDATE).spent, engine.stats())
    with pytest.raises(holon.UnknownNameError, match="no mandate `nobody/m`"):
        engine.admit("nobody/m", "holon-labs/fx-convert")
    with pytest.raises(holon.UnknownNameError, match="no agent `acme/nothing`"):
        engine.admit(ROOT_MANDATE, "acme/nothing")
    with pytest.raises(ValueError, match="does not offer capability"):
        engine.admit(ROOT_MANDATE, "holon-labs/fx-convert", capability="legal.review")
    with pytest.raises(TypeError):
        engine.admit(ROOT_MANDATE, 7)
    with pytest.raises(holon.UnknownNameError):
        engine.spend("nobody/m")
    with pytest.raises(ValueError, match="principal"):
        engine.approve("1", "not a principal")
    r = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert").reservation
    with pytest.raises(ValueError, match="outcome"):
        r.settle("0.001", outcome="great")
    with pytest.raises(ValueError, match="latency_ms"):
        r.settle("0.001", latency_ms=10**9)
    with pytest.raises(OverflowError):
        r.settle("0.001", latency_ms=-1)
    r.release()
    assert (engine.spend(ROOT_MANDATE).spent, engine.stats()) == before


def test_documents_that_cannot_load_raise_naming_the_file(tmp_path, examples):
    with pytest.raises(holon.DocumentsError, match="no such directory"):
        holon.Engine.from_documents(str(tmp_path / "nowhere"))
    (tmp_path / "notes.yaml").write_text("hello: world\n")
    with pytest.raises(holon.DocumentsError, match="notes.yaml: not a holon document"):
        holon.Engine.from_documents(str(tmp_path))
    with pytest.raises(ValueError, match="give `store` too"):
        holon.Engine.from_documents(str(examples), node="n1")
    with pytest.raises(holon.StoreError):
        holon.Engine.from_documents(str(examples), store="nonsense:x")


def test_reload_publishes_all_or_nothing(hot):
    engine = holon.Engine.from_documents(str(hot))
    r = engine.admit("test/hot", "holon-labs/fx-convert").reservation
    (hot / "hot.yaml").write_text((hot / "hot.yaml").read_text().replace('"0.050"', '"0.070"'))
    assert engine.reload() == 2
    assert engine.spend("test/hot").total == Decimal("0.070")
    assert engine.spend("test/hot").spent == Decimal("0.001"), "spend survives a reload"
    (hot / "broken.yaml").write_text("holon_mandate: '0.1'\nid: [\n")
    with pytest.raises(holon.DocumentsError, match="broken.yaml"):
        engine.reload()
    assert engine.spend("test/hot").total == Decimal("0.070"), "a failed reload changes nothing"
    r.settle("0.001")


def test_an_idempotency_key_replays_the_first_answer(engine):
    first = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert", idempotency_key="req-1")
    spent = engine.spend(ROOT_MANDATE).spent
    again = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert", idempotency_key="req-1")
    assert again is first and again.reservation is first.reservation
    assert engine.spend(ROOT_MANDATE).spent == spent, "a retry never reserves twice"
    with pytest.raises(holon.IdempotencyConflictError, match="another call"):
        engine.admit(ROOT_MANDATE, "acme/table-extract", idempotency_key="req-1")
    for bad in ("", "k" * 256, "a b", "tab\t"):
        with pytest.raises(ValueError, match="1 to 255 visible ASCII characters"):
            engine.admit(ROOT_MANDATE, "holon-labs/fx-convert", idempotency_key=bad)
    with pytest.raises(holon.UnknownNameError):
        engine.admit("nobody/m", "holon-labs/fx-convert", idempotency_key="req-2")
    assert engine.admit(ROOT_MANDATE, "holon-labs/fx-convert", idempotency_key="req-2").allowed
    first.reservation.settle("0.001")
    assert holon.IDEMPOTENCY_KEYS_MAX == 100_000 and holon.IDEMPOTENCY_KEY_BYTES_MAX == 255
    assert holon.IDEMPOTENCY_KEEP_S == 86_400


def test_a_replay_never_authorises_a_call_whose_reservation_ended(engine):
    """Issue #50: a kept allowed answer was given to every retry of its key, also after its
    reservation was settled. Now a retry after the end is a denial that lets nothing through."""
    first = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert", idempotency_key="once")
    first.reservation.settle("0.001")
    spent = engine.spend(ROOT_MANDATE).spent
    for _ in range(20):
        again = engine.admit(ROOT_MANDATE, "holon-labs/fx-convert", idempotency_key="once")
        assert not again.allowed and again.reservation is None
        assert again.codes == ["replay_reservation_ended"], again.codes
        assert f"reservation `{first.reservation.id}`" in again.reasons[0].message
    assert engine.spend(ROOT_MANDATE).spent == spent, "nothing reserved by the replays"


def test_the_introspection(engine):
    assert ROOT_MANDATE in engine.mandates and "holon-labs/fx-convert" in engine.agents
    assert "5 mandates" in repr(engine)
    spend = engine.spend(ROOT_MANDATE)
    assert spend.currency == "EUR" and spend.total == Decimal("100.00") and spend.per_day == Decimal("20.00")
    assert spend.store_spent is None and spend.store_leased is None
    assert engine.flush() is None
    assert holon.__version__ == "0.1.0"
    private = {"Decimal", "Optional", "Union", "annotations", "asyncio"}
    assert not private & set(dir(holon)), sorted(private & set(dir(holon)))


def test_a_store_backed_engine_flushes_and_keeps_admitting_and_its_spend_is_the_stores(tmp_path):
    """Issue #50: flush() stopped the node (every admit after it waited 2 s and was denied
    lease_pending, for good), and spend() on a store reported ~4.6e12 micro-units (the
    allowance a store-backed ledger withholds). Now flush leaves the node running, and
    spend is what the calls reserved and kept, equal to the store's figure once flushed."""

    from conftest import hot_documents

    docs = hot_documents(tmp_path, total="1.00")
    url = f"sqlite:{tmp_path / 'store.db'}"
    engine = holon.Engine.from_documents(str(docs), store=url, node="py-flush")

    def allowed():
        for _ in range(200):
            d = engine.admit("test/hot", "holon-labs/fx-convert")
            if d.allowed:
                return d
            assert d.codes == ["lease_pending"], d.codes
        raise AssertionError("never allowed")

    for _ in range(3):
        allowed().reservation.settle("0.0004")
    spend = engine.spend("test/hot")
    assert spend.spent == Decimal("0.0012"), spend.spent
    engine.flush()
    after = engine.admit("test/hot", "holon-labs/fx-convert")
    assert after.allowed, (after.codes, "an admit after flush() is allowed at once")
    after.reservation.settle("0.0004")
    engine.flush()
    spend = engine.spend("test/hot")
    assert spend.spent == Decimal("0.0016") and spend.store_spent == Decimal("0.0016"), (spend.spent, spend.store_spent)
    assert holon.Store(url).status("test/hot")["spent"] == Decimal("0.0016")
    # Stopping is another call: then every admit says so at once, never "retry shortly".
    engine.stop()
    stopped = engine.admit("test/hot", "holon-labs/fx-convert")
    assert stopped.codes == ["node_stopped"], stopped.codes
    assert "do not retry" in stopped.reasons[0].message
    with pytest.raises(holon.StoreError, match="stopped"):
        engine.flush()


def test_admit_async(engine):
    import asyncio

    d = asyncio.run(holon.admit_async(engine, ROOT_MANDATE, "holon-labs/fx-convert"))
    assert d.allowed
    d.reservation.settle("0.001")


def test_the_use_example_in_docs_python_md_prints_what_it_says(monkeypatch):
    """Issue #50: docs/python.md said `held.pending` is '1' where running it gave another id.
    Its first example is run as written (from the repository's root); every top-level line
    with a `# (…)`, `# '…'` or `# Decimal(…)` comment must give what the comment starts with.
    (A held call's id is a number of the process, so the example does not print it.)"""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[3]
    monkeypatch.chdir(root)
    block = re.search(r"## Use\n\n```python\n(.*?)```", (root / "docs" / "python.md").read_text(), re.S).group(1)
    checks = []
    program = []
    for line in block.splitlines():
        code, _, comment = line.partition("  #")
        comment = comment.strip()
        if comment[:1] in ("(", "D", "'") and not line.startswith(" "):
            checks.append((code.strip(), comment))
            program.append(f"__seen.append(({code.strip()!r}, repr(({code.strip()}))))")
        else:
            program.append(line)
    seen: list = []
    exec("\n".join(program), {"__seen": seen})  # noqa: S102 - our own documentation
    assert len(seen) == len(checks) >= 3, (seen, checks)
    for (code, given), (_, comment) in zip(seen, checks):
        assert comment.startswith(given), (code, given, comment)
