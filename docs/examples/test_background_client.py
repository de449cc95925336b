"""A client that works on a thread of its own (a scheduler, a background refresher):
the test waits until the fake has seen what the client should have done."""

from __future__ import annotations

import threading

from mgmt_client import MgmtClient


# --8<-- [start:wait]
def test_a_background_sync_authenticates_once(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([{"id": 7}])

    def sync() -> None:  # what a scheduler would run, three times
        with MgmtClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key) as client:
            for _ in range(3):
                client.get("/v2/devices")

    threading.Thread(target=sync, daemon=True).start()

    # Blocks until the fake has seen three calls (or fails after 10 s, with its timeline).
    mgmt_server.wait(calls=3, timeout=10)
    assert mgmt_server.auth_count(version="v2") == 1


# --8<-- [end:wait]
