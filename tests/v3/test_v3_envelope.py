"""v3 API calls refused as the published pages show them: the envelope {"message": ...}
(401 Unauthorized, 403 Forbidden, 500 Internal Server Error), no returnCode, the gateway's
headers, and the diagnosis kept where users read it (the fake's own header, the request
log, the timeline). The domain directly, then the wire with real clients."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Callable

import aiohttp
import httpx
import pytest
import requests
from werkzeug import Request, Response

from pytest_mgmtauth import Account, ApiCall, MgmtClock, MgmtServer
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.flows.v3 import V3Flow, envelope, gateway_headers
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.records import Refusal

DIAGNOSIS = "X-Mgmtauth-Diagnosis"
PATH = "/v3/customer/visitor/accounts/acme/profiles/main"

# -- the domain ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "Unauthorized"),  # api/v3/visitor-profile/endpoints
        (429, "Too many requests"),  # api/v3/visitor-privacy/endpoints
        (500, "Internal Server Error"),  # api/v3/visitor-privacy/endpoints
        (403, "Forbidden"),  # a documented choice: the page shows no body
        (404, "Not Found"),
        (410, "Gone"),
        (413, "Request Entity Too Large"),  # the same text on every Python
    ],
)
def test_the_envelope_of_each_status(status: int, message: str) -> None:
    assert envelope(status) == {"message": message}


def test_a_refusal_in_v3s_envelope_keeps_its_reason_status_and_retry_after() -> None:
    options = Options(v3_host="us-east-1-platform.tealiumapis.com")
    styled = V3Flow.api_error(Refusal(429, 429, "slow down", retry_after=3), options)
    assert (styled.status, styled.reason, styled.retry_after) == (429, "slow down", 3)
    assert styled.body == {"message": "Too many requests"}
    headers = dict(styled.headers)
    assert headers["x-region"] == "us-east-1"
    assert len(headers["x-amzn-requestid"]) == 36  # a UUID, new per answer
    # The service's flows keep their shape.
    plain = Refusal(404, 404, "no route")
    assert V2Flow.api_error(plain, options) is plain


def test_the_region_header_comes_from_a_region_host_only() -> None:
    assert dict(gateway_headers("us-west-2-platform.tealiumapis.com"))["x-region"] == "us-west-2"
    assert "x-region" not in dict(gateway_headers("gateway.example"))


# -- the wire --------------------------------------------------------------------------


def _token(server: MgmtServer, http: requests.Session, account: Account) -> str:
    answer = http.post(
        f"{server.url}/v3/auth/accounts/acme/profiles/main",
        data={"username": account.username, "key": account.api_key},
    )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["token"]
    return token


def test_a_made_up_token_gets_exactly_the_published_401(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    mgmt_server.expect_refusals()
    mgmt_server.route("GET", PATH).respond_with_json({})
    answer = http.get(mgmt_server.region_url + PATH, headers={"Authorization": "Bearer made-up"})
    assert answer.status_code == 401
    assert answer.json() == {"message": "Unauthorized"}
    assert answer.headers["Content-Type"] == "application/json"
    diagnosis = answer.headers[DIAGNOSIS]
    assert "not a JWT" in diagnosis
    # v3 messages never name v2.
    assert "v2" not in diagnosis
    assert "/v3/auth/accounts/{account}/profiles/{profile}" in diagnosis
    assert answer.headers["x-region"] == "us-west-2"
    assert answer.headers["x-amzn-requestid"]
    # The same diagnosis in the request log and the timeline.
    [logged] = [r for r in mgmt_server.requests if r.path == PATH]
    assert (logged.status, logged.diagnosis) == (401, diagnosis)
    [call] = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
    assert call.reason is not None
    assert call.reason in diagnosis
    assert f"-> 401 (Unauthorized: {call.reason})" in mgmt_server.timeline()


def test_a_missing_permission_on_v3_is_a_final_403_and_on_v2_still_401_1469(
    mgmt_server: MgmtServer, http: requests.Session, get_token: Callable[[Account], str]
) -> None:
    nobody = mgmt_server.add_account(permissions=[])
    mgmt_server.route("GET", PATH, permission="visitors:read").respond_with_json({})
    mgmt_server.route(
        "GET", "/v2/dle/accounts/acme/profiles/main", permission="dle"
    ).respond_with_json({})
    token = _token(mgmt_server, http, nobody)
    v3 = http.get(mgmt_server.region_url + PATH, headers={"Authorization": f"Bearer {token}"})
    assert (v3.status_code, v3.json()) == (403, {"message": "Forbidden"})
    assert "lacks the permission 'visitors:read'" in v3.headers[DIAGNOSIS]
    v2 = http.get(
        mgmt_server.url + "/v2/dle/accounts/acme/profiles/main",
        headers={"Authorization": f"Bearer {get_token(nobody)}"},
    )
    assert (v2.status_code, v2.json()["returnCode"]) == (401, 1469)
    # A 403 does not end the token: the same token keeps working where it may.
    mgmt_server.route("GET", PATH + "/ids").respond_with_json({})
    assert http.get(
        mgmt_server.region_url + PATH + "/ids", headers={"Authorization": f"Bearer {token}"}
    ).ok
    assert "-> 403 (Forbidden: account" in mgmt_server.timeline()


def test_a_failing_handler_on_a_v3_route_is_the_published_500(
    mgmt_server: MgmtServer, http: requests.Session, mgmt_account: Account
) -> None:
    def broken(request: Request) -> Response:
        raise RuntimeError("the handler's own bug")

    mgmt_server.route("GET", PATH).respond_with_handler(broken)
    token = _token(mgmt_server, http, mgmt_account)
    answer = http.get(mgmt_server.region_url + PATH, headers={"Authorization": f"Bearer {token}"})
    assert (answer.status_code, answer.json()) == (500, {"message": "Internal Server Error"})
    assert "the handler's own bug" in answer.headers[DIAGNOSIS]
    with pytest.raises(RuntimeError, match="the handler's own bug"):
        mgmt_server.check()


def test_an_undeclared_v3_path_is_a_404_in_the_envelope(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    answer = http.get(mgmt_server.region_url + "/v3/nothing/here")
    assert (answer.status_code, answer.json()) == (404, {"message": "Not Found"})
    assert "no route declares GET /v3/nothing/here" in answer.headers[DIAGNOSIS]


def test_every_client_reads_the_same_published_body(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    mgmt_server.expect_refusals()
    mgmt_server.route("GET", PATH).respond_with_json({})
    url = mgmt_server.region_url + PATH
    auth = {"Authorization": "Bearer x.y.z"}
    with httpx.Client(trust_env=False) as client:
        via_httpx = client.get(url, headers=auth)
    assert (via_httpx.status_code, via_httpx.json()) == (401, {"message": "Unauthorized"})
    assert via_httpx.headers[DIAGNOSIS] == http.get(url, headers=auth).headers[DIAGNOSIS]

    async def with_aiohttp() -> tuple[int, object, str]:
        async with aiohttp.ClientSession() as session, session.get(url, headers=auth) as got:
            return got.status, await got.json(), got.headers[DIAGNOSIS]

    status, body, diagnosis = asyncio.run(with_aiohttp())
    assert (status, body) == (401, {"message": "Unauthorized"})
    assert diagnosis == via_httpx.headers[DIAGNOSIS]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as refused:
        opener.open(urllib.request.Request(url, headers=auth))
    assert refused.value.code == 401
    assert json.loads(refused.value.read()) == {"message": "Unauthorized"}


def test_the_diagnosis_header_masks_secrets_and_escapes_what_a_header_cannot_hold(
    mgmt_server: MgmtServer, http: requests.Session, mgmt_account: Account
) -> None:
    # A path that quotes the API key and a character a header cannot hold: the 404's
    # diagnosis repeats the path, masked and escaped.
    path = f"/v3/x/{mgmt_account.api_key}/\u00e9"
    answer = http.get(mgmt_server.region_url + path)
    assert (answer.status_code, answer.json()) == (404, {"message": "Not Found"})
    diagnosis = answer.headers[DIAGNOSIS]
    assert "no route declares GET /v3/x/" in diagnosis
    assert mgmt_account.api_key not in diagnosis
    assert all(" " <= c <= "~" for c in diagnosis)
    [logged] = [r for r in mgmt_server.requests if r.path.startswith("/v3/x/")]
    assert logged.diagnosis == diagnosis


def test_re_authenticating_after_a_v3_403_is_told_that_403_is_final(
    mgmt_server: MgmtServer, http: requests.Session, mgmt_clock: MgmtClock
) -> None:
    nobody = mgmt_server.add_account(permissions=[])
    mgmt_server.route("GET", PATH, permission="visitors:read").respond_with_json({})
    first = _token(mgmt_server, http, nobody)
    refused = http.get(mgmt_server.region_url + PATH, headers={"Authorization": f"Bearer {first}"})
    assert refused.status_code == 403
    _token(mgmt_server, http, nobody)  # the loop a 401-as-403 fake would cause
    with pytest.raises(AssertionError) as churn:
        mgmt_server.assert_token_reused()
    message = str(churn.value)
    assert "-> 403 (Forbidden) at 00:00:00: a 403 is a missing permission" in message
    assert "Fix: treat 403 as final for that operation" in message
    assert "returnCode" not in message
