"""A grant-issuing flow defined in the test suite, with no edit to the package: ``POST
/v9/session`` with JSON ``{"user", "key"}`` -> ``{"session_id": <random>, "expires_in":
600}``; protected calls send ``X-Session: <id>``. The example "Adding a flow" in
docs/architecture.md points to: it imports only the flow-authoring surface, and hands
its opaque session id and lifetime to the grant rule (``service.grants.token``), which
counts, judges churn, expires, masks, records and faults it as any flow's grant."""

from __future__ import annotations

import json
import secrets
import urllib.parse

import pytest
import requests

from pytest_mgmtauth import Account, FaultInjected, MgmtServer, TokenIssued
from pytest_mgmtauth.flows import (
    Answer,
    BearerFlow,
    BearerToken,
    Endpoint,
    Incoming,
    MalformedCall,
    registered,
)

# -- the flow (everything a grant means is the grant rule's: service.grants) ------------

LIFETIME = 600
#: Renewing within this much of the end is reuse, not churn.
MARGIN = LIFETIME // 6


class V9SessionFlow(BearerFlow):
    name = "v9"
    title = "/v9/session"
    path_title = "/v9/session"
    credential = "session"
    grants_phrase = "/v9/session sessions"
    answer_field = "session_id"
    token_word = "session id"
    route_prefix = "/v9/"
    auth_hosts = ("api.tealiumiq.com",)
    api_hosts = ("api.tealiumiq.com",)
    endpoints = (Endpoint("session", "/v9/session"),)  # no form: reads its JSON body

    @classmethod
    def fix_churn(cls, options) -> str:
        return (
            "keep the session_id from POST /v9/session and send it as X-Session with every "
            f"call; start a new session only within {MARGIN} s of its expires_in "
            f"({LIFETIME} s) or after a call was answered 401"
        )

    @classmethod
    def churn_margin(cls, options) -> float:
        return MARGIN

    @classmethod
    def fix_expired(cls, options) -> str:
        return f"start a new session before expires_in ({LIFETIME} s) runs out"

    @classmethod
    def fix_refused(cls) -> str:
        return "'X-Session: <session_id from POST /v9/session>'"

    def answer_session(self, incoming: Incoming) -> Answer:
        media = (incoming.content_type or "").split(";")[0].strip().lower()
        if media != "application/json":
            raise MalformedCall(415, f"/v9/session takes JSON, not {media or 'no body type'}")
        try:
            body = json.loads(incoming.body)
        except ValueError:
            raise MalformedCall(400, "/v9/session: the body is not JSON") from None
        user, key = (body.get(f) if isinstance(body, dict) else None for f in ("user", "key"))
        if not isinstance(user, str) or not isinstance(key, str):
            raise MalformedCall(400, "/v9/session takes {'user': str, 'key': str}")
        service = self.service
        with service.mutex:
            now = service.timeline.now()
            refuse, client = self.refuse_auth(now), incoming.client
            self.check_account(user, key, now=now, client=client, refuse=refuse, json_body=True)
        session_id = secrets.token_urlsafe(24)
        service.grants.token(
            self,
            user,
            session_id,
            lifetime=LIFETIME,
            arrived=incoming.arrived,
            secret=True,
        )
        return Answer({"session_id": session_id, "expires_in": LIFETIME})

    def read(self, received) -> BearerToken:
        values = received.header("X-Session")
        if not values:
            other = self.others_carried(received)
            hint = f" (this request carries {other})" if other else ""
            problem = (
                f"no X-Session header: send 'X-Session: <session_id>' from POST /v9/session{hint}"
            )
            return BearerToken(missing=True, problem=problem)
        if len(values) > 1 or "," in values[0]:
            return BearerToken(problem="send exactly one X-Session header")
        return BearerToken(token=values[0].strip())

    def carried(self, received) -> str | None:
        return "an X-Session header" if received.header("X-Session") else None


@pytest.fixture(autouse=True, scope="module")
def _v9_flow_registered():
    with registered(V9SessionFlow):
        yield


# -- a client ---------------------------------------------------------------------------


