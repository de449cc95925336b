"""The published pages' own examples as a snapshot (``published/examples.json``, each
test's entry citing its page, ``"(not shown)"`` where the page shows nothing), checked with
the drift check's own machinery: each test makes the exchange its example shows, and the
fake's record must differ from the example only by the documented choices below."""

from __future__ import annotations

import http.client
import json
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
import requests
from werkzeug import Request, Response

from pytest_mgmtauth import Account, MgmtClock, MgmtServer, OAuthClient
from pytest_mgmtauth._service.exchange_shape import Snapshot, normalise
from pytest_mgmtauth._verdicts.drift import ABSENT, compare

PUBLISHED = Snapshot.loads((Path(__file__).parent / "published" / "examples.json").read_text())
SOURCES = json.loads((Path(__file__).parent / "published" / "examples.json").read_text())

#: Where the fake differs from a published example on purpose, and the row of
#: docs/behaviour.md that says why: (test, field, the example's value, the fake's).
DOCUMENTED_CHOICES = {
    ("test_v2_auth_answer", "body.token.jwt.claims.jti", ABSENT, "string"),  # row 20
}


@pytest.fixture(autouse=True)
def _checked_against_the_example(request: pytest.FixtureRequest, mgmt_server: MgmtServer):
    kept = mgmt_server.record_exchanges()
    yield
    name = request.node.name
    example = PUBLISHED.tests[name].exchanges
    paths = {e["path"] for e in example}
    mine = [r for r in map(normalise, kept) if r["path"] in paths]
    found = {(name, d.field, d.service, d.fake) for d in compare(example, mine)}
    assert SOURCES["tests"][name]["source"]  # each example cites its page
    assert found == {c for c in DOCUMENTED_CHOICES if c[0] == name}, [
        d.line() for d in compare(example, mine)
    ]


def _http() -> requests.Session:
    http = requests.Session()
    http.trust_env = False
    return http


