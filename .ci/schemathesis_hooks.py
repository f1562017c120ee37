"""Schemathesis hooks for .ci/schemathesis (loaded through SCHEMATHESIS_HOOKS).

The stateful phase follows the document's links from an admit's answer (settle, release,
sub-call, approve), but a generated admit names a mandate and an agent this server does
not hold, so on its own it is denied and no link is ever followed ("API Links: 0
covered"). In that phase only, and only for a request generated to fit the document, a
positive admit is pointed at a mandate and agent of the bundled examples, with no `at`
(the server's clock) and no capability: the call is allowed or held, and the links run
with the ids the server really wrote. Every other phase, and every negative case, is
sent as schemathesis generated it.
"""
import schemathesis
from schemathesis.generation.meta import TestPhase
from schemathesis.generation.modes import GenerationMode

MANDATE = "alice/m-2026-11"
AGENT = "acme/table-extract"


@schemathesis.hook
def before_call(ctx, case, kwargs):
    meta = case.meta
    if meta is None or meta.phase.name != TestPhase.STATEFUL:
        return
    if meta.generation.mode != GenerationMode.POSITIVE:
        return
    if case.operation.method.upper() != "POST" or case.operation.path != "/v1/admit":
        return
    if not isinstance(case.body, dict):
        return
    case.body["mandate"] = MANDATE
    case.body["agent"] = AGENT
    case.body["at"] = None
    case.body["capability"] = None
