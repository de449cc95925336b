"""The verdicts (findings) and the report section text, on a manual clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from domain_support import admitted

from pytest_mgmtauth._service.accounts import Account
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.records import Refusal
from pytest_mgmtauth._service.secret_text import diagnose_reauth_after
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock
from pytest_mgmtauth._verdicts.checks import check_token_reused, churn_message
from pytest_mgmtauth._verdicts.evidence import Evidence
from pytest_mgmtauth._verdicts.findings import (
    KINDS,
    Finding,
    default_kinds,
    findings,
    report_section,
)

MakeService = Callable[..., AuthService]


def evidence(service: AuthService) -> Evidence:
    return Evidence(
        events=service.timeline.events,
        options=service.options,
        started_at=service.timeline.started_at,
        now=service.timeline.now(),
    )


def grant(service: AuthService, account: Account) -> str:
    token, _ = service.flow(V2Flow).grant(account.username, account.api_key)
    return token


def call(service: AuthService, token: str, *, permission: str | None = None) -> int:
    try:
        auth = admitted(service, "v2", token=token, path="/api/things", permission=permission)
    except Refusal as refusal:
        return refusal.return_code
    service.timeline.record_call(auth, "GET", "/api/things", 200)
    return 200


def test_a_clean_timeline_has_no_findings_of_any_kind(service: AuthService) -> None:
    account = service.accounts.add_account()
    token = grant(service, account)
    assert call(service, token) == 200
    assert findings(evidence(service), kinds=KINDS) == []


def test_churn_is_one_finding_per_account_with_the_assertions_message(
    service: AuthService,
) -> None:
    alice, bob, carol = (
        service.accounts.add_account(),
        service.accounts.add_account(),
        service.accounts.add_account(),
    )
    for account in (alice, alice, bob, bob, bob, carol):
        grant(service, account)
    found = findings(evidence(service))
    assert [(f.kind, f.username) for f in found] == [
        ("churn", alice.username),
        ("churn", bob.username),
    ]
    assert found[1].message == churn_message(evidence(service), username=bob.username)
    assert found[1].headline.startswith(
        f"pytest-mgmtauth: token churn: account {bob.username!r} was granted 2 new"
    )
    assert found[1].fix.startswith("Fix: keep the token from /v2/auth")


def test_expired_use_is_a_finding_by_default_and_open_sessions_only_with_require_logout(
    make_service: MakeService, clock: ManualClock
) -> None:
    for require_logout in (False, True):
        service = make_service(require_logout=require_logout)
        account = service.accounts.add_account()
        token = grant(service, account)
        clock.advance(1900)
        assert call(service, token) == 1401
        grant(service, account)  # after a 1401: reuse, not churn
        service.flow(V1Flow).login(account.username, account.password)  # never logged out
        kinds = [f.kind for f in findings(evidence(service))]
        assert kinds == (["expired_use", "open_session"] if require_logout else ["expired_use"])
        without_logout = tuple(k for k in KINDS if k != "open_session")
        assert default_kinds(service.options) == (KINDS if require_logout else without_logout)
    found = findings(evidence(service), kinds=["open_session"])
    assert found == [Finding("open_session", account.username, found[0].message)]
    assert found[0].headline.startswith(
        "pytest-mgmtauth: 1 v1 session(s) were not ended with /v1/logout: S1"
    )
    assert "POST /v1/logout" in found[0].fix


def test_a_revoked_token_is_not_expired_use(service: AuthService) -> None:
    account = service.accounts.add_account()
    token = grant(service, account)
    service.fault_runner.revoke(token)
    assert call(service, token) == 1401
    assert findings(evidence(service), kinds=KINDS) == []


def test_unknown_kinds_are_refused_with_the_known_ones(service: AuthService) -> None:
    with pytest.raises(ValueError, match="known: churn, expired_use, refused_call, open_session"):
        findings(evidence(service), kinds=["chrun"])


def test_reauthenticating_after_a_1469_gets_its_own_diagnosis_and_fix(
    service: AuthService,
) -> None:
    account = service.accounts.add_account(permissions=[])
    token = grant(service, account)
    assert call(service, token, permission="admin") == 1469
    grant(service, account)
    message = churn_message(evidence(service))
    assert message is not None
    assert (
        "the call before it: GET /api/things with T1 -> 401 (1469) at 00:00:00: 1469 is a "
        "missing permission; logging in again cannot help" in message
    )
    assert "Fix: treat 401 with returnCode 1469 as final" in message
    # Not the generic churn advice: keeping the token would not have helped.
    assert "keep the token from /v2/auth" not in message
    with pytest.raises(AssertionError, match="logging in again cannot help"):
        check_token_reused(evidence(service))


def test_a_1401_before_the_grant_is_not_the_1469_diagnosis() -> None:
    assert diagnose_reauth_after(1401) is None
    assert diagnose_reauth_after(None) is None
    assert diagnose_reauth_after(1469) is not None


def test_report_section_has_the_timeline_rejections_and_every_verdict(
    service: AuthService, clock: ManualClock
) -> None:
    account = service.accounts.add_account()
    token = grant(service, account)
    clock.advance(1900)
    assert call(service, token) == 1401
    service.flow(V1Flow).login(account.username, account.password)
    text = report_section(evidence(service))
    lines = text.splitlines()
    assert lines[0] == "Timeline of all accounts (simulated time since the test started):"
    assert "  00:31:40  GET /api/things with T1 -> 401 (1401: token T1 expired 100 s ago" in text
    assert "Credentials:" in lines
    verdicts = lines[lines.index("Verdicts:") :]
    assert verdicts[1] == "  churn: none"
    assert verdicts[2].startswith(
        "  expired-credential use: the client presented an expired credential 1 time; "
        "first: GET /api/things with T1 at 00:31:40"
    )
    assert verdicts[3].startswith("    Fix: refresh proactively")
    assert verdicts[4] == "  refused calls (wrong credential): none"
    assert verdicts[5].startswith(
        "  open v1 sessions (not checked: require_logout is off): 1 v1 session(s) were not "
        "ended with /v1/logout: S1"
    )
    assert verdicts[6] == "  wrong host: none"
    assert verdicts[7] == "  API versions past Active: none"
    assert verdicts[8] == (
        "  drift from the service's recording: not checked: no snapshot records this test "
        "(page Checked against the service)"
    )
    assert len(verdicts) == 9


def test_report_section_of_a_long_timeline_is_cut_and_lists_the_rejections(
    make_service: MakeService,
) -> None:
    service = make_service(throttle=None)
    account = service.accounts.add_account()
    for _ in range(60):
        call(service, grant(service, account))
    stale = grant(service, account)
    service.fault_runner.revoke(stale)
    assert call(service, stale) == 1401
    text = report_section(evidence(service))
    assert "more line(s): mgmt_server.timeline() shows them all" in text
    assert "Rejections (1):\n  00:00:00  GET /api/things with T61 -> 401 (1401:" in text
    assert "  churn: pytest-mgmtauth" not in text
    assert f"  churn: token churn: account {account.username!r} was granted 60 new" in text


def test_options_take_require_logout_as_a_bool() -> None:
    assert Options().require_logout is False
    assert "require_logout=True" in Options(require_logout=True).describe()
    with pytest.raises(TypeError, match="'require_logout' must be True or False"):
        Options(require_logout="yes")  # type: ignore[arg-type]


def test_concurrent_grants_are_named_in_the_plural_when_several() -> None:
    from pytest_mgmtauth._verdicts.evidence import issued

    assert issued(["T1"]) == "T1 was issued"
    assert issued(["T2", "T3"]) == "T2, T3 were issued"
