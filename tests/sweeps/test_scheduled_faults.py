"""Scheduled faults (a fault at a trigger point) in the domain, on a manual clock; and the
sweep's pure parts: validation, the reading of the timeline after a fault, the verdict."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest
from domain_support import admitted

from pytest_mgmtauth import (
    ApiCall,
    CredentialRevoked,
    ScheduledFault,
    ScheduledFaultFired,
    TokenIssued,
)
from pytest_mgmtauth._service import faults as _faults
from pytest_mgmtauth._service.faults import FaultPlan
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.records import AUTH_FAILED, Refusal
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock
from pytest_mgmtauth._verdicts import sweep_plan as _sweep_plan, sweep_verdict as _sweep_verdict

MakeService = Callable[..., AuthService]


def _call(service: AuthService, token: str) -> str:
    """A protected v2 call as the transport makes it: counted, authorized, answered."""
    service.fault_runner.protected_call_arrived()
    try:
        return admitted(service, "v2", token=token, path="/v2/things").credential
    finally:
        service.fault_runner.protected_call_answered()


def _grant(service: AuthService, username: str, key: str) -> str:
    service.fault_runner.plan.auth_call()
    return service.flow(V2Flow).grant(username, key)[0]


# -- the trigger point -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "at", "point"),
    [
        ("expire", "call3", "call3"),
        ("revoke", 2, "call2"),
        ("reset", "call1", "call1"),
        ("throttle", "auth2", "auth2"),
        ("unavailable", 4, "auth4"),
    ],
)
def test_a_scheduled_fault_names_its_point(kind: str, at: str | int, point: str) -> None:
    fault = _faults.scheduled(kind, at)
    assert isinstance(fault, ScheduledFault)
    assert fault.point == point
    assert str(fault) == f"{kind}@{point}"


@pytest.mark.parametrize(
    ("kind", "at", "message"),
    [
        ("explode", "call1", "unknown fault kind 'explode'; known: expire, revoke"),
        ("expire", "auth2", "expire is triggered at a protected call ('call3'), not at 'auth2'"),
        ("throttle", "call2", "throttle is triggered at an authentication ('auth2')"),
        ("expire", 0, "at must be >= 1"),
        ("expire", "call0", "at must be a point like 'call3'"),
        ("expire", "3", "at must be a point like 'call3'"),
        ("expire", True, "at must be a point like 'call3'"),
    ],
)
def test_a_bad_scheduled_fault_says_what_is_accepted(kind: str, at: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        _faults.scheduled(kind, at)


def test_the_plan_counts_calls_and_fires_each_scheduled_fault_once_at_its_point() -> None:
    plan = FaultPlan()
    plan.schedule(_faults.scheduled("throttle", "auth2"))
    plan.schedule(_faults.scheduled("reset", "call2"))
    assert plan.auth_call() is None
    assert str(plan.auth_call()) == "throttle@auth2"
    assert plan.auth_call() is None
    assert plan.protected_call() is None
    assert str(plan.protected_call()) == "reset@call2"
    assert plan.scheduled() == []
    assert (plan.auth_calls, plan.protected_calls) == (3, 2)


def test_revoke_before_a_call_ends_the_credential_in_use_when_the_call_before_is_answered(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    service.fault_runner.schedule(_faults.scheduled("revoke", "call2"))
    token = _grant(service, account.username, account.api_key)
    assert _call(service, token) == "T1"  # call 1 answered: the revoke fires now
    with pytest.raises(Refusal) as excinfo:
        _call(service, token)
    assert excinfo.value.return_code == AUTH_FAILED
    assert "token T1 was revoked" in excinfo.value.reason
    fired = [e for e in service.timeline.events if isinstance(e, ScheduledFaultFired)]
    assert [(e.fault, e.point, e.detail) for e in fired] == [
        ("revoke", "call2", "token T1 revoked on cue")
    ]
    assert any(isinstance(e, CredentialRevoked) for e in service.timeline.events)
    assert service.fault_runner.plan.scheduled() == []


def test_expire_moves_a_movable_clock_to_the_end_of_the_credential_in_use(
    service: AuthService, clock: ManualClock
) -> None:
    moved: list[float] = []

    def advance(seconds: float) -> bool:
        moved.append(seconds)
        clock.advance(seconds)
        return True

    service.fault_runner.advance = advance
    account = service.accounts.add_account()
    service.fault_runner.schedule(_faults.scheduled("expire", "call1"))
    token = _grant(service, account.username, account.api_key)  # before call 1: now
    assert moved == [1800.0]  # the token's whole lifetime: its exp has come
    with pytest.raises(Refusal) as excinfo:
        _call(service, token)
    assert "while the answer that granted it was in flight" in excinfo.value.reason
    refused = [e for e in service.timeline.events if isinstance(e, ApiCall)]
    # The clock moved while /v2/auth was answering: a client that checks the token's
    # expiry before each call had checked before it authenticated, and sends the new
    # token at once. A 401 to recover from, not a use of an expired token (issue 29).
    assert not refused[0].credential_expired
    assert not refused[0].wrong_credential
    fired = next(e for e in service.timeline.events if isinstance(e, ScheduledFaultFired))
    assert fired.detail == (
        "the clock moved on 1800 s to the end of token T1 while the answer that granted "
        "it was in flight"
    )
    # Before call 2 it fires once call 1 is answered: a client that watches the clock
    # could have renewed, so sending the token then is expired use.
    second = _grant(service, account.username, account.api_key)
    service.fault_runner.schedule(_faults.scheduled("expire", "call3"))
    _call(service, second)
    with pytest.raises(Refusal) as excinfo:
        _call(service, second)
    assert "valid 1800 s from issue" in excinfo.value.reason
    assert [e for e in service.timeline.events if isinstance(e, ApiCall)][-1].credential_expired


def test_expire_on_a_clock_that_cannot_move_ends_the_credential_on_cue(
    service: AuthService,
) -> None:
    service.fault_runner.advance = lambda seconds: False
    account = service.accounts.add_account()
    service.fault_runner.schedule(_faults.scheduled("expire", "call1"))
    token = _grant(service, account.username, account.api_key)
    with pytest.raises(Refusal) as excinfo:
        _call(service, token)
    assert "ended early on cue" in excinfo.value.reason
    fired = next(e for e in service.timeline.events if isinstance(e, ScheduledFaultFired))
    assert "the clock cannot move: the test does not run on mgmt_clock" in fired.detail


def test_a_fault_before_call_1_without_any_grant_fires_at_the_call_and_ends_nothing(
    service: AuthService,
) -> None:
    service.fault_runner.schedule(_faults.scheduled("revoke", "call1"))
    with pytest.raises(Refusal):
        _call(service, "not-a-token")
    fired = next(e for e in service.timeline.events if isinstance(e, ScheduledFaultFired))
    assert fired.detail == "no credential was in use, nothing ended"


def test_throttle_at_an_authentication_answers_429_with_retry_after_and_grants_nothing(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    service.fault_runner.schedule(_faults.scheduled("throttle", "auth1"))
    due = service.fault_runner.plan.auth_call()
    fired = service.fault_runner.take_fault(
        "v2", "POST", "/v2/auth", account.username, scheduled=due
    )
    assert fired is not None
    assert (fired.fault.status, fired.fault.retry_after) == (429, 1)
    event = next(e for e in service.timeline.events if isinstance(e, ScheduledFaultFired))
    assert event.describe() == (
        "scheduled fault throttle@auth1: POST /v2/auth answered error 429, Retry-After 1s"
    )
    assert service.auth_count() == 0


# -- the sweep's pure parts ------------------------------------------------------------


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        (("expire", "melt"), "unknown fault kind 'melt'; known: expire, revoke, throttle"),
        (42, "faults must be a tuple of fault kinds"),
    ],
)
def test_sweep_faults_are_validated(faults: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        _sweep_plan.check_faults(faults, "here")


@pytest.mark.parametrize("points", [0, -1, 2.5, True, "3", 101])
def test_sweep_points_must_be_a_positive_int(points: object) -> None:
    with pytest.raises(ValueError, match="points must be a positive int"):
        _sweep_plan.check_points(points, "here")


def test_the_sweep_option_takes_a_comma_list_or_all() -> None:
    assert _sweep_plan.parse_faults_option("expire, revoke", "x") == ("expire", "revoke")
    assert _sweep_plan.parse_faults_option("all", "x") == _sweep_plan.FAULT_KINDS
    with pytest.raises(ValueError, match="unknown fault kind 'expyre'"):
        _sweep_plan.parse_faults_option("expyre", "x")


_T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _fired(kind: str, point: str, seconds: float = 0) -> ScheduledFaultFired:
    return ScheduledFaultFired(
        at=_T0 + timedelta(seconds=seconds), username="u", fault=kind, point=point, detail="d"
    )


def _refused(seconds: float = 0) -> ApiCall:
    return ApiCall(
        at=_T0 + timedelta(seconds=seconds),
        username="u",
        method="GET",
        path="/v2/things",
        version="v2",
        credential="T1",
        status=401,
        return_code=1401,
        reason="revoked",
    )


def _issued(seconds: float = 0, label: str = "T2") -> TokenIssued:
    at = _T0 + timedelta(seconds=seconds)
    return TokenIssued(
        at=at, username="u", token=label, fingerprint="f", expires_at=at + timedelta(hours=1)
    )


def test_after_a_revoke_a_client_that_never_re_authenticates_is_named() -> None:
    after = _sweep_verdict.analyse(
        "revoke", [_issued(0, "T1"), _fired("revoke", "call2"), _refused()], failed=True
    )
    assert after.summary == "the client never re-authenticates after a 401 with 1401"


def test_after_an_expire_a_client_that_renews_only_on_the_401_lost_a_call() -> None:
    events = [_fired("expire", "call2"), _refused(), _issued()]
    after = _sweep_verdict.analyse("expire", events, failed=False)
    assert after.summary.startswith("lost a call: it sent GET /v2/things with the expired")


def test_after_a_throttle_a_retry_before_retry_after_is_named() -> None:
    early = _sweep_verdict.analyse(
        "throttle", [_fired("throttle", "auth1"), _issued(0)], failed=False
    )
    assert early.summary == (
        "the client retried authentication 0 s after a 429 with Retry-After 1 s: honour Retry-After"
    )
    patient = _sweep_verdict.analyse(
        "throttle", [_fired("throttle", "auth1"), _issued(1)], failed=False
    )
    assert patient.summary == ""


def test_the_verdict_counts_points_and_names_the_first_failure() -> None:
    ok = _sweep_verdict.Cell("passed")
    fail = _sweep_verdict.Cell("failed", after="the client never re-authenticates after a 401")
    unreached = _sweep_verdict.Cell("not reached")
    rows = {
        "expire": {1: ok, 2: ok, 3: unreached},
        "revoke": {1: fail, 2: fail, 3: unreached},
    }
    assert _sweep_verdict.verdict(ok, rows) == (
        "survives expire at 2/2 points; revoke fails from call 1 (2/2 points): the client "
        "never re-authenticates after a 401"
    )


def test_expire_of_a_v1_session_moves_the_clock_past_its_idle_timeout(
    service: AuthService, clock: ManualClock
) -> None:
    def advance(seconds: float) -> bool:
        clock.advance(seconds)
        return True

    service.fault_runner.advance = advance
    account = service.accounts.add_account()
    service.fault_runner.schedule(_faults.scheduled("expire", "call2"))
    service.fault_runner.plan.auth_call()
    session = service.flow(V1Flow).login(account.username, account.password)

    def call() -> str:
        service.fault_runner.protected_call_arrived()
        try:
            return admitted(
                service, "v1", session=session.session_id, utk=session.utk, path="/v1/things"
            ).credential
        finally:
            service.fault_runner.protected_call_answered()

    clock.advance(100)
    assert call() == "S1"  # answered: the session's idle timeout has now passed
    with pytest.raises(Refusal) as excinfo:
        call()
    assert "expired after 1800 s idle" in excinfo.value.reason
    fired = next(e for e in service.timeline.events if isinstance(e, ScheduledFaultFired))
    assert fired.detail == "the clock moved on 1800 s to the end of session S1"


def test_an_expire_that_failed_without_mgmt_clock_says_to_use_it() -> None:
    fired = ScheduledFaultFired(
        at=_T0,
        username="u",
        fault="expire",
        point="call1",
        detail="token T1 expired on cue (the clock cannot move: the test does not run on "
        "mgmt_clock)",
    )
    after = _sweep_verdict.analyse("expire", [fired, _refused()], failed=True)
    assert after.summary == (
        "the client never re-authenticates after a 401 with 1401; the credential ended "
        "early on cue because the test does not run on mgmt_clock: request mgmt_clock, so "
        "the clock moves to the credential's end and a client that renews in time survives"
    )
