"""The cost of an exploration against the same runs written out as parametrized tests.

11. One test marked ``@pytest.mark.mgmtauth_explore(runs=200, seed=1)`` (one item, its
    body run 200 times, each under its own schedule of faults and clock moves) against
    the same body written out as 200 parametrized tests, each scheduling by hand
    (``mgmt_server.schedule_fault``, ``mgmt_server.schedule_clock_move``) exactly the
    events that fired in one run of the exploration. Same client (requests, renewing
    before expiry, waiting ``Retry-After`` on ``mgmt_clock``, re-authenticating after a
    401, resending a GET dropped or answered 503): it passes every schedule, so nothing
    is shrunk. What differs is the exploration's own work (drawing the schedules, the
    reading of each run's timeline) against pytest's per-item work (collection,
    reports, the terminal). Target: 1.0x (wall).

The exploration's events are recorded once (a run with ``BENCH_EXPLORE_RECORD`` set,
which has each run write the events that fired), then both suites run alternately in
fresh processes, several rounds, medians.

    python benchmarks/bench_explore.py [--quick] [--runs N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from _bench import Figure, print_figures, run_pytest
from bench_suites import PYTEST_INI, _rows, _runs, suite_figure

HEADER = """
import json
import os
import re

import pytest
import requests

from pytest_mgmtauth import ScheduledFaultFired

RECORD = os.environ.get("BENCH_EXPLORE_RECORD")


def record(mgmt_server):
    fired = []
    for event in mgmt_server.events:
        if isinstance(event, ScheduledFaultFired):
            seconds = re.search(r"([0-9]+) s", event.detail) if event.fault == "clock" else None
            fired.append([event.fault, event.point, int(seconds[1]) if seconds else 0])
    with open(RECORD, "a") as out:
        out.write(json.dumps(fired) + "\\n")


class Client:
    def __init__(self, url, account, clock):
        self.url, self.account, self.clock, self.token = url, account, clock, None
        self.http = requests.Session()
        self.http.trust_env = False

    def _authenticate(self):
        for attempt in range(3):
            answer = self.http.post(
                self.url + "/v2/auth",
                data={"username": self.account.username, "key": self.account.api_key},
            )
            if answer.status_code in (429, 503) and attempt < 2:
                self.clock.advance(seconds=float(answer.headers.get("Retry-After", "1")))
                continue
            answer.raise_for_status()
            body = answer.json()
            self.token, self.expires = body["token"], self.clock.now().timestamp() + 1800
            return

    def get(self, path):
        # Two faults, and a 401 from a clock move at the first grant (the token it
        # keeps as fresh is already expired): four attempts.
        for attempt in range(4):
            if self.token is None or self.clock.now().timestamp() >= self.expires - 60:
                self._authenticate()
            try:
                answer = self.http.get(
                    self.url + path, headers={"Authorization": "Bearer " + self.token}
                )
            except requests.ConnectionError:
                continue
            if answer.status_code == 401 and attempt < 3:
                self.token = None
                continue
            if answer.status_code == 503 and attempt < 3:
                continue
            answer.raise_for_status()
            return answer.json()
"""

BODY = """
    mgmt_server.route("GET", "/api/items").respond_with_json({"items": [1]})
    client = Client(mgmt_server.url, mgmt_account, mgmt_clock)
    for _ in range(3):
        assert client.get("/api/items") == {"items": [1]}
    if RECORD:
        record(mgmt_server)
"""

EXPLORED = (
    """
@pytest.mark.mgmtauth_explore(runs={runs}, seed=1)
def test_explored(mgmt_server, mgmt_account, mgmt_clock):"""
    + BODY
)

BY_HAND = (
    """
SCHEDULES = {schedules!r}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_by_hand(mgmt_server, mgmt_account, mgmt_clock, schedule):
    for kind, point, seconds in schedule:
        if kind == "clock":
            mgmt_server.schedule_clock_move(seconds, at=point)
        else:
            mgmt_server.schedule_fault(kind, at=point)"""
    + BODY
)

#: The client renews a minute before expiry: findings (a lost call after an expire before
#: call 1) warn alike on both sides and must not become errors.
FINDINGS_ALLOWED = "    ignore::pytest_mgmtauth.AuthFindingWarning\n"


def _write(directory: Path, test: str) -> Path:
    directory.mkdir()
    (directory / "pytest.ini").write_text(PYTEST_INI + FINDINGS_ALLOWED)
    (directory / f"test_{directory.name}.py").write_text(HEADER + test)
    return directory


def bench_explore(root: Path, runs: int, rounds: int) -> Figure:
    explored = _write(root / "explored", EXPLORED.replace("{runs}", str(runs)))
    recorded = root / "events.jsonl"
    out = run_pytest(explored, env={"BENCH_EXPLORE_RECORD": str(recorded)}).proc.stdout
    if "1 passed" not in out:
        raise RuntimeError(f"the explored suite did not pass:\n{out[-3000:]}")
    schedules = [json.loads(line) for line in recorded.read_text().splitlines()]
    if len(schedules) != runs:
        raise RuntimeError(f"expected {runs} runs of the explored body, got {len(schedules)}")
    by_hand = _write(root / "byhand", BY_HAND.replace("{schedules!r}", repr(schedules)))
    out = run_pytest(by_hand).proc.stdout
    if f"{runs} passed" not in out:
        raise RuntimeError(f"the written-out suite: expected {runs} passed:\n{out[-3000:]}")
    xs, ys = _runs((explored, ()), (by_hand, ()), rounds)
    title = f"an explored test, runs={runs}, vs {runs} parametrized tests with its events"
    print(_rows(title, xs, ys))
    kinds = sorted({event[0] for schedule in schedules for event in schedule})
    why = f"; events: {', '.join(kinds)}"
    return suite_figure(f"explore runs={runs} vs {runs} tests (wall)", xs, ys, "wall", 1.0, why)


def main(quick: bool = False, runs: int | None = None, rounds: int | None = None) -> list[Figure]:
    runs = runs or (30 if quick else 200)
    rounds = rounds or (3 if quick else 7)
    with tempfile.TemporaryDirectory(prefix="mgmtauth-bench-") as tmp:
        return [bench_explore(Path(tmp), runs, rounds)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and rounds")
    parser.add_argument("--runs", type=int, default=None, help="runs of the explored body")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds")
    args = parser.parse_args()
    figures = main(args.quick, args.runs, args.rounds)
    print()
    print_figures(figures)
    sys.exit(0)
