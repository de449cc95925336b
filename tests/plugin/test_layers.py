"""The layers of docs/architecture.md, checked on the source: each folder of the package
imports only the folders below it, and the pure ones (the service, the verdicts) import
no framework at all."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import pytest_mgmtauth

PACKAGE = Path(pytest_mgmtauth.__file__).parent

#: Each folder, the package's folders it may import, and the third-party packages it may
#: import besides the standard library. Listed from the bottom up.
LAYERS: dict[str, tuple[set[str], set[str]]] = {
    "_service": (set(), {"jwt", "cryptography"}),
    "_verdicts": ({"_service"}, set()),
    "_http": ({"_service"}, {"werkzeug", "pytest_httpserver", "trustme"}),
    "_fake": ({"_service", "_verdicts", "_http"}, {"cryptography"}),
    "_standalone": (
        {"_service", "_verdicts", "_http", "_fake", "__init__"},
        {"werkzeug", "cryptography"},
    ),
    "_glue": (
        {"_service", "_verdicts", "_fake"},
        {"pytest", "_pytest", "freezegun"},
    ),
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every import in the file, also those inside functions and
    under TYPE_CHECKING: level 0 is absolute, 1 is ``from .x``, 2 is ``from ..x``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.extend((0, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or "__init__"))
    return found


def _wrong_imports(folder: str, path: Path, depth: int) -> list[str]:
    """The imports of a module ``depth`` folders below the package (1: in ``folder``
    itself, 2: in a subfolder of it) that its layer does not allow."""
    folders, libraries = LAYERS[folder]
    wrong = []
    for level, name in _imports(path):
        top = name.split(".")[0]
        if level == 0:
            allowed = top in sys.stdlib_module_names or top in libraries
        elif level <= depth:
            allowed = True  # within the folder
        elif level == depth + 1:
            allowed = top in folders
        else:
            allowed = False
        if not allowed:
            wrong.append(f"{'.' * level}{name}")
    return wrong


MODULES = [
    (folder, path.relative_to(PACKAGE).as_posix())
    for folder in LAYERS
    for path in sorted((PACKAGE / folder).rglob("*.py"))
]


@pytest.mark.parametrize(("folder", "module"), MODULES, ids=[m for _, m in MODULES])
def test_each_folder_imports_only_the_folders_below_it(folder: str, module: str) -> None:
    path = PACKAGE / module
    depth = len(path.relative_to(PACKAGE / folder).parts)
    assert _wrong_imports(folder, path, depth) == []


def test_every_module_of_the_package_is_in_a_layer() -> None:
    top_level = {p.name for p in PACKAGE.glob("*.py")}
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert top_level == {"__init__.py", "__main__.py", "plugin.py"}
    assert folders == set(LAYERS)


def test_a_wrong_import_is_caught(tmp_path: Path) -> None:
    """The check itself can fail: a service module that imports HTTP and pytest."""
    module = tmp_path / "probe.py"
    module.write_text("from .._http.app import FakeApp\nimport pytest\nfrom .clock import Clock\n")
    assert _wrong_imports("_service", module, depth=1) == [".._http.app", "pytest"]


#: The most lines a module of the package may have (docs/architecture.md): past it, a
#: module holds more than one thing a maintainer can name.
MAX_MODULE_LINES = 400


def test_no_module_of_the_package_is_over_the_line_limit() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert len(sizes) > 40  # the package itself was read
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}
