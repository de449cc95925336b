"""Exploration of the two clients of ``explore_clients.py`` (docs/explore.md).

The fixed client's exploration runs here as it would in a user's suite: it passes. The
other one passes every sweep and fails its exploration, so both run in a ``pytester``
suite of their own and the tests check what a user sees.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from explore_clients import FixedSyncClient

from pytest_mgmtauth import Account, MgmtClock, MgmtServer

DEVICES = [{"id": n} for n in range(8)]


# --8<-- [start:explore]
@pytest.mark.mgmtauth_explore(runs=100, max_faults=2)
def test_sync_devices(mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock):
    mgmt_server.route("GET", "/v2/devices").respond_with_json(DEVICES)
    client = FixedSyncClient(
        mgmt_server.url,
        mgmt_account.username,
        mgmt_account.api_key,
        sleep=lambda seconds: mgmt_clock.advance(seconds=seconds),  # waits in simulated time
    )
    client.connect()
    for _ in range(3):
        assert len(client.get("/v2/devices")) == 8


# --8<-- [end:explore]


SUITE = """
import pytest
from explore_clients import {client}


@pytest.mark.{marker}
def test_sync_devices(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1, 2, 3])
    client = {client}(
        mgmt_server.url,
        mgmt_account.username,
        mgmt_account.api_key,
        sleep=lambda seconds: mgmt_clock.advance(seconds=seconds),
    )
    client.connect()
    for _ in range(3):
        assert client.get("/v2/devices") == [1, 2, 3]
"""


def _run(pytester: pytest.Pytester, client: str, marker: str) -> pytest.RunResult:
    here = Path(__file__).parent
    pytester.makepyfile(
        explore_clients=here.joinpath("explore_clients.py").read_text(),
        sweep_clients=here.joinpath("sweep_clients.py").read_text(),
        test_sync=SUITE.format(client=client, marker=marker),
    )
    return pytester.runpytest_inprocess("-p", "no:randomly")


ALL_FAULTS = "faults=('expire', 'revoke', 'throttle', 'unavailable', 'reset')"


def test_the_client_passes_every_sweep(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "SyncClient", f"mgmtauth_sweep({ALL_FAULTS}, points=3)")
    # The points it never reaches (a second authentication) skip; the others pass.
    result.assert_outcomes(passed=12, skipped=4)
    result.stdout.re_match_lines(
        [
            r"  verdict: survives expire at 3/3 points; survives revoke at 3/3 points; "
            r"survives throttle at 1/1 points; survives unavailable at 1/1 points; "
            r"survives reset at 3/3 points$"
        ]
    )


def test_the_client_fails_its_exploration_and_the_story_says_why(
    pytester: pytest.Pytester,
) -> None:
    result = _run(pytester, "SyncClient", "mgmtauth_explore(runs=200, seed=4)")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r"=+ mgmtauth explore =+",
            r"test_sync.py::test_sync_devices$",
            r"  \d+ runs, \d+ distinct schedules, \d+ failing$",
            r"  shortest failing schedule: revoke@call1, throttle@auth2$",
            r"    1. revoke@call1: token T1 revoked on cue$",
            r"    2. throttle@auth2: POST /v2/auth answered error 429, Retry-After 1s$",
            r"    then: the client never retried authentication after a 429$",
            r"    the test failed: requests.exceptions.HTTPError: 429 Client Error: .*",
            r'  replay it: @pytest.mark.mgmtauth_explore\(replay="revoke@call1, '
            r'throttle@auth2"\)$',
        ]
    )


def test_the_fix_survives_that_schedule(pytester: pytest.Pytester) -> None:
    replay = 'mgmtauth_explore(replay="revoke@call1, throttle@auth2")'
    _run(pytester, "SyncClient", replay).assert_outcomes(failed=1)
    _run(pytester, "FixedSyncClient", replay).assert_outcomes(passed=1)
