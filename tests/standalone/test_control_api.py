"""The control API under /_mgmtauth/, driven with requests against an in-process
standalone server: timeline, clock, accounts, routes, faults, reset, and bad input."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from pytest_mgmtauth import Options
from pytest_mgmtauth._standalone import AccountSpec, StandaloneServer

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
    assert answer.json()["returnCode"] == status
    assert message in answer.json()["message"]
    assert _token(http, server.url).status_code == 200


def test_a_body_that_is_not_json(server: StandaloneServer, http: requests.Session) -> None:
    answer = http.post(f"{server.url}/_mgmtauth/clock/advance", data=b"\xff\xfeseconds")
    assert answer.status_code == 400
    assert "the body is not JSON" in answer.json()["message"]
    huge = http.post(f"{server.url}/_mgmtauth/accounts", data=b"{" + b" " * 70_000 + b"}")
    assert huge.status_code == 413


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
            for _ in range(1000):  # real-time guard, at most ~10 s
                if http.get(f"{control}/events").json()["events"]:
                    break
                time.sleep(0.01)
            http.post(f"{control}/clock/advance", json={"seconds": 29})
            time.sleep(0.05)
            assert not pending.done()
            http.post(f"{control}/clock/advance", json={"seconds": 1})
            assert pending.result(timeout=10).status_code == 200
    finally:
        server.stop()
