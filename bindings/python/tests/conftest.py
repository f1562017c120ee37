"""Documents for the tests: the bundled examples, and a small hot mandate."""

import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"

HOT_MANDATE = """\
holon_mandate: "0.1"
id: test/hot
parent: null
issuer: tester
grantee: tester/gateway
valid: { from: "2026-01-01T00:00:00Z", until: "2099-12-31T23:59:59Z" }
budget: { currency: EUR, total: "%(total)s" }
allow: { agents: ["holon-labs/fx-convert"] }
"""


def hot_documents(directory: pathlib.Path, total: str = "0.050") -> pathlib.Path:
    """holon-labs/fx-convert (0.001 EUR a call) and `test/hot`, a mandate of `total` EUR."""
    docs = directory / "docs"
    shutil.copytree(EXAMPLES / "agents" / "fx-convert", docs / "fx-convert")
    (docs / "hot.yaml").write_text(HOT_MANDATE % {"total": total})
    return docs


@pytest.fixture
def examples() -> pathlib.Path:
    return EXAMPLES


@pytest.fixture
def hot(tmp_path: pathlib.Path) -> pathlib.Path:
    return hot_documents(tmp_path)


def pytest_report_header(config):
    return f"holon documents: {EXAMPLES} (pid {os.getpid()})"
