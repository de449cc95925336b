"""The glue drives MgmtServer through its lifecycle methods only (issue 11): no private
attribute of a fake is reached into from plugin.py, _glue/sweep.py or the standalone server."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_mgmtauth
from pytest_mgmtauth import MgmtServer

PACKAGE = Path(pytest_mgmtauth.__file__).parent
GLUE = [
    "plugin.py",
    "_glue/report.py",
    "_glue/sweep.py",
    "_standalone/server.py",
    "_standalone/control.py",
]


@pytest.mark.parametrize("module", GLUE)
def test_glue_calls_no_private_attribute_of_a_fake(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text())
    reached = [
        f"{node.value.id}.{node.attr} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("fake", "old", "mgmt_server")
        and node.attr.startswith("_")
    ]
    assert reached == []


def test_lifecycle_methods_exist_for_the_plugin() -> None:
    for name in (
        "evidence",
        "check",
        "teardown_findings",
        "report_section",
        "summary",
        "close",
    ):
        assert callable(getattr(MgmtServer, name)), name
    assert callable(MgmtServer.use_clock_mover)
