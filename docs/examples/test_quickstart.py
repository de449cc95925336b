"""The quickstart's tests: the smallest useful ones (run them with `pytest docs/examples`)."""

from __future__ import annotations

import pytest
from mgmt_client import MgmtClient

from pytest_mgmtauth import TokenIssued


# --8<-- [start:first-test]
def test_client_reuses_its_token(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([{"id": 7}])

    with MgmtClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key) as client:
        for _ in range(10):
            assert client.get("/v2/devices") == [{"id": 7}]

    assert mgmt_server.auth_count(version="v2") == 1


# --8<-- [end:first-test]


# --8<-- [start:clock-test]
@pytest.mark.mgmtauth(token_ttl=300)  # 5-minute tokens instead of 30
def test_client_gets_a_new_token_before_the_old_one_expires(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([])

    with MgmtClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key) as client:
        client.get("/v2/devices")
        mgmt_clock.advance(minutes=3)  # 2 minutes left: the token is reused
        client.get("/v2/devices")
        mgmt_clock.advance(seconds=90)  # 30 s left, inside the 60 s refresh margin
        client.get("/v2/devices")

    grants = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert [e.token for e in grants] == ["T1", "T2"]
    assert (grants[1].at - grants[0].at).total_seconds() == 270
    assert not grants[1].premature  # renewing near expiry is reuse, not churn


# --8<-- [end:clock-test]
