"""The layers of docs/architecture.md, checked on the source (issue 11): the domain and
the pure halves of the sweep import no pytest and no Werkzeug, and nothing imports
upwards (the domain nothing outside itself, the transport nothing of the glue)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import pytest_mgmtauth

PACKAGE = Path(pytest_mgmtauth.__file__).parent
DOMAIN = sorted(p.name for p in (PACKAGE / "_domain").glob("*.py"))
TRANSPORT = sorted(p.name for p in (PACKAGE / "_transport").glob("*.py"))
#: What the domain may import besides the standard library and itself.
DOMAIN_LIBRARIES = {"jwt", "cryptography"}
#: Never below the glue.
FRAMEWORKS = {"pytest", "_pytest", "werkzeug", "pytest_httpserver"}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every import in the file, also those inside functions and
    under TYPE_CHECKING: level 0 is absolute, 1 is ``from .x``, 2 is ``from ..x``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.extend((0, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


@pytest.mark.parametrize("module", DOMAIN)
def test_the_domain_imports_the_standard_library_its_libraries_and_itself(module: str) -> None:
    wrong = [
        f"{'.' * level}{name}"
        for level, name in _imports(PACKAGE / "_domain" / module)
        if level > 1
        or (
            level == 0
            and name.split(".")[0] not in sys.stdlib_module_names
            and name.split(".")[0] not in DOMAIN_LIBRARIES
        )
    ]
    assert wrong == []


@pytest.mark.parametrize("module", TRANSPORT)
def test_the_transport_imports_the_domain_and_itself_only(module: str) -> None:
    wrong = [
        f"{'.' * level}{name}"
        for level, name in _imports(PACKAGE / "_transport" / module)
        if (level == 2 and not name.startswith("_domain"))
        or level > 2
        or (level == 0 and name.split(".")[0] in {"pytest", "_pytest", "pytest_mgmtauth"})
    ]
    assert wrong == []


@pytest.mark.parametrize("module", ["_sweep_plan.py", "_sweep_verdict.py"])
def test_the_pure_halves_of_the_sweep_import_no_framework_and_no_glue(module: str) -> None:
    wrong = [
        f"{'.' * level}{name}"
        for level, name in _imports(PACKAGE / module)
        if (level == 0 and name.split(".")[0] in FRAMEWORKS | {"pytest_mgmtauth"})
        or (level == 1 and not name.startswith(("_domain", "_sweep_plan")))
        or level > 1
    ]
    assert wrong == []
