"""The cost of a sweep item against the same test with the same fault scripted by hand.

7. A generated suite of ``tests`` test functions, each swept with
   ``@pytest.mark.mgmtauth_sweep(faults=("expire", "revoke", "reset"), points=3)`` (one
   baseline and nine fault items each), against the same functions parametrized by hand
   over the same ten cases, each calling ``mgmt_server.schedule_fault(kind, at=k)`` in its
   body. Same items, same faults, same client (requests, re-authenticating once on a
   401 and retrying a dropped connection), both on ``mgmt_clock``. What differs is the
   sweep's own work: the expansion at collection, the reached check, the reading of the
   timeline after the fault, the properties and the matrix. Target: 1.1x (CPU).

Both suites run alternately in fresh processes, several rounds, medians.

    python benchmarks/bench_sweep.py [--quick] [--tests N] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _bench import Figure, print_figures, run_pytest
from bench_suites import PYTEST_INI, _rows, _runs, _suite, suite_figure

HEADER = """
import pytest
import requests


class Client:
    def __init__(self, url, account):
        self.url, self.account, self.token = url, account, None
        self.http = requests.Session()
        self.http.trust_env = False

    def get(self, path):
        for attempt in (1, 2):
            if self.token is None:
                answer = self.http.post(
                    self.url + "/v2/auth",
                    data={"username": self.account.username, "key": self.account.api_key},
                )
                self.token = answer.json()["token"]
            try:
                answer = self.http.get(
                    self.url + path, headers={"Authorization": "Bearer " + self.token}
                )
            except requests.ConnectionError:
                continue
            if answer.status_code == 401 and attempt == 1:
                self.token = None
                continue
            return answer.json()


CASES = [None] + [(kind, k) for kind in ("expire", "revoke", "reset") for k in (1, 2, 3)]
"""

FINDINGS_ALLOWED = "    ignore::pytest_mgmtauth.AuthFindingWarning\n"

BODY = """
    mgmt_server.route("GET", "/api/items").respond_with_json({{"items": [{i}]}})
    client = Client(mgmt_server.url, mgmt_account)
    for _ in range(3):
        assert client.get("/api/items") == {{"items": [{i}]}}
"""

SWEPT_TEST = (
    """
@pytest.mark.mgmtauth_sweep(faults=("expire", "revoke", "reset"), points=3)
def test_{i}(mgmt_server, mgmt_account, mgmt_clock):"""
    + BODY
)

BY_HAND_TEST = (
    """
@pytest.mark.parametrize("case", CASES)
def test_{i}(mgmt_server, mgmt_account, mgmt_clock, case):
    if case is not None:
        mgmt_server.schedule_fault(case[0], at=case[1])"""
    + BODY
)


def bench_sweep(root: Path, tests: int, rounds: int) -> Figure:
    swept = _suite(root, "swept", HEADER, SWEPT_TEST, tests)
    by_hand = _suite(root, "byhand", HEADER, BY_HAND_TEST, tests)
    for directory in (swept, by_hand):
        # The client renews only after a 401, so the expire and revoke items end with an
        # ExpiredCredentialWarning on both sides alike: this figure is about cost, and
        # the warnings must not turn into errors under the suites' filterwarnings=error.
        (directory / "pytest.ini").write_text(PYTEST_INI + FINDINGS_ALLOWED)
    # Both suites must run the same items, all passing: check once before timing.
    for directory in (swept, by_hand):
        out = run_pytest(directory).proc.stdout
        if f"{tests * 10} passed" not in out:
            raise RuntimeError(f"{directory.name}: expected {tests * 10} passed:\n{out[-2000:]}")
    xs, ys = _runs((swept, ()), (by_hand, ()), rounds)
    print(_rows(f"{tests * 10} items: swept vs the same faults scripted by hand", xs, ys))
    return suite_figure("sweep item vs the same fault by hand (CPU)", xs, ys, "cpu", 1.1)


def main(quick: bool = False, tests: int | None = None, rounds: int | None = None) -> list[Figure]:
    tests = tests or (10 if quick else 30)
    rounds = rounds or (3 if quick else 7)
    with tempfile.TemporaryDirectory(prefix="mgmtauth-bench-") as tmp:
        return [bench_sweep(Path(tmp), tests, rounds)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer tests and rounds")
    parser.add_argument("--tests", type=int, default=None, help="test functions per suite")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds")
    args = parser.parse_args()
    figures = main(args.quick, args.tests, args.rounds)
    print()
    print_figures(figures)
    sys.exit(0)
