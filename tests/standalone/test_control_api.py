"""The control API under /_mgmtauth/, driven with requests against an in-process
standalone server: timeline, clock, accounts, routes, faults, reset, and bad input."""

from __future__ import annotations

import concurrent.futures
import re
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit

import pytest
import requests

from pytest_mgmtauth import MgmtServer, Options
from pytest_mgmtauth._service.records import status_code
from pytest_mgmtauth._standalone.cli import build_parser, server_from_args
from pytest_mgmtauth._standalone.messages import host_allowed
from pytest_mgmtauth._standalone.server import AccountSpec, StandaloneServer

ALICE = AccountSpec(username="alice@example.com", api_key="k+e&y=%/1", password="pa+ss&1")


@pytest.fixture
def server(key_file: Path) -> Iterator[StandaloneServer]:
    server = StandaloneServer(
        Options(throttle=2),
        port=0,
        accounts=[ALICE],
        routes=[("GET", "/v2/things"), ("GET", "/v1/things")],
        key_file=str(key_file),
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def control(server: StandaloneServer, http: requests.Session) -> Any:
    def call(method: str, path: str, body: Any = None, **kw: Any) -> requests.Response:
        if body is None and method == "POST":
            body = {}  # control POSTs are JSON, an empty object at least
        return http.request(method, f"{server.url}/_mgmtauth{path}", json=body, **kw)

    return call


def _token(http: requests.Session, url: str, key: str = "k+e&y=%/1") -> requests.Response:
    return http.post(f"{url}/v2/auth", data={"username": "alice@example.com", "key": key})


def test_index_lists_the_endpoints(control: Any) -> None:
    answer = control("GET", "/")
    assert answer.status_code == 200
    paths = {(e["method"], e["path"]) for e in answer.json()["endpoints"]}
    assert ("POST", "/_mgmtauth/clock/advance") in paths
    assert ("GET", "/_mgmtauth/events") in paths


def test_events_are_the_timeline_as_json(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    assert _token(http, server.url).status_code == 200
    (event,) = control("GET", "/events").json()["events"]
    assert event["type"] == "TokenIssued"
    assert event["username"] == "alice@example.com"
    assert event["token"] == "T1"
    assert event["while_valid"] == []
    assert event["description"].startswith("token T1 (#")
    assert "{exp}" not in event["description"]
    assert event["at"].endswith("Z")


def test_advancing_the_clock_expires_tokens(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    token = _token(http, server.url).json()["token"]
    headers = {"Authorization": f"Bearer {token}"}
    assert http.get(f"{server.url}/v2/things", headers=headers).status_code == 200
    before = control("GET", "/clock").json()["now"]
    advanced = control("POST", "/clock/advance", {"minutes": 30})
    assert advanced.status_code == 200
    assert advanced.json()["now"] > before
    refused = http.get(f"{server.url}/v2/things", headers=headers)
    assert refused.status_code == 401
    assert "expired" in refused.json()["message"]


def test_accounts_added_and_listed_with_credentials(control: Any) -> None:
    added = control("POST", "/accounts", {"username": "bob@example.com", "permissions": []})
    assert added.status_code == 201
    assert added.json()["username"] == "bob@example.com"
    assert len(added.json()["api_key"]) == 60
    listed = control("GET", "/accounts").json()["accounts"]
    assert [a["username"] for a in listed] == ["alice@example.com", "bob@example.com"]


def test_routes_declared_through_the_control_api_are_authenticated(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    declared = control(
        "POST", "/routes", {"method": "POST", "path": "/v2/jobs", "json": {"id": 7}, "status": 201}
    )
    assert declared.status_code == 201
    assert http.post(f"{server.url}/v2/jobs").status_code == 401
    token = _token(http, server.url).json()["token"]
    answer = http.post(f"{server.url}/v2/jobs", headers={"Authorization": f"Bearer {token}"})
    assert (answer.status_code, answer.json()) == (201, {"id": 7})


def test_a_route_declared_with_a_rate_limit_answers_429_past_it(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    declared = control("POST", "/routes", {"path": "/v2/polls", "rate_limit": "1/min"})
    assert declared.status_code == 201
    assert declared.json()["rate_limit"] == "1/min"
    bearer = {"Authorization": f"Bearer {_token(http, server.url).json()['token']}"}
    assert http.get(f"{server.url}/v2/polls", headers=bearer).status_code == 200
    refused = http.get(f"{server.url}/v2/polls", headers=bearer)
    assert refused.status_code == 429
    assert refused.json()["returnCode"] == 429
    assert "1 calls to route GET /v2/polls within the last 60 s" in refused.json()["message"]
    bad = control("POST", "/routes", {"path": "/v2/polls", "rate_limit": "often"})
    assert bad.status_code == 400
    assert "rate_limit must be a rate '<N>/s' or '<N>/min'" in bad.json()["message"]


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"[1, -1E400]"])
def test_a_route_answer_that_other_languages_cannot_parse_is_refused(
    server: StandaloneServer, http: requests.Session, value: bytes
) -> None:
    # Python's json took these and the route then served NaN / Infinity, which Node's
    # JSON.parse, Jackson and Go's encoding/json refuse.
    raw = b'{"path": "/v2/odd", "json": {"n": ' + value + b"}}"
    answer = _raw_post(server, http, "/routes", raw)
    assert answer.status_code == 400, answer.text
    assert "the body is not standard JSON" in answer.json()["message"]
    token = _token(http, server.url).json()["token"]
    served = http.get(f"{server.url}/v2/odd", headers={"Authorization": f"Bearer {token}"})
    assert served.status_code == 404  # nothing was declared
    assert "NaN" not in served.text
    assert "Infinity" not in served.text


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/v2/a\nb", "a line feed (U+000A) at character 6"),
        ("/v2/things\n", "a line feed (U+000A)"),
        ("/v2/a\tb", "a tab (U+0009)"),
        ("/v2/a\udcffb", "a lone surrogate (U+DCFF)"),
        ("//_mgmtauth/x", "the path starts with '//'"),
        ("//v2/things", "the path starts with '//'"),
        ("/v2/things?page=1", "contains '?'"),
        ("/v2/a%40b", "the percent-escape '%40'"),
    ],
)
def test_a_route_no_request_can_reach_is_refused(
    server: StandaloneServer, control: Any, http: requests.Session, path: str, said: str
) -> None:
    answer = control("POST", "/routes", {"path": path})
    assert answer.status_code == 400, answer.text
    message = answer.json()["message"]
    assert message.startswith("POST /_mgmtauth/routes: the path")
    assert said in message
    token = _token(http, server.url).json()["token"]
    # Nothing was declared: the fake's startup routes only.
    routes = http.get(f"{server.url}/v2/none", headers={"Authorization": f"Bearer {token}"})
    assert "declared routes: GET /v2/things, GET /v1/things." in routes.json()["message"]


def test_a_repeated_query_parameter_is_400_naming_it(control: Any) -> None:
    answer = control("GET", "/timeline?username=alice@example.com&username=bob@example.com")
    assert answer.status_code == 400
    assert (
        "the query parameter 'username' appears 2 times; send it once" in answer.json()["message"]
    )
    answer = control("GET", "/check?churn=false&churn=true")
    assert answer.status_code == 400
    assert "'churn' appears 2 times" in answer.json()["message"]
    assert control("GET", "/timeline?username=alice@example.com").status_code == 200


def test_the_request_log_through_the_control_api(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    # Issue 29, item 14: the requests the fake answered, not the control API's own.
    control("GET", "/clock")
    token = _token(http, server.url).json()["token"]
    http.get(f"{server.url}/v2/things?x=1", headers={"Authorization": f"Bearer {token}"})
    http.get(f"{server.url}/v2/nothing")
    logged = control("GET", "/requests").json()["requests"]
    assert [(r["method"], r["path"], r["query"], r["status"]) for r in logged] == [
        ("POST", "/v2/auth", "", 200),
        ("GET", "/v2/things", "x=1", 200),
        ("GET", "/v2/nothing", "", 404),
    ]
    first = logged[0]
    assert first["test"] is None
    assert first["host"] == urlsplit(server.url).netloc
    assert ["Content-Type", "application/x-www-form-urlencoded"] in first["headers"]
    assert first["body"].startswith("username=alice%40example.com&key=")
    assert "k+e&y" not in first["body"]
    assert "k%2Be%26y" not in first["body"]  # the key, as sent
    assert logged[2]["body"] is None
    assert first["at"].endswith("Z") or first["at"].endswith("+00:00")
    authorization = dict(logged[1]["headers"])["Authorization"]
    assert token not in authorization
    control("POST", "/reset")
    assert control("GET", "/requests").json() == {"requests": [], "dropped": 0}


def test_the_request_log_masks_a_key_in_the_encodings_of_other_languages(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    # Issue 38, item 1: GET /_mgmtauth/requests gave back the key as JavaScript and Java
    # encode it, or in lower-case hex, or in a Basic header.
    key = "k+e&y=%/1"
    js, java = "k%2Be%26y%3D%25%2F1", "k%2be%26y%3d%25%2f1"  # encodeURIComponent, lower hex
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for spelled in (js, java):
        body = f"username=alice%40example.com&key={spelled}"
        assert http.post(f"{server.url}/v2/auth", data=body, headers=form).ok
    http.get(f"{server.url}/v2/things", auth=("alice@example.com", key))
    answer = control("GET", "/requests").json()
    assert answer["dropped"] == 0
    logged = answer["requests"]
    assert len(logged) == 3
    text = repr(logged)
    for reading in (text, unquote(text), unquote_plus(text)):
        assert key not in reading
    authorization = dict(logged[2]["headers"])["Authorization"]
    assert re.fullmatch(r"Basic #[0-9a-f]{6}", authorization)


def test_faults_through_the_control_api(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    scripted = control("POST", "/faults", {"kind": "fail", "error": 503, "count": 2})
    assert scripted.status_code == 201
    assert scripted.json()["pending"][0]["count"] == 2
    control("POST", "/faults", {"kind": "malformed", "version": "v2"})
    assert _token(http, server.url).status_code == 503
    assert _token(http, server.url).status_code == 503
    with pytest.raises(requests.JSONDecodeError):
        _token(http, server.url).json()
    assert control("GET", "/faults").json() == {"pending": []}
    control("POST", "/faults", {"kind": "reset"})
    with pytest.raises(requests.ConnectionError):
        _token(http, server.url)
    control("POST", "/faults", {"kind": "hang", "seconds": 30})
    assert control("DELETE", "/faults").json() == {"pending": []}
    assert _token(http, server.url).status_code == 200
    kinds = [e["fault"] for e in control("GET", "/events").json()["events"] if "fault" in e]
    assert kinds == ["fail", "fail", "malformed", "reset"]


def test_expire_revoke_lock_unlock_rotate(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    token = _token(http, server.url).json()["token"]
    assert control("POST", "/expire", {"credential": token}).json() == {"expired": "T1"}
    assert control("POST", "/revoke", {"credential": "T1"}).json() == {"revoked": "T1"}
    form = {"username": "alice@example.com", "password": "pa+ss&1"}
    assert control("POST", "/lock", {"username": "alice@example.com"}).status_code == 200
    assert http.post(f"{server.url}/v1/login", data=form).json()["returnCode"] == 1402
    control("POST", "/unlock", {"username": "alice@example.com"})
    assert http.post(f"{server.url}/v1/login", data=form).status_code == 200
    rotated = control("POST", "/rotate-key", {"username": "alice@example.com"}).json()
    assert _token(http, server.url).json()["returnCode"] == 1401
    assert _token(http, server.url, rotated["api_key"]).status_code == 200
    new = control("POST", "/rotate-password", {"username": "alice@example.com", "password": "x1"})
    assert new.json()["password"] == "x1"
    types = [e["type"] for e in control("GET", "/events").json()["events"]]
    for kind in ("CredentialExpired", "CredentialRevoked", "AccountLockedManually"):
        assert kind in types
    assert types.count("SecretRotated") == 2


def test_throttling_on_the_standalone_clock(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    answers = [_token(http, server.url) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    # The server's clock is real: a second may pass between the grants (59 then).
    retry_after = int(answers[-1].headers["Retry-After"])
    assert 1 <= retry_after <= 60
    control("POST", "/clock/advance", {"seconds": retry_after})
    assert _token(http, server.url).status_code == 200


def test_reset_restores_the_startup_accounts_and_credentials(
    server: StandaloneServer, control: Any, http: requests.Session
) -> None:
    control("POST", "/accounts", {"username": "bob@example.com"})
    control("POST", "/rotate-key", {"username": "alice@example.com"})
    control("POST", "/faults", {"kind": "fail"})
    reset = control("POST", "/reset")
    assert [a["username"] for a in reset.json()["accounts"]] == ["alice@example.com"]
    assert reset.json()["accounts"][0]["api_key"] == "k+e&y=%/1"
    assert control("GET", "/events").json() == {"events": []}
    assert control("GET", "/faults").json() == {"pending": []}
    assert _token(http, server.url).status_code == 200
    token = _token(http, server.url).json()["token"]
    answer = http.get(f"{server.url}/v2/things", headers={"Authorization": f"Bearer {token}"})
    assert answer.json() == {"ok": True, "route": "GET /v2/things"}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("GET", "/nope", None, 404, "no control endpoint GET /_mgmtauth/nope"),
        ("PUT", "/events", None, 405, "/_mgmtauth/events takes GET, not PUT"),
        ("POST", "/clock/advance", {"seconds": -5}, 400, "forward only"),
        ("POST", "/clock/advance", {}, 400, "say how far"),
        ("POST", "/clock/advance", {"seconds": "5"}, 400, "'seconds' must be a number"),
        ("POST", "/clock/advance", {"secs": 5}, 400, "unknown field 'secs'; known fields"),
        ("POST", "/clock/advance", [5], 400, "must be a JSON object, got list"),
        ("POST", "/faults", {}, 400, "the field 'kind' (a string) is required"),
        ("POST", "/faults", {"kind": "explode"}, 400, "kind must be one of fail, hang"),
        ("POST", "/faults", {"kind": "fail", "error": 200}, 400, "HTTP error status"),
        ("POST", "/faults", {"kind": "reset", "seconds": 3}, 400, "do not apply to kind 'reset'"),
        ("POST", "/faults", {"kind": "hang"}, 400, "'seconds' (a number) is required"),
        ("POST", "/faults", {"kind": "fail", "count": True}, 400, "must be an integer"),
        ("POST", "/expire", {"credential": "T9"}, 400, "no token or session of this test is T9"),
        ("POST", "/lock", {"username": "eve@example.com"}, 400, "no account 'eve@example.com'"),
        ("POST", "/accounts", {"username": "alice@example.com"}, 400, "exists already"),
        ("POST", "/accounts", {"username": "not-an-email"}, 400, "e-mail addresses"),
        ("POST", "/routes", {"path": "v2/x"}, 400, "path must start with '/'"),
        ("POST", "/routes", {"path": "/v2/auth"}, 400, "the fake's own endpoint"),
        ("POST", "/rotate-key", {"username": 5}, 400, "'username' must be a string"),
    ],
)
def test_bad_control_input_is_a_4xx_json_error_and_the_server_carries_on(
    server: StandaloneServer,
    control: Any,
    http: requests.Session,
    method: str,
    path: str,
    body: Any,
    status: int,
    message: str,
) -> None:
    answer = control(method, path, body)
    assert answer.status_code == status
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json()["returnCode"] == status_code(status)
    assert message in answer.json()["message"]
    assert _token(http, server.url).status_code == 200


def test_a_body_that_is_not_json(server: StandaloneServer, http: requests.Session) -> None:
    as_json = {"Content-Type": "application/json"}
    url = f"{server.url}/_mgmtauth"
    answer = http.post(f"{url}/clock/advance", data=b"\xff\xfeseconds", headers=as_json)
    assert answer.status_code == 400
    assert "the body is not JSON" in answer.json()["message"]
    huge = http.post(f"{url}/accounts", data=b"{" + b" " * 70_000 + b"}", headers=as_json)
    assert huge.status_code == 413
    # The one limit of the fake and the control API, in the same words as the fake's.
    assert huge.json() == {
        "returnCode": 413,
        "message": "POST /_mgmtauth/accounts: the body is 70002 bytes; the fake reads at most "
        "65536",
    }


def test_a_frozen_clock_moves_only_when_advanced(key_file: Path, http: requests.Session) -> None:
    server = StandaloneServer(Options(), port=0, frozen_clock=True, key_file=str(key_file))
    server.start()
    try:
        url = f"{server.url}/_mgmtauth/clock"
        first = http.get(url).json()["now"]
        assert http.get(url).json()["now"] == first
        advanced = http.post(f"{url}/advance", json={"hours": 1}).json()["now"]
        # "Z" is ISO 8601 for UTC; Python 3.10's fromisoformat wants "+00:00".
        delta = datetime.fromisoformat(advanced.replace("Z", "+00:00")) - datetime.fromisoformat(
            first.replace("Z", "+00:00")
        )
        assert delta == timedelta(hours=1)
        assert server.describe()["clock"] == "frozen"
    finally:
        server.stop()


def test_an_internal_error_is_answered_and_the_server_carries_on(
    server: StandaloneServer, control: Any, http: requests.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: object) -> list[object]:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(type(server.fake), "events", property(broken))
    answer = control("GET", "/events")
    assert answer.status_code == 500
    assert "failed internally (RuntimeError: simulated bug)" in answer.json()["message"]
    assert _token(http, server.url).status_code == 200


def test_a_hang_on_the_simulated_clock_ends_when_the_control_api_advances_it(
    key_file: Path, http: requests.Session
) -> None:
    server = StandaloneServer(
        Options(), port=0, accounts=[ALICE], frozen_clock=True, key_file=str(key_file)
    )
    server.start()
    try:
        control = f"{server.url}/_mgmtauth"
        http.post(f"{control}/faults", json={"kind": "hang", "seconds": 30, "clock": "simulated"})
        own = requests.Session()  # one per thread
        own.trust_env = False
        with own, concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(_token, own, server.url)
            server.fake.wait(until=bool, timeout=10)  # any event: the hang has begun
            http.post(f"{control}/clock/advance", json={"seconds": 29})
            time.sleep(0.05)
            assert not pending.done()
            http.post(f"{control}/clock/advance", json={"seconds": 1})
            assert pending.result(timeout=10).status_code == 200
    finally:
        server.stop()


# -- issue 9: an invalid control request changes nothing and never breaks the server -----


@pytest.fixture
def still(key_file: Path) -> Iterator[StandaloneServer]:
    """A server on a frozen clock: its state can be compared before and after."""
    server = StandaloneServer(
        Options(throttle=None),
        port=0,
        accounts=[ALICE],
        routes=[("GET", "/v2/things")],
        key_file=str(key_file),
        frozen_clock=True,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def still_control(still: StandaloneServer, http: requests.Session) -> Any:
    def call(method: str, path: str, body: Any = None, **kw: Any) -> requests.Response:
        if body is None and method == "POST":
            body = {}
        return http.request(method, f"{still.url}/_mgmtauth{path}", json=body, **kw)

    return call


def _state(control: Any) -> tuple[Any, ...]:
    return (
        control("GET", "/clock").json(),
        control("GET", "/events").json(),
        control("GET", "/faults").json(),
    )


def _raw_post(server: StandaloneServer, http: requests.Session, path: str, raw: bytes) -> Any:
    headers = {"Content-Type": "application/json"}
    return http.post(f"{server.url}/_mgmtauth{path}", data=raw, headers=headers)


@pytest.mark.parametrize(
    ("path", "raw", "message"),
    [
        ("/clock/advance", b'{"seconds": 1e308}', "seconds must be >= 0 and <= 3153600000"),
        ("/clock/advance", b'{"hours": 1e305}', "hours must be >= 0 and <= 876000"),
        ("/clock/advance", b'{"seconds": 3e11}', "seconds must be >= 0 and <= 3153600000"),
        ("/clock/advance", b'{"seconds": 1e400}', "not standard JSON: the number 1e400 is too"),
        ("/clock/advance", b'{"seconds": 1' + b"0" * 400 + b"}", "got a huge int"),
        ("/clock/advance", b'{"seconds": 1' + b"0" * 5000 + b"}", "the body is not JSON"),
        ("/clock/advance", b'{"seconds": NaN}', "not standard JSON: NaN is not a JSON value"),
        ("/clock/advance", b'{"seconds": -0.0}', "got -0.0"),
        ("/clock/advance", b'{"seconds": -5, "hours": 1}', "forward only (got seconds=-5)"),
        ("/clock/advance", b'{"seconds": 3153600000, "hours": 1}', "at most 3153600000"),
        ("/clock/advance", b'{"seconds": ' + b"[" * 100_00 + b"]" * 100_00 + b"}", "nests"),
        ("/clock/advance", b"[" * 40 + b"]" * 40, "nests deeper than 32"),
        ("/lock", b'{"username": "alice@example.com", "seconds": 1e308}', "'seconds' must be"),
        ("/lock", b'{"username": "alice@example.com", "seconds": 0}', "'seconds' must be > 0"),
        ("/faults", b'{"kind": "fail", "count": 0}', "count must be an int >= 1"),
        ("/faults", b'{"kind": "hang", "seconds": 1e300}', "seconds must be > 0 and <= 3153"),
        ("/faults", b'{"kind": "fail", "retry_after": 1' + b"0" * 30 + b"}", "got a huge int"),
        ("/routes", b'{"path": "/_mgmtauth/x"}', "reserved for mgmtauth-server's control API"),
        ("/routes", b'{"path": "/v2/x", "status": 0}', "status must be 200-599, got 0"),
        ("/routes", b'{"path": "/v2/x", "json": {"a": NaN}}', "NaN is not a JSON value"),
        ("/routes", b'{"path": "/v2/x", "json": [Infinity]}', "Infinity is not a JSON value"),
        ("/routes", b'{"path": "/v2/x", "json": -Infinity}', "-Infinity is not a JSON value"),
        ("/routes", b'{"path": "/v2/x", "json": {"a": 1e999}}', "1e999 is too large for a"),
        ("/routes", b'{"path": "/v2/x", "json": {"a": -2.5E+400}}', "-2.5E+400 is too large"),
        ("/expire", b'{"credential": 5}', "'credential' must be a string"),
    ],
)
def test_an_invalid_control_request_changes_nothing_and_the_server_stays_up(
    still: StandaloneServer,
    still_control: Any,
    http: requests.Session,
    path: str,
    raw: bytes,
    message: str,
) -> None:
    before = _state(still_control)
    answer = _raw_post(still, http, path, raw)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json()["returnCode"] == status_code(answer.status_code)
    assert message in answer.json()["message"]
    assert _state(still_control) == before
    assert _token(http, still.url).status_code == 200
    assert still_control("GET", "/clock").status_code == 200


def test_the_clock_stops_before_the_year_3000_and_keeps_serving(
    still: StandaloneServer, still_control: Any, http: requests.Session
) -> None:
    for _ in range(20):  # 100 years at a time, until refused
        answer = still_control("POST", "/clock/advance", {"hours": 876000})
        if answer.status_code != 200:
            break
    assert answer.status_code == 400
    assert "past 3000-01-01" in answer.json()["message"]
    assert still_control("GET", "/clock").json()["now"] < "3000"
    token = _token(http, still.url)
    assert token.status_code == 200
    assert still_control("POST", "/lock", {"username": "alice@example.com", "seconds": 3e8}).ok
    assert "until" in still_control("GET", "/events").json()["events"][-1]


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x"],
)
def test_control_posts_must_be_json(
    still: StandaloneServer, still_control: Any, http: requests.Session, content_type: str | None
) -> None:
    before = _state(still_control)
    headers = {} if content_type is None else {"Content-Type": content_type}
    answer = http.post(f"{still.url}/_mgmtauth/reset", data=b"{}", headers=headers)
    if content_type is None:
        answer = http.post(f"{still.url}/_mgmtauth/reset")
    assert answer.status_code == 415
    assert "Content-Type: application/json" in answer.json()["message"]
    assert _state(still_control) == before
    with_charset = {"Content-Type": "application/json; charset=utf-8"}
    ok = http.post(f"{still.url}/_mgmtauth/reset", data=b"{}", headers=with_charset)
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.example", 403),
        ("evil.example:8765", 403),
        ("127.0.0.1.nip.io", 403),
        ("localhost", 200),
        ("LOCALHOST:1234", 200),
        ("127.0.0.2", 200),
        ("[::1]:8765", 200),
    ],
)
def test_the_control_api_answers_only_loopback_hosts(
    still: StandaloneServer, http: requests.Session, host: str, status: int
) -> None:
    # A DNS-rebinding page reaches 127.0.0.1 with its own name in Host.
    answer = http.get(f"{still.url}/_mgmtauth/accounts", headers={"Host": host})
    assert answer.status_code == status
    if status == 403:
        assert "DNS rebinding" in answer.json()["message"]
        assert "api_key" not in answer.text


@pytest.mark.parametrize(
    ("header", "bound", "extra", "allowed"),
    [
        (None, "127.0.0.1", (), True),
        ("127.0.0.1:8765", "127.0.0.1", (), True),
        ("localhost.", "127.0.0.1", (), True),
        ("app.localhost:80", "127.0.0.1", (), True),
        ("[::1]", "::1", (), True),
        ("[::1", "127.0.0.1", (), False),
        ("evil.example", "127.0.0.1", (), False),
        ("192.168.1.5:8765", "127.0.0.1", (), False),
        ("192.168.1.5:8765", "0.0.0.0", (), True),  # a wildcard: any IP address
        ("evil.example", "0.0.0.0", (), False),  # but no name
        ("myhost:8765", "myhost", (), True),
        ("MGMTAUTH:8765", "0.0.0.0", ("mgmtauth",), True),
        ("", "127.0.0.1", (), False),
    ],
)
def test_host_guard_cases(
    header: str | None, bound: str, extra: tuple[str, ...], allowed: bool
) -> None:
    assert host_allowed(header, bound, extra) is allowed


def test_allow_host_lets_a_compose_service_name_in(key_file: Path, http: requests.Session) -> None:
    server = server_from_args(
        build_parser().parse_args(
            ["--port", "0", "--key-file", str(key_file), "--allow-host", "mgmtauth"]
        )
    )
    server.start()
    try:
        url = f"{server.url}/_mgmtauth/clock"
        assert http.get(url, headers={"Host": "mgmtauth:8765"}).status_code == 200
        refused = http.get(url, headers={"Host": "other:8765"})
        assert refused.status_code == 403
        assert "--allow-host" in refused.json()["message"]
    finally:
        server.stop()


@pytest.mark.parametrize(
    "path", ["/_mgmtauth/things", "/_mgmtauth", re.compile(r"^/_mgmtauth/.*"), "/_mgmtauthx"]
)
def test_mgmt_server_route_refuses_the_control_prefix(
    mgmt_server: MgmtServer, path: str | re.Pattern[str]
) -> None:
    with pytest.raises(ValueError, match="reserved for mgmtauth-server's control API"):
        mgmt_server.route("GET", path)
    mgmt_server.route("GET", "/v2/_mgmtauth")  # elsewhere in a path it is any name


def test_a_long_value_is_named_by_kind_and_size_never_in_part(
    still: StandaloneServer, still_control: Any
) -> None:
    # Part of a string could be most of a secret that masking by whole secrets misses.
    long = "k" * 59 + "Z"
    for body in ({"seconds": long}, {"seconds": [long]}, {long: 1}):
        message = still_control("POST", "/clock/advance", body).json()["message"]
        assert "kkkkk" not in message
        assert "characters" in message
