"""A timeline of cold one-test runs (no pytest cache), the key's part in it.

Runs the one-test plugin suite of ``bench_slope.py`` cold (``.pytest_cache`` and the
suite's ``__pycache__`` removed before each run) with a small plugin that notes the time
of pytest's hooks and of the signing key's steps: started (``SigningKey.start``), its
generation begun and ended (``key_cache.new_key``, in which thread), the test asking
for the key (``SigningKey.key``). The canned stub's one-test suite runs alternately for
its wall time. Times are from the process's start as the parent sees it; a trace, not a
benchmark: figure 10 is ``bench_slope.py``'s.

    python benchmarks/trace_cold.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench import importable_from, make_cold, run_pytest, table  # noqa: E402
from bench_slope import CANNED_CONFTEST  # noqa: E402
from bench_suites import FAKE_TEST, STOCK_TEST, _suite  # noqa: E402

#: The tracing plugin, loaded with ``-p mgmtauth_trace``. It wraps the key's methods by
#: name: a renamed one fails the run (KeyError below) rather than trace nothing.
TRACER = """
import atexit, json, os, threading, time

T0 = float(os.environ["MGMTAUTH_TRACE_T0"])
marks = []


def mark(what):
    marks.append((round((time.time() - T0) * 1000, 1), what))


def pytest_configure(config):
    from pytest_mgmtauth._fake import key_cache

    key = key_cache.SigningKey
    start, get = key.start, key.key
    generate = key_cache.new_key

    def traced_start(self):
        if not self.started:
            mark("key started")
        return start(self)

    def traced_key(self):
        mark("test asks for the key")
        try:
            return get(self)
        finally:
            mark("test has the key")

    def traced_generate():
        mark("generation begun in " + threading.current_thread().name)
        try:
            return generate()
        finally:
            mark("key made by " + threading.current_thread().name)

    key.start, key.key = traced_start, traced_key
    key_cache.new_key = traced_generate


def pytest_collection(session):
    mark("collection starts")


def pytest_runtest_call(item):
    mark("test body starts")


@atexit.register
def _write():
    mark("exit")
    with open(os.environ["MGMTAUTH_TRACE_OUT"], "w") as out:
        json.dump(marks, out)
"""


def _at(marks: list[tuple[float, str]], prefix: str) -> float | None:
    return next((at for at, what in marks if what.startswith(prefix)), None)


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="mgmtauth-trace-") as tmp:
        root = Path(tmp)
        (root / "mgmtauth_trace.py").write_text(TRACER)
        plugin = _suite(root, "cold-plugin", "import requests\n", FAKE_TEST, 1)
        canned = _suite(root, "cold-canned", "import requests\n", STOCK_TEST, 1, CANNED_CONFTEST)
        out = root / "trace.json"
        rows, heads, waits, plugin_walls, canned_walls = [], [], [], [], []
        for i in range(runs):
            pair = [(plugin, True), (canned, False)]
            for directory, traced in pair if i % 2 == 0 else reversed(pair):
                make_cold(directory)
                if not traced:
                    canned_walls.append(run_pytest(directory).wall)
                    continue
                env = {
                    **importable_from(root),
                    "MGMTAUTH_TRACE_T0": repr(time.time()),
                    "MGMTAUTH_TRACE_OUT": str(out),
                }
                wall = run_pytest(directory, "-p", "mgmtauth_trace", env=env).wall
                plugin_walls.append(wall)
                marks = [(at, what) for at, what in json.loads(out.read_text())]
                print(f"cold run {i + 1}, {wall * 1e3:.0f} ms in all:")
                for at, what in marks:
                    print(f"  {at:7.1f} ms  {what}")
                started = _at(marks, "key started")
                begun = _at(marks, "generation begun in mgmtauth-signing-key")
                asked = _at(marks, "test asks for the key")
                has = _at(marks, "test has the key")
                if (
                    started is not None
                    and begun is not None
                    and asked is not None
                    and has is not None
                ):
                    heads.append(asked - begun)
                    waits.append(has - asked)
                    rows.append(
                        [
                            str(i + 1),
                            f"{begun - started:.0f} ms",
                            f"{asked - begun:.0f} ms",
                            f"{has - asked:.0f} ms",
                            f"{wall * 1e3:.0f} ms",
                        ]
                    )
        print()
        print(
            table(
                [
                    "run",
                    "key started -> generation begun",
                    "generation begun -> test asks",
                    "test waits",
                    "wall",
                ],
                rows,
            )
        )
        if heads:
            print(
                f"medians: head start {median(heads):.0f} ms, wait {median(waits):.0f} ms; "
                f"wall plugin {median(plugin_walls) * 1e3:.0f} ms, canned stub "
                f"{median(canned_walls) * 1e3:.0f} ms"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    main(parser.parse_args().runs)
