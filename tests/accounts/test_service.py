"""AuthService: grants, sessions, lockout, permissions and the timeline, on a manual clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from domain_support import admitted

from pytest_mgmtauth import (
    AccountLocked,
    ApiCall,
    AuthRejected,
    BadRequest,
    LoggedIn,
    LoggedOut,
    LoginRejected,
    LogoutRejected,
    SessionExpired,
    TokenIssued,
    UnknownRoute,
)
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.records import AUTH_FAILED, FORBIDDEN, LOCKED_OUT, Refusal
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock, to_datetime
from pytest_mgmtauth._service.tokens import TokenSigner

MakeService = Callable[..., AuthService]


def _call_v2(service: AuthService, token: str | None, permission: str | None = None) -> str:
    auth = admitted(service, "v2", token=token, path="/api/things", permission=permission)
    return auth.credential


def _call_v1(
    service: AuthService, session_id: str | None, utk: str | None, permission: str | None = None
) -> str:
    auth = admitted(
        service, "v1", session=session_id, utk=utk, path="/v1/things", permission=permission
    )
    return auth.credential


def _refusal(call: Callable[[], object]) -> Refusal:
    with pytest.raises(Refusal) as excinfo:
        call()
    return excinfo.value


# -- v2 ------------------------------------------------------------------------------


def test_grant_token_issues_a_token_valid_for_token_ttl(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(token_ttl=300)
    account = service.accounts.add_account()
    token, record = service.flow(V2Flow).grant(account.username, account.api_key)
    assert record.label == "T1"
    assert record.claims.sub == account.username
    assert record.claims.iat == int(clock.now)
    assert record.claims.exp == int(clock.now) + 300
    assert _call_v2(service, token) == "T1"
    clock.advance(299)
    assert _call_v2(service, token) == "T1"
    clock.advance(1)
    refusal = _refusal(lambda: _call_v2(service, token))
    assert (refusal.status, refusal.return_code) == (401, AUTH_FAILED)
    assert "token T1 expired 0 s ago (valid 300 s from issue)" in refusal.reason


def test_wrong_key_is_1401_with_the_diagnosis(service: AuthService) -> None:
    account = service.accounts.add_account(api_key="abc+def")
    refusal = _refusal(lambda: service.flow(V2Flow).grant(account.username, "abc def"))
    assert (refusal.status, refusal.return_code) == (401, AUTH_FAILED)
    assert refusal.message.startswith("Authentication failed: the API key arrived un-encoded")
    [event] = service.timeline.events
    assert isinstance(event, AuthRejected)
    assert event.username == account.username
    assert event.return_code == AUTH_FAILED


def test_unknown_username_suggests_the_closest_account(service: AuthService) -> None:
    service.accounts.add_account("alice@example.com")
    refusal = _refusal(lambda: service.flow(V2Flow).grant("alise@example.com", "k"))
    assert refusal.return_code == AUTH_FAILED
    assert "no account 'alise@example.com' exists; did you mean 'alice@example.com'?" in (
        refusal.reason
    )
    [event] = service.timeline.events
    assert isinstance(event, AuthRejected)
    assert event.username is None


def test_unknown_username_without_accounts_says_how_to_add_one(service: AuthService) -> None:
    refusal = _refusal(lambda: service.flow(V2Flow).grant("x@example.com", "k"))
    assert "this test has no accounts: add one with mgmt_server.add_account()" in refusal.reason


def test_tokens_are_refused_when_forged_or_not_of_this_test(
    make_service: MakeService, signer: TokenSigner, other_signer: TokenSigner, clock: ManualClock
) -> None:
    service = make_service()
    account = service.accounts.add_account()
    forged, _ = other_signer.issue(account.username, int(clock.now), 1800)
    refusal = _refusal(lambda: _call_v2(service, forged))
    assert "signature does not verify" in refusal.reason
    # Signed with the same key, but by another test's service: not issued here.
    elsewhere = make_service()
    elsewhere.accounts.add_account(account.username)
    other_test_token, _ = signer.issue(account.username, int(clock.now), 1800)
    refusal = _refusal(lambda: _call_v2(service, other_test_token))
    assert "not issued in this test" in refusal.reason
    refusal = _refusal(lambda: _call_v2(service, None))
    assert refusal.reason.startswith("no Authorization header")
    calls = [e for e in service.timeline.events if isinstance(e, ApiCall)]
    assert [c.status for c in calls] == [401, 401, 401]
    # The forged token names a known account: the refusal is attributed to it.
    assert calls[0].username == account.username
    assert calls[2].username is None


def test_transport_problem_is_refused_before_the_token_is_looked_at(
    service: AuthService,
) -> None:
    refusal = _refusal(
        lambda: admitted(service, "v2", authorization="Bearer x.y.z, Bearer a.b.c", path="/p")
    )
    assert refusal.reason.startswith("2 Authorization values")


# -- v1 sessions ---------------------------------------------------------------------


def test_login_gives_a_session_that_authenticates_with_its_utk(service: AuthService) -> None:
    account = service.accounts.add_account()
    session = service.flow(V1Flow).login(account.username, account.password)
    assert session.label == "S1"
    assert len(session.session_id) >= 16
    assert session.utk
    assert _call_v1(service, session.session_id, session.utk) == "S1"


def test_session_ends_after_idle_timeout_and_use_keeps_it_alive(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(session_timeout=600)
    account = service.accounts.add_account()
    session = service.flow(V1Flow).login(account.username, account.password)
    clock.advance(599)
    _call_v1(service, session.session_id, session.utk)  # resets the idle time
    clock.advance(599)
    _call_v1(service, session.session_id, session.utk)
    clock.advance(600)
    refusal = _refusal(lambda: _call_v1(service, session.session_id, session.utk))
    assert "session S1 expired after 600 s idle 0 s ago: log in again" in refusal.reason
    expired = [e for e in service.timeline.events if isinstance(e, SessionExpired)]
    assert len(expired) == 1
    # The session ended at last use + timeout, not when someone noticed.
    assert expired[0].at == to_datetime(clock.now)
    assert expired[0].session == "S1"


def test_session_expiry_is_recorded_even_if_nobody_calls(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(session_timeout=60)
    account = service.accounts.add_account()
    service.flow(V1Flow).login(account.username, account.password)
    start = clock.now
    clock.advance(3600)
    expired = [e for e in service.timeline.events if isinstance(e, SessionExpired)]
    assert [e.at for e in expired] == [to_datetime(start + 60)]
    assert len([e for e in service.timeline.events if isinstance(e, SessionExpired)]) == 1


def test_logout_ends_the_session(service: AuthService, clock: ManualClock) -> None:
    account = service.accounts.add_account()
    session = service.flow(V1Flow).login(account.username, account.password)
    clock.advance(5)
    service.flow(V1Flow).logout(session.session_id)
    clock.advance(10)
    refusal = _refusal(lambda: _call_v1(service, session.session_id, session.utk))
    assert "session S1 ended by /v1/logout 10 s ago" in refusal.reason
    refusal = _refusal(lambda: service.flow(V1Flow).logout(session.session_id))
    assert "session S1 had ended already (logout)" in refusal.reason
    kinds = [type(e) for e in service.timeline.events]
    assert kinds == [LoggedIn, LoggedOut, ApiCall, LogoutRejected]


def test_logout_after_the_idle_timeout_says_the_session_had_ended(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(session_timeout=60)
    account = service.accounts.add_account()
    session = service.flow(V1Flow).login(account.username, account.password)
    clock.advance(60)
    refusal = _refusal(lambda: service.flow(V1Flow).logout(session.session_id))
    assert "session S1 had ended already (timeout)" in refusal.reason
    assert [type(e) for e in service.timeline.events] == [LoggedIn, SessionExpired, LogoutRejected]


def test_logout_of_an_unknown_session_is_refused(service: AuthService) -> None:
    refusal = _refusal(lambda: service.flow(V1Flow).logout("NOPE"))
    assert refusal.return_code == AUTH_FAILED
    assert "names no session of this test" in refusal.reason


def test_utk_of_another_session_is_refused_and_named(service: AuthService) -> None:
    account = service.accounts.add_account()
    first = service.flow(V1Flow).login(account.username, account.password)
    second = service.flow(V1Flow).login(account.username, account.password)
    refusal = _refusal(lambda: _call_v1(service, first.session_id, second.utk))
    assert "the utk does not belong to session S1 (it is the utk of session S2)" in (refusal.reason)
    refusal = _refusal(lambda: _call_v1(service, first.session_id, "made-up"))
    assert "(no session has it)" in refusal.reason
    refusal = _refusal(lambda: _call_v1(service, first.session_id, None))
    assert "the utk query parameter is missing" in refusal.reason


def test_unknown_or_missing_session_is_refused(service: AuthService) -> None:
    refusal = _refusal(lambda: _call_v1(service, "0123456789ABCDEF", "u"))
    assert "the JSESSIONID cookie names no session of this test" in refusal.reason
    refusal = _refusal(lambda: _call_v1(service, None, "u"))
    assert refusal.reason.startswith("no JSESSIONID cookie")


# -- lockout -------------------------------------------------------------------------


def _fail_login(service: AuthService, username: str) -> Refusal:
    return _refusal(lambda: service.flow(V1Flow).login(username, "wrong-password"))


def test_lockout_after_threshold_failures_lasts_lockout_duration(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(lockout_threshold=3, lockout_duration=600)
    account = service.accounts.add_account()
    for _ in range(3):
        assert _fail_login(service, account.username).return_code == AUTH_FAILED
    locked_at = clock.now
    # Even the right password is refused while locked.
    refusal = _refusal(lambda: service.flow(V1Flow).login(account.username, account.password))
    assert (refusal.status, refusal.return_code) == (401, LOCKED_OUT)
    assert refusal.message.startswith(
        "Too many unsuccessful login attempts; try again in 10 minutes"
    )
    assert "wait 600 s" in refusal.reason
    clock.advance(599)
    assert _refusal(
        lambda: service.flow(V1Flow).login(account.username, account.password)
    ).return_code == (LOCKED_OUT)
    clock.advance(1)
    session = service.flow(V1Flow).login(account.username, account.password)
    assert session.label == "S1"
    [locked] = [e for e in service.timeline.events if isinstance(e, AccountLocked)]
    assert locked.failures == 3
    assert locked.at == to_datetime(locked_at)
    assert locked.until == to_datetime(locked_at + 600)


def test_attempts_during_lockout_do_not_extend_it(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(lockout_threshold=2, lockout_duration=100)
    account = service.accounts.add_account()
    _fail_login(service, account.username)
    _fail_login(service, account.username)
    for _ in range(5):
        clock.advance(19)
        assert _fail_login(service, account.username).return_code == LOCKED_OUT
    clock.advance(5)  # 100 s after the lockout started
    assert service.flow(V1Flow).login(account.username, account.password).label == "S1"
    assert len([e for e in service.timeline.events if isinstance(e, AccountLocked)]) == 1


def test_lockout_times_count_whole_seconds_from_the_first_event(
    signer: TokenSigner,
) -> None:
    # As under mgmt_clock set up after mgmt_server: the service is made mid-second,
    # then time is frozen on the whole second before.
    clock = ManualClock(start=1_800_000_000.4)
    service = AuthService(Options(lockout_threshold=1), signer, clock)
    account = service.accounts.add_account()
    clock.now = 1_800_000_000.0
    _fail_login(service, account.username)
    refusal = _fail_login(service, account.username)
    assert "account locked since 00:00:00 until 00:10:00 after 1 failed logins" in (refusal.reason)


def test_a_success_resets_the_failure_count(make_service: MakeService) -> None:
    service = make_service(lockout_threshold=3)
    account = service.accounts.add_account()
    for _ in range(2):
        _fail_login(service, account.username)
    service.flow(V1Flow).login(account.username, account.password)
    for _ in range(2):
        assert _fail_login(service, account.username).return_code == AUTH_FAILED
    assert service.flow(V1Flow).login(account.username, account.password).label == "S2"


def test_lockout_message_rounds_minutes_of_the_duration(make_service: MakeService) -> None:
    service = make_service(lockout_threshold=1, lockout_duration=90)
    account = service.accounts.add_account()
    _fail_login(service, account.username)
    refusal = _fail_login(service, account.username)
    assert refusal.message.startswith("Too many unsuccessful login attempts; try again in 2 ")


def test_lockout_is_per_account(make_service: MakeService) -> None:
    service = make_service(lockout_threshold=1)
    locked = service.accounts.add_account()
    other = service.accounts.add_account()
    _fail_login(service, locked.username)
    assert _fail_login(service, locked.username).return_code == LOCKED_OUT
    assert service.flow(V1Flow).login(other.username, other.password).label == "S1"


# -- permissions ---------------------------------------------------------------------


def test_missing_permission_is_1469_on_both_versions(service: AuthService) -> None:
    reader = service.accounts.add_account(permissions=["tags:read"])
    token, _ = service.flow(V2Flow).grant(reader.username, reader.api_key)
    session = service.flow(V1Flow).login(reader.username, reader.password)
    assert _call_v2(service, token, "tags:read") == "T1"
    refusal = _refusal(lambda: _call_v2(service, token, "tags:write"))
    assert (refusal.status, refusal.return_code) == (401, FORBIDDEN)
    assert refusal.message.startswith("User is authenticated but the request is denied")
    assert "lacks the permission 'tags:write'" in refusal.reason
    refusal = _refusal(lambda: _call_v1(service, session.session_id, session.utk, "tags:write"))
    assert refusal.return_code == FORBIDDEN
    forbidden = [
        e for e in service.timeline.events if isinstance(e, ApiCall) and e.return_code == FORBIDDEN
    ]
    assert [(e.version, e.credential) for e in forbidden] == [("v2", "T1"), ("v1", "S1")]


def test_account_without_permissions_may_call_unprotected_routes(service: AuthService) -> None:
    nobody = service.accounts.add_account(permissions=[])
    token, _ = service.flow(V2Flow).grant(nobody.username, nobody.api_key)
    assert _call_v2(service, token, None) == "T1"
    assert _refusal(lambda: _call_v2(service, token, "x")).return_code == FORBIDDEN


# -- the timeline --------------------------------------------------------------------


def test_events_record_simulated_time_and_account(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(lockout_threshold=1)
    alice = service.accounts.add_account("alice@example.com")
    bob = service.accounts.add_account("bob@example.com")
    t0 = clock.now
    token, _ = service.flow(V2Flow).grant(alice.username, alice.api_key)
    clock.advance(10)
    auth = admitted(service, "v2", token=token, method="POST", path="/api/tags")
    service.timeline.record_call(auth, "POST", "/api/tags", 201)
    clock.advance(10)
    _fail_login(service, bob.username)
    clock.advance(10)
    service.timeline.record_bad_request("POST", "/v2/auth", 415, "no Content-Type")
    service.timeline.record_unknown_route("GET", "/nowhere", 404)
    events = service.timeline.events
    assert [(type(e), e.username, e.at) for e in events] == [
        (TokenIssued, "alice@example.com", to_datetime(t0)),
        (ApiCall, "alice@example.com", to_datetime(t0 + 10)),
        (LoginRejected, "bob@example.com", to_datetime(t0 + 20)),
        (AccountLocked, "bob@example.com", to_datetime(t0 + 20)),
        (BadRequest, None, to_datetime(t0 + 30)),
        (UnknownRoute, None, to_datetime(t0 + 30)),
    ]
    issued, call, _, _, bad, unknown = events
    assert isinstance(issued, TokenIssued)
    assert issued.token == "T1"
    assert issued.expires_at == to_datetime(int(t0) + 1800)
    assert not issued.premature
    assert isinstance(call, ApiCall)
    assert (call.method, call.path, call.version, call.credential, call.status) == (
        "POST",
        "/api/tags",
        "v2",
        "T1",
        201,
    )
    assert call.authenticated
    assert isinstance(bad, BadRequest)
    assert (bad.status, bad.reason) == (415, "no Content-Type")
    assert isinstance(unknown, UnknownRoute)
    assert (unknown.path, unknown.status) == ("/nowhere", 404)
    # Events are immutable and never carry a secret.
    with pytest.raises(AttributeError):
        issued.token = "T9"  # type: ignore[misc]
    assert token not in repr(events)
    assert alice.api_key not in repr(events)


def test_events_are_a_copy(service: AuthService) -> None:
    account = service.accounts.add_account()
    service.flow(V2Flow).grant(account.username, account.api_key)
    service.timeline.events.clear()
    assert len(service.timeline.events) == 1


def test_expired_credentials_are_marked_on_the_call(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(token_ttl=120)
    account = service.accounts.add_account()
    token, _ = service.flow(V2Flow).grant(account.username, account.api_key)
    clock.advance(121)
    _refusal(lambda: _call_v2(service, token))
    [call] = [e for e in service.timeline.events if isinstance(e, ApiCall)]
    assert call.credential == "T1"
    assert call.credential_expired
    assert call.return_code == AUTH_FAILED
    assert not call.authenticated


def test_auth_count_counts_grants_by_version_and_account(service: AuthService) -> None:
    alice = service.accounts.add_account()
    bob = service.accounts.add_account()
    service.flow(V2Flow).grant(alice.username, alice.api_key)
    service.flow(V2Flow).grant(alice.username, alice.api_key)
    service.flow(V1Flow).login(bob.username, bob.password)
    _refusal(lambda: service.flow(V2Flow).grant(bob.username, "wrong"))
    _fail_login(service, alice.username)
    assert service.auth_count() == 3
    assert service.auth_count(version="v2") == 2
    assert service.auth_count(version="v1") == 1
    assert service.auth_count(username=alice.username) == 2
    assert service.auth_count(version="v1", username=alice.username) == 0
    assert service.auth_count(version="v2", username=bob.username) == 0
    with pytest.raises(
        ValueError,
        match=r"version must be 'v2' \(/v2/auth\), 'v3' \(v3 auth\), 'v1' \(/v1/login\), "
        r"'oauth' \(the OAuth 2.0 token endpoint\), 'scim' \(/v2/auth-long-lived/token\) or "
        r"None \(every flow\), got 'v4'",
    ):
        service.auth_count(version="v4")


def test_a_new_token_while_one_is_valid_is_marked_premature(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(token_ttl=600, refresh_margin=60, throttle=None)
    account = service.accounts.add_account()
    service.flow(V2Flow).grant(account.username, account.api_key)
    clock.advance(100)
    service.flow(V2Flow).grant(account.username, account.api_key)  # T1 still valid: churn
    clock.advance(550)  # T2 is 50 s from expiry: within the margin
    service.flow(V2Flow).grant(account.username, account.api_key)
    issued = [e for e in service.timeline.events if isinstance(e, TokenIssued)]
    assert [e.while_valid for e in issued] == [(), ("T1",), ()]
