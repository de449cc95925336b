"""Whole flows with the clients people use: requests, httpx, urllib.request.

The done-when items of the core live here: a client that relies on its cookie jar for
JSESSIONID fails as against the real service (Path=/urest_service, Secure), one that
sends ``Cookie: JSESSIONID=...`` and ``utk`` itself works; a client that forgets to
URL-encode the key fails with the diagnosis.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from http.cookiejar import CookieJar
from urllib.parse import urlencode

import httpx
import pytest
import requests

from pytest_mgmtauth import Account, ApiCall, MgmtServer

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
JSESSIONID_LINE = re.compile(r"^JSESSIONID=([^;]*);")


def _session_id(set_cookie_lines: list[str]) -> str:
    for line in set_cookie_lines:
        match = JSESSIONID_LINE.match(line)
        if match:
            return match.group(1)
    raise AssertionError(f"no line starts with JSESSIONID= in {set_cookie_lines!r}")


def _urlopen(request: urllib.request.Request) -> tuple[int, dict[str, object], list[str]]:
    """(status, JSON body, Set-Cookie lines), for answers of any status."""
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response), response.headers.get_all("Set-Cookie")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.load(error), error.headers.get_all("Set-Cookie") or []


# -- v2 with each client -------------------------------------------------------------


def test_v2_flow_with_requests(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    mgmt_server.route("GET", "/api/tags").respond_with_json({"tags": [1]})
    with requests.Session() as client:
        client.trust_env = False
        auth = client.post(
            f"{mgmt_server.url}/v2/auth",
            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        )
        assert auth.status_code == 200
        client.headers["Authorization"] = f"Bearer {auth.json()['token']}"
        for _ in range(3):
            assert client.get(f"{mgmt_server.url}/api/tags").json() == {"tags": [1]}
    assert mgmt_server.auth_count(version="v2") == 1
    calls = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
    assert [(c.credential, c.status) for c in calls] == [("T1", 200)] * 3


def test_v2_flow_with_httpx(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    mgmt_server.route("POST", "/api/tags").respond_with_json({"created": True}, status=201)
    with httpx.Client(base_url=mgmt_server.url, trust_env=False) as client:
        auth = client.post(
            "/v2/auth", data={"username": mgmt_account.username, "key": mgmt_account.api_key}
        )
        assert auth.status_code == 200
        assert auth.headers["X-XSS-Protection"] == "1;mode=block"
        token = auth.json()["token"]
        created = client.post(
            "/api/tags", json={"name": "t"}, headers={"Authorization": f"Bearer {token}"}
        )
        assert (created.status_code, created.json()) == (201, {"created": True})


def test_v2_flow_with_urllib(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    mgmt_server.route("GET", "/api/tags").respond_with_json({"tags": []})
    body = urlencode({"username": mgmt_account.username, "key": mgmt_account.api_key})
    status, answer, _ = _urlopen(
        urllib.request.Request(f"{mgmt_server.url}/v2/auth", data=body.encode(), headers=FORM)
    )
    assert status == 200
    bearer = {"Authorization": f"Bearer {answer['token']}"}
    status, answer, _ = _urlopen(
        urllib.request.Request(f"{mgmt_server.url}/api/tags", headers=bearer)
    )
    assert (status, answer) == (200, {"tags": []})


@pytest.mark.parametrize("client", ["requests", "httpx", "urllib"])
def test_forgetting_to_url_encode_the_key_fails_with_every_client(
    mgmt_server: MgmtServer, client: str
) -> None:
    # Fresh generated keys every time: the mistake must fail for every key, not most.
    for _ in range(10):
        account = mgmt_server.add_account()
        body = f"username={account.username}&key={account.api_key}"
        if client == "requests":
            response = requests.post(f"{mgmt_server.url}/v2/auth", data=body, headers=FORM)
            status, answer = response.status_code, response.json()
        elif client == "httpx":
            result = httpx.post(
                f"{mgmt_server.url}/v2/auth", content=body, headers=FORM, trust_env=False
            )
            status, answer = result.status_code, result.json()
        else:
            status, answer, _ = _urlopen(
                urllib.request.Request(
                    f"{mgmt_server.url}/v2/auth", data=body.encode(), headers=FORM
                )
            )
        assert status == 401, answer
        assert answer["returnCode"] == 1401
        assert "the API key arrived un-encoded" in str(answer["message"])
        assert account.api_key not in str(answer["message"])
    assert mgmt_server.auth_count() == 0


# -- v1: the cookie jar trap ---------------------------------------------------------


def test_requests_session_relying_on_its_cookie_jar_fails(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    route = mgmt_server.route("GET", "/v1/tags")
    route.respond_with_json({"tags": []})
    with requests.Session() as client:
        client.trust_env = False
        login = client.post(
            f"{mgmt_server.url}/v1/login",
            data={"username": mgmt_account.username, "password": mgmt_account.password},
        )
        assert login.status_code == 200
        assert "JSESSIONID" in client.cookies  # stored...
        utk = login.json()["utk"]
        response = client.get(f"{mgmt_server.url}/v1/tags", params={"utk": utk})
    # ...but never sent back: Path=/urest_service and Secure, as with the real service.
    assert response.status_code == 401
    assert response.json()["returnCode"] == 1401
    assert "no JSESSIONID cookie was sent" in response.json()["message"]
    assert route.call_count == 0


def test_httpx_client_relying_on_its_cookie_jar_fails(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/v1/tags").respond_with_json({})
    with httpx.Client(base_url=mgmt_server.url, trust_env=False) as client:
        login = client.post(
            "/v1/login",
            data={"username": mgmt_account.username, "password": mgmt_account.password},
        )
        assert login.status_code == 200
        response = client.get("/v1/tags", params={"utk": login.json()["utk"]})
    assert response.status_code == 401
    assert "no JSESSIONID cookie was sent" in response.json()["message"]


def test_urllib_cookie_processor_relying_on_its_jar_fails(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/v1/tags").respond_with_json({})
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    body = urlencode({"username": mgmt_account.username, "password": mgmt_account.password})
    with opener.open(
        urllib.request.Request(f"{mgmt_server.url}/v1/login", data=body.encode(), headers=FORM)
    ) as login:
        utk = json.load(login)["utk"]
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        opener.open(f"{mgmt_server.url}/v1/tags?{urlencode({'utk': utk})}")
    with excinfo.value as error:
        assert error.code == 401
        assert "no JSESSIONID cookie was sent" in json.load(error)["message"]


@pytest.mark.mgmtauth(https=True)
def test_cookie_jar_fails_over_https_too_because_of_the_path(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    # Over HTTPS Secure no longer stops the jar: Path=/urest_service still does.
    assert mgmt_server.url.startswith("https://")
    mgmt_server.route("GET", "/v1/tags").respond_with_json({})
    with requests.Session() as client:
        client.trust_env = False
        client.verify = mgmt_server.ca_bundle
        login = client.post(
            f"{mgmt_server.url}/v1/login",
            data={"username": mgmt_account.username, "password": mgmt_account.password},
        )
        assert login.status_code == 200
        response = client.get(f"{mgmt_server.url}/v1/tags", params={"utk": login.json()["utk"]})
        assert response.status_code == 401
        # The same session works once the client sends the cookie itself.
        session_id = _session_id(login.raw.headers.getlist("Set-Cookie"))
        works = client.get(
            f"{mgmt_server.url}/v1/tags",
            params={"utk": login.json()["utk"]},
            headers={"Cookie": f"JSESSIONID={session_id}"},
        )
        assert works.status_code == 200


# -- v1: what working clients do -----------------------------------------------------


def test_v1_flow_with_requests_sending_the_cookie_itself(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/v1/tags").respond_with_json({"tags": ["x"]})
    login = requests.post(
        f"{mgmt_server.url}/v1/login",
        data={"username": mgmt_account.username, "password": mgmt_account.password},
    )
    session_id = _session_id(login.raw.headers.getlist("Set-Cookie"))
    utk = login.json()["utk"]
    cookie = {"Cookie": f"JSESSIONID={session_id}"}
    response = requests.get(f"{mgmt_server.url}/v1/tags", params={"utk": utk}, headers=cookie)
    assert (response.status_code, response.json()) == (200, {"tags": ["x"]})
    logout = requests.post(f"{mgmt_server.url}/v1/logout", headers={**cookie, **FORM})
    assert logout.status_code == 200


def test_v1_flow_with_httpx_sending_the_cookie_itself(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/v1/tags").respond_with_json({"tags": []})
    with httpx.Client(base_url=mgmt_server.url, trust_env=False) as client:
        login = client.post(
            "/v1/login",
            data={"username": mgmt_account.username, "password": mgmt_account.password},
        )
        session_id = _session_id(login.headers.get_list("set-cookie"))
        utk = login.json()["utk"]
        response = client.get(
            "/v1/tags", params={"utk": utk}, headers={"Cookie": f"JSESSIONID={session_id}"}
        )
        assert response.status_code == 200
        logout = client.post("/v1/logout", headers={"Cookie": f"JSESSIONID={session_id}"})
        assert logout.status_code == 200


def test_v1_flow_with_urllib_sending_the_cookie_itself(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.route("GET", "/v1/tags").respond_with_json({"tags": []})
    body = urlencode({"username": mgmt_account.username, "password": mgmt_account.password})
    status, answer, set_cookies = _urlopen(
        urllib.request.Request(f"{mgmt_server.url}/v1/login", data=body.encode(), headers=FORM)
    )
    assert status == 200
    session_id = _session_id(set_cookies)
    cookie = {"Cookie": f"JSESSIONID={session_id}"}
    status, answer, _ = _urlopen(
        urllib.request.Request(
            f"{mgmt_server.url}/v1/tags?{urlencode({'utk': answer['utk']})}", headers=cookie
        )
    )
    assert status == 200
    status, _, _ = _urlopen(
        urllib.request.Request(
            f"{mgmt_server.url}/v1/logout", data=b"", headers={**cookie, **FORM}, method="POST"
        )
    )
    assert status == 200
