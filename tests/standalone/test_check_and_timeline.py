"""GET /_mgmtauth/timeline and /_mgmtauth/check: the Python assertions' timeline and
verdicts for clients in any language, over real HTTP from an in-process server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import requests

from pytest_mgmtauth import Options
from pytest_mgmtauth._standalone.server import AccountSpec, StandaloneServer
from pytest_mgmtauth._verdicts.checks import (
    check_logged_out,
    check_no_expired_credential_used,
    check_token_reused,
)
from pytest_mgmtauth._verdicts.evidence import format_timeline

ALICE = AccountSpec(username="alice@example.com", api_key="k+e&y=%/1", password="pa+ss&1")
BOB = AccountSpec(username="bob@example.com", api_key="b0b+key", password="b0b+pass")


@pytest.fixture
def server(key_file: Path) -> Iterator[StandaloneServer]:
    server = StandaloneServer(
        Options(throttle=None),
        port=0,
        accounts=[ALICE, BOB],
        routes=[("GET", "/v2/things"), ("GET", "/v1/things")],
        key_file=str(key_file),
        frozen_clock=True,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def get(server: StandaloneServer, http: requests.Session) -> Any:
    def call(path: str, **params: str) -> requests.Response:
        return http.get(f"{server.url}/_mgmtauth{path}", params=params)

    return call


def _token(http: requests.Session, url: str, who: AccountSpec = ALICE) -> str:
    answer = http.post(f"{url}/v2/auth", data={"username": who.username, "key": who.api_key})
    assert answer.status_code == 200, answer.text
    token = answer.json()["token"]
    assert isinstance(token, str)
    return token


def _things(http: requests.Session, url: str, token: str) -> int:
    return http.get(f"{url}/v2/things", headers={"Authorization": f"Bearer {token}"}).status_code


def _raised(check: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(AssertionError) as excinfo:
        check(*args, **kwargs)
    return str(excinfo.value)


# -- /check ----------------------------------------------------------------------------


def test_check_of_a_client_that_reuses_its_token_is_ok(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    token = _token(http, server.url)
    assert [_things(http, server.url, token) for _ in range(3)] == [200, 200, 200]
    answer = get("/check")
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/json"
    verdict = answer.json()
    assert verdict["ok"] is True
    assert verdict["findings"] == []
    assert verdict["counts"]["grants"] == 1
    assert verdict["counts"]["api_calls"] == 3
    assert verdict["counts"]["churn"] == 0
    assert verdict["counted"] == {
        "churn": True,
        "expired_use": True,
        "refused_call": True,
        "open_session": False,
        "wrong_host": True,
        "deprecated_version": True,
    }


def test_check_reports_churn_with_the_message_of_assert_token_reused(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    for _ in range(3):  # a new token for every call
        assert _things(http, server.url, _token(http, server.url)) == 200
    verdict = get("/check").json()
    assert verdict["ok"] is False
    (finding,) = verdict["findings"]
    assert finding["kind"] == "churn"
    assert finding["username"] == "alice@example.com"
    assert finding["message"].startswith("pytest-mgmtauth: token churn: account 'alice@")
    assert finding["message"] == _raised(
        check_token_reused, server.fake.evidence(), username="alice@example.com"
    )
    assert verdict["counts"]["churn"] == 2
    for secret in (ALICE.api_key, ALICE.password):
        assert secret not in get("/check").text
    # Switched off, churn is counted but is no finding.
    quiet = get("/check", churn="false").json()
    assert quiet["ok"] is True
    assert quiet["counts"]["churn"] == 2


def test_check_reports_an_expired_token_used_per_account(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    token = _token(http, server.url, BOB)
    server.clock.advance(1800)
    assert _things(http, server.url, token) == 401
    verdict = get("/check").json()
    (finding,) = verdict["findings"]
    assert (finding["kind"], finding["username"]) == ("expired_use", "bob@example.com")
    assert finding["message"] == _raised(
        check_no_expired_credential_used, server.fake.evidence(), username="bob@example.com"
    )
    assert verdict["counts"]["expired_use"] == 1
    assert get("/check", expired_use="false").json()["ok"] is True


def test_check_reports_calls_refused_for_the_wrong_credential_and_can_leave_them_out(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    # Issue 29: a client that recovers after each refusal passed /check silently.
    assert _things(http, server.url, "not-a-token") == 401
    token = _token(http, server.url)
    assert _things(http, server.url, token) == 200
    verdict = get("/check").json()
    assert verdict["ok"] is False
    (finding,) = verdict["findings"]
    assert (finding["kind"], finding["username"]) == ("refused_call", None)
    assert finding["message"].startswith(
        "pytest-mgmtauth: 1 protected call(s) were refused because the client sent the wrong "
        "credential; first: GET /v2/things with no known credential"
    )
    assert verdict["counts"]["refused_call"] == 1
    assert get("/check", refused_call="false").json()["ok"] is True


def test_open_sessions_are_findings_only_when_logout_is_required(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    login = http.post(
        f"{server.url}/v1/login", data={"username": ALICE.username, "password": ALICE.password}
    )
    assert login.status_code == 200
    default = get("/check").json()
    assert default["ok"] is True
    assert default["counts"]["open_session"] == 1
    required = get("/check", require_logout="true").json()
    assert required["ok"] is False
    assert required["counted"]["open_session"] is True
    (finding,) = required["findings"]
    assert (finding["kind"], finding["username"]) == ("open_session", "alice@example.com")
    assert finding["message"] == _raised(
        check_logged_out, server.fake.evidence(), username="alice@example.com"
    )
    session = login.cookies["JSESSIONID"]
    assert session not in get("/check", require_logout="true").text
    http.post(f"{server.url}/v1/logout", headers={"Cookie": f"JSESSIONID={session}"})
    assert get("/check", require_logout="1").json()["ok"] is True


def test_a_reset_clears_the_verdicts(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    _token(http, server.url)
    _token(http, server.url)
    assert get("/check").json()["ok"] is False
    assert http.post(f"{server.url}/_mgmtauth/reset", json={}).status_code == 200
    assert get("/check").json() == {
        "ok": True,
        "findings": [],
        "counts": {
            "grants": 0,
            "api_calls": 0,
            "rejections": 0,
            "churn": 0,
            "concurrent": 0,
            "expired_use": 0,
            "refused_call": 0,
            "open_session": 0,
            "wrong_host": 0,
            "deprecated_version": 0,
        },
        "counted": {
            "churn": True,
            "expired_use": True,
            "refused_call": True,
            "open_session": False,
            "wrong_host": True,
            "deprecated_version": True,
        },
    }


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"require_logout": "maybe"}, "?require_logout= takes true or false, got 'maybe'"),
        ({"requireLogout": "true"}, "unknown query parameter 'requireLogout'; known: "),
    ],
)
def test_bad_check_parameters_are_a_400_that_says_what_is_known(
    get: Any, params: dict[str, str], message: str
) -> None:
    answer = get("/check", **params)
    assert answer.status_code == 400
    assert message in answer.json()["message"]
    known = "require_logout, churn, expired_use, refused_call"
    assert known in get("/check", nope="1").json()["message"]


# -- /timeline -------------------------------------------------------------------------


def test_timeline_is_the_text_of_the_python_failure_messages(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    token = _token(http, server.url)
    assert _things(http, server.url, token) == 200
    _token(http, server.url)  # churn: marked in the timeline
    answer = get("/timeline")
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "text/plain; charset=utf-8"
    text = answer.text
    assert text == format_timeline(server.fake.evidence()) + "\n"
    assert text.startswith("Timeline of all accounts (simulated time since the test started):")
    assert "T1 issued by /v2/auth" in text
    assert "<-- PREMATURE: T1 still valid" in text
    assert token not in text
    one = get("/timeline", username="alice@example.com").text
    assert one.startswith("Timeline of account 'alice@example.com'")


def test_a_long_timeline_is_shown_whole(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    token = _token(http, server.url)
    for _ in range(20):  # alternating lines, so none merge: 41 in all
        assert _things(http, server.url, token) == 200
        assert http.get(f"{server.url}/v2/nothing").status_code == 404
    text = get("/timeline").text
    assert "more line(s)" not in text
    assert text.count("GET /v2/things with T1 -> 200") == 20
    # The failure messages cut it around the event they are about, and send the
    # reader to where it is whole: mgmt_server.timeline() in a test...
    cut = format_timeline(server.fake.evidence())
    assert "more line(s): mgmt_server.timeline() shows them all" in cut
    whole = server.fake.timeline()
    assert "more line(s)" not in whole
    assert whole.count("GET /v2/things with T1 -> 200") == 20


def test_a_finding_with_a_long_timeline_points_at_the_timeline_endpoint(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    _token(http, server.url)
    token = _token(http, server.url)  # churn, then 30 lines more
    for _ in range(15):
        assert _things(http, server.url, token) == 200
        assert http.get(f"{server.url}/v2/nothing").status_code == 404
    (finding,) = get("/check").json()["findings"]
    # ...and GET /_mgmtauth/timeline for a client in another language.
    assert "more line(s): GET /_mgmtauth/timeline shows them all" in finding["message"]
    assert "mgmt_server" not in finding["message"]


def test_timeline_of_an_unknown_account_is_a_400_naming_the_known_ones(get: Any) -> None:
    answer = get("/timeline", username="carol@example.com")
    assert answer.status_code == 400
    assert answer.headers["Content-Type"] == "application/json"
    message = answer.json()["message"]
    assert "no account 'carol@example.com'" in message
    assert "'alice@example.com', 'bob@example.com'" in message


def test_the_new_endpoints_are_listed_and_take_only_get(
    server: StandaloneServer, get: Any, http: requests.Session
) -> None:
    endpoints = {(e["method"], e["path"]): e for e in get("/").json()["endpoints"]}
    assert endpoints["GET", "/_mgmtauth/timeline"]["query"] == ["username"]
    assert endpoints["GET", "/_mgmtauth/check"]["query"] == [
        "require_logout",
        "churn",
        "expired_use",
        "refused_call",
        "wrong_host",
        "deprecated_version",
    ]
    assert "query" not in endpoints["GET", "/_mgmtauth/events"]
    # Endpoints that take no query parameters still ignore them (a cache-buster, say).
    assert get("/events", _="1").status_code == 200
    answer = http.post(f"{server.url}/_mgmtauth/check", json={})
    assert answer.status_code == 405
    assert "/_mgmtauth/check takes GET, not POST" in answer.json()["message"]


def test_check_counts_calls_to_api_versions_past_active_unless_switched_off(
    key_file: Path, http: requests.Session
) -> None:
    # A version whose month was two years ago is in End of Support now (24 months Active,
    # then 12), whatever today is.
    now = datetime.now(timezone.utc)
    path = f"/v{now.year - 2}-{now.month:02d}/cdp/things"
    server = StandaloneServer(
        Options(throttle=None),
        port=0,
        accounts=[ALICE],
        routes=[("GET", path)],
        key_file=str(key_file),
        frozen_clock=True,
    )
    server.start()
    try:
        token = _token(http, server.url)
        answer = http.get(server.url + path, headers={"Authorization": f"Bearer {token}"})
        assert (answer.status_code, answer.headers["Deprecation"]) == (200, "true")
        # The answer that told the client is no finding; calling the version again is.
        assert http.get(f"{server.url}/_mgmtauth/check").json()["ok"] is True
        http.get(server.url + path, headers={"Authorization": f"Bearer {token}"})
        check = http.get(f"{server.url}/_mgmtauth/check").json()
        assert [f["kind"] for f in check["findings"]] == ["deprecated_version"]
        assert check["counts"]["deprecated_version"] == 1
        off = http.get(f"{server.url}/_mgmtauth/check", params={"deprecated_version": "false"})
        assert off.json()["ok"] is True
    finally:
        server.stop()


def test_a_route_on_version_9998_answers_and_check_agrees(
    key_file: Path, http: requests.Session
) -> None:
    # Its End of Life would fall in the year 10000: Active, as in the fake of a test.
    server = StandaloneServer(
        Options(throttle=None),
        port=0,
        accounts=[ALICE],
        routes=[("GET", "/v9998-01/cdp/audiences")],
        key_file=str(key_file),
        frozen_clock=True,
    )
    server.start()
    try:
        token = _token(http, server.url)
        answer = http.get(
            f"{server.url}/v9998-01/cdp/audiences", headers={"Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 200
        assert "Sunset" not in answer.headers
        assert http.get(f"{server.url}/_mgmtauth/check").json()["ok"] is True
    finally:
        server.stop()