def start_session(
    mgmt_server: MgmtServer, account: Account, *, key: str | None = None
) -> requests.Response:
    return requests.post(
        mgmt_server.url + "/v9/session",
        json={"user": account.username, "key": account.api_key if key is None else key},
    )


def session_of(mgmt_server: MgmtServer, account: Account) -> str:
    answer = start_session(mgmt_server, account)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["expires_in"] == LIFETIME
    session: str = body["session_id"]
    return session


def get(mgmt_server: MgmtServer, path: str, session: str | None) -> requests.Response:
    headers = {} if session is None else {"X-Session": session}
    return requests.get(mgmt_server.url + path, headers=headers)


@pytest.fixture
def things(mgmt_server):
    return mgmt_server.route("GET", "/v9/things").respond_with_json(["a"])


# -- the tests --------------------------------------------------------------------------


def test_session_reaches_the_route_and_is_counted(mgmt_clock, mgmt_server, mgmt_account, things):
    session = session_of(mgmt_server, mgmt_account)
    for _ in range(3):
        assert get(mgmt_server, "/v9/things", session).json() == ["a"]
    assert things.auth == "v9"  # by route_prefix
    assert mgmt_server.auth_count(version="v9") == 1
    assert mgmt_server.auth_count(version="v2") == 0
    mgmt_server.assert_auth_count(1, version="v9", username=mgmt_account.username)
    mgmt_server.assert_credential_reused()
    mgmt_server.assert_no_expired_credential_used()
    mgmt_server.assert_no_refused_calls()
    [issued] = [e for e in mgmt_server.events if isinstance(e, TokenIssued)]
    assert issued.version == "v9"
    assert issued.expires_at.timestamp() - issued.at.timestamp() == LIFETIME


def test_session_ids_are_random(mgmt_server, mgmt_account):
    assert session_of(mgmt_server, mgmt_account) != session_of(mgmt_server, mgmt_account)


def test_wrong_key_unknown_and_missing_session(mgmt_server, mgmt_account, things):
    mgmt_server.expect_refusals()
    refused = start_session(mgmt_server, mgmt_account, key="not-the-key")
    assert refused.status_code == 401
    assert refused.json()["returnCode"] == 1401
    unknown = get(mgmt_server, "/v9/things", "no-such-session-id")
    assert unknown.status_code == 401
    assert unknown.json()["returnCode"] == 1401
    missing = get(mgmt_server, "/v9/things", None)
    assert missing.status_code == 401
    assert "no X-Session header" in missing.json()["message"]
    assert things.call_count == 0
    assert mgmt_server.auth_count(version="v9") == 0


def test_a_wrong_key_in_the_json_body_gets_json_advice(mgmt_server, mgmt_account):
    mgmt_server.expect_refusals()
    encoded = urllib.parse.quote(mgmt_account.api_key, safe="")
    assert encoded != mgmt_account.api_key
    message = start_session(mgmt_server, mgmt_account, key=encoded).json()["message"]
    assert "arrived URL-encoded inside a JSON body" in message
    assert "json={...}" in message
    assert "data={" not in message


def test_expiry_on_mgmt_clock(mgmt_clock, mgmt_server, mgmt_account, things):
    session = session_of(mgmt_server, mgmt_account)
    mgmt_clock.advance(seconds=LIFETIME - 1)
    assert get(mgmt_server, "/v9/things", session).status_code == 200
    mgmt_clock.advance(seconds=1)
    expired = get(mgmt_server, "/v9/things", session)
    assert expired.status_code == 401
    assert expired.json()["returnCode"] == 1401
    assert "expired 0 s ago" in expired.json()["message"]
    with pytest.raises(AssertionError, match="presented an expired credential 1 time"):
        mgmt_server.assert_no_expired_credential_used()
    # A new session after the old one ended is no churn.
    get(mgmt_server, "/v9/things", session_of(mgmt_server, mgmt_account))
    mgmt_server.assert_credential_reused()
    assert "T1 expired (used 1 time)" in mgmt_server.timeline()


