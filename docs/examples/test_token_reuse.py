"""Testing token reuse and expiry with pytest-mgmtauth (docs/token-reuse.md)."""

from __future__ import annotations

import threading

import pytest
from reuse_clients import ChurningClient, ProactiveClient, ReactiveClient

from pytest_mgmtauth import Account, MgmtClock, MgmtServer


@pytest.fixture
def things(mgmt_server: MgmtServer) -> None:
    mgmt_server.route("GET", "/api/things").respond_with_json([{"id": 1}])


# --8<-- [start:churn]
def test_a_client_that_authenticates_before_every_call_churns(
    mgmt_server: MgmtServer, mgmt_account: Account, things: None
) -> None:
    client = ChurningClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key)
    for _ in range(3):
        assert client.get("/api/things").status_code == 200

    with pytest.raises(AssertionError) as failure:
        mgmt_server.assert_token_reused()
    message = str(failure.value)
    assert f"account {mgmt_account.username!r} was granted 2 new credential(s)" in message
    assert "First premature grant: T2" in message
    assert mgmt_account.api_key not in message  # secrets appear as fingerprints only


# --8<-- [end:churn]


# --8<-- [start:proactive]
@pytest.mark.mgmtauth(strict=True)  # churn would fail this test at teardown
def test_refreshing_a_minute_before_expiry_reuses_and_never_sends_an_expired_token(
    mgmt_clock: MgmtClock, mgmt_server: MgmtServer, mgmt_account: Account, things: None
) -> None:
    client = ProactiveClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key)
    for _ in range(16):  # two hours of calls, one every 7 min 15 s
        assert client.get("/api/things").status_code == 200
        mgmt_clock.advance(seconds=435)

    mgmt_server.assert_token_reused()
    mgmt_server.assert_no_expired_token_used()
    mgmt_server.assert_auth_count(4, version="v2")  # at 0:00, 0:29, 0:58 and 1:27
    assert "00:29:00  T2 issued by /v2/auth" in mgmt_server.timeline()  # 60 s before exp


# --8<-- [end:proactive]


# --8<-- [start:reactive]
def test_waiting_for_the_401_is_reuse_but_sends_expired_tokens(
    mgmt_clock: MgmtClock, mgmt_server: MgmtServer, mgmt_account: Account, things: None
) -> None:
    client = ReactiveClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key)
    for _ in range(12):
        assert client.get("/api/things").status_code == 200
        mgmt_clock.advance(minutes=10)

    mgmt_server.assert_token_reused()  # re-authenticating after a 1401 is reuse
    with pytest.raises(AssertionError, match="presented an expired credential 3 times"):
        mgmt_server.assert_no_expired_token_used()


# --8<-- [end:reactive]


# --8<-- [start:single-flight]
def test_threads_sharing_a_client_refresh_once(
    mgmt_server: MgmtServer, mgmt_account: Account, things: None
) -> None:
    client = ProactiveClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key)
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()  # all threads need a token at the same moment
        assert client.get("/api/things").status_code == 200

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    mgmt_server.assert_single_flight()
    mgmt_server.assert_auth_count(1)


# --8<-- [end:single-flight]


def test_the_timeline_is_there_to_read(
    mgmt_clock: MgmtClock, mgmt_server: MgmtServer, mgmt_account: Account, things: None
) -> None:
    client = ReactiveClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key)
    client.get("/api/things")
    mgmt_clock.advance(minutes=31)
    client.get("/api/things")
    timeline = mgmt_server.timeline(mgmt_account.username)
    assert "00:30:00  T1 expired (used 1 time)" in timeline
    assert "00:31:00  GET /api/things with T1 -> 401 (1401: token T1 expired 60 s ago" in timeline
