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
LITELLM_DOCS = ROOT / "bindings" / "python" / "tests" / "litellm" / "docs"


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
        # A sentence's reading of the clock, as the Rust runner says it.
        return re.sub(r"it is now \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "it is now <now>", text)


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


def documents(scenario, tmp):
    """A copy of the scenario's documents with its edits."""
    docs = tmp / "docs"
    shutil.copytree(LITELLM_DOCS if scenario.get("documents") == "litellm" else ROOT / "examples", docs)
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
    return docs


class Python:
    def __init__(self, scenario, tmp):
        docs = documents(scenario, tmp)
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
        if op == "request":
            # What a proxy does for one request: the admit, then its settle at the cost.
            name = step["as"]
            answer = self.op("admit", args, step, names)
            if answer.get("decision") == "allowed":
                settled = self.op("settle", {"reservation": name, "actual": args["cost"], "outcome": "success"}, {}, names)
                answer["kept"] = settled["kept"]
            return answer
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
        if op == "request" and not step.get("as"):
            step = {**step, "as": f"request-{n + 1}"}
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


def refusal(message):
    """The plug-in's refusal (`holon denied the request under mandate M: code: sentence;
    code: sentence`) as a normalized denial."""
    head, _, rest = message.partition(": ")
    words = head.split()
    parts = re.split(r"; (?=[a-z_]+: )", rest)
    codes = [p.partition(": ")[0] for p in parts]
    reasons = [Names().in_text(p.partition(": ")[2]) for p in parts]
    return {"decision": words[1] if len(words) > 1 else None, "codes": codes, "reasons": reasons}


LITELLM_FIELDS = ("decision", "codes", "reasons")


@pytest.mark.parametrize(
    "file,scenario",
    [(f, s) for f, s in scenarios() if s.get("documents") == "litellm"],
    ids=lambda v: v if isinstance(v, str) else slug(v["name"]),
)
def test_a_request_through_a_real_litellm_proxy_gets_the_librarys_decision(file, scenario, tmp_path):
    """The scenarios on the plug-in's documents through a real LiteLLM proxy with the
    `holon_litellm` callback (mocked responses, loopback): each request's decision, codes
    and sentences as the library's (what a client sees; the settle happens in the proxy's
    callback, and the store's figures are the other tests' to check)."""
    import importlib.util
    import sys

    if importlib.util.find_spec("litellm") is None:
        pytest.skip("LiteLLM is not installed here (pip install 'litellm[proxy]'): the proxy cannot run")
    sys.path.insert(0, str(ROOT / "benches"))
    import litellm_head_to_head as h2h

    transcript = TRANSCRIPTS / f"{slug(scenario['name'])}.json"
    if not transcript.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{transcript} is missing: `cargo test --test conformance` writes it (CI runs it first)")
        pytest.skip(f"{transcript} is missing: run `cargo test --test conformance` first")
    library = json.loads(transcript.read_text())["answers"]
    proxy = h2h.Proxy("holon", 1, tmp_path / "work", docs=documents(scenario, tmp_path))
    differences, asked = [], 0
    try:
        for n, step in enumerate(scenario["steps"]):
            op, args = operation(step)
            if op != "request":
                continue
            assert args["agent"] == "openai/gpt-4o-mini", "the proxy's one model"
            status, _, payload = proxy.ask(user=args["mandate"])
            asked += 1
            answer = {"decision": "allowed"} if status == 200 else refusal(payload.get("error", {}).get("message", ""))
            for key in LITELLM_FIELDS:
                want = library[n].get(key)
                if key in answer and answer[key] != want and not (key != "decision" and status == 200):
                    differences.append(f"step {n + 1}: `{key}` differs: library {want!r}, litellm {answer[key]!r}")
    finally:
        proxy.stop()
    assert asked >= 1
    assert not differences, f"{file} / {scenario['name']}:\n" + "\n".join(differences)


def test_the_suite_has_its_scenarios():
    found = scenarios()
    proxied = sum(1 for _, s in found if s.get("documents") == "litellm")
    summary = f"conformance: {len(found)} scenarios through python, {proxied} of them through a real LiteLLM proxy too\n"
    print(summary)
    # .ci/python prints it after pytest.
    TRANSCRIPTS.mkdir(parents=True, exist_ok=True)
    (TRANSCRIPTS / "python-summary.txt").write_text(summary)
    assert len(found) >= 40
