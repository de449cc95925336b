"""The benchmarks use the plugin as a user does: the public names of ``pytest_mgmtauth``
(its ``__all__``) and its fixtures and markers in tests, never a private module or a
private attribute, so that a refactor of the package cannot break them unnoticed.
Checked on the source of every script, and on the code it writes out (the suites and
conftests it generates, kept in strings)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pytest_mgmtauth

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
PACKAGE = pytest_mgmtauth.__name__
#: What a benchmark may name in the package: the public names (and ``__all__`` itself).
PUBLIC = frozenset(pytest_mgmtauth.__all__) | {"__all__"}
#: ``pytest_mgmtauth.<name>`` in a string that is not Python: a ``-W`` filter, an ini.
NAMED = re.compile(rf"\b{PACKAGE}\.(\w+)")
#: ``something._name`` in a string that is not Python (a template with format fields).
PRIVATE_ATTRIBUTE = re.compile(r"\b(\w+)\.(_(?!_)\w*)")


def private_uses(source: str, where: str = "") -> list[str]:
    """What ``source`` reaches that is not public: an import of any module of the package
    but the package itself, a name of it not in ``__all__``, a private attribute of
    anything but ``self``; also inside every string (generated code), and in a string
    that is not Python, ``pytest_mgmtauth.<name>`` and ``x._name``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        found = [f"{where}{PACKAGE}.{name}" for name in NAMED.findall(source) if name not in PUBLIC]
        return found + [
            f"{where}{owner}.{name}"
            for owner, name in PRIVATE_ATTRIBUTE.findall(source)
            if owner != "self"
        ]
    package_names = {PACKAGE}  # how the code names the package (import ... as ...)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            package_names.update(a.asname or a.name for a in node.names if a.name == PACKAGE)
    found = []
    for node in ast.walk(tree):
        at = f"{where}line {getattr(node, 'lineno', '?')}: "
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names if a.name.startswith(f"{PACKAGE}.")]
            found += [f"{at}import {module}" for module in modules]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == PACKAGE:
                names = [a.name for a in node.names if a.name not in PUBLIC]
                found += [f"{at}from {PACKAGE} import {name}" for name in names]
            elif node.module.startswith(f"{PACKAGE}."):
                found.append(f"{at}from {node.module} import ...")
        elif isinstance(node, ast.Attribute):
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner in package_names and node.attr not in PUBLIC:
                found.append(f"{at}{owner}.{node.attr}")
            elif node.attr.startswith("_") and not node.attr.startswith("__") and owner != "self":
                found.append(f"{at}{ast.unparse(node)}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (PACKAGE in node.value or "._" in node.value)
        ):
            found += private_uses(node.value, where=f"{at}in a string, ")
    return found


SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def test_the_benchmarks_are_there() -> None:
    assert {"run.py", "_bench.py", "bench_calls.py"} <= {path.name for path in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.name for path in SCRIPTS])
def test_a_benchmark_reaches_only_public_names(script: Path) -> None:
    assert private_uses(script.read_text()) == []


@pytest.mark.parametrize(
    "probe",
    [
        "from pytest_mgmtauth._fake.server import MgmtServer",
        "import pytest_mgmtauth._service.options",
        "import pytest_mgmtauth.plugin",
        "from pytest_mgmtauth import _LAZY",
        "import pytest_mgmtauth as pm\npm._fake",
        "import pytest_mgmtauth\npytest_mgmtauth.plugin",
        "import importlib\nimportlib.import_module('pytest_mgmtauth._http.server')",
        "def f(fake):\n    return fake._binding",
        "SUITE = '''\nfrom pytest_mgmtauth._fake import key_cache\n'''",
        "SUITE = '''\ndef test_{i}(mgmt_server):\n    mgmt_server._service\n'''",
        "INI = '[pytest]\\nfilterwarnings = ignore::pytest_mgmtauth._verdicts.X'",
    ],
)
def test_a_private_use_is_caught(probe: str) -> None:
    assert private_uses(probe) != []


def test_public_uses_pass() -> None:
    source = (
        "import pytest_mgmtauth\n"
        "from pytest_mgmtauth import MgmtServer, Options\n"
        "print(pytest_mgmtauth.__version__, pytest_mgmtauth.MgmtClock)\n"
        "class C:\n    def __init__(self):\n        self._x = 1\n"
        "INI = '[pytest]\\nfilterwarnings = ignore::pytest_mgmtauth.AuthFindingWarning'\n"
        "SUITE = '''\ndef test_{i}(mgmt_server):\n    mgmt_server.route('GET', '/x')\n'''\n"
    )
    assert private_uses(source) == []
