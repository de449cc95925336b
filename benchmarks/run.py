"""Every figure of the benchmarks, with its target, in one run.

    python benchmarks/run.py            # the full run: about 10 minutes on 2 cores
    python benchmarks/run.py --quick    # fewer rounds, 1,500 tests for memory: ~4 minutes

Each benchmark prints its own table as it goes; the summary at the end lists every
figure, its baseline measured in the same run, and whether its target is met. The
HTTPS and concurrency figures come from ``bench_transport.py``, run as it is. The exit
status is 1 when a target is missed and ``--check`` is given.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_calls  # noqa: E402
import bench_clock  # noqa: E402
import bench_explore  # noqa: E402
import bench_keepalive  # noqa: E402
import bench_slope  # noqa: E402
import bench_suites  # noqa: E402
import bench_sweep  # noqa: E402
from _bench import Figure, machine, print_figures  # noqa: E402


def transport(quick: bool) -> int:
    """bench_transport.py (HTTPS vs HTTP, 8 concurrent slow handlers), its own output."""
    script = HERE / "bench_transport.py"
    if not script.exists():
        print("bench_transport.py is not there: no HTTPS or concurrency figures\n")
        return 1
    args = ["--rounds", "100", "--concurrent-rounds", "8"] if quick else []
    proc = subprocess.run([sys.executable, str(script), *args, "--check"], check=False)
    return proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    print(f"pytest-mgmtauth benchmarks, {machine()}{' (quick)' if args.quick else ''}\n")
    started = time.perf_counter()
    figures: list[Figure] = []
    sections = [
        ("== 1, 2: one request, fake vs stock pytest-httpserver handler", bench_calls.main),
        ("== 4a: mgmt_clock vs freezegun, in one process", bench_clock.main),
        ("== 3, 4b, 4c, 6: whole suites in fresh processes", bench_suites.main),
        ("== 7: a sweep item vs the same fault scripted by hand", bench_sweep.main),
        (
            "== 11: an explored test (runs=200) vs 200 parametrized tests, same events",
            bench_explore.main,
        ),
        ("== 9, 10: each further test (slope), cold fixed cost", bench_slope.main),
        (
            "== 8: keep-alive: connections per 100 calls, round trip with reuse",
            bench_keepalive.main,
        ),
    ]
    for title, bench in sections:
        print(title)
        figures.extend(bench(args.quick))
        print()
    print("== 5: HTTPS vs HTTP, 8 concurrent 100 ms handlers (bench_transport.py)")
    transport_status = transport(args.quick)
    print()
    print(f"== summary ({time.perf_counter() - started:.0f} s)")
    print_figures(figures)
    transport_text = "met" if transport_status == 0 else "MISSED (see its table above)"
    print(f"  - HTTPS and concurrency targets (bench_transport.py): {transport_text}")
    missed = [f.name for f in figures if not f.met] + (["transport"] if transport_status else [])
    if missed:
        print(f"\nmissed: {', '.join(missed)}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
