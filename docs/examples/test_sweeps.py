"""Sweeps of the three clients of ``sweep_clients.py`` (docs/sweeps.md).

The recovering client's sweep runs here as it would in a user's suite: every item
passes. The other two are expected to show something, so their sweeps run in a
``pytester`` suite of their own and the tests check the matrix and verdict a user sees.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_clients import RecoveringClient

from pytest_mgmtauth import Account, MgmtClock, MgmtServer

DEVICES = [{"id": n} for n in range(8)]


# --8<-- [start:sweep]
@pytest.mark.mgmtauth_sweep(
    faults=("expire", "revoke", "throttle", "unavailable", "reset"), points=3
)
def test_sync_devices(mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock):
    mgmt_server.route("GET", "/v2/devices").respond_with_json(DEVICES)
    mgmt_server.route("GET", "/v2/devices/count").respond_with_json({"count": 8})
    client = RecoveringClient(
        mgmt_server.url,
        mgmt_account.username,
        mgmt_account.api_key,
        sleep=lambda seconds: mgmt_clock.advance(seconds=seconds),  # waits in simulated time
    )
    client.connect()
    assert len(client.get("/v2/devices")) == 8
    assert client.get("/v2/devices/count") == {"count": 8}
    assert len(client.get("/v2/devices")) == 8


# --8<-- [end:sweep]


SUITE = """
import pytest
from sweep_clients import {client}

@pytest.mark.mgmtauth_sweep(faults={faults!r}, points=3)
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


def _sweep(pytester: pytest.Pytester, client: str, faults: tuple[str, ...]) -> pytest.RunResult:
    clients = Path(__file__).with_name("sweep_clients.py").read_text()
    pytester.makepyfile(sweep_clients=clients, test_sync=SUITE.format(client=client, faults=faults))
    return pytester.runpytest_inprocess("-p", "no:randomly")


def test_a_client_that_never_retries_on_401_survives_expire_and_fails_revoke(
    pytester: pytest.Pytester,
) -> None:
    result = _sweep(pytester, "ProactiveClient", ("expire", "revoke"))
    result.assert_outcomes(passed=4, failed=3)
    result.stdout.re_match_lines(
        [
            r"=+ mgmtauth sweep =+",
            r"test_sync.py::test_sync_devices$",
            r" +1 +2 +3$",
            r"  baseline +ok$",
            r"  expire call +ok +ok +ok$",
            r"  revoke call +FAIL +FAIL +FAIL$",
            r"  verdict: survives expire at 3/3 points; revoke fails from call 1 \(3/3 "
            r"points\): the client never re-authenticates after a 401 with 1401$",
        ]
    )


def test_a_client_that_ignores_retry_after_is_throttled_again_and_fails(
    pytester: pytest.Pytester,
) -> None:
    result = _sweep(pytester, "ImpatientClient", ("throttle",))
    # Its retries at once are answered 429 again, as a real throttle answers them.
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    result.stdout.re_match_lines(
        [
            r"  throttle auth +FAIL +- +-$",
            r"  verdict: throttle fails from auth 1 \(1/1 points\): the client retried "
            r"authentication 0 s after a 429 with Retry-After 1 s: honour Retry-After$",
        ]
    )
