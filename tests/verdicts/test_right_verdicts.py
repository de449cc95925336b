"""Right verdicts (issue 29): no finding against a correct client, none missed against a
wrong one. Domain level, on a manual clock: each test is one item's regression."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from domain_support import admitted

from pytest_mgmtauth._service.accounts import Account
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.flows.v3 import V3Flow, named_scopes
from pytest_mgmtauth._service.records import Refusal, SessionRecord
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock
from pytest_mgmtauth._verdicts.checks import churn_message
from pytest_mgmtauth._verdicts.evidence import Evidence, format_timeline
from pytest_mgmtauth._verdicts.findings import KINDS, findings, report_section

MakeService = Callable[..., AuthService]


def evidence(service: AuthService) -> Evidence:
    return Evidence(
        events=service.timeline.events,
        options=service.options,
        started_at=service.timeline.started_at,
        now=service.timeline.now(),
    )


def kinds(service: AuthService) -> list[str]:
    return [f.kind for f in findings(evidence(service), kinds=KINDS)]


def v2_token(service: AuthService, account: Account) -> str:
    return service.flow(V2Flow).grant(account.username, account.api_key)[0]


def v3_token(service: AuthService, account: Account, profile: str = "main") -> str:
    return service.flow(V3Flow).grant(account.username, account.api_key, "acme", profile)[0]


def bearer_call(service: AuthService, version: str, token: str, path: str) -> int:
    try:
        auth = admitted(service, version, token=token, path=path)
    except Refusal as refusal:
        return refusal.return_code
    service.timeline.record_call(auth, "GET", path, 200)
    return 200


def v1_call(
    service: AuthService, session: SessionRecord, *, cookie: bool = True, path: str = "/v1/x"
) -> int:
    sent = session.session_id if cookie else None
    try:
        auth = admitted(service, "v1", session=sent, utk=session.utk, path=path)
    except Refusal as refusal:
        return refusal.return_code
    service.timeline.record_call(auth, "GET", path, 200)
    return 200


# -- item 1: renewing within the last 5 minutes of a 30-minute token is no churn -------


@pytest.mark.parametrize("early", [120, 300])
def test_renewing_up_to_five_minutes_before_expiry_is_no_churn(
    service: AuthService, clock: ManualClock, early: int
) -> None:
    account = service.accounts.add_account()
    token = v2_token(service, account)
    assert bearer_call(service, "v2", token, "/api/things") == 200
    clock.advance(1800 - early)
    token = v2_token(service, account)
    assert bearer_call(service, "v2", token, "/api/things") == 200
    assert churn_message(evidence(service)) is None
    assert kinds(service) == []


def test_renewing_earlier_is_churn_and_names_the_setting_by_every_name(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service()
    account = service.accounts.add_account()
    v2_token(service, account)
    clock.advance(1800 - 301)
    v2_token(service, account)
    message = churn_message(evidence(service))
    assert message is not None
    assert "PREMATURE: T1 still valid for another 5m01s" in message
    for name in (
        "@pytest.mark.mgmtauth(refresh_margin=...)",
        "mgmtauth_refresh_margin",
        "--mgmtauth-refresh-margin",
    ):
        assert name in message.rsplit("\n\n", 1)[-1]
    # Scaled down for a short token_ttl: a sixth of it.
    short = make_service(token_ttl=60)
    assert short.options.refresh_margin == 10
    account = short.accounts.add_account()
    v2_token(short, account)
    clock.advance(50)
    v2_token(short, account)
    assert churn_message(evidence(short)) is None


# -- item 2: a session the service ended is not open; one unforeseeable 401 is no finding


def test_a_session_ended_idle_then_a_new_login_is_no_finding(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(require_logout=True)
    account = service.accounts.add_account()
    flow = service.flow(V1Flow)
    first = flow.login(account.username, account.password)
    assert v1_call(service, first) == 200
    clock.advance(1801)
    assert v1_call(service, first) == 1401  # the only way to learn of the idle expiry
    second = flow.login(account.username, account.password)
    assert v1_call(service, second) == 200
    flow.logout(second.session_id)
    assert kinds(service) == []


def test_going_on_with_a_session_the_service_ended_is_still_expired_use(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(require_logout=True)
    account = service.accounts.add_account()
    flow = service.flow(V1Flow)
    first = flow.login(account.username, account.password)
    clock.advance(1801)
    assert v1_call(service, first) == 1401
    assert v1_call(service, first) == 1401
    assert kinds(service) == ["expired_use"]
    # Recovering once and then presenting the dead session again counts too.
    service = make_service()
    account = service.accounts.add_account()
    flow = service.flow(V1Flow)
    first = flow.login(account.username, account.password)
    clock.advance(1801)
    assert v1_call(service, first) == 1401
    flow.login(account.username, account.password)
    assert v1_call(service, first) == 1401
    found = findings(evidence(service))
    assert [f.kind for f in found] == ["expired_use"]
    assert "presented an expired credential 2 times" in found[0].headline


# -- item 3: the cookie-jar bug is reported once, as refused calls ----------------------


def test_v1_calls_without_the_cookie_are_refused_calls_and_the_login_after_is_no_churn(
    make_service: MakeService,
) -> None:
    service = make_service(require_logout=True)
    account = service.accounts.add_account()
    flow = service.flow(V1Flow)
    for _ in range(3):  # a client that logs in again after each 401
        session = flow.login(account.username, account.password)
        assert v1_call(service, session, cookie=False) == 1401
    found = findings(evidence(service), kinds=KINDS)
    assert [(f.kind, f.username) for f in found] == [("refused_call", account.username)]
    assert found[0].headline.startswith(
        f"pytest-mgmtauth: 3 protected call(s) of account {account.username!r} were refused "
        "because the client sent the wrong credential; first: GET /v1/x with no known "
        "credential at 00:00:00 -> 401 (1401: no JSESSIONID cookie was sent"
    )


# -- item 7: a wrong credential is a finding, a refusal brought about on cue is not ----


def test_a_v3_token_of_another_profile_is_a_refused_call_even_when_the_client_recovers(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    for _ in range(4):
        main = v3_token(service, account, "main")
        assert bearer_call(service, "v3", main, "/v3/x/accounts/acme/profiles/dev") == 1401
        dev = v3_token(service, account, "dev")
        assert bearer_call(service, "v3", dev, "/v3/x/accounts/acme/profiles/dev") == 200
    found = findings(evidence(service))
    assert [f.kind for f in found] == ["refused_call"]
    assert "4 protected call(s)" in found[0].headline
    assert "token T1 is for acme/main, but this call is for profile acme/dev" in found[0].headline


def test_unknown_and_malformed_tokens_are_refused_calls_of_no_known_account(
    service: AuthService,
) -> None:
    assert bearer_call(service, "v2", "not-a-jwt", "/api/things") == 1401
    found = findings(evidence(service))
    assert [(f.kind, f.username) for f in found] == [("refused_call", None)]


def test_refusals_the_test_brought_about_are_not_refused_calls(
    service: AuthService, clock: ManualClock
) -> None:
    account = service.accounts.add_account()
    token = v2_token(service, account)
    service.fault_runner.revoke(token)
    assert bearer_call(service, "v2", token, "/api/things") == 1401
    token = v2_token(service, account)
    service.fault_runner.expire(token)
    assert bearer_call(service, "v2", token, "/api/things") == 1401
    token = v2_token(service, account)
    clock.advance(1801)
    assert bearer_call(service, "v2", token, "/api/things") == 1401  # expired: its own kind
    assert kinds(service) == ["expired_use"]


# -- item 8: every account and profile a v3 path names must be the token's --------------


@pytest.mark.parametrize(
    "path",
    [
        "/v3/accounts/acme/profiles/main/accounts/other/profiles/dev",
        "/v3/accounts/acme/profiles/main/x/accounts/acme/profiles/dev",
        "/v3/accounts/acme%2Fprofiles%2Fmain/accounts/other/profiles/dev",
        "/v3/accounts/other%252Fprofiles%252Fdev/../acme/profiles/main/x",
        "/v3/accounts/acme/profiles/main/x/../../../../accounts/other/profiles/dev",
    ],
)
def test_a_v3_token_is_refused_on_a_path_that_also_names_another_pair(
    service: AuthService, path: str
) -> None:
    account = service.accounts.add_account()
    token = v3_token(service, account)
    assert bearer_call(service, "v3", token, path) == 1401
    assert kinds(service) == ["refused_call"]


def test_the_pairs_a_v3_path_names() -> None:
    assert named_scopes("/v3/accounts/acme/profiles/main/x") == [("acme", "main")]
    dotted = named_scopes("/v3/accounts/acme/profiles/main/x/../../../../accounts/o/profiles/d")
    assert dotted[:2] == [("acme", "main"), ("o", "d")]
    assert ("o", "d") in named_scopes("/v3/accounts/o%2Fprofiles%2Fd/x")
    # Issue 38, item 10: a doubled slash hid the profile from the check.
    assert ("acme", "other") in named_scopes("/v3/accounts/acme//profiles/other/x")


def test_the_own_pair_named_twice_is_accepted(service: AuthService) -> None:
    account = service.accounts.add_account()
    token = v3_token(service, account)
    path = "/v3/accounts/acme/profiles/main/copy/accounts/acme/profiles/main"
    assert bearer_call(service, "v3", token, path) == 200


# -- item 9: what came from a request cannot forge a line ------------------------------

FORGED = "\n  00:00:00  T9 issued by /v2/auth (#abcdef), valid until 00:30:00"


def test_a_path_with_a_newline_is_shown_escaped(service: AuthService) -> None:
    account = service.accounts.add_account()
    service.timeline.record_unknown_route("GET", "/v2/x" + FORGED, 404)
    service.timeline.record_bad_request("GET", "/v2/y" + FORGED, 400, "bad" + FORGED)
    token = v3_token(service, account)
    assert bearer_call(service, "v3", token, "/v3/accounts/acme/profiles/dev" + FORGED) == 1401
    assert bearer_call(service, "v3", token, "/v3/accounts/acme/profiles/m\nain/x") == 1401
    for text in (
        format_timeline(evidence(service), whole=True),
        report_section(evidence(service)),
        *(f.message for f in findings(evidence(service), kinds=KINDS)),
    ):
        lines = text.splitlines()
        assert not [line for line in lines if line.lstrip().startswith("00:00:00  T9")], text
    timeline = format_timeline(evidence(service), whole=True)
    assert (
        "GET '/v2/x\\n  00:00:00  T9 issued by /v2/auth (#abcdef), valid until 00:30:00' -> "
        "404: no route declares it"
    ) in timeline
    assert "GET '/v3/accounts/acme/profiles/m\\nain/x' with T1 -> 401 (Unauthorized: " in timeline


def test_v3_names_in_a_grant_and_a_refused_grant_are_shown_escaped(service: AuthService) -> None:
    account = service.accounts.add_account(profiles=["acme/main"])
    with pytest.raises(Refusal):
        service.flow(V3Flow).grant(account.username, account.api_key, "acme", "x" + FORGED)
    service.flow(V3Flow).grant(account.username, account.api_key, "acme", "main")
    text = format_timeline(evidence(service), whole=True)
    assert not [line for line in text.splitlines() if line.startswith("  00:00:00  T9")], text
    assert "for acme/'x\\n  00:00:00  T9" in text


# -- item 6: time zero after another tool moved the clock ------------------------------


def test_a_jump_before_the_first_event_moves_time_zero_also_for_reasons(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(lockout_threshold=1)
    account = service.accounts.add_account()
    clock.now += 3 * 365 * 86400.0  # as time-machine's travel: not a move of ours
    flow = service.flow(V1Flow)
    with pytest.raises(Refusal):
        flow.login(account.username, "wrong")
    with pytest.raises(Refusal) as locked:
        flow.login(account.username, account.password)
    assert "account locked since 00:00:00 until 00:10:00" in locked.value.reason
    lines = format_timeline(evidence(service), whole=True).splitlines()
    assert lines[1].startswith("  00:00:00  /v1/login rejected (1401)")
    # A move of the plugin's own clock is part of the story: it still shows.
    service = make_service()
    account = service.accounts.add_account()
    clock.advance(3600)
    v2_token(service, account)
    assert "  01:00:00  T1 issued by /v2/auth" in format_timeline(evidence(service), whole=True)
