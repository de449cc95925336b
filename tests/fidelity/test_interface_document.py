"""Fidelity: every row of the interface document's tables, checked against the fake.

The document (a copy of the service's interface document, beside this file) is parsed
at collection time: each table row and each "Response headers present on success" item
becomes one test, which looks up its check below by the row's key. A row the document
gains without a check here fails ("no check"), and a check whose row disappeared fails
too, so the fake and the document cannot drift apart silently.

The fake serves HTTPS here, as the service does ("exposes a management API over HTTPS"),
and the client is httpx trusting the session's test CA.
"""

from __future__ import annotations

import base64
import dataclasses
import email.utils
import json
import re
from datetime import datetime, timezone
from http.cookies import SimpleCookie
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pytest_mgmtauth import Account, MgmtClock, MgmtServer

DOCUMENT = Path(__file__).with_name("management-auth-interface.md")
FORM = "application/x-www-form-urlencoded"

pytestmark = pytest.mark.mgmtauth(https=True)


# -- reading the document -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of a table (or one item of a success-headers list) of the document."""

    key: str
    cells: dict[str, str]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _split_outside_parentheses(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    items.append(current.strip().rstrip("."))
    return [item for item in items if item]


def read_document(path: Path = DOCUMENT) -> list[Row]:
    rows: list[Row] = []
    heading = ""
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("Response headers present on success:"):
            listed = line.split(":", 1)[1]
            for item in _split_outside_parentheses(listed):
                rows.append(Row(f"{heading} > success header > {item}", {"item": item}))
        elif (
            line.startswith("|") and index + 1 < len(lines) and set(lines[index + 1]) <= set("|-: ")
        ):
            header = _cells(line)
            index += 2
            while index < len(lines) and lines[index].startswith("|"):
                values = dict(zip(header, _cells(lines[index]), strict=True))
                key_columns = header[:3] if header[0] == "State" else header[:1]
                label = " / ".join(values[c] for c in key_columns)
                rows.append(Row(f"{heading} > {label}", values))
                index += 1
            continue
        index += 1
    return rows


ROWS = read_document()


# -- talking to the fake --------------------------------------------------------------


@dataclasses.dataclass
class Service:
    """The fake of one test, a client that trusts its CA, and the simulated clock."""

    server: MgmtServer
    clock: MgmtClock
    http: httpx.Client
    account: Account

    def url(self, path: str) -> str:
        return f"{self.server.url}{path}"

    def auth(self, account: Account | None = None, **form: str) -> httpx.Response:
        account = account or self.account
        fields = {"username": account.username, "key": account.api_key, **form}
        return self.http.post(self.url("/v2/auth"), data=fields)

    def token(self, account: Account | None = None) -> str:
        reply = self.auth(account)
        assert reply.status_code == 200, reply.text
        token: str = reply.json()["token"]
        return token

    def login(self, account: Account | None = None, **form: str) -> httpx.Response:
        account = account or self.account
        fields = {"username": account.username, "password": account.password, **form}
        return self.http.post(self.url("/v1/login"), data=fields)

    def session(self, account: Account | None = None) -> tuple[str, str]:
        reply = self.login(account)
        assert reply.status_code == 200, reply.text
        return jsessionid(reply), reply.json()["utk"]

    def v2_call(self, token: str) -> httpx.Response:
        return self.http.get(self.url("/api/devices"), headers={"Authorization": f"Bearer {token}"})

    def v1_call(self, session_id: str, utk: str) -> httpx.Response:
        return self.http.get(
            self.url("/v1/devices"),
            params={"utk": utk},
            headers={"Cookie": f"JSESSIONID={session_id}"},
        )

    def logout(self, session_id: str | None) -> httpx.Response:
        headers = {"Content-Type": FORM}
        if session_id is not None:
            headers["Cookie"] = f"JSESSIONID={session_id}"
        return self.http.post(self.url("/v1/logout"), headers=headers)


def set_cookie_lines(reply: httpx.Response) -> list[str]:
    return reply.headers.get_list("Set-Cookie")


def cookie_line(reply: httpx.Response, name: str) -> str:
    lines = [line for line in set_cookie_lines(reply) if line.startswith(f"{name}=")]
    assert len(lines) == 1, f"{name}: {set_cookie_lines(reply)}"
    return lines[0]


def cookie_attributes(line: str) -> tuple[str, str, dict[str, str]]:
    """``(name, value, {attribute (lowercase): value or ''})`` of one Set-Cookie line."""
    first, *attributes = [part.strip() for part in line.split(";")]
    name, _, value = first.partition("=")
    parsed = {}
    for attribute in attributes:
        key, _, attr_value = attribute.partition("=")
        parsed[key.lower()] = attr_value
    return name, value, parsed


def jsessionid(reply: httpx.Response) -> str:
    for line in set_cookie_lines(reply):
        match = re.match(r"^JSESSIONID=([^;]*);", line)
        if match:
            return match.group(1)
    raise AssertionError(f"no JSESSIONID line in {set_cookie_lines(reply)}")


def jwt_part(token: str, index: int) -> dict[str, Any]:
    part = token.split(".")[index]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


def assert_error(reply: httpx.Response, status: int, return_code: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["Content-Type"] == "application/json"
    body: dict[str, Any] = reply.json()
    assert body["returnCode"] == return_code, body
    assert isinstance(body["message"], str)
    assert body["message"]
    return body


def assert_missing_field(reply: httpx.Response, field: str) -> None:
    body = assert_error(reply, 400, 1400)
    assert f"missing form field {field!r}" in body["message"]


# -- the checks, one per row ----------------------------------------------------------

CHECKS: dict[str, Callable[[Service], None]] = {}


def check(*keys: str) -> Callable[[Callable[[Service], None]], Callable[[Service], None]]:
    def register(function: Callable[[Service], None]) -> Callable[[Service], None]:
        for key in keys:
            assert key not in CHECKS, f"two checks for {key!r}"
            CHECKS[key] = function
        return function

    return register


V2 = "POST {base_url}/v2/auth"
V1_LOGIN = "POST {base_url}/v1/login"
V1_LOGOUT = "POST {base_url}/v1/logout"


@check(
    "Credentials sent by the caller > username",
    f"{V2} > Form field username",
    f"{V1_LOGIN} > Form field username",
)
def username_is_required_in_both_versions(s: Service) -> None:
    assert "@" in s.account.username  # an e-mail address
    form = {"key": s.account.api_key}
    assert_missing_field(s.http.post(s.url("/v2/auth"), data=form), "username")
    form = {"password": s.account.password}
    assert_missing_field(s.http.post(s.url("/v1/login"), data=form), "username")
    assert s.auth().status_code == 200
    assert s.login().status_code == 200


@check("Credentials sent by the caller > key", f"{V2} > Form field key")
def key_is_required_and_must_be_url_encoded(s: Service) -> None:
    key = s.account.api_key
    assert set("+&=%/") <= set(key)  # it contains characters that need encoding
    form = {"username": s.account.username}
    assert_missing_field(s.http.post(s.url("/v2/auth"), data=form), "key")
    raw_body = f"username={s.account.username}&key={key}"  # the key NOT URL-encoded
    refused = s.http.post(s.url("/v2/auth"), content=raw_body, headers={"Content-Type": FORM})
    assert_error(refused, 401, 1401)
    assert s.auth().status_code == 200  # dict form data: the client encodes the key


@check("Credentials sent by the caller > password", f"{V1_LOGIN} > Form field password")
def password_is_required_for_v1(s: Service) -> None:
    form = {"username": s.account.username}
    assert_missing_field(s.http.post(s.url("/v1/login"), data=form), "password")
    assert_error(s.login(password=s.account.password + "x"), 401, 1401)
    assert s.login().status_code == 200


@check("Credentials returned by the service > token", f"{V2} > token")
def token_is_the_only_field_a_jwt_valid_for_30_minutes(s: Service) -> None:
    reply = s.auth()
    assert reply.status_code == 200
    assert reply.headers["Content-Type"] == "application/json"
    body = reply.json()
    assert list(body) == ["token"]
    token = body["token"]
    assert jwt_part(token, 0) == {"typ": "JWT", "alg": "RS512"}
    claims = jwt_part(token, 1)
    assert claims["sub"] == s.account.username
    assert claims["exp"] - claims["iat"] == 30 * 60
    assert len(token) > 800


@check("Credentials returned by the service > utk", f"{V1_LOGIN} > utk")
def utk_is_the_only_field_and_authenticates_with_the_cookie(s: Service) -> None:
    reply = s.login()
    assert reply.status_code == 200
    assert reply.headers["Content-Type"] == "application/json"
    body = reply.json()
    assert list(body) == ["utk"]
    assert isinstance(body["utk"], str)
    assert body["utk"]
    session_id = jsessionid(reply)
    assert s.v1_call(session_id, body["utk"]).status_code == 200
    assert_error(s.v1_call(session_id, body["utk"] + "x"), 401, 1401)  # both are needed


@check("Credentials returned by the service > JSESSIONID")
def jsessionid_cookie_has_the_documented_attributes(s: Service) -> None:
    line = cookie_line(s.login(), "JSESSIONID")
    _name, value, attributes = cookie_attributes(line)
    assert value
    assert attributes == {"path": "/urest_service", "secure": "", "httponly": ""}
    assert SimpleCookie(line)["JSESSIONID"]["path"] == "/urest_service"


@check("Credentials returned by the service > rememberMe")
def remember_me_deletes_a_cookie_in_both_versions(s: Service) -> None:
    for reply in (s.auth(), s.login()):
        _name, value, attributes = cookie_attributes(cookie_line(reply, "rememberMe"))
        assert value == "deleteMe"
        assert attributes["max-age"] == "0"
        assert attributes["path"] == "/urest_service"
        expires = email.utils.parsedate_to_datetime(attributes["expires"].replace("-", " "))
        assert expires < datetime.now(timezone.utc)


@check("Error body (v1) > returnCode", "Error body (v1) > message")
def v1_error_body_has_an_integer_return_code_and_a_message(s: Service) -> None:
    reply = s.login(password="wrong")
    body = assert_error(reply, 401, 1401)
    assert type(body["returnCode"]) is int
    assert set(body) == {"returnCode", "message"}


@check("Bearer token (v2) > none / POST {base_url}/v2/auth / username and key accepted")
def auth_with_accepted_credentials_issues_a_valid_token(s: Service) -> None:
    token = s.token()
    assert s.v2_call(token).status_code == 200


@check(
    "Bearer token (v2) > token valid / time / 30 minutes have passed since issue",
    "Limits > Bearer token validity",
)
def token_expires_after_30_minutes_and_the_caller_authenticates_again(s: Service) -> None:
    token = s.token()
    s.clock.advance(minutes=29, seconds=59)
    assert s.v2_call(token).status_code == 200
    s.clock.advance(seconds=1)
    body = assert_error(s.v2_call(token), 401, 1401)
    assert "expired" in body["message"]
    assert s.v2_call(s.token()).status_code == 200


@check(
    "Bearer token (v2) > token valid / POST {base_url}/v2/auth / caller asks for a new "
    "token on every call",
    "Limits > Throttling of authentication calls",
)
def a_new_token_on_every_call_is_allowed_then_throttled(s: Service) -> None:
    first = s.token()
    second = s.token()  # allowed: a new, different, valid token
    assert second != first
    assert s.v2_call(second).status_code == 200
    statuses = [s.auth().status_code for _ in range(10)]
    assert 429 in statuses, statuses  # "may throttle at its discretion": this fake does
    throttled = s.auth()
    body = assert_error(throttled, 429, 429)
    assert int(throttled.headers["Retry-After"]) >= 1
    assert body["message"]
    # Churn is exactly what this row is about; the assertion takes over the teardown check.
    with pytest.raises(AssertionError):
        s.server.assert_token_reused()


@check("Session (v1) > none / POST {base_url}/v1/login / username and password accepted")
def login_with_accepted_credentials_starts_a_session(s: Service) -> None:
    reply = s.login()
    assert reply.status_code == 200
    assert jsessionid(reply)
    assert reply.json()["utk"]


@check(
    "Session (v1) > none / POST {base_url}/v1/login / credentials rejected",
    "Errors > 1401",
)
def rejected_credentials_give_1401(s: Service) -> None:
    assert_error(s.login(password=s.account.password + "x"), 401, 1401)
    stranger = {"username": "stranger@example.com", "password": "x"}
    assert_error(s.http.post(s.url("/v1/login"), data=stranger), 401, 1401)
    assert not s.login(password="x").headers.get_list("Set-Cookie")  # no session


@check(
    "Session (v1) > none / POST {base_url}/v1/login / too many unsuccessful attempts",
    "Errors > 1402",
    "Limits > Login lockout wait after too many unsuccessful attempts",
)
def too_many_failures_lock_the_account_for_10_minutes(s: Service) -> None:
    threshold = s.server.options.lockout_threshold
    for _ in range(threshold):
        assert_error(s.login(password="wrong"), 401, 1401)
    body = assert_error(s.login(), 401, 1402)  # even the right password
    assert "10 minutes" in body["message"]
    s.clock.advance(minutes=9, seconds=59)
    assert_error(s.login(), 401, 1402)
    s.clock.advance(seconds=1)
    assert s.login().status_code == 200


@check("Session (v1) > session active / POST {base_url}/v1/logout / valid JSESSIONID cookie sent")
def logout_ends_the_session(s: Service) -> None:
    session_id, utk = s.session()
    assert s.logout(session_id).status_code == 200
    assert_error(s.v1_call(session_id, utk), 401, 1401)


@check("Session (v1) > session active / time / session expires")
def an_idle_session_expires_by_itself(s: Service) -> None:
    session_id, utk = s.session()
    assert s.v1_call(session_id, utk).status_code == 200
    s.clock.advance(seconds=s.server.options.session_timeout)
    body = assert_error(s.v1_call(session_id, utk), 401, 1401)
    assert "expired" in body["message"]


@check(f"{V2} > Header Content-Type")
def auth_takes_a_url_encoded_form(s: Service) -> None:
    form = {"username": s.account.username, "key": s.account.api_key}
    as_json = s.http.post(s.url("/v2/auth"), json=form)
    body = assert_error(as_json, 415, 415)
    assert FORM in body["message"]
    assert s.http.post(s.url("/v2/auth"), data=form).status_code == 200


@check(f"{V1_LOGOUT} > Header Content-type", f"{V1_LOGOUT} > Cookie JSESSIONID")
def logout_takes_the_session_cookie(s: Service) -> None:
    session_id, _ = s.session()
    body = assert_error(s.logout(None), 401, 1401)
    assert "JSESSIONID" in body["message"]
    reply = s.logout(session_id)
    assert reply.status_code == 200
    assert_error(s.logout(session_id), 401, 1401)  # the session has ended


@check("Errors > 1469")
def a_route_needing_a_missing_permission_gives_1469(s: Service) -> None:
    s.server.route("GET", "/api/admin", permission="admin").respond_with_json({})
    limited = s.server.add_account(permissions=["read"])
    reply = s.http.get(s.url("/api/admin"), headers={"Authorization": f"Bearer {s.token(limited)}"})
    body = assert_error(reply, 401, 1469)
    assert "permission" in body["message"]
    session_id, utk = s.session(limited)
    s.server.route("GET", "/v1/admin", permission="admin").respond_with_json({})
    reply = s.http.get(
        s.url("/v1/admin"), params={"utk": utk}, headers={"Cookie": f"JSESSIONID={session_id}"}
    )
    assert_error(reply, 401, 1469)


# Success headers: "Name (value)" must be present with that value, "Name" present.
_FIXED_VALUE = re.compile(r"^(?P<name>[\w-]+) \((?P<value>[^)]*)\)$")


def _success_reply(s: Service, heading: str) -> httpx.Response:
    reply = s.auth() if heading == V2 else s.login()
    assert reply.status_code == 200
    return reply


def _check_success_header(s: Service, heading: str, item: str) -> None:
    reply = _success_reply(s, heading)
    if item.startswith("Set-Cookie"):
        cookie = re.search(r"(JSESSIONID|rememberMe)", item)
        assert cookie is not None, item
        line = cookie_line(reply, cookie.group(1))
        if cookie.group(1) == "JSESSIONID":
            for attribute in re.search(r"\((.*)\)", item).group(1).split(";"):  # type: ignore[union-attr]
                assert attribute.strip() in line, (attribute, line)
        else:
            assert line.startswith("rememberMe=deleteMe;")
        return
    fixed = _FIXED_VALUE.match(item)
    if fixed:
        assert reply.headers.get_list(fixed["name"]) == [fixed["value"]], item
    else:
        assert reply.headers.get(item), f"{item} missing: {reply.headers}"
    if item == "Content-Length":
        assert int(reply.headers[item]) == len(reply.content)


for _row in ROWS:
    if " > success header > " in _row.key:
        _heading, _item = _row.key.split(" > ", 1)[0], _row.cells["item"]

        def _header_check(s: Service, heading: str = _heading, item: str = _item) -> None:
            _check_success_header(s, heading, item)

        CHECKS[_row.key] = _header_check


# -- the tests ------------------------------------------------------------------------


@pytest.fixture
def service(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock
) -> Iterator[Service]:
    mgmt_server.route("GET", "/api/devices").respond_with_json({"devices": []})
    mgmt_server.route("GET", "/v1/devices").respond_with_json({"devices": []})
    with httpx.Client(verify=mgmt_server.client_ssl_context() or True, timeout=10) as http:
        yield Service(mgmt_server, mgmt_clock, http, mgmt_account)


def test_the_document_has_the_tables_this_module_walks() -> None:
    sections = {row.key.split(" > ")[0] for row in ROWS}
    assert {
        "Credentials sent by the caller",
        "Credentials returned by the service",
        "Error body (v1)",
        "Bearer token (v2)",
        "Session (v1)",
        V2,
        V1_LOGIN,
        V1_LOGOUT,
        "Errors",
        "Limits",
    } <= sections
    assert len(ROWS) >= 40


def test_every_check_belongs_to_a_row_of_the_document() -> None:
    stale = sorted(set(CHECKS) - {row.key for row in ROWS})
    assert not stale, f"checks for rows the document no longer has: {stale}"


@pytest.mark.parametrize("row", ROWS, ids=[row.key for row in ROWS])
def test_row(row: Row, service: Service) -> None:
    check_row = CHECKS.get(row.key)
    assert check_row is not None, f"no check for this row of the document: {row.cells}"
    check_row(service)