def test_renewing_early_is_churn_and_within_margin_is_reuse(
    mgmt_clock, mgmt_server, mgmt_account, things
):
    first = session_of(mgmt_server, mgmt_account)
    get(mgmt_server, "/v9/things", first)
    mgmt_clock.advance(seconds=LIFETIME - MARGIN)
    session_of(mgmt_server, mgmt_account)  # within the margin: reuse
    mgmt_server.assert_credential_reused()
    session_of(mgmt_server, mgmt_account)  # T2 still fresh: churn
    with pytest.raises(AssertionError, match="token churn") as failed:
        mgmt_server.assert_credential_reused()
    message = str(failed.value)
    assert "First premature grant: T3" in message
    assert "while T2 was still valid" in message
    assert "T1 issued by /v9/session" in message
    assert "keep the session_id from POST /v9/session" in message
    assert "within its flow's refresh margin (v9: 100 s)" in message  # not the 300 s default


def test_expire_revoke_and_scheduled_expire(mgmt_clock, mgmt_server, mgmt_account, things):
    one = session_of(mgmt_server, mgmt_account)
    assert mgmt_server.revoke("T1") == "T1"
    revoked = get(mgmt_server, "/v9/things", one)
    assert "session T1 was revoked" in revoked.json()["message"]
    two = session_of(mgmt_server, mgmt_account)
    assert mgmt_server.expire(two) == "T2"
    assert "ended early on cue" in get(mgmt_server, "/v9/things", two).json()["message"]
    three = session_of(mgmt_server, mgmt_account)
    mgmt_server.schedule_fault("expire", at=mgmt_server.protected_calls + 2)
    assert get(mgmt_server, "/v9/things", three).status_code == 200
    assert get(mgmt_server, "/v9/things", three).status_code == 401  # clock moved to its end
    assert "the clock moved on" in mgmt_server.timeline()
    # One credential, one name: a session of this flow is never called a token.
    texts = [mgmt_server.timeline(), *(e.describe() for e in mgmt_server.events)]
    assert not [t for t in texts if "token T" in t]
    mgmt_server.assert_credential_reused()
    # Revoked and expired on cue (T1, T2) are not the client's fault; a scheduled expire
    # on mgmt_clock lets T3's lifetime pass, and a client that watches the clock renews.
    with pytest.raises(AssertionError, match="1 time; first: GET /v9/things with T3"):
        mgmt_server.assert_no_expired_credential_used()


def test_scripted_faults_on_the_grant_endpoint(mgmt_server, mgmt_account, things):
    mgmt_server.fail_next(version="v9", error=503)
    failed = start_session(mgmt_server, mgmt_account)
    assert failed.status_code == 503
    assert "scripted" in failed.json()["message"]
    mgmt_server.malformed_next(version="v9")
    cut = start_session(mgmt_server, mgmt_account)
    assert cut.status_code == 200
    assert cut.text.startswith('{"session_id": "')
    with pytest.raises(ValueError, match=r"Expecting|Unterminated|Extra data"):
        cut.json()
    [fail, malformed] = [e for e in mgmt_server.events if isinstance(e, FaultInjected)]
    assert (fail.fault, malformed.fault, fail.path) == ("fail", "malformed", "/v9/session")
    assert mgmt_server.auth_count(version="v9") == 0
    assert get(mgmt_server, "/v9/things", session_of(mgmt_server, mgmt_account)).ok
    mgmt_server.assert_auth_count(1, version="v9")
    assert mgmt_server.auth_calls == 3


def test_bad_bodies(mgmt_server, mgmt_account):
    form = requests.post(mgmt_server.url + "/v9/session", data={"user": "x", "key": "y"})
    assert form.status_code == 415
    broken = requests.post(
        mgmt_server.url + "/v9/session",
        data="{not json",
        headers={"Content-Type": "application/json"},
    )
    assert broken.status_code == 400
    assert broken.json()["message"] == "/v9/session: the body is not JSON"


