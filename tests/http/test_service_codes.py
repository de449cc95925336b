"""The service's pages in the fake's own v1 and v2 errors: the codes 1400, 1404 and 1464
(the Hosted Data Layer pages), the rememberMe deletion dated as the published answers
date it, /v1/login/ with a trailing slash (the login page: "may cause authentication
to fail"), and the fake's diagnosis header: visible ASCII, bounded, no secret whole."""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import quote

import httpx
import pytest
import requests

from pytest_mgmtauth import Account, LoggedIn, MgmtClock, MgmtServer, UnknownRoute
from pytest_mgmtauth._http.errors import MAX_DIAGNOSIS, diagnosis_value, error_body
from pytest_mgmtauth._service.accounts import fingerprint, generate_password
from pytest_mgmtauth._service.flows.base import remember_me
from pytest_mgmtauth._service.records import status_code

DIAGNOSIS = "X-Mgmtauth-Diagnosis"


@pytest.mark.parametrize(
    ("status", "code"), [(400, 1400), (404, 1404), (405, 1464), (413, 413), (503, 503)]
)
def test_the_pages_codes_and_the_status_elsewhere(status: int, code: int) -> None:
    assert status_code(status) == code
    assert error_body(status, "why")["returnCode"] == code
    assert error_body(1401, "why")["returnCode"] == 1401  # a service code stays


def test_remember_me_expires_a_day_before_the_answer() -> None:
    # The published v1 answer: Date Mon, 31 Oct 2016 20:39:29 GMT.
    now = parsedate_to_datetime("Mon, 31 Oct 2016 20:39:29 GMT").timestamp()
    assert remember_me(now) == (
        "rememberMe=deleteMe; Path=/urest_service; Max-Age=0; Expires=Sun, 30-Oct-2016 20:39:29 GMT"
    )


def test_a_diagnosis_header_value_is_visible_ascii_and_bounded() -> None:
    assert diagnosis_value("caf\u00e9\nend") == "caf\\xe9\\nend"
    long = diagnosis_value("x" * 10_000)
    assert len(long) == MAX_DIAGNOSIS
    assert long.endswith("the whole diagnosis is in the timeline]")


def _get_with(client: str, url: str) -> tuple[str, str]:
    """The diagnosis header and the body text of a GET by ``client``, as they came."""
    if client == "requests":
        with requests.Session() as session:
            session.trust_env = False
            answer = session.get(url)
        return answer.headers[DIAGNOSIS], answer.text
    if client == "httpx":
        with httpx.Client(trust_env=False) as session:
            reply = session.get(url)
        return reply.headers[DIAGNOSIS], reply.text
    try:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url)
    except urllib.error.HTTPError as error:
        with error:
            return error.headers[DIAGNOSIS], error.read().decode()
    raise AssertionError("no error answer")


@pytest.mark.parametrize("client", ["requests", "httpx", "urllib"])
def test_a_secret_that_an_escape_completes_is_masked_in_the_header_and_body(
    mgmt_server: MgmtServer, client: str
) -> None:
    # '%0e' then the rest of a password that starts '0e' arrives as '\x0e' and the rest:
    # the header's escape \x0e (the body's \u000e) would complete the password.
    secret = "0e" + generate_password()[2:]
    mgmt_server.add_account(password=secret)
    rest = quote(secret[2:], safe="")
    header, body = _get_with(client, f"{mgmt_server.url}/nope/%0e{rest}")
    assert header.startswith(f"no route declares GET /nope/{fingerprint(secret)};")
    assert secret not in header
    assert secret not in body
    (entry,) = mgmt_server.requests
    assert entry.diagnosis == header
    assert secret not in mgmt_server.timeline()
    assert not [e for e in mgmt_server.events if secret in repr(e)]


def test_undeclared_paths_and_methods_get_1404_and_1464(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    mgmt_server.route("POST", "/v2/dle/accounts/acme/profiles/main/datalayers/x")
    missing = http.get(mgmt_server.url + "/v2/nothing")
    assert (missing.status_code, missing.json()["returnCode"]) == (404, 1404)
    assert missing.headers[DIAGNOSIS] == missing.json()["message"]
    wrong = http.put(mgmt_server.url + "/v2/dle/accounts/acme/profiles/main/datalayers/x")
    assert (wrong.status_code, wrong.json()["returnCode"]) == (405, 1464)
    assert wrong.headers["Allow"] == "POST"
    assert [e.status for e in mgmt_server.events if isinstance(e, UnknownRoute)] == [404, 405]


def test_a_v1_call_with_utk_twice_gets_1400(
    mgmt_server: MgmtServer, http: requests.Session, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/v1/dle/accounts/acme/profiles/main/datalayers")
    login = http.post(
        mgmt_server.url + "/v1/login",
        data={"username": mgmt_account.username, "password": mgmt_account.password},
    )
    utk = login.json()["utk"]
    answer = http.get(
        mgmt_server.url + f"/v1/dle/accounts/acme/profiles/main/datalayers?utk={utk}&utk={utk}"
    )
    assert (answer.status_code, answer.json()["returnCode"]) == (400, 1400)


@pytest.mark.parametrize("path", ["/v1/login/", "/v2/auth/"])
def test_an_auth_path_with_a_trailing_slash_fails_naming_the_slash(
    mgmt_server: MgmtServer, http: requests.Session, mgmt_account: Account, path: str
) -> None:
    answer = http.post(
        mgmt_server.url + path,
        data={
            "username": mgmt_account.username,
            "password": mgmt_account.password,
            "key": mgmt_account.api_key,
        },
    )
    assert (answer.status_code, answer.json()["returnCode"]) == (404, 1404)
    message = answer.json()["message"]
    assert message.startswith(f"{path} ends with a slash: send POST {path.rstrip('/')}")
    assert "may cause authentication to fail" in message
    assert not [e for e in mgmt_server.events if isinstance(e, LoggedIn)]


@pytest.mark.parametrize("path", ["/v1/login", "/v3/auth/accounts/acme/profiles/main"])
def test_remember_me_on_the_wire_is_the_answers_date_minus_a_day(
    mgmt_server: MgmtServer,
    http: requests.Session,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    path: str,
) -> None:
    mgmt_clock.advance(seconds=3 * 86400 + 12.5)
    answer = http.post(
        mgmt_server.url + path,
        data={
            "username": mgmt_account.username,
            "password": mgmt_account.password,
            "key": mgmt_account.api_key,
        },
    )
    assert answer.status_code == 200, answer.text
    [cookie] = [c for c in answer.raw.headers.getlist("Set-Cookie") if "rememberMe" in c]
    expires = cookie.split("Expires=")[1].replace("-", " ")
    date = parsedate_to_datetime(answer.headers["Date"])
    assert parsedate_to_datetime(expires) == date - timedelta(hours=24)
