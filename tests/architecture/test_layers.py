"""The layers of docs/architecture.md, checked on the source: each folder of the package
imports only the folders below it, and the pure ones (the service, the verdicts) import
no framework at all."""

from __future__ import annotations

import ast
import re
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
        # hypothesis: the explorations' schedules (_glue/explore.py, the explore extra).
        {"pytest", "_pytest", "freezegun", "hypothesis"},
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


#: The public authoring module: names of ``_service`` only, so the flows in
#: ``_service/flows/`` may be written against it as a user's flow is.
AUTHORING = f"{PACKAGE.name}.flows"


def _wrong_imports(folder: str, path: Path, depth: int) -> list[str]:
    """The imports of a module ``depth`` folders below the package (1: in ``folder``
    itself, 2: in a subfolder of it) that its layer does not allow."""
    folders, libraries = LAYERS[folder]
    wrong = []
    for level, name in _imports(path):
        top = name.split(".")[0]
        if level == 0 and name == AUTHORING:
            allowed = folder == "_service"
        elif level == 0:
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
    assert top_level == {"__init__.py", "__main__.py", "flows.py", "plugin.py"}
    assert folders == set(LAYERS)


def test_the_authoring_module_imports_only_the_service() -> None:
    """``pytest_mgmtauth.flows`` re-exports the service's names: a flow written against
    it stays in the pure domain (no HTTP, no pytest)."""
    wrong = [
        name
        for level, name in _imports(PACKAGE / "flows.py")
        if not (level == 1 and name.split(".")[0] == "_service")
        and not (level == 0 and name.split(".")[0] in sys.stdlib_module_names)
    ]
    assert wrong == []


def test_a_wrong_import_is_caught(tmp_path: Path) -> None:
    """The check itself can fail: a service module that imports HTTP and pytest."""
    module = tmp_path / "probe.py"
    module.write_text("from .._http.app import FakeApp\nimport pytest\nfrom .clock import Clock\n")
    assert _wrong_imports("_service", module, depth=1) == [".._http.app", "pytest"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path, package: str) -> set[str]:
    """The package's modules ``path`` imports when it runs: at module level or inside a
    function, but not under ``if TYPE_CHECKING:`` (never executed). Importing
    ``a.b.c`` runs ``a`` and ``a.b`` first, so those count too."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            skipped.update(id(n) for n in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names = [module]
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                file = PACKAGE.parent / Path(*sub.split("."))
                if file.with_suffix(".py").exists() or (file / "__init__.py").exists():
                    names.append(sub)
        for name in names:
            if name.split(".")[0] != PACKAGE.name:
                continue
            parts = name.split(".")
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return found


def _import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = _runtime_imports(path, package) - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles_in_the_package() -> None:
    """No module imports, even inside a function, a module that imports it back (through
    any number of others): the layers hold inside each folder too."""
    graph = _import_graph()
    assert len(graph) > 40  # the package itself was read
    assert _circles(graph) == []


def test_an_import_circle_is_caught() -> None:
    """The check itself can fail: a function-level import closing a circle counts, one
    under TYPE_CHECKING does not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .records import Refusal\n"
        "def f():\n    from .flows.registry import FLOWS\n"
    )
    probe = PACKAGE / "_service" / "probe_for_the_test.py"
    try:
        probe.write_text(source)
        imports = _runtime_imports(probe, f"{PACKAGE.name}._service")
    finally:
        probe.unlink()
    assert f"{PACKAGE.name}._service.flows.registry" in imports
    assert f"{PACKAGE.name}._service.records" not in imports


def _message_texts(path: Path) -> list[str]:
    """The string literals of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_message_points_to_a_path_of_the_repository() -> None:
    """An installed user has no docs/ folder: messages name a page by its title."""
    found = [
        f"{path.relative_to(PACKAGE)}: {text!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for text in _message_texts(path)
        if re.search(r"docs/[\w-]+\.md", text)
    ]
    assert found == []


def test_a_message_naming_a_docs_path_is_caught(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""See docs/hosts.md."""\nX = "(see docs/hosts.md)"\n')
    assert _message_texts(probe) == ["(see docs/hosts.md)"]
