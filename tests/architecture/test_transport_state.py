"""No state travels in WSGI environ keys between the package's own modules: a request's
state goes in its ``Arrival`` (``_http/arrival.py``), which the connection's handler puts
under the one key ``ARRIVAL`` and the request object takes out. Every other environ key
the package reads or writes is WSGI's, CGI's or Werkzeug's. Checked on the source of the
folders that see requests (elsewhere, ``environ`` is the process environment)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_mgmtauth

PACKAGE = Path(pytest_mgmtauth.__file__).parent
#: The folders whose code sees a request's WSGI environ.
SEE_REQUESTS = ("_http", "_standalone")

#: The one environ key of the package's own, and the modules that may use it: the
#: handler puts the Arrival there, the request takes it out.
OWN_KEY = "ARRIVAL"
OWN_KEY_MODULES = {"_http/handler.py", "_http/arrival.py"}


def _environ_keys(tree: ast.AST) -> list[tuple[int, ast.expr]]:
    """(line, key) of every ``<...>environ[key]`` and ``<...>environ.get(key...)``."""
    found: list[tuple[int, ast.expr]] = []

    def is_environ(node: ast.expr) -> bool:
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
        return name == "environ"

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_environ(node.value):
            found.append((node.lineno, node.slice))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "__setitem__", "setdefault", "pop")
            and is_environ(node.func.value)
            and node.args
        ):
            found.append((node.lineno, node.args[0]))
    return found


def _own_keys() -> list[str]:
    """Where the package's source names an environ key of its own (not a literal
    WSGI/CGI/Werkzeug name), outside the one key's two modules."""
    wrong = []
    paths = [p for folder in SEE_REQUESTS for p in sorted((PACKAGE / folder).rglob("*.py"))]
    assert paths, f"no modules in {SEE_REQUESTS}"
    for path in paths:
        module = path.relative_to(PACKAGE).as_posix()
        for line, key in _environ_keys(ast.parse(path.read_text())):
            where = f"{module}:{line}"
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if key.value.lower().startswith("mgmtauth"):
                    wrong.append(f"{where}: {key.value!r}")
            elif not (isinstance(key, ast.Name) and key.id == OWN_KEY):
                wrong.append(f"{where}: {ast.unparse(key)}")
            elif module not in OWN_KEY_MODULES:
                wrong.append(f"{where}: {OWN_KEY} outside {sorted(OWN_KEY_MODULES)}")
    return wrong


def test_no_state_travels_in_environ_keys_between_the_package_modules() -> None:
    assert _own_keys() == []


def test_the_check_finds_a_key_of_the_package_own(tmp_path: Path) -> None:
    source = (
        "LISTENER = 'mgmtauth.listener'\n"
        "def f(request):\n"
        "    request.environ[LISTENER] = 'region'\n"
        "    return request.environ.get('mgmtauth.body'), request.environ.get('RAW_URI')\n"
    )
    keys = [ast.unparse(key) for _, key in _environ_keys(ast.parse(source))]
    assert keys == ["LISTENER", "'mgmtauth.body'", "'RAW_URI'"]
