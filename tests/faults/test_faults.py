"""Throttling policy, the fault plan, and faults on cue (expire, revoke, lock, rotate),
on a manual clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from domain_support import admitted

from pytest_mgmtauth import (
    AccountLockedManually,
    AccountUnlocked,
    ApiCall,
    CredentialExpired,
    CredentialRevoked,
    FaultInjected,
    LoginRejected,
    SecretRotated,
    Throttled,
    TokenIssued,
)
from pytest_mgmtauth._service import faults as _faults
from pytest_mgmtauth._service.faults import FaultPlan
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.records import AUTH_FAILED, LOCKED_OUT, THROTTLE_WINDOW, Refusal
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock, OffsetClock

MakeService = Callable[..., AuthService]


def _refusal(call: Callable[[], object]) -> Refusal:
    with pytest.raises(Refusal) as excinfo:
        call()
    return excinfo.value


def _call_v2(service: AuthService, token: str) -> str:
    return admitted(service, "v2", token=token, path="/api/things").credential


def _call_v1(service: AuthService, session_id: str, utk: str) -> str:
    return admitted(service, "v1", session=session_id, utk=utk, path="/v1/things").credential


# -- throttling ------------------------------------------------------------------------


def test_a_client_that_asks_for_a_token_on_every_call_is_throttled_after_the_limit(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(throttle=3)
    account = service.accounts.add_account()
    for _ in range(4):  # one honest grant, then three premature ones
        service.flow(V2Flow).grant(account.username, account.api_key)
        clock.advance(1)
    refusal = _refusal(lambda: service.flow(V2Flow).grant(account.username, account.api_key))
    assert (refusal.status, refusal.return_code) == (429, 429)
    # The oldest premature grant (at t=1) leaves the 60 s window at t=61; now is t=4.
    assert refusal.retry_after == 57
    assert "3 new tokens within 60 s while the account held a valid one" in refusal.message
    throttled = [e for e in service.timeline.events if isinstance(e, Throttled)]
    assert [(e.retry_after, e.premature_grants, e.username) for e in throttled] == [
        (57, 3, account.username)
    ]


def test_waiting_retry_after_lifts_the_throttle_and_attempts_meanwhile_do_not_extend_it(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(throttle=2)
    account = service.accounts.add_account()
    for _ in range(3):
        service.flow(V2Flow).grant(account.username, account.api_key)
    first = _refusal(lambda: service.flow(V2Flow).grant(account.username, account.api_key))
    assert first.retry_after == THROTTLE_WINDOW
    clock.advance(30)
    second = _refusal(lambda: service.flow(V2Flow).grant(account.username, account.api_key))
    assert second.retry_after == 30  # counting down, not extended by the attempt
    clock.advance(30)
    _, record = service.flow(V2Flow).grant(account.username, account.api_key)
    assert record.label == "T4"


def test_a_client_that_reuses_its_token_and_refreshes_near_expiry_is_never_throttled(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(throttle=1, token_ttl=600, refresh_margin=60)
    account = service.accounts.add_account()
    token, record = service.flow(V2Flow).grant(account.username, account.api_key)
    for _ in range(200):  # 200 calls over 10 simulated hours, refreshing 30 s before expiry
        clock.advance(180)
        if clock() >= record.claims.exp - 30:
            token, record = service.flow(V2Flow).grant(account.username, account.api_key)
        _call_v2(service, token)
    assert len(service.credentials.tokens) > 10  # it did refresh, many times
    assert not [e for e in service.timeline.events if isinstance(e, Throttled)]
    assert not [e for e in service.timeline.events if isinstance(e, TokenIssued) and e.premature]


def test_throttle_none_switches_it_off(make_service: MakeService) -> None:
    service = make_service(throttle=None)
    account = service.accounts.add_account()
    for _ in range(50):
        service.flow(V2Flow).grant(account.username, account.api_key)
    assert len(service.credentials.tokens) == 50


def test_the_throttle_answers_before_the_key_is_checked(make_service: MakeService) -> None:
    # Like a rate limiter in front of the service: a wrong key while throttled gets 429.
    service = make_service(throttle=1)
    account = service.accounts.add_account()
    service.flow(V2Flow).grant(account.username, account.api_key)
    service.flow(V2Flow).grant(account.username, account.api_key)
    assert _refusal(lambda: service.flow(V2Flow).grant(account.username, "wrong")).status == 429


def test_throttling_counts_per_account(make_service: MakeService) -> None:
    service = make_service(throttle=1)
    churner, neighbour = service.accounts.add_account(), service.accounts.add_account()
    service.flow(V2Flow).grant(churner.username, churner.api_key)
    service.flow(V2Flow).grant(churner.username, churner.api_key)
    _refusal(lambda: service.flow(V2Flow).grant(churner.username, churner.api_key))
    _, record = service.flow(V2Flow).grant(neighbour.username, neighbour.api_key)
    assert record.username == neighbour.username


# -- the fault plan --------------------------------------------------------------------


def test_faults_fire_in_order_each_for_its_count_and_version() -> None:
    plan = FaultPlan()
    plan.add(_faults.failure(503, count=2, version="v2"))
    plan.add(_faults.reset(version="v1"))
    plan.add(_faults.malformed())
    fired = [plan.take("v1"), plan.take("v2"), plan.take("v2"), plan.take("v2"), plan.take("v1")]
    kinds = [(f.fault.kind, f.ordinal) if f else None for f in fired]
    assert kinds == [("reset", 1), ("fail", 1), ("fail", 2), ("malformed", 1), None]
    assert plan.pending() == []


def test_any_for_looks_without_taking() -> None:
    plan = FaultPlan()
    assert not plan.any_for("v2")
    plan.add(_faults.reset(version="v1"))
    assert (plan.any_for("v2"), plan.any_for("v1")) == (False, True)
    assert plan.any_for("v1")  # still there: looking takes nothing
    plan.take("v1")
    assert not plan.any_for("v1")


def test_pending_faults_show_the_calls_they_still_apply_to() -> None:
    plan = FaultPlan()
    plan.add(_faults.hang(2.5, clock="simulated", count=3))
    plan.take("v2")
    (pending,) = plan.pending()
    assert (pending.kind, pending.count, pending.seconds, pending.clock) == (
        "hang",
        2,
        2.5,
        "simulated",
    )
    plan.clear()
    assert plan.take("v2") is None


@pytest.mark.parametrize(
    ("error", "status", "retry_after"),
    [(503, 503, None), (500, 500, None), (429, 429, 1), (1401, 401, None), (1402, 401, None)],
)
def test_failure_maps_service_errors_to_401_and_gives_429_a_retry_after(
    error: int, status: int, retry_after: int | None
) -> None:
    fault = _faults.failure(error)
    assert (fault.status, fault.return_code, fault.retry_after) == (status, error, retry_after)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: _faults.failure(200), "HTTP error status"),
        (lambda: _faults.failure(1469), "HTTP error status"),
        (lambda: _faults.failure(503, count=0), "count must be an int >= 1"),
        (lambda: _faults.failure(503, version="v4"), "version must be 'v2'"),
        (lambda: _faults.failure(429, retry_after=-1), "retry_after must be an int >= 0"),
        (lambda: _faults.hang(0), "seconds must be > 0"),
        (lambda: _faults.hang(float("inf")), "seconds must be > 0 and <= 315360000 seconds"),
        (lambda: _faults.hang(1e300), r"seconds must be > 0 and <= 315360000 .*, got 1e\+300"),
        (lambda: _faults.hang(float("nan")), "seconds must be > 0 and <= 315360000"),
        (lambda: _faults.failure(503, count=10**9), "count must be an int >= 1 and <= 1000000"),
        (lambda: _faults.failure(429, retry_after=10**400), "got a huge int"),
        (lambda: _faults.hang(1, clock="wall"), "clock must be 'real' or 'simulated'"),
        (lambda: _faults.reset(count=True), "count must be an int >= 1"),
    ],
)
def test_bad_fault_options_say_what_to_pass(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_a_fired_fault_is_in_the_timeline_with_the_account_it_hit(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    service.fault_runner.plan.add(_faults.failure(502, count=2))
    service.fault_runner.take_fault("v2", "POST", "/v2/auth", account.username)
    service.fault_runner.take_fault("v1", "POST", "/v1/login", "nobody@example.com")
    assert service.fault_runner.take_fault("v2", "POST", "/v2/auth", account.username) is None
    events = [e for e in service.timeline.events if isinstance(e, FaultInjected)]
    assert [(e.username, e.path, e.ordinal, e.count, e.detail) for e in events] == [
        (account.username, "/v2/auth", 1, 2, "error 502"),
        (None, "/v1/login", 2, 2, "error 502"),
    ]
    assert events[0].describe() == "POST /v2/auth -> scripted fault (1 of 2): error 502"


# -- expire and revoke -----------------------------------------------------------------


def test_expire_ends_a_token_early_and_reauth_afterwards_is_no_churn(
    service: AuthService, clock: ManualClock
) -> None:
    account = service.accounts.add_account()
    token, _ = service.flow(V2Flow).grant(account.username, account.api_key)
    _call_v2(service, token)
    assert service.fault_runner.expire(token) == "T1"
    clock.advance(5)
    refusal = _refusal(lambda: _call_v2(service, token))
    assert refusal.return_code == AUTH_FAILED
    assert "token T1 expired 5 s ago (ended early on cue)" in refusal.message
    service.flow(V2Flow).grant(account.username, account.api_key)
    issued = [e for e in service.timeline.events if isinstance(e, TokenIssued)]
    assert issued[-1].while_valid == ()
    # The client could not have seen it coming: no use of an expired token.
    refused = [e for e in service.timeline.events if isinstance(e, ApiCall) and e.status == 401]
    assert [e.credential_expired for e in refused] == [False]
    assert [e.credential for e in service.timeline.events if isinstance(e, CredentialExpired)] == [
        "T1"
    ]


def test_revoke_by_label_refuses_the_token_and_the_session(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    token, _ = service.flow(V2Flow).grant(account.username, account.api_key)
    session = service.flow(V1Flow).login(account.username, account.password)
    assert service.fault_runner.revoke("T1") == "T1"
    assert service.fault_runner.revoke(session.session_id) == "S1"
    assert "token T1 was revoked 0 s ago" in _refusal(lambda: _call_v2(service, token)).message
    refusal = _refusal(lambda: _call_v1(service, session.session_id, session.utk))
    assert "session S1 revoked" in refusal.message
    revoked = [
        (e.credential, e.version)
        for e in service.timeline.events
        if isinstance(e, CredentialRevoked)
    ]
    assert revoked == [("T1", "v2"), ("S1", "v1")]


def test_expire_a_session_by_its_utk(service: AuthService) -> None:
    account = service.accounts.add_account()
    session = service.flow(V1Flow).login(account.username, account.password)
    service.fault_runner.expire(session.utk)
    refusal = _refusal(lambda: _call_v1(service, session.session_id, session.utk))
    assert "session S1 expired (ended early on cue)" in refusal.message


def test_expiring_an_unknown_credential_names_the_known_ones_without_the_secret(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    service.flow(V2Flow).grant(account.username, account.api_key)
    with pytest.raises(ValueError, match=r"known: T1$") as excinfo:
        service.fault_runner.expire("eyJhbGciOiJub25lIn0.e30.")
    assert "eyJhbGciOiJub25lIn0" not in str(excinfo.value)


# -- lock and unlock -------------------------------------------------------------------


def test_lock_answers_1402_until_unlock(service: AuthService) -> None:
    account = service.accounts.add_account()
    service.lockout.lock(account.username)
    refusal = _refusal(lambda: service.flow(V1Flow).login(account.username, account.password))
    assert (refusal.status, refusal.return_code) == (401, LOCKED_OUT)
    assert "account locked on cue since 00:00:00, until unlocked" in refusal.message
    service.flow(V2Flow).grant(account.username, account.api_key)  # v2 is not affected
    service.lockout.unlock(account.username)
    assert service.flow(V1Flow).login(account.username, account.password).label == "S1"
    kinds = [type(e) for e in service.timeline.events if e.username == account.username]
    assert kinds[:3] == [AccountLockedManually, LoginRejected, TokenIssued]
    assert AccountUnlocked in kinds


def test_lock_for_seconds_ends_on_the_clock(service: AuthService, clock: ManualClock) -> None:
    account = service.accounts.add_account()
    service.lockout.lock(account.username, seconds=120)
    clock.advance(119)
    _refusal(lambda: service.flow(V1Flow).login(account.username, account.password))
    clock.advance(1)
    assert service.flow(V1Flow).login(account.username, account.password).label == "S1"


def test_unlock_ends_an_automatic_lockout_and_forgets_failures(
    make_service: MakeService,
) -> None:
    service = make_service(lockout_threshold=2)
    account = service.accounts.add_account()
    for _ in range(2):
        _refusal(lambda: service.flow(V1Flow).login(account.username, "wrong"))
    assert _refusal(
        lambda: service.flow(V1Flow).login(account.username, account.password)
    ).return_code == (LOCKED_OUT)
    service.lockout.unlock(account.username)
    _refusal(
        lambda: service.flow(V1Flow).login(account.username, "wrong")
    )  # one failure, not a lockout
    assert service.flow(V1Flow).login(account.username, account.password).label == "S1"


def test_lock_names_an_unknown_account(service: AuthService) -> None:
    service.accounts.add_account("alice@example.com")
    with pytest.raises(ValueError, match=r"did you mean 'alice@example\.com'"):
        service.lockout.lock("alice@example.org")


# -- rotation --------------------------------------------------------------------------


def test_rotate_key_makes_the_old_key_a_diagnosed_1401_and_keeps_issued_tokens(
    service: AuthService, clock: ManualClock
) -> None:
    account = service.accounts.add_account()
    token, _ = service.flow(V2Flow).grant(account.username, account.api_key)
    clock.advance(90)
    rotated = service.accounts.rotate_secret(account.username, "API key")
    assert rotated.api_key != account.api_key
    assert rotated.password == account.password
    refusal = _refusal(lambda: service.flow(V2Flow).grant(account.username, account.api_key))
    assert refusal.return_code == AUTH_FAILED
    assert "old API key" in refusal.message
    assert "replaced at 00:01:30 by rotation" in refusal.message
    assert account.api_key not in refusal.message
    assert _call_v2(service, token) == "T1"
    clock.advance(1800)
    service.flow(V2Flow).grant(account.username, rotated.api_key)
    (event,) = [e for e in service.timeline.events if isinstance(e, SecretRotated)]
    assert event.secret == "API key"
    assert account.api_key not in event.describe()


def test_rotate_password_old_one_counts_towards_lockout(make_service: MakeService) -> None:
    service = make_service(lockout_threshold=2)
    account = service.accounts.add_account()
    rotated = service.accounts.rotate_secret(account.username, "password", "N3w+pass&word")
    assert rotated.password == "N3w+pass&word"
    for _ in range(2):
        assert (
            "old password"
            in _refusal(
                lambda: service.flow(V1Flow).login(account.username, account.password)
            ).message
        )
    assert _refusal(
        lambda: service.flow(V1Flow).login(account.username, rotated.password)
    ).return_code == (LOCKED_OUT)


def test_rotating_to_the_same_secret_is_refused(service: AuthService) -> None:
    account = service.accounts.add_account()
    with pytest.raises(ValueError, match="is the account's current one"):
        service.accounts.rotate_secret(account.username, "API key", account.api_key)


# -- the standalone clock --------------------------------------------------------------


def test_offset_clock_runs_with_real_time_and_only_moves_forward() -> None:
    clock = OffsetClock()
    before = clock()
    clock.advance(3600)
    assert clock() - before >= 3600
    assert clock._offset == 3600
    with pytest.raises(ValueError, match="forward only"):
        clock.advance(-1)
