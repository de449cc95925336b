"""What the tests of hosts and interception share: the one scenario every client kind
runs with its hard-coded URLs (v2, v3 following ``host``, v1 with calls at
my.tealiumiq.com), written once against a tiny client interface."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pytest_mgmtauth import Account, MgmtServer

V2_AUTH = "https://api.tealiumiq.com/v2/auth"
V3_AUTH = "https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main"
V1_LOGIN = "https://api.tealiumiq.com/v1/login"
V3_PATH = "/v3/things/accounts/acme/profiles/main"


@dataclass
class Reply:
    status: int
    text: str
    json: object
    headers: Mapping[str, str]


#: ``send(method, url, form, headers) -> Reply``: one request of a client under test.
Send = Callable[[str, str, "Mapping[str, str] | None", "Mapping[str, str]"], Reply]


def declare_routes(server: MgmtServer) -> None:
    server.route("GET", "/v2/things").respond_with_json({"v2": True})
    server.route("GET", V3_PATH).respond_with_json({"v3": True})
    server.route("GET", "/urest/things", auth="v1").respond_with_json({"v1": True})


def scenario(server: MgmtServer, account: Account, send: Send) -> None:
    """v2: auth and a call at api.tealiumiq.com; v3: auth at platform.tealiumapis.com
    and a call at the ``host`` of its answer; v1: login at api.tealiumiq.com and a call
    at my.tealiumiq.com, JSESSIONID sent by hand as public clients do."""
    creds = {"username": account.username, "key": account.api_key}
    v2 = send("POST", V2_AUTH, creds, {})
    assert v2.status == 200, v2.text
    assert isinstance(v2.json, dict)
    token = v2.json["token"]
    bearer = {"Authorization": f"Bearer {token}"}
    call = send("GET", "https://api.tealiumiq.com/v2/things", None, bearer)
    assert (call.status, call.json) == (200, {"v2": True}), call.text

    v3 = send("POST", V3_AUTH, creds, {})
    assert v3.status == 200, v3.text
    assert isinstance(v3.json, dict)
    assert v3.json["host"] == server.options.v3_host
    bearer = {"Authorization": f"Bearer {v3.json['token']}"}
    call = send("GET", f"https://{v3.json['host']}{V3_PATH}", None, bearer)
    assert (call.status, call.json) == (200, {"v3": True}), call.text

    login = {"username": account.username, "password": account.password}
    v1 = send("POST", V1_LOGIN, login, {})
    assert v1.status == 200, v1.text
    assert isinstance(v1.json, dict)
    cookie = re.search(r"JSESSIONID=([^;]*)", v1.headers["Set-Cookie"])
    assert cookie is not None
    url = f"https://my.tealiumiq.com/urest/things?utk={v1.json['utk']}"
    call = send("GET", url, None, {"Cookie": f"JSESSIONID={cookie[1]}"})
    assert (call.status, call.json) == (200, {"v1": True}), call.text


def check_timeline(server: MgmtServer) -> None:
    """Every call answered 200, at the hosts the scenario named."""
    text = server.timeline()
    assert "GET /v2/things with T1 -> 200" in text
    assert "GET /v3/things/accounts/acme/profiles/main with T2 -> 200" in text
    assert "GET /urest/things at my.tealiumiq.com with S1 -> 200" in text
    assert "wrong host" not in text
