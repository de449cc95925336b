"""Fidelity beyond the interface document: each row of ``public-record.md`` (v3 auth as
the service's public documentation describes it, and the published token and v1
identifier shapes) checked against the fake, over HTTPS as the service serves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx
import pytest
from test_interface_document import (
    Row,
    Service,
    cookie_line,
    jsessionid,
    jwt_part,
    read_document,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pytest_mgmtauth import Account, MgmtClock, MgmtServer

DOCUMENT = Path(__file__).with_name("public-record.md")
ROWS = read_document(DOCUMENT)
V3 = "v3 auth"
PUBLISHED = "Published values"
SCOPED = "/v3/customers/accounts/acme/profiles/main"

pytestmark = pytest.mark.mgmtauth(https=True, throttle=2)


def v3_auth(s: Service, profile: str = "main", **form: str) -> httpx.Response:
    fields = {"username": s.account.username, "key": s.account.api_key, **form}
    return s.http.post(s.url(f"/v3/auth/accounts/acme/profiles/{profile}"), data=fields)


def v3_token(s: Service, profile: str = "main") -> dict[str, str]:
    reply = v3_auth(s, profile)
    assert reply.status_code == 200, reply.text
    body: dict[str, str] = reply.json()
    return body


def _request(s: Service) -> None:
    assert v3_auth(s).status_code == 200


def _success(s: Service) -> None:
    reply = v3_auth(s)
    assert reply.status_code == 200
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.json().keys() == {"token", "host"}


def _success_headers(s: Service) -> None:
    reply = v3_auth(s)
    remember = cookie_line(reply, "rememberMe")
    assert remember.startswith("rememberMe=deleteMe; Path=/urest_service")
    assert remember == cookie_line(s.auth(), "rememberMe")  # v2's line
    assert reply.headers["Connection"] == "keep-alive"


def _host(s: Service) -> None:
    host = v3_token(s)["host"]
    assert host == urlsplit(s.server.region_url).netloc != urlsplit(s.server.url).netloc


def _token(s: Service) -> None:
    token = v3_token(s)["token"]
    assert jwt_part(token, 0)["alg"] == "RS512"
    assert token.startswith("eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzUxMiJ9.")  # typ first
    claims = jwt_part(token, 1)
    assert claims["exp"] - claims["iat"] == 1800


def _later_calls(s: Service) -> None:
    body = v3_token(s)
    reply = s.http.get(
        f"https://{body['host']}{SCOPED}", headers={"Authorization": f"Bearer {body['token']}"}
    )
    assert reply.status_code == 200


def _scope(s: Service) -> None:
    token = v3_token(s)["token"]
    reply = s.http.get(
        s.server.region_url + "/v3/customers/accounts/acme/profiles/dev",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert reply.status_code == 401
    assert reply.json() == {"message": "Unauthorized"}
    message = reply.headers["X-Mgmtauth-Diagnosis"]
    assert "acme/main" in message
    assert "acme/dev" in message


def _400(s: Service) -> None:
    reply = s.http.post(s.url("/v3/auth/accounts/acme/profiles/main"), data={"username": "x"})
    assert reply.status_code == 400


def _401(s: Service) -> None:
    assert v3_auth(s, key="wrong").status_code == 401
    limited = s.server.add_account(profiles=["acme/main"])
    reply = s.http.post(
        s.url("/v3/auth/accounts/acme/profiles/dev"),
        data={"username": limited.username, "key": limited.api_key},
    )
    assert reply.status_code == 401


def _404(s: Service) -> None:
    assert s.http.post(s.url("/v3/auth/accounts/acme"), data={"a": "b"}).status_code == 404
    assert s.http.get(s.url("/v3/auth/accounts/acme/profiles/main")).status_code == 404


def _429(s: Service) -> None:
    for _ in range(3):
        v3_token(s)
    reply = v3_auth(s)
    assert reply.status_code == 429
    assert int(reply.headers["Retry-After"]) >= 1
    with pytest.raises(AssertionError, match="token churn"):
        s.server.assert_token_reused()


def _5xx(s: Service) -> None:
    s.server.fail_next(error=502, version="v3")
    assert v3_auth(s).status_code == 502


def _iss(s: Service) -> None:
    assert jwt_part(s.token(), 1)["iss"] == "https://api.tealiumiq.com"
    assert jwt_part(v3_token(s)["token"], 1)["iss"] == "https://api.tealiumiq.com"


def _claims(s: Service) -> None:
    claims = jwt_part(s.token(), 1)
    # The published claims and jti (the row says why the fake keeps it), nothing else.
    assert claims.keys() == {"sub", "iss", "nbf", "iat", "exp", "jti"}
    assert claims["sub"] == s.account.username
    assert claims["exp"] == claims["iat"] + 1800


def _jsessionid(s: Service) -> None:
    ids = []
    for _ in range(3):
        ids.append(jsessionid(s.login()))
        assert s.logout(ids[-1]).status_code == 200
    assert all(re.fullmatch(r"-?[1-9][0-9]*|0", i) for i in ids), ids
    assert len(set(ids)) == 3


def _utk(s: Service) -> None:
    reply = s.login()
    assert re.fullmatch(r"[A-Z0-9]{21}", reply.json()["utk"])
    s.logout(jsessionid(reply))


CHECKS: dict[str, Callable[[Service], None]] = {
    f"{V3} > Request": _request,
    f"{V3} > Success": _success,
    f"{V3} > Success headers": _success_headers,
    f"{V3} > host": _host,
    f"{V3} > Token": _token,
    f"{V3} > Later calls": _later_calls,
    f"{V3} > Token scope": _scope,
    f"{V3} > 400": _400,
    f"{V3} > 401": _401,
    f"{V3} > 404": _404,
    f"{V3} > 429": _429,
    f"{V3} > 5xx": _5xx,
    f"{PUBLISHED} > Token header": _token,
    f"{PUBLISHED} > Token iss": _iss,
    f"{PUBLISHED} > Token claims": _claims,
    f"{PUBLISHED} > JSESSIONID": _jsessionid,
    f"{PUBLISHED} > utk": _utk,
}


@pytest.fixture
def service(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> Iterator[Service]:
    mgmt_server.route("GET", SCOPED).respond_with_json({"visitors": []})
    mgmt_server.route("GET", "/v3/customers/accounts/acme/profiles/dev").respond_with_json({})
    with httpx.Client(verify=mgmt_server.client_ssl_context() or True, timeout=10) as http:
        yield Service(mgmt_server, mgmt_clock, http, mgmt_account)


def test_every_check_belongs_to_a_row_and_every_row_has_one() -> None:
    keys = {row.key for row in ROWS}
    assert len(ROWS) == 17
    assert set(CHECKS) == keys


@pytest.mark.parametrize("row", ROWS, ids=[row.key for row in ROWS])
def test_row(row: Row, service: Service) -> None:
    check_row = CHECKS.get(row.key)
    assert check_row is not None, f"no check for this row: {row}"
    check_row(service)
