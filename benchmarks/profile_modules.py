"""Modules a request crosses on the server's side, and how often it goes from one to
another: one ``POST /v2/auth`` and one bearer call (``GET /api/items``).

Not a timing: a count of Python ``call`` events (``threading.setprofile``), by the module
of the function called, on the thread that serves the request's connection, from the
client's connect until the thread is done with the connection (accepted, read,
answered, closed). "Modules" is how many distinct modules were called; "switches" how
many times one call's module differs from the previous call's. Counted twice: over every
call (Python's and Werkzeug's modules too), and over the package's own calls only (the
calls into other modules left out, so going out to Werkzeug and back is no switch). A
measure of how much a
request goes back and forth across the code, for comparing one version with another
(run the same script on both); the figures move with Werkzeug's and Python's versions.

The fake is the ``mgmt_server`` fixture's, in one test of a pytest run in this process
(``in_tests``); each request on a new connection (``http.client``), as in
``bench_calls.py``, after one untimed grant and call that warm everything up.

Folded by layer (``--layers``): each of the package's calls named by its layer
(``_http``, ``_service``, ...), and the switches between the transport and the domain
counted (``_http`` to ``_service`` or back). Per function (``--functions``): how many
times each was called, to compare two versions function by function.

    python benchmarks/profile_modules.py [--modules] [--layers] [--functions]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time
from collections import Counter
from types import FrameType
from typing import Any
from urllib.parse import urlencode, urlsplit

from _bench import in_tests, request, table

from pytest_mgmtauth import MgmtServer

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
#: Seconds the server's thread gets to finish with a connection after its answer came.
SETTLE = 0.3


class CallRecorder:
    """The module of every Python function called, per thread, while :attr:`on` (and
    the function, in :attr:`functions`)."""

    def __init__(self) -> None:
        self.on = False
        self.calls: dict[int, list[str]] = {}
        self.functions: dict[int, list[str]] = {}

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and self.on:
            module = str(frame.f_globals.get("__name__", "?"))
            ident = threading.get_ident()
            self.calls.setdefault(ident, []).append(module)
            self.functions.setdefault(ident, []).append(f"{module}:{frame.f_code.co_qualname}")

    def record(self, request: Any) -> tuple[list[str], list[str]]:
        """The modules and the functions called by the thread that served
        ``request()``'s connection."""
        self.calls = {}
        self.functions = {}
        self.on = True
        try:
            request()
            time.sleep(SETTLE)
        finally:
            self.on = False
        main = threading.get_ident()
        serving = [
            ident
            for ident, calls in self.calls.items()
            if ident != main and any(m.startswith("pytest_mgmtauth") for m in calls)
        ]
        if not serving:
            return [], []
        ident = max(serving, key=lambda i: len(self.calls[i]))
        return self.calls[ident], self.functions[ident]


def switches(modules: list[str]) -> int:
    return sum(1 for before, after in itertools.pairwise(modules) if before != after)


def layer(module: str) -> str:
    """The package's layer of one of its modules (``_http``, ``_service``, ...)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def crossings(modules: list[str], a: str = "_http", b: str = "_service") -> int:
    """Switches between layers ``a`` and ``b`` among the package's calls (other layers'
    calls left out)."""
    layers = [layer(m) for m in modules if m.startswith("pytest_mgmtauth.")]
    layers = [x for x in layers if x in (a, b)]
    return switches(layers)


def _request(url: str, method: str, path: str, body: str | None, headers: dict[str, str]) -> bytes:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return request((parts.hostname, parts.port), method, path, body, headers)


def main(
    show_modules: bool = False, show_layers: bool = False, show_functions: bool = False
) -> None:
    recorder = CallRecorder()
    # Every thread started from here on: the session's server and its connection threads.
    threading.setprofile(recorder)
    results: dict[str, list[str]] = {}
    functions: dict[str, list[str]] = {}

    def measure(index: int, fake: MgmtServer) -> None:
        account = fake.add_account()
        fake.route("GET", "/api/items").respond_with_json({"items": [1, 2, 3]})
        form = urlencode({"username": account.username, "key": account.api_key})

        def auth() -> bytes:
            return _request(fake.url, "POST", "/v2/auth", form, FORM)

        token = json.loads(auth())["token"]  # warm-up; the first token is signed ahead
        bearer = {"Authorization": f"Bearer {token}"}

        def call() -> bytes:
            return _request(fake.url, "GET", "/api/items", None, bearer)

        call()
        time.sleep(SETTLE)
        for name, made in (("POST /v2/auth", auth), ("GET /api/items (bearer)", call)):
            results[name], functions[name] = recorder.record(made)

    in_tests(measure, [{"throttle": None}])
    threading.setprofile(None)
    rows = []
    for name, modules in results.items():
        own = [m for m in modules if m.startswith("pytest_mgmtauth")]
        figures = (len(set(own)), switches(own), len(own))
        figures_all = (len(set(modules)), switches(modules), len(modules))
        rows.append([name, *map(str, figures + figures_all)])
    columns = ["modules", "switches", "calls"]
    print(table(["request", *(f"own {c}" for c in columns), *(f"all {c}" for c in columns)], rows))
    if show_layers:
        print()
        print(
            table(
                ["request", "_http <-> _service switches"],
                [[name, str(crossings(modules))] for name, modules in results.items()],
            )
        )
    if show_functions:
        for name, called in functions.items():
            print(f"\n{name}: {len(called)} calls")
            counts = Counter(called)
            for function in sorted(counts, key=lambda f: (-counts[f], f)):
                print(f"  {counts[function]:4d}  {function}")
    if show_modules:
        for name, modules in results.items():
            print(f"\n{name}:")
            for module in dict.fromkeys(modules):
                print(f"  {modules.count(module):4d}  {module}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", action="store_true", help="list the modules and calls")
    parser.add_argument(
        "--layers", action="store_true", help="count the switches between _http and _service"
    )
    parser.add_argument("--functions", action="store_true", help="list the calls per function")
    args = parser.parse_args()
    main(args.modules, args.layers, args.functions)
    sys.exit(0)
