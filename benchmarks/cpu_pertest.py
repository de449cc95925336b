"""Issue 14: each further test's CPU, by thread and by phase, without a profiler.

Runs the 700-test suites of ``bench_slope.py`` (the plugin and the canned stub: each test
authenticates at ``/v2/auth`` and makes one protected call with requests) alternately,
with a small plugin that reads, as the session ends, each thread's CPU time from
``/proc/self/task`` (Linux only) by thread name, and times the main thread's setup,
call and teardown of every test with ``time.thread_time()`` (CPU) and
``time.perf_counter()`` (wall). Figures are per test, averaged over the suite's tests:
fixed costs are included (a few ms over 700 tests). Where the slope's ratio comes from,
not a figure with a target.

    python benchmarks/cpu_pertest.py [--rounds 3] [--tests 700]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench import importable_from, run_pytest, table  # noqa: E402
from bench_slope import CANNED_CONFTEST  # noqa: E402
from bench_suites import FAKE_TEST, STOCK_TEST, _suite  # noqa: E402

#: The measuring plugin, loaded with ``-p mgmtauth_cpu``.
MEASURE = """
import json, os, re, threading, time

import pytest

TICKS = os.sysconf("SC_CLK_TCK")
cpu = {"setup": 0.0, "call": 0.0, "teardown": 0.0}
wall = dict(cpu)
tests = [0]


def _phase(name):
    @pytest.hookimpl(hookwrapper=True)
    def hook(item):
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        yield
        cpu[name] += time.thread_time() - cpu0
        wall[name] += time.perf_counter() - wall0
        tests[0] += name == "teardown"

    return hook


pytest_runtest_setup = _phase("setup")
pytest_runtest_call = _phase("call")
pytest_runtest_teardown = _phase("teardown")


def _thread_cpu(tid):
    with open(f"/proc/self/task/{tid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    names = {t.native_id: t.name for t in threading.enumerate()}
    threads = {}
    for tid in os.listdir("/proc/self/task"):
        name = names.get(int(tid), "an unnamed thread")
        name = re.sub(r"-\\d+$", "", re.sub(r"^Thread-\\d+.*", "Thread-N", name))
        try:
            threads[name] = threads.get(name, 0.0) + _thread_cpu(tid)
        except OSError:  # ended meanwhile
            pass
    times = os.times()
    with open(os.environ["MGMTAUTH_CPU_OUT"], "w") as out:
        json.dump(
            {
                "tests": tests[0],
                "process": times.user + times.system,
                "threads": threads,
                "cpu": cpu,
                "wall": wall,
            },
            out,
        )
"""


def main(rounds: int, n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="mgmtauth-cpu-") as tmp:
        root = Path(tmp)
        (root / "mgmtauth_cpu.py").write_text(MEASURE)
        suites = {
            "plugin": _suite(root, "plugin", "import requests\n", FAKE_TEST, n),
            "canned": _suite(root, "canned", "import requests\n", STOCK_TEST, n, CANNED_CONFTEST),
        }
        out = root / "cpu.json"
        env = {**importable_from(root), "MGMTAUTH_CPU_OUT": str(out)}
        for directory in suites.values():  # warm-up: the key in pytest's cache
            run_pytest(directory)
        seen: dict[str, list[dict[str, object]]] = {name: [] for name in suites}
        order = list(suites)
        for i in range(rounds):
            for name in order if i % 2 == 0 else reversed(order):
                run_pytest(suites[name], "-p", "mgmtauth_cpu", env=env)
                seen[name].append(json.loads(out.read_text()))
        for name, results in seen.items():
            rows = []
            for result in results:
                per = 1e3 / float(result["tests"])  # type: ignore[arg-type]
                threads: dict[str, float] = result["threads"]  # type: ignore[assignment]
                cpu: dict[str, float] = result["cpu"]  # type: ignore[assignment]
                wall: dict[str, float] = result["wall"]  # type: ignore[assignment]
                main_thread = threads.pop("MainThread", 0.0)
                process: float = result["process"]  # type: ignore[assignment]
                others = ", ".join(
                    f"{thread} {seconds * per:.2f}" for thread, seconds in sorted(threads.items())
                )
                rows.append(
                    [
                        f"{process * per:.2f}",
                        f"{main_thread * per:.2f}",
                        others or "-",
                        " / ".join(f"{cpu[p] * per:.2f}" for p in ("setup", "call", "teardown")),
                        " / ".join(f"{wall[p] * per:.2f}" for p in ("setup", "call", "teardown")),
                    ]
                )
            print(f"{name}: ms per test, one row per run ({n} tests)")
            print(
                table(
                    [
                        "process CPU",
                        "main thread CPU",
                        "other threads alive at the end, CPU",
                        "main: setup / call / teardown CPU",
                        "main: setup / call / teardown wall",
                    ],
                    rows,
                )
            )
            print()
        print(
            "Threads that ended before the session's end count in the process's CPU only "
            "(the stock server's thread among them)."
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tests", type=int, default=700)
    args = parser.parse_args()
    main(args.rounds, args.tests)
