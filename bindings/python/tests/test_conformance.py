"""The gateway conformance suite through the Python package (testdata/conformance/README.md):
every scenario of ``testdata/conformance/*.yaml`` run in process on a SQLite store, each
step's answer normalized as the Rust runner normalizes the library's, the sidecar's and
Envoy's, checked against the scenario's expectations and compared field by field with the
library's transcript (``target/conformance/``, written by ``cargo test --test conformance``;
CI runs it first, and there a missing transcript fails)."""

import json
import os
import pathlib
import re
import shutil

import pytest
import yaml

import holon

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "testdata" / "conformance"
TRANSCRIPTS = ROOT / "target" / "conformance"


def scenarios():
    out = []
    for path in sorted(SCENARIOS.glob("*.yaml")):
        for s in yaml.safe_load(path.read_text()):
            out.append((path.name, s))
    return out


def slug(name: str) -> str:
    return "".join(c.lower() if c.isascii() and c.isalnum() else "-" for c in name)


class Names:
    """Ids the engine gave, by the step names they were given under (and back)."""

    def __init__(self):
        self.by_id, self.by_name = {}, {}

    def name_of(self, ident, fresh):
        ident = str(ident)
        if ident not in self.by_id:
            name = fresh or ident
            self.by_id[ident] = name
            self.by_name.setdefault(name, ident)
        return self.by_id[ident]

    def id(self, name):
        return self.by_name.get(name, f"never-given-{name}")

    def in_text(self, text):
        for ident, name in self.by_id.items():
            text = text.replace(f"`{ident}`", f"`{name}`")
        return text


ERRORS = (
    (holon.UnknownNameError, "not_found"),
    (holon.ReservationEndedError, "conflict"),
    (holon.PendingError, "forbidden"),
    (holon.IdempotencyConflictError, "unprocessable"),
    (ValueError, "bad_request"),
)


def error_of(e):
    for kind, word in ERRORS:
        if isinstance(e, kind):
            return {"error": word}
    raise e


class Python:
    def __init__(self, scenario, tmp):
        docs = tmp / "docs"
        shutil.copytree(ROOT / "examples", docs)
        for file, replacements in (scenario.get("edit") or {}).items():
            if file == "drop":
                for f in replacements:
                    (docs / f).unlink()
                continue
            text = (docs / file).read_text()
            for a, b in replacements.items():
                assert a in text, (file, a)
                text = text.replace(a, b)
            (docs / file).write_text(text)
        self.engine = holon.Engine.from_documents(str(docs), store=f"sqlite:{tmp / 'ledger.db'}", node="python")
        self.open = {}

    def decision(self, d, step, names):
        out = {
            "decision": d.decision,
            "codes": list(d.codes),
            "reasons": [names.in_text(r.message) for r in d.reasons],
        }
        if d.codes != ["replay_reservation_ended"]:
            out["worst_case"] = str(d.worst_case)
            if d.currency is not None:
                out["currency"] = d.currency
        if d.reservation is not None:
            name = names.name_of(d.reservation.id, step.get("as"))
            out["reservation"] = name
            self.open.setdefault(name, d.reservation)
        if d.pending is not None:
            out["pending"] = names.name_of(d.pending, step.get("as"))
        return out

    def step(self, op, args, step, names):
        try:
            return self.op(op, args, step, names)
        except holon.HolonError as e:
            return error_of(e)
        except ValueError as e:
            return error_of(e)

    def op(self, op, args, step, names):
        e = self.engine
        if op == "admit":
            d = e.admit(args["mandate"], args["agent"], max_cost=args.get("max_cost"),
                        capability=args.get("capability"), idempotency_key=args.get("key"))
            return self.decision(d, step, names)
        if op == "approve":
            by = args["by"] if args.get("form") == "name" else f"account:{args['by']}"
            return self.decision(e.approve(names.id(args["pending"]), by), step, names)
        if op == "refuse":
            return {"refused": e.refuse(names.id(args["pending"]), approver=f"account:{args['by']}")}
        if op == "settle":
            s = self.open[args["reservation"]].settle(args["actual"], outcome=args.get("outcome"),
                                                      latency_ms=args.get("latency_ms"))
            return {"kept": str(s.kept), "billed": str(s.billed), "worst_case": str(s.worst_case), "clamped": s.clamped}
        if op == "release":
            self.open[args["reservation"]].release()
            return {"released": True}
        if op == "sub_call":
            d = self.open[args["reservation"]].sub_call(agent=args.get("agent"), capability=args.get("capability"),
                                                        max_cost=args.get("max_cost"))
            return self.decision(d, step, names)
        if op == "spend":
            s = e.spend(args)
            return {"spent": str(s.spent), "today": str(s.today)}
        if op == "flush":
            e.flush()
            return {"flushed": True}
        raise AssertionError(f"no step {op}")


def allowed_difference(library):
    """The README's table, for Python: an unknown name raises (error: not_found)."""
    return library.get("codes") in (["unknown_mandate"], ["unknown_agent"])


def operation(step):
    (op,) = [k for k in step if k not in ("as", "expect")]
    return op, step[op]


@pytest.mark.parametrize("file,scenario", scenarios(), ids=lambda v: v if isinstance(v, str) else slug(v["name"]))
def test_a_scenario_gives_the_librarys_answers_through_python(file, scenario, tmp_path):
    surface = Python(scenario, tmp_path)
    names = Names()
    transcript = TRANSCRIPTS / f"{slug(scenario['name'])}.json"
    library = json.loads(transcript.read_text())["answers"] if transcript.exists() else None
    if library is None and os.environ.get("CI"):
        pytest.fail(f"{transcript} is missing: `cargo test --test conformance` writes it (CI runs it first)")
    differences = []
    for n, step in enumerate(scenario["steps"]):
        op, args = operation(step)
        answer = surface.step(op, args, step, names)
        lib = library[n] if library is not None else None
        if lib is not None and allowed_difference(lib):
            assert answer == {"error": "not_found"}, (n, answer)
            continue
        for key, want in (step.get("expect") or {}).items():
            if answer.get(key) != want:
                differences.append(f"step {n + 1} ({op}): `{key}` is {answer.get(key)!r}, expected {want!r}: {answer}")
        if lib is not None:
            for key in sorted(set(lib) | set(answer)):
                if lib.get(key) != answer.get(key):
                    differences.append(f"step {n + 1} ({op}): `{key}` differs: library {lib.get(key)!r}, python {answer.get(key)!r}")
    assert not differences, f"{file} / {scenario['name']}:\n" + "\n".join(differences)


def test_the_suite_has_its_scenarios():
    found = scenarios()
    print(f"conformance: {len(found)} scenarios through python")
    assert len(found) >= 40
