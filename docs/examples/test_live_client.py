"""A client test marked live: an ordinary run checks the client against the fake (and
against the module's snapshot, if it has one); ``pytest --mgmtauth-live`` runs it against
the service and records that snapshot. See the page Checked against the service."""

from __future__ import annotations

import pytest
from mgmt_client import MgmtClient


# --8<-- [start:live]
@pytest.mark.mgmtauth_live
def test_one_token_serves_many_calls_live(mgmt_server, mgmt_account):
    # The service answers this route in a live run; the fake's canned answer is not used.
    mgmt_server.route("GET", "/v2/devices").respond_with_json([{"id": 7}])

    with MgmtClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key) as client:
        for _ in range(3):
            client.request("GET", "/v2/devices")

    if not mgmt_server.live:  # the fake's timeline: what a live run cannot count
        assert mgmt_server.auth_count(version="v2") == 1


# --8<-- [end:live]