def test_v2_auth_answer(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    reply = _http().post(
        mgmt_server.url + "/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    assert reply.status_code == 200


def test_v3_token_and_host(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    reply = _http().post(
        mgmt_server.url + "/v3/auth/accounts/acme/profiles/main",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    assert reply.status_code == 200


def _oauth_token(server: MgmtServer, client: OAuthClient, scope: str) -> requests.Response:
    return _http().post(
        server.url + "/oauth/token",
        data={"grant_type": "client_credentials", "scope": scope},
        auth=(client.client_id, client.client_secret),
    )


def test_oauth_token_answer(mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient) -> None:
    reply = _oauth_token(mgmt_server, mgmt_oauth_client, "acme:main:tiq:2026-07:profiles:manage")
    assert reply.status_code == 200


def test_gateway_403_body(mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient) -> None:
    path = "/v2026-07/tiq/accounts/acme/profiles/main/labels"
    mgmt_server.route("GET", path, auth="oauth", scope="acme:main:tiq:2026-07:labels:read")
    mgmt_server.expect_refusals()
    token = _oauth_token(mgmt_server, mgmt_oauth_client, "acme:main:tiq:2026-07:profiles:manage")
    reply = _http().get(
        mgmt_server.url + path,
        headers={"Authorization": "Bearer " + token.json()["access_token"]},
    )
    assert reply.status_code == 403


@pytest.mark.mgmtauth(sunset_check="off")
def test_lifecycle_headers(mgmt_server: MgmtServer, mgmt_clock: MgmtClock) -> None:
    mgmt_clock.move_to(datetime(2028, 7, 1, tzinfo=timezone.utc))  # v2026-06: End of Support
    path = "/v2026-06/cdp/accounts/acme/profiles/main/audiences"
    mgmt_server.route("GET", path, auth="oauth", scope="acme:main:cdp:*:*").respond_with_json([])
    client = mgmt_server.add_client(["acme:main:cdp:*:*"])
    token = _oauth_token(mgmt_server, client, "acme:main:cdp:*:*")
    reply = _http().get(
        mgmt_server.url + path,
        headers={"Authorization": "Bearer " + token.json()["access_token"]},
    )
    assert reply.status_code == 200


_SCIM = "/v2/auth-long-lived"


def _scim_token(server: MgmtServer, account: Account, path: str = f"{_SCIM}/token") -> str:
    form = {"account": "acme", "profile": "main", "username": account.username}
    reply = _http().post(server.url + path, data={**form, "key": account.api_key})
    assert reply.status_code == 200, reply.text
    token: str = reply.json()["access_token"]
    return token


def test_scim_token_answer(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    _scim_token(mgmt_server, mgmt_account)


@pytest.mark.mgmtauth(scim_token_version="v1")
def test_scim_token_answer_earlier_page(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    _scim_token(mgmt_server, mgmt_account, "/v1/auth-long-lived/token")


def test_scim_revoke_answer(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    token = _scim_token(mgmt_server, mgmt_account)
    form = {"account": "acme", "profile": "main", "username": mgmt_account.username}
    reply = _http().post(
        mgmt_server.url + f"{_SCIM}/revoke",
        data={"token": token, **form, "key": mgmt_account.api_key},
    )
    assert reply.status_code == 200


def test_scim_401_body(mgmt_server: MgmtServer) -> None:
    mgmt_server.route("GET", "/scim/v2/Users").respond_with_json({})
    mgmt_server.expect_refusals()
    reply = _http().get(
        mgmt_server.url + "/scim/v2/Users",
        headers={"Authorization": "Bearer not-a-token", "X-Tealium-Account": "acme"},
    )
    assert reply.status_code == 401


def test_scim_403_missing_account_header(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    mgmt_server.route("GET", "/scim/v2/Groups").respond_with_json({})
    mgmt_server.expect_refusals()
    token = _scim_token(mgmt_server, mgmt_account)
    reply = _http().get(
        mgmt_server.url + "/scim/v2/Groups", headers={"Authorization": f"Bearer {token}"}
    )
    assert reply.status_code == 403


# -- v3 API calls, the service's codes and the small points (the newest pages) -----------

V3_VISITOR = "/v3/customer/visitor/accounts/acme/profiles/main"


def _v3_token(server: MgmtServer, account: Account) -> str:
    reply = _http().post(
        server.url + "/v3/auth/accounts/acme/profiles/main",
        data={"username": account.username, "key": account.api_key},
    )
    token: str = reply.json()["token"]
    return token


def test_v3_call_401_body(mgmt_server: MgmtServer) -> None:
    mgmt_server.route("GET", V3_VISITOR).respond_with_json({})
    mgmt_server.expect_refusals()
    reply = _http().get(mgmt_server.region_url + V3_VISITOR, headers={"Authorization": "Bearer x"})
    assert reply.status_code == 401
    # The shape is checked by the fixture; the message is the page's exactly.
    assert reply.json() == {"message": "Unauthorized"}
    # The gateway's headers, as the published v3 answers carry them (http-api/endpoints).
    assert {"x-amzn-requestid", "x-region"} <= {name.lower() for name in reply.headers}


def test_v3_call_500_body(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    path = "/v3/privacy/visitor/accounts/acme/profiles/main"

    def fails(request: Request) -> Response:
        raise RuntimeError("the route's own failure")

    mgmt_server.route("GET", path).respond_with_handler(fails)
    token = _v3_token(mgmt_server, mgmt_account)
    reply = _http().get(mgmt_server.region_url + path, headers={"Authorization": "Bearer " + token})
    assert (reply.status_code, reply.json()) == (500, {"message": "Internal Server Error"})
    with pytest.raises(RuntimeError, match="the route's own failure"):
        mgmt_server.check()


def test_v3_publish_401_and_403(mgmt_server: MgmtServer) -> None:
    path = "/v3/tiq/accounts/acme/profiles/main/publish"
    mgmt_server.route("POST", path, permission="publish").respond_with_json({})
    mgmt_server.expect_refusals()
    no_token = _http().post(mgmt_server.region_url + path)
    assert no_token.status_code == 401
    publisher_not = mgmt_server.add_account(permissions=[])
    token = _v3_token(mgmt_server, publisher_not)
    reply = _http().post(
        mgmt_server.region_url + path, headers={"Authorization": "Bearer " + token}
    )
    assert (reply.status_code, reply.json()) == (403, {"message": "Forbidden"})


def test_v2_hdl_404_code(mgmt_server: MgmtServer) -> None:
    path = "/v2/dle/accounts/acme/profiles/main/datalayers/datalayer1"
    assert _http().get(mgmt_server.url + path).status_code == 404


def test_v2_hdl_400_code(mgmt_server: MgmtServer) -> None:
    # A request the fake itself refuses with 400: two Host headers.
    path = "/v2/dle/accounts/acme/profiles/main/datalayers/datalayer1"
    address = mgmt_server.url.split("//", 1)[1]
    connection = http.client.HTTPConnection(address)
    connection.putrequest("POST", path, skip_host=True)
    connection.putheader("Host", address)
    connection.putheader("Host", address)
    connection.putheader("Content-Length", "0")
    connection.endheaders()
    reply = connection.getresponse()
    assert reply.status == 400
    assert json.loads(reply.read())["returnCode"] == 1400
    connection.close()


def test_v1_hdl_405_code(mgmt_server: MgmtServer) -> None:
    path = "/v1/dle/accounts/acme/profiles/main/datalayers/dl1"
    mgmt_server.route("POST", path, auth="v1").respond_with_json({"status": "pending"})
    assert _http().put(mgmt_server.url + path).status_code == 405


def test_v1_login_answer(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> None:
    reply = _http().post(
        mgmt_server.url + "/v1/login",
        data={"username": mgmt_account.username, "password": mgmt_account.password},
    )
    assert reply.status_code == 200
    [remember] = [c for c in reply.raw.headers.getlist("Set-Cookie") if "rememberMe" in c]
    expires = parsedate_to_datetime(remember.split("Expires=")[1].replace("-", " "))
    assert expires == parsedate_to_datetime(reply.headers["Date"]) - timedelta(hours=24)


def test_v1_login_trailing_slash(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    reply = _http().post(
        mgmt_server.url + "/v1/login/",
        data={"username": mgmt_account.username, "password": mgmt_account.password},
    )
    # Authentication fails: no session, no utk (the fake answers 404 naming the slash).
    assert reply.status_code == 404
    assert "utk" not in reply.json()
    assert "JSESSIONID" not in reply.headers.get("Set-Cookie", "")
