"""``python stand_in.py DIFFERENCE [mgmtauth-server options]``: ``mgmtauth-server`` playing
the service for live runs, with one difference from the fake injected into its answers
(``none``: as it is). Options make some differences (``--token-ttl 3600``); the others,
which no option makes, are made here on the wire, after the fake has answered:

- ``extra_key``: the v2 auth answer has one more key, ``expires_in``;
- ``rs256``: tokens' JWT header says ``RS256`` (the signature is left as it was);
- ``no_host``: v3 auth answers have no ``host``;
- ``no_scope``: OAuth token answers have no ``scope``;
- ``status_403``: every 401 is a 403;
- ``cookie``: the v1 session cookie is ``SESSIONID``, not ``JSESSIONID``;
- ``text_403``: every 401 is a 403 whose JSON body is labelled ``text/plain``;
- ``html_401``: every 401 is a gateway's HTML page;
- ``deep``: the v2 auth answer is a JSON array nested 100,000 deep;
- ``badge_flow``: none, and the flow of ``badge_flow.py`` is registered (a flow of a
  test suite, which the service has too).
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable

from werkzeug import Request, Response

from pytest_mgmtauth._http import app as app_module
from pytest_mgmtauth._standalone.cli import main


def _json_answer(response: Response, change: Callable[[dict[str, object]], object]) -> None:
    if response.mimetype != "application/json":
        return
    body = json.loads(response.get_data())
    if isinstance(body, dict):
        change(body)
        response.set_data(json.dumps(body).encode())


def _rs256(body: dict[str, object]) -> None:
    token = body.get("token") or body.get("access_token")
    if isinstance(token, str) and token.count(".") == 2:
        header, rest = token.split(".", 1)
        claims = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
        claims["alg"] = "RS256"
        new = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
        body["token" if "token" in body else "access_token"] = f"{new}.{rest}"


def inject(difference: str, request: Request, response: Response) -> Response:
    if difference == "extra_key" and request.path == "/v2/auth":
        _json_answer(response, lambda body: body.setdefault("expires_in", 1800))
    elif difference == "rs256" and request.path in ("/v2/auth", "/oauth/token"):
        _json_answer(response, _rs256)
    elif difference == "no_host" and request.path.startswith("/v3/auth/"):
        _json_answer(response, lambda body: body.pop("host", None))
    elif difference == "no_scope" and request.path == "/oauth/token":
        _json_answer(response, lambda body: body.pop("scope", None))
    elif difference == "status_403" and response.status_code == 401:
        response.status_code = 403
    elif difference == "cookie":
        cookies = response.headers.getlist("Set-Cookie")
        if cookies:
            del response.headers["Set-Cookie"]
            for cookie in cookies:
                response.headers.add("Set-Cookie", cookie.replace("JSESSIONID=", "SESSIONID=", 1))
    elif difference == "text_403" and response.status_code == 401:
        response.status_code = 403
        response.headers["Content-Type"] = "text/plain; charset=utf-8"
    elif difference == "html_401" and response.status_code == 401:
        response.set_data(b"<html><body><h1>401 Authorization Required</h1></body></html>")
        response.headers["Content-Type"] = "text/html"
    elif difference == "deep" and request.path == "/v2/auth":
        response.set_data(b"[" * DEEP + b"]" * DEEP)
    return response


#: How deep the ``deep`` answer is nested: far past Python's recursion limit.
DEEP = 100_000


if __name__ == "__main__":
    chosen = sys.argv[1]
    if chosen == "badge_flow":
        from badge_flow import BadgeFlow

        from pytest_mgmtauth._service.flows.registry import register

        register(BadgeFlow)
    answer = app_module.FakeApp.__call__

    def injected(self: app_module.FakeApp, request: Request) -> Response:
        return inject(chosen, request, answer(self, request))

    app_module.FakeApp.__call__ = injected  # type: ignore[method-assign]
    sys.exit(main(sys.argv[2:]))
