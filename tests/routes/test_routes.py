"""User-declared routes: authenticated before their handler, 404/405 for the rest."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import pytest
import requests
from werkzeug import Request, Response

from pytest_mgmtauth import Account, ApiCall, MgmtServer, RouteHandler, UnknownRoute

GetToken = Callable[[Account], str]
Login = Callable[[Account], tuple[str, str]]


def test_route_returns_a_handler_with_pytest_httpserver_responders(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: GetToken, http: requests.Session
) -> None:
    seen: list[str] = []

    def handler(request: Request) -> Response:
        seen.append(request.args["q"])
        return Response("custom", status=202, content_type="text/plain")

    json_route = mgmt_server.route("GET", "/api/json")
    assert isinstance(json_route, RouteHandler)
    json_route.respond_with_json({"a": 1}, status=201)
    mgmt_server.route("GET", "/api/data").respond_with_data("raw", content_type="text/plain")
    mgmt_server.route("GET", "/api/fn").respond_with_handler(handler)
    bearer = {"Authorization": f"Bearer {get_token(mgmt_account)}"}
    first = http.get(f"{mgmt_server.url}/api/json", headers=bearer)
    assert (first.status_code, first.json()) == (201, {"a": 1})
    second = http.get(f"{mgmt_server.url}/api/data", headers=bearer)
    assert (second.status_code, second.text) == (200, "raw")
    third = http.get(f"{mgmt_server.url}/api/fn", params={"q": "x"}, headers=bearer)
    assert (third.status_code, third.text) == (202, "custom")
    assert seen == ["x"]
    calls = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
    assert [(c.path, c.status) for c in calls] == [
        ("/api/json", 201),
        ("/api/data", 200),
        ("/api/fn", 202),
    ]


def test_every_respond_with_returns_the_handler_so_it_can_be_kept(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: GetToken, http: requests.Session
) -> None:
    # pytest-httpserver's return None: `things = route(...).respond_with_json(...)` then
    # `things.call_count` was an AttributeError (issue 10).
    handlers = {
        "json": mgmt_server.route("GET", "/api/json").respond_with_json([]),
        "data": mgmt_server.route("GET", "/api/data").respond_with_data("raw"),
        "response": mgmt_server.route("GET", "/api/response").respond_with_response(
            Response("made", status=201)
        ),
        "handler": mgmt_server.route("GET", "/api/handler").respond_with_handler(
            lambda request: Response("computed")
        ),
    }
    bearer = {"Authorization": f"Bearer {get_token(mgmt_account)}"}
    for name, handler in handlers.items():
        assert isinstance(handler, RouteHandler)
        assert handler.call_count == 0
        assert http.get(f"{mgmt_server.url}/api/{name}", headers=bearer).ok
        assert handler.call_count == 1, name


def test_auth_follows_the_path_unless_overridden(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    get_token: GetToken,
    v1_login: Login,
    http: requests.Session,
) -> None:
    assert mgmt_server.route("GET", "/v1/a").auth == "v1"
    assert mgmt_server.route("GET", "/v2/a").auth == "v2"
    assert mgmt_server.route("GET", "/api/a").auth == "v2"
    assert mgmt_server.route("GET", re.compile(r"^/v1/items/\d+$")).auth == "v1"
    legacy = mgmt_server.route("GET", "/legacy/a", auth="v1")
    legacy.respond_with_json({"legacy": True})
    token = get_token(mgmt_account)
    session_id, utk = v1_login(mgmt_account)
    by_bearer = http.get(
        f"{mgmt_server.url}/legacy/a", headers={"Authorization": f"Bearer {token}"}
    )
    assert by_bearer.status_code == 401
    assert "this is a v1 route" in by_bearer.json()["message"]
    by_session = http.get(
        f"{mgmt_server.url}/legacy/a",
        params={"utk": utk},
        headers={"Cookie": f"JSESSIONID={session_id}"},
    )
    assert by_session.status_code == 200


def test_v2_route_with_only_a_session_cookie_says_sessions_are_v1(
    mgmt_server: MgmtServer, mgmt_account: Account, v1_login: Login, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/a").respond_with_json({})
    session_id, _ = v1_login(mgmt_account)
    response = http.get(f"{mgmt_server.url}/api/a", headers={"Cookie": f"JSESSIONID={session_id}"})
    assert response.status_code == 401
    # Issue 43, 6: "/v1/ routes only" misled a client of /urest/...: say how to declare one.
    assert (
        "v1 sessions work on v1 routes only, those under /v1/ and those declared "
        "route(..., auth='v1') (the service's /urest/...)"
    ) in response.json()["message"]


def test_regex_routes_match_paths(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: GetToken, http: requests.Session
) -> None:
    route = mgmt_server.route("DELETE", re.compile(r"^/api/tags/\d+$"))
    route.respond_with_data("", status=204)
    bearer = {"Authorization": f"Bearer {get_token(mgmt_account)}"}
    assert http.delete(f"{mgmt_server.url}/api/tags/42", headers=bearer).status_code == 204
    assert http.delete(f"{mgmt_server.url}/api/tags/x", headers=bearer).status_code == 404
    assert route.call_count == 1


def test_unknown_path_is_404_json_and_recorded(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/tags").respond_with_json({})
    response = http.get(f"{mgmt_server.url}/api/nowhere")
    assert response.status_code == 404
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert body["returnCode"] == 1404
    assert "no route declares GET /api/nowhere" in body["message"]
    assert "declared routes: GET /api/tags" in body["message"]
    assert "mgmt_server.route('GET', '/api/nowhere')" in body["message"]
    [event] = mgmt_server.events
    assert isinstance(event, UnknownRoute)
    assert (event.method, event.path, event.status) == ("GET", "/api/nowhere", 404)


def test_declared_path_with_another_method_is_405(
    mgmt_server: MgmtServer, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/tags").respond_with_json({})
    mgmt_server.route("DELETE", "/api/tags").respond_with_json({})
    response = http.put(f"{mgmt_server.url}/api/tags")
    assert response.status_code == 405
    assert response.json()["returnCode"] == 1464
    # Allow names the methods declared for this path, not the fake's own endpoints'.
    assert response.headers["Allow"] == "DELETE, GET"
    [event] = mgmt_server.events
    assert isinstance(event, UnknownRoute)
    assert event.status == 405


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_builtin_endpoints_take_post_only(
    mgmt_server: MgmtServer, http: requests.Session, method: str
) -> None:
    for path in ("/v2/auth", "/v1/login", "/v1/logout"):
        response = http.request(method, f"{mgmt_server.url}{path}")
        assert response.status_code == 405
        assert response.headers["Allow"] == "POST"
        assert response.json()["message"] == f"{path} takes POST, not {method}"


def test_route_permission_is_checked_after_authentication(
    mgmt_server: MgmtServer, get_token: GetToken, http: requests.Session
) -> None:
    admin = mgmt_server.add_account()
    nobody = mgmt_server.add_account(permissions=[])
    route = mgmt_server.route("POST", "/api/users", permission="users:write")
    route.respond_with_json({"created": True}, status=201)
    for account, status, code in ((nobody, 401, 1469), (admin, 201, None)):
        response = http.post(
            f"{mgmt_server.url}/api/users",
            headers={"Authorization": f"Bearer {get_token(account)}"},
        )
        assert response.status_code == status
        assert response.json().get("returnCode") == code
    assert route.call_count == 1


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("FETCH", "/x"), {}, ValueError, "method must be one of GET, POST"),
        (("GET", "x"), {}, ValueError, "path must start with '/'"),
        (("POST", "/v2/auth"), {}, ValueError, "/v2/auth is the fake's own endpoint"),
        (("GET", 5), {}, TypeError, "path must be a str or a compiled regex"),
        (
            ("GET", "/items\n"),
            {},
            ValueError,
            "no request can reach '/items\\n': the path contains a line feed",
        ),
        (("GET", "//_mgmtauth/x"), {}, ValueError, "the path starts with '//'"),
        (
            ("GET", "/x"),
            {"auth": "v4"},
            ValueError,
            "auth must be 'v2' (/v2/auth), 'v3' (v3 auth), 'v1' (/v1/login), 'oauth' (the OAuth "
            "2.0 token endpoint), 'scim' (/v2/auth-long-lived/token) or None (by the path)",
        ),
    ],
)
def test_route_arguments_are_checked(
    mgmt_server: MgmtServer,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        mgmt_server.route(*args, **kwargs)  # type: ignore[arg-type]


def test_lowercase_method_is_accepted(mgmt_server: MgmtServer) -> None:
    assert mgmt_server.route("get", "/x").method == "GET"


def test_url_helpers(mgmt_server: MgmtServer) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", mgmt_server.url)
    assert mgmt_server.url_for("/v2/auth") == mgmt_server.url + "/v2/auth"
    assert mgmt_server.url_for("v2/auth") == mgmt_server.url + "/v2/auth"
    assert mgmt_server.ca_bundle is None
    assert mgmt_server.client_ssl_context() is None


def test_handler_returning_something_else_than_a_response_is_blamed_on_the_handler(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: GetToken, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/x").respond_with_handler(
        lambda request: {"a": 1}  # type: ignore[arg-type, return-value]
    )
    bearer = {"Authorization": f"Bearer {get_token(mgmt_account)}"}
    response = http.get(f"{mgmt_server.url}/api/x", headers=bearer)
    assert response.status_code == 500
    message = response.json()["message"]
    assert "the handler of <route GET /api/x auth=v2> returned dict" in message
    assert "failed internally" not in message
    # Re-raised in the test (at teardown; here by hand, which also clears it).
    with pytest.raises(TypeError, match="returned dict, not a werkzeug Response or str"):
        mgmt_server.check()


def test_route_without_a_response_is_re_raised_naming_the_route(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: GetToken, http: requests.Session
) -> None:
    mgmt_server.route("GET", "/api/y")  # forgot .respond_with_json(...)
    bearer = {"Authorization": f"Bearer {get_token(mgmt_account)}"}
    response = http.get(f"{mgmt_server.url}/api/y", headers=bearer)
    assert response.status_code == 500
    assert "the handler of <route GET /api/y auth=v2> raised" in response.json()["message"]
    with pytest.raises(Exception, match="no response defined"):
        mgmt_server.check()


def test_call_count_counts_what_the_timeline_shows_even_while_a_handler_runs(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: GetToken, http: requests.Session
) -> None:
    # Issue 43, part 2, defect 18: call_count went up before the handler ran and the
    # ApiCall was recorded after it answered, so a call stalled in between (a body that
    # never came) was in one and not the other.
    entered, release = threading.Event(), threading.Event()

    def handler(request: Request) -> Response:
        entered.set()
        release.wait(30)
        return Response("done")

    slow = mgmt_server.route("GET", "/api/slow").respond_with_handler(handler)
    bearer = {"Authorization": f"Bearer {get_token(mgmt_account)}"}
    answers: list[int] = []
    call = threading.Thread(
        target=lambda: answers.append(
            http.get(f"{mgmt_server.url}/api/slow", headers=bearer).status_code
        )
    )
    call.start()
    try:
        assert entered.wait(30)
        calls = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
        assert (slow.call_count, len(calls)) == (0, 0)  # in the handler: in neither yet
    finally:
        release.set()
        call.join(30)
    assert answers == [200]
    calls = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
    assert (slow.call_count, len(calls)) == (1, 1)
