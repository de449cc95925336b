"""``mgmt_clock`` against freezegun used directly, in one process.

One sample: start a frozen clock, move it 30 s, read the time, stop it; that is what a
test using the clock pays for it. The plugin's ``MgmtClock`` (freezegun underneath with
``tick=False``, ``real_asyncio=True`` and pytest's timer ignored) against
``freezegun.freeze_time(tick=False)`` with freezegun's defaults otherwise, both started
from the same instant. freezegun's start scans every loaded module, so both are measured
in the same process with the same modules loaded. Target: at most 1.1x.

    python benchmarks/bench_clock.py [--quick]
"""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta, timezone
from importlib.metadata import entry_points

import freezegun
from _bench import Figure, alternate, median, per_call, print_figures, spread, table

from pytest_mgmtauth import MgmtClock

START = datetime(2030, 1, 1, tzinfo=timezone.utc)
STEP = timedelta(seconds=30)


def plugin_clock() -> None:
    clock = MgmtClock(START).start()
    clock.advance(STEP)
    assert clock.now() == START + STEP
    clock.stop()


def plain_freezegun() -> None:
    freezer = freezegun.freeze_time(START, tick=False)
    factory = freezer.start()
    factory.tick(STEP)
    assert datetime.now(timezone.utc) == START + STEP
    freezer.stop()


def main(quick: bool = False) -> list[Figure]:
    # Load what a test session has loaded (pytest and its plugins): freezegun's start
    # cost grows with the number of modules.
    import pytest  # noqa: F401
    import pytest_httpserver  # noqa: F401
    import requests  # noqa: F401

    # The plugin, loaded as pytest loads it: by its entry point.
    (plugin,) = entry_points(group="pytest11", name="mgmtauth")
    plugin.load()

    rounds, batch = (40, 10) if quick else (150, 20)
    for fn in (plugin_clock, plain_freezegun):
        fn()
    xs, ys = alternate(per_call(plugin_clock, batch), per_call(plain_freezegun, batch), rounds)
    print(
        table(
            ["clock", "median", "IQR", "samples"],
            [
                [
                    "mgmt_clock (MgmtClock)",
                    f"{median(xs) * 1e3:.3f} ms",
                    spread(xs),
                    f"{rounds} x {batch}",
                ],
                [
                    "freezegun.freeze_time",
                    f"{median(ys) * 1e3:.3f} ms",
                    spread(ys),
                    f"{rounds} x {batch}",
                ],
            ],
        )
    )
    return [
        Figure(
            "mgmt_clock vs freezegun (start, move, read, stop)", median(xs), median(ys), "s", 1.1
        )
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    figures = main(parser.parse_args().quick)
    print()
    print_figures(figures)
