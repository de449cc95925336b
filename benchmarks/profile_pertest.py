"""Where each further test's time goes (issue 14): one profile of both sides.

Runs the plugin suite of ``bench_slope.py`` (each test authenticates at ``/v2/auth`` and
makes one protected call with requests) under yappi, which profiles every thread: the
main thread (pytest, the fixtures, the client) and the server's threads (the accept loop
and one thread per connection). Profiling starts after ``--warmup`` tests (so the key,
the server and the first imports are not counted) and stops after the last one; the
figures are per profiled test and as shares of the main thread's wall time per test.
The clock is the wall clock: a blocking call counts the time it waited, for the peer or
for the GIL.

A profile, not a benchmark: the profiler slows Python code much more than C code (the
RS512 signing), so the shares lean towards Python-heavy items. Needs yappi (in the
``test`` extra).

    python benchmarks/profile_pertest.py [--tests 200] [--warmup 20]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: (label, module path suffix, function name as yappi names it)
Item = tuple[str, str, str]
_SENDALL = "<method 'sendall' of '_socket.socket' objects>"
_PEEK = "<method 'peek' of '_io.BufferedReader' objects>"

MAIN_ITEMS: list[Item] = [
    ("test body (pytest_pyfunc_call)", "_pytest/python.py", "pytest_pyfunc_call"),
    ("  requests calls (auth + protected call)", "requests/api.py", "request"),
    ("    TCP connect", "urllib3/connection.py", "HTTPConnection.connect"),
    ("    sending the request (sendall)", "builtins", _SENDALL),
    ("    waiting for the answer's head", "http/client.py", "HTTPResponse.begin"),
    ("  mgmt_server.route(...)", "pytest_mgmtauth/_fake/server.py", "MgmtServer.route"),
    ("fixture mgmt_server (setup and teardown)", "pytest_mgmtauth/plugin.py", "mgmt_server"),
    ("  MgmtServer() (a fresh service)", "pytest_mgmtauth/_fake/server.py", "MgmtServer.__init__"),
    (
        "  close(): idle connections closed",
        "_http/connections.py",
        "ConnectionServer.drop_idle_connections",
    ),
    (
        "  teardown check (findings)",
        "pytest_mgmtauth/_fake/server.py",
        "MgmtServer.teardown_findings",
    ),
    ("fixture mgmt_account (account generation)", "pytest_mgmtauth/plugin.py", "mgmt_account"),
]
#: The accept loop's thread, apart: it sleeps in a selector until a connection comes,
#: which the connection threads' selector rows must not count.
ACCEPT_ITEM: Item = (
    "accept loop: accept, hand to a thread",
    "_http/connections.py",
    "ConnectionServer._accept_one",
)
SERVER_ITEMS: list[Item] = [
    (
        "connection threads, whole life",
        "_http/connections.py",
        "ConnectionServer._serve_connection",
    ),
    ("  idle: Werkzeug's wait after each answer", "selectors.py", "EpollSelector.select"),
    ("  idle: waiting for the next request", "builtins", _PEEK),
    (
        "  request line and headers (http.server)",
        "http/server.py",
        "ConnectionHandler.parse_request",
    ),
    (
        "  WSGI environ (Werkzeug + the fake's)",
        "_http/handler.py",
        "ConnectionHandler.make_environ",
    ),
    ("  the fake's app (FakeApp)", "_http/app.py", "FakeApp.__call__"),
    ("    waiting for a token signed ahead", "_service/tokens.py", "TokenSigner._take"),
    ("    form parsing", "_http/parsing.py", "read_form"),
    ("    bearer header checks", "_http/flows.py", "bearer_token"),
    ("    event recording", "_service/timeline.py", "Timeline.record"),
    ("  writing the answer", "werkzeug/serving.py", "write"),
    ("  shutting the connection down", "socketserver.py", "ConnectionServer.shutdown_request"),
]


def _child(directory: Path, warmup: int, out: Path) -> int:
    """Run the suite in this process under yappi; write per-group function times."""
    import pytest
    import yappi

    window: dict[str, float] = {}

    class Window:
        def __init__(self) -> None:
            self.index = 0

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
            if self.index == warmup:
                yappi.set_clock_type("wall")
                yappi.start(builtins=True, profile_threads=True)
                window["start"] = time.perf_counter()
            yield
            self.index += 1
            if nextitem is None and "start" in window:
                window["end"] = time.perf_counter()
                yappi.stop()
                window["tests"] = self.index - warmup

    import os

    os.chdir(directory)
    status = pytest.main(["-q", "-p", "no:randomly", "-p", "no:xdist"], plugins=[Window()])
    if status != 0:
        return int(status)
    groups: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    threads: dict[str, int] = defaultdict(int)
    for thread in yappi.get_thread_stats():
        stats = yappi.get_func_stats(filter={"ctx_id": thread.id})
        names = {stat.name.rsplit(".", 1)[-1] for stat in stats}
        if thread.name == "_MainThread":
            group = "main"
        elif "_serve_connection" in names:
            group = "server"
        elif "_accept_one" in names:
            # (serve_forever itself was entered before the profiler started)
            group = "accept"
        else:
            continue
        threads[group] += 1
        for stat in stats:
            groups[group][f"{stat.module}|{stat.name}"] += stat.ttot
    out.write_text(json.dumps({"window": window, "threads": threads, "groups": groups}))
    return 0


def _total(times: dict[str, float], module: str, name: str) -> float:
    """Seconds in ``name`` of a module whose path ends with ``module`` (with callees)."""
    total = 0.0
    for key, seconds in times.items():
        path, function = key.split("|", 1)
        if path.endswith(module) and function == name:
            total += seconds
    return total


def _missing(times: dict[str, float], items: list[Item]) -> list[str]:
    """Items that match nothing in the profile: a function moved or renamed since the
    list was written (its row would read 0 % and mislead)."""
    return [
        f"{name} in ...{module}" for _, module, name in items if not _total(times, module, name)
    ]


def _report(data: dict[str, Any]) -> None:
    missing = _missing(data["groups"]["main"], MAIN_ITEMS)
    missing += _missing(data["groups"]["server"], SERVER_ITEMS)
    missing += _missing(data["groups"]["accept"], [ACCEPT_ITEM])
    if missing:
        raise SystemExit(
            "not in the profile (moved or renamed? update MAIN_ITEMS / SERVER_ITEMS): "
            + "; ".join(missing)
        )
    window = data["window"]
    tests = int(window["tests"])
    per_test = (window["end"] - window["start"]) / tests
    print(
        f"{tests} tests profiled; main thread {per_test * 1e3:.2f} ms per test (wall, under "
        f"the profiler); connection threads: {data['threads'].get('server', 0)}\n"
    )
    main = data["groups"]["main"]
    rows = [(label, _total(main, module, name) / tests) for label, module, name in MAIN_ITEMS]
    top_level = sum(ms for label, ms in rows if not label.startswith(" "))
    calls = rows[1][1]
    socket_work = sum(ms for label, ms in rows[2:5])
    rows.insert(5, ("    requests' and urllib3's own work (the rest)", calls - socket_work))
    rows.insert(0, ("pytest's own per-test work (the rest)", per_test - top_level))
    print(f"{'main thread':<54} {'ms/test':>7}  {'share':>6}")
    for label, seconds in rows:
        print(f"  {label:<52} {seconds * 1e3:7.2f}  {seconds / per_test:6.1%}")
    server = data["groups"]["server"]
    rows = [(label, _total(server, module, name) / tests) for label, module, name in SERVER_ITEMS]
    life = rows[0][1]
    idle = sum(ms for label, ms in rows if label.startswith("  idle"))
    listed = sum(ms for label, ms in rows if label.startswith("  ") and not label.startswith("   "))
    rows.insert(1, ("  busy (whole life less the idle waits)", life - idle))
    rows.append(("  the rest (Werkzeug's run_wsgi, thread start, end)", life - listed))
    label, module, name = ACCEPT_ITEM
    rows.insert(0, (label, _total(data["groups"]["accept"], module, name) / tests))
    print(f"\n{'server threads (they overlap the main thread)':<54} {'ms/test':>7}  {'share':>6}")
    for label, seconds in rows:
        print(f"  {label:<52} {seconds * 1e3:7.2f}  {seconds / per_test:6.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=200, help="profiled tests (200)")
    parser.add_argument("--warmup", type=int, default=20, help="tests before profiling (20)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return _child(args.child, args.warmup, args.out)
    sys.path.insert(0, str(HERE))
    from bench_suites import FAKE_TEST, _suite

    with tempfile.TemporaryDirectory(prefix="mgmtauth-profile-") as tmp:
        root = Path(tmp)
        n = args.warmup + args.tests
        directory = _suite(root, "plugin", "import requests\n", FAKE_TEST, n)
        out = root / "profile.json"
        # A fresh process: pytest must import the plugin itself (assertion rewriting).
        child = [sys.executable, __file__, "--child", str(directory), "--out", str(out)]
        proc = subprocess.run([*child, "--warmup", str(args.warmup)], check=False)
        if proc.returncode != 0:
            print(f"the profiled suite failed (exit status {proc.returncode})")
            return 1
        _report(json.loads(out.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