def test_request_log_and_timeline_mask_the_key_and_session(
    mgmt_clock, mgmt_server, mgmt_account, things
):
    mgmt_server.expect_refusals()
    session = session_of(mgmt_server, mgmt_account)
    get(mgmt_server, "/v9/things", session)
    start_session(mgmt_server, mgmt_account, key=mgmt_account.api_key + "x")  # wrong key
    texts = [repr(r) for r in mgmt_server.requests]
    texts += [mgmt_server.timeline(), repr(mgmt_server.events)]
    for text in texts:
        assert mgmt_account.api_key not in text
        assert session not in text
    grant, call = mgmt_server.requests[:2]
    assert '"key": "#' in grant.body  # the key by its fingerprint
    assert call.header("X-Session").startswith("#")
    timeline = mgmt_server.timeline()
    assert "T1 issued by /v9/session (#" in timeline
    assert "valid until 00:10:00" in timeline
    assert "GET /v9/things with T1 -> 200" in timeline
    assert "/v9/session rejected (1401)" in timeline


def test_a_v2_token_on_a_v9_route(mgmt_server, mgmt_account, things, get_token):
    mgmt_server.expect_refusals()
    token = get_token(mgmt_account)
    answer = get(mgmt_server, "/v9/things", token)
    assert answer.status_code == 401
    assert "is a v2 token" in answer.json()["message"]
    bearer = requests.get(
        mgmt_server.url + "/v9/things", headers={"Authorization": "Bearer " + token}
    )
    assert "this request carries a bearer token" in bearer.json()["message"]


# -- strict mode and the report, as a user's suite sees them (pytester) -------------------

USER_SUITE = """
import pytest
import requests


def start(mgmt_server, account):
    answer = requests.post(
        mgmt_server.url + "/v9/session", json={"user": account.username, "key": account.api_key}
    )
    assert answer.status_code == 200
    return answer.json()["session_id"]


def test_churns(mgmt_clock, mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v9/things").respond_with_json([])
    for _ in range(2):
        session = start(mgmt_server, mgmt_account)
        answer = requests.get(mgmt_server.url + "/v9/things", headers={"X-Session": session})
        assert answer.status_code == 200


def test_reuses(mgmt_clock, mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v9/things").respond_with_json([])
    session = start(mgmt_server, mgmt_account)
    for _ in range(2):
        answer = requests.get(mgmt_server.url + "/v9/things", headers={"X-Session": session})
        assert answer.status_code == 200


def test_uses_an_expired_session(mgmt_clock, mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v9/things").respond_with_json([])
    session = start(mgmt_server, mgmt_account)
    mgmt_clock.advance(seconds=600)
    answer = requests.get(mgmt_server.url + "/v9/things", headers={"X-Session": session})
    assert answer.status_code == 401
"""


def test_strict_mode_errors_on_churn_and_expired_use(mgmt_pytester):
    mgmt_pytester.makepyfile(
        "pytestmark = __import__('pytest').mark.mgmtauth(strict=True)\n" + USER_SUITE
    )
    result = mgmt_pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_churns*",
            "*pytest-mgmtauth: token churn: account 'user1.*@example.com' was granted 1 new "
            "credential(s) while it still held a valid one (2 grants in all). First premature "
            "grant: T2 (#*) at 00:00:00, while T1 was still valid*",
            "*00:00:00  T1 issued by /v9/session (#*), valid until 00:10:00",
            "*00:00:00  GET /v9/things with T1 -> 200",
            "*Fix: keep the session_id from POST /v9/session*",
            "*ERROR at teardown of test_uses_an_expired_session*",
            "*the client presented an expired credential 1 time*",
            "*mgmtauth timeline*",
        ]
    )


def test_without_strict_churn_is_a_warning_and_the_report_counts_it(mgmt_pytester):
    mgmt_pytester.makeini(
        "[pytest]\nfilterwarnings =\n    default::pytest_mgmtauth.TokenChurnWarning\n"
        "    default::pytest_mgmtauth.ExpiredCredentialWarning\n"
    )
    mgmt_pytester.makepyfile(USER_SUITE)
    result = mgmt_pytester.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-report")
    result.assert_outcomes(passed=3, warnings=2)
    result.stdout.fnmatch_lines(
        [
            "*TokenChurnWarning: pytest-mgmtauth: token churn*",
            "*mgmtauth: credentials per test*",
            "*::test_churns * 2 * 2 * 0 * 1 * 0  <- churn",
        ]
    )
