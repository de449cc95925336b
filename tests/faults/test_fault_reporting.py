"""Faults and throttling as a user's suite sees them: in the failure message's timeline
and in the teardown warning (pytester)."""

from __future__ import annotations

import pytest


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


SUITE = """
import pytest
import requests


def authenticate(mgmt_server, account):
    return requests.post(
        mgmt_server.url + "/v2/auth",
        data={"username": account.username, "key": account.api_key},
    )


@pytest.mark.mgmtauth(throttle=2)
def test_churning_client(mgmt_clock, mgmt_server, mgmt_account):
    # Frozen: Retry-After is exact only if no real second passes between the grants.
    mgmt_server.fail_next(error=503)
    statuses = [authenticate(mgmt_server, mgmt_account).status_code for _ in range(5)]
    assert statuses == [503, 200, 200, 200, 429]
    mgmt_server.revoke("T1")
    mgmt_server.rotate_key(mgmt_account)
    mgmt_server.assert_token_reused()
"""


def test_the_timeline_of_a_failure_shows_faults_throttling_and_changes_on_cue(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "POST /v2/auth -> scripted fault (1 of 1): error 503" in text
    assert "/v2/auth throttled (429, Retry-After 60s) after 2 premature grants" in text
    assert "token T1 revoked on cue" in text
    assert "API key rotated on cue" in text
    assert "the old one now gets 1401" in text
