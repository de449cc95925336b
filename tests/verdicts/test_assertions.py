"""Churn, herds, expiry, logout and counts: the checks and their messages, on a manual clock."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import parse_qsl, quote, quote_plus, unquote_plus

import pytest
from domain_support import admitted
from hypothesis import given, strategies as st

from pytest_mgmtauth._service.accounts import _KEY_ALPHABET, Account, fingerprint
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.records import Refusal
from pytest_mgmtauth._service.secret_text import diagnose_secret
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock
from pytest_mgmtauth._verdicts.checks import (
    check_auth_count,
    check_logged_out,
    check_no_expired_credential_used,
    check_single_flight,
    check_token_reused,
    churn_message,
)
from pytest_mgmtauth._verdicts.evidence import AuthSummary, Evidence, format_timeline, summarize
from pytest_mgmtauth._verdicts.findings import finding_counts, findings

MakeService = Callable[..., AuthService]


def evidence(service: AuthService) -> Evidence:
    return Evidence(
        events=service.timeline.events,
        options=service.options,
        started_at=service.timeline.started_at,
        now=service.timeline.now(),
    )


def grant(service: AuthService, account: Account, *, arrived: int | None = None) -> str:
    token, _ = service.flow(V2Flow).grant(account.username, account.api_key, arrived=arrived)
    return token


def call(service: AuthService, token: str | None, *, scheme: bool = True) -> int:
    """A protected v2 call (``scheme``: with ``Bearer`` before the token); the status
    the client gets (200 or the refusal's)."""
    header = f"Bearer {token}" if scheme else token
    try:
        auth = admitted(service, "v2", authorization=header, path="/api/things")
    except Refusal as refusal:
        return refusal.return_code
    service.timeline.record_call(auth, "GET", "/api/things", 200)
    return 200


def churn_error(service: AuthService, **kwargs: str) -> str:
    with pytest.raises(AssertionError) as excinfo:
        check_token_reused(evidence(service), **kwargs)
    return str(excinfo.value)


# -- churn: the definition -------------------------------------------------------------


def test_one_token_reused_for_many_calls_passes(service: AuthService, clock: ManualClock) -> None:
    account = service.accounts.add_account()
    token = grant(service, account)
    for _ in range(10):
        assert call(service, token) == 200
        clock.advance(60)
    check_token_reused(evidence(service))
    assert churn_message(evidence(service)) is None


def test_reauth_before_every_call_fails_naming_account_and_first_premature_grant(
    service: AuthService, clock: ManualClock
) -> None:
    account = service.accounts.add_account()
    tokens = []
    for _ in range(4):
        tokens.append(grant(service, account))
        call(service, tokens[-1])
        clock.advance(10)
    message = churn_error(service)
    assert f"account {account.username!r} was granted 3 new credential(s)" in message
    t2 = fingerprint(tokens[1])
    assert f"First premature grant: T2 ({t2}) at 00:00:10, while T1 was still valid" in message
    assert "the call before it: GET /api/things with T1 -> 200 at 00:00:00" in message
    assert "PREMATURE: T1 still valid for another 29m50s" in message
    assert "(churn is counted per account, whichever client asked)." in message
    # The setting that decides what is early, by every name a user sets it with.
    assert message.rstrip().endswith(
        "A new credential within refresh_margin (300 s) of the old one's expiry is reuse, "
        "not churn; if the client renews earlier on purpose, widen it with "
        "@pytest.mark.mgmtauth(refresh_margin=...), the ini setting mgmtauth_refresh_margin "
        "or --mgmtauth-refresh-margin (mgmtauth-server: --refresh-margin)."
    )
    assert "Fix: keep the token from /v2/auth" in message
    # Secrets appear as fingerprints only.
    assert account.api_key not in message
    assert not any(token in message for token in tokens)
    assert not any(token[:40] in message for token in tokens)


def test_reauth_within_refresh_margin_is_reuse_and_one_second_earlier_is_churn(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(token_ttl=1800, refresh_margin=60)
    account = service.accounts.add_account()
    grant(service, account)
    clock.advance(1800 - 60)  # exactly refresh_margin before exp
    grant(service, account)
    check_token_reused(evidence(service))

    clock.advance(1800 - 61)  # T2 was issued at 1740; this is 61 s before its exp
    grant(service, account)
    assert "First premature grant: T3" in churn_error(service)


def test_reauth_after_expiry_is_reuse(service: AuthService, clock: ManualClock) -> None:
    account = service.accounts.add_account()
    grant(service, account)
    clock.advance(1800)
    grant(service, account)
    check_token_reused(evidence(service))


def test_reauth_after_a_1401_is_reuse_even_at_the_same_instant(
    service: AuthService, clock: ManualClock
) -> None:
    # Under a frozen clock everything happens at one instant: the refusal must still
    # release exactly the credentials granted before it, and no later one.
    account = service.accounts.add_account()
    token = grant(service, account)
    assert call(service, token, scheme=False) == 1401
    second = grant(service, account)
    check_token_reused(evidence(service))
    assert call(service, second) == 200
    grant(service, account)
    assert "First premature grant: T3" in churn_error(service)


def test_a_1469_does_not_refuse_the_credential(service: AuthService) -> None:
    account = service.accounts.add_account(permissions=[])
    token = grant(service, account)
    with pytest.raises(Refusal) as excinfo:
        admitted(service, "v2", token=token, path="/x", permission="admin")
    assert excinfo.value.return_code == 1469
    grant(service, account)
    assert "First premature grant: T2" in churn_error(service)


def test_churn_is_per_account_whichever_client_asked(service: AuthService) -> None:
    alice, bob = service.accounts.add_account(), service.accounts.add_account()
    grant(service, alice)  # client 1
    grant(service, bob)  # another account: no churn
    check_token_reused(evidence(service))
    grant(service, alice)  # client 2, same account
    message = churn_error(service)
    assert f"account {alice.username!r}" in message
    assert f"account {bob.username!r} was granted" not in message
    check_token_reused(evidence(service), username=bob.username)


def test_v1_login_while_a_session_is_active_is_churn_and_after_logout_is_not(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    first = service.flow(V1Flow).login(account.username, account.password)
    service.flow(V1Flow).logout(first.session_id)
    service.flow(V1Flow).login(account.username, account.password)
    check_token_reused(evidence(service))
    service.flow(V1Flow).login(account.username, account.password)
    message = churn_error(service)
    assert "First premature grant: S3" in message
    assert "while S2 was still valid" in message
    assert "keep the JSESSIONID and utk of one /v1/login" in message


# -- thundering herd -------------------------------------------------------------------


def test_grants_requested_while_another_was_in_flight_are_a_herd(service: AuthService) -> None:
    account = service.accounts.add_account()
    # Three threads send /v2/auth together: all arrive before the first is answered.
    arrivals = [service.credentials.request_arrived() for _ in range(3)]
    for arrived in arrivals:
        grant(service, account, arrived=arrived)
    events = evidence(service).events
    issued = [e for e in events if type(e).__name__ == "TokenIssued"]
    assert [e.concurrent_with for e in issued] == [(), ("T1",), ("T1", "T2")]  # type: ignore[attr-defined]
    with pytest.raises(AssertionError) as excinfo:
        check_single_flight(evidence(service))
    message = str(excinfo.value)
    assert f"thundering herd: 2 grant(s) to account {account.username!r}" in message
    assert "first: T2 at 00:00:00, requested before T1 was issued" in message
    assert "Fix: refresh in single flight" in message
    assert "a thundering herd" in churn_error(service)


def test_sequential_grants_are_not_a_herd(service: AuthService, clock: ManualClock) -> None:
    account = service.accounts.add_account()
    for _ in range(3):
        grant(service, account, arrived=service.credentials.request_arrived())
        clock.advance(1800)
    check_single_flight(evidence(service))


def test_a_request_that_arrived_after_the_grant_was_issued_is_not_concurrent(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    grant(service, account, arrived=service.credentials.request_arrived())
    grant(service, account, arrived=service.credentials.request_arrived())  # churn, but not a herd
    check_single_flight(evidence(service))
    assert "thundering herd" not in churn_error(service)


# -- expiry, logout, counts --------------------------------------------------------------


def test_proactive_refresh_passes_and_reactive_refresh_fails_expired_use(
    make_service: MakeService, clock: ManualClock
) -> None:
    proactive = make_service()
    account = proactive.accounts.add_account()
    token, record = proactive.flow(V2Flow).grant(account.username, account.api_key)
    for _ in range(12):
        clock.advance(290)
        if clock.now >= record.claims.exp - 60:  # one minute before expiry
            token, record = proactive.flow(V2Flow).grant(account.username, account.api_key)
        assert call(proactive, token) == 200
    assert proactive.auth_count() == 3  # at 0, 1740 and 3480 s
    check_token_reused(evidence(proactive))
    check_no_expired_credential_used(evidence(proactive))

    reactive = make_service()
    account = reactive.accounts.add_account()
    token = grant(reactive, account)
    for _ in range(6):
        clock.advance(600)
        if call(reactive, token) == 1401:
            token = grant(reactive, account)
            assert call(reactive, token) == 200
    check_token_reused(evidence(reactive))
    with pytest.raises(AssertionError) as excinfo:
        check_no_expired_credential_used(evidence(reactive))
    message = str(excinfo.value)
    assert "presented an expired credential 2 times" in message
    assert "first: GET /api/things with T1 at 00:30:00 -> 401 (token T1 expired 0 s ago" in message
    assert "Fix: refresh proactively" in message


def test_ended_session_presented_fails_expired_use(service: AuthService) -> None:
    account = service.accounts.add_account()
    record = service.flow(V1Flow).login(account.username, account.password)
    service.flow(V1Flow).logout(record.session_id)
    with pytest.raises(Refusal):
        admitted(service, "v1", session=record.session_id, utk=record.utk, path="/v1/x")
    with pytest.raises(AssertionError, match="log in again before the next call"):
        check_no_expired_credential_used(evidence(service))


def test_logged_out_fails_for_a_session_left_open_and_names_it(
    service: AuthService, clock: ManualClock
) -> None:
    account = service.accounts.add_account()
    closed = service.flow(V1Flow).login(account.username, account.password)
    service.flow(V1Flow).logout(closed.session_id)
    check_logged_out(evidence(service))
    service.flow(V1Flow).login(account.username, account.password)
    clock.advance(1800)
    # Ended by the service (idle timeout): "logout call is optional" then.
    check_logged_out(evidence(service))
    service.flow(V1Flow).login(account.username, account.password)
    with pytest.raises(AssertionError) as excinfo:
        check_logged_out(evidence(service))
    message = str(excinfo.value)
    assert "1 v1 session(s) were not ended with /v1/logout: S3" in message
    assert "still active" in message
    assert "S2" not in message.split("\n")[0]


def test_auth_count_is_exact_and_shows_the_timeline(service: AuthService) -> None:
    account = service.accounts.add_account()
    grant(service, account)
    service.flow(V1Flow).login(account.username, account.password)
    check_auth_count(evidence(service), 2)
    check_auth_count(evidence(service), 1, version="v2")
    check_auth_count(evidence(service), 1, version="v1", username=account.username)
    with pytest.raises(AssertionError) as excinfo:
        check_auth_count(evidence(service), 1)
    message = str(excinfo.value)
    assert message.startswith("pytest-mgmtauth: expected 1 credential grants, got 2: T1 at")
    assert "Timeline of all accounts" in message
    with pytest.raises(AssertionError, match="did the client reach /v2/auth at all"):
        check_auth_count(evidence(service), 1, username="nobody@example.com")
    with pytest.raises(TypeError):
        check_auth_count(evidence(service), True)


# -- the timeline ----------------------------------------------------------------------


def test_timeline_collapses_repeated_calls_and_lists_each_credential(
    service: AuthService, clock: ManualClock
) -> None:
    account = service.accounts.add_account()
    token = grant(service, account)
    for _ in range(5):
        call(service, token)
        clock.advance(60)
    clock.advance(1800)
    assert call(service, token) == 1401
    text = format_timeline(evidence(service), username=account.username)
    lines = text.splitlines()
    assert lines[0] == (
        f"Timeline of account {account.username!r} (simulated time since the test started):"
    )
    assert "  00:00:00  GET /api/things with T1 -> 200  (x5, until 00:04:00)" in lines
    assert "  00:30:00  T1 expired (used 5 times)" in lines
    assert any(
        line.startswith("  00:35:00  GET /api/things with T1 -> 401 (1401: token T1")
        for line in lines
    )
    assert lines[-1] == (
        f"  T1   {fingerprint(token)}  issued 00:00:00, used 5 times, expired 00:30:00, "
        "first refused 00:35:00"
    )


def test_long_timelines_are_cut_around_the_first_premature_grant(
    service: AuthService, clock: ManualClock
) -> None:
    account = service.accounts.add_account()
    token = grant(service, account)
    for i in range(40):  # distinct calls, nothing to collapse
        service.timeline.record_call(
            admitted(service, "v2", token=token, path=f"/p{i}"),
            "GET",
            f"/p{i}",
            200,
        )
    clock.advance(5)
    grant(service, account)
    for i in range(40):
        service.timeline.record_call(
            admitted(service, "v2", token=token, path=f"/q{i}"),
            "GET",
            f"/q{i}",
            200,
        )
    message = churn_error(service)
    assert "PREMATURE: T1 still valid" in message
    assert re.search(r"\.\.\. \d+ more line\(s\) \.\.\.", message)
    assert "more line(s): mgmt_server.timeline() shows them all" in message
    assert len(message.splitlines()) < 50


def test_summary_counts_grants_calls_rejections_churn_and_herds(service: AuthService) -> None:
    account = service.accounts.add_account()
    arrivals = [service.credentials.request_arrived(), service.credentials.request_arrived()]
    token = grant(service, account, arrived=arrivals[0])
    grant(service, account, arrived=arrivals[1])
    call(service, token)
    call(service, None)
    with pytest.raises(Refusal):
        service.flow(V2Flow).grant(account.username, "wrong")
    assert summarize(service.timeline.events) == AuthSummary(
        grants=2, api_calls=2, rejections=2, churn=1, concurrent=1
    )
    assert summarize(service.timeline.events).as_properties()[0] == ("mgmtauth_grants", 2)


# -- diagnoses of how a secret travelled (property) ---------------------------------------

_KEYS = st.text(alphabet=_KEY_ALPHABET, min_size=2, max_size=60).filter(lambda k: k[0].isalnum())


@given(key=_KEYS)
def test_any_key_sent_unencoded_is_diagnosed_as_such_without_showing_it(key: str) -> None:
    body = f"username=a%40b.c&key={key}"
    try:
        received = dict(parse_qsl(body, keep_blank_values=True, errors="strict"))["key"]
    except UnicodeDecodeError:
        return  # answered 400 before any comparison (tests/diagnoses/test_diagnoses.py)
    message = diagnose_secret("API key", key, received)
    if received == key:
        assert message == ""  # nothing in it needed encoding
    else:
        assert message.startswith("the API key arrived un-encoded: ")
        assert key not in message


@given(key=_KEYS)
def test_any_key_encoded_twice_is_diagnosed_as_such(key: str) -> None:
    received = unquote_plus(quote_plus(quote(key, safe="")))  # what the server reads
    message = diagnose_secret("API key", key, received)
    if received == key:
        assert message == ""
    else:
        assert message.startswith("the API key arrived URL-encoded twice")


def test_a_session_the_test_revoked_need_not_be_logged_out(service: AuthService) -> None:
    account = service.accounts.add_account()
    record = service.flow(V1Flow).login(account.username, account.password)
    service.fault_runner.revoke(record.session_id)
    check_logged_out(evidence(service))
    text = format_timeline(evidence(service))
    assert "S1   " in text
    assert "revoked 00:00:00" in text


def test_v1_logins_in_flight_together_are_a_herd_too(service: AuthService) -> None:
    account = service.accounts.add_account()
    arrivals = [service.credentials.request_arrived(), service.credentials.request_arrived()]
    for arrived in arrivals:
        service.flow(V1Flow).login(account.username, account.password, arrived=arrived)
    with pytest.raises(AssertionError, match=r"first: S2 at 00:00:00, requested before S1"):
        check_single_flight(evidence(service))
    message = churn_error(service)
    assert "First premature grant: S2" in message
    assert "refresh in single flight" in message


def test_a_long_churn_names_the_first_held_tokens_and_counts_the_rest(
    make_service: MakeService,
) -> None:
    service = make_service(throttle=None)
    account = service.accounts.add_account()
    for _ in range(8):
        grant(service, account)
    message = churn_error(service)
    assert "PREMATURE: T1, T2, T3, T4 and 3 more still valid (T1 for another 30m00s)" in message
    assert "PREMATURE: T1, T2, T3, T4, T5 still valid" in message  # five are listed whole


# -- finding_counts: the figures of /_mgmtauth/check -----------------------------------


def test_finding_counts_count_every_kind_whether_it_is_a_finding_or_not(
    service: AuthService, clock: ManualClock
) -> None:
    churner = service.accounts.add_account("churner@example.com")
    stale = service.accounts.add_account("stale@example.com")
    for _ in range(3):  # re-auth before every call
        assert call(service, grant(service, churner)) == 200
    token = grant(service, stale)
    clock.advance(1800)
    assert call(service, token) == 1401  # sent after expiry
    service.flow(V1Flow).login(stale.username, stale.password)  # never logged out
    counts = finding_counts(evidence(service))
    assert (counts["churn"], counts["expired_use"], counts["open_session"]) == (2, 1, 1)
    assert (counts["grants"], counts["api_calls"], counts["rejections"]) == (5, 4, 1)
    # Open sessions are counted even though findings() leaves them out by default.
    assert [f.kind for f in findings(evidence(service))] == ["churn", "expired_use"]
