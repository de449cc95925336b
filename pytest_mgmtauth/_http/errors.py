"""Every JSON error body the fake and mgmtauth-server answer, and the body limits.

``{"returnCode": ..., "message": ...}`` is built here only: by the fake's routes, the
control API (``_standalone/control.py``) and the raw-socket answers of the server
(``_server.py``: a plain-HTTP request at the HTTPS fake, a framing error). The largest
body is checked here only too (:func:`read_limited_body`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from werkzeug import Response

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from werkzeug import Request

    from .._service.records import Refusal

#: Largest request body the fake reads; larger ones get 413 (a form of the service's
#: is a few hundred bytes).
MAX_BODY_BYTES = 64 * 1024
#: Largest control request body read, in bytes.
MAX_CONTROL_BODY = MAX_BODY_BYTES
#: Deepest nesting of arrays and objects a control request body may have.
MAX_CONTROL_DEPTH = 32


#: WSGI environ key: the request body, once read whole within the limit.
BODY_READ = "mgmtauth.body"


class BodyTooLarge(Exception):
    """The request body is over the limit; ``str()`` says by how much (answer 413)."""


def read_limited_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, or :class:`BodyTooLarge` if it is over ``limit`` bytes (by its
    Content-Length, or as read: a chunked body has none)."""
    length = request.content_length
    if length is not None and length > limit:
        raise BodyTooLarge(f"the body is {length} bytes; the fake reads at most {limit}")
    body = request.get_data(cache=True)
    if len(body) > limit:
        raise BodyTooLarge(f"the body is over {limit} bytes")
    request.environ[BODY_READ] = body  # for the request log
    return body


def error_body(return_code: int, message: str, **extra: Any) -> dict[str, Any]:
    """The body of every error answer: ``returnCode``, ``message`` and any extras."""
    return {"returnCode": return_code, "message": message, **extra}


def error_bytes(return_code: int, message: str) -> bytes:
    """:func:`error_body` encoded, for answers written straight to the socket."""
    return json.dumps(error_body(return_code, message)).encode()


def json_response(status: int, body: Any, headers: Sequence[tuple[str, str]] = ()) -> Response:
    response = Response(json.dumps(body), status=status, content_type="application/json")
    for name, value in headers:
        response.headers.add(name, value)
    return response


def error_response(
    status: int, return_code: int, message: str, *, allow: str | None = None, **extra: Any
) -> Response:
    """Every error the fake answers has ``returnCode`` and ``message``; for answers the
    interface document does not show, ``returnCode`` is the HTTP status. A 405 names the
    methods the path does take in ``Allow``."""
    headers: list[tuple[str, str]] = []
    if allow is not None:
        headers.append(("Allow", allow))
    return json_response(status, error_body(return_code, message, **extra), headers)


def refusal_response(refusal: Refusal) -> Response:
    """The answer to a refusal of the service: its status, return code and message, and
    ``retryAfter`` with a ``Retry-After`` header when it has one; or the body and
    headers a flow's own error shape gave it (OAuth's RFC 6749/6750 errors)."""
    if refusal.body is not None:
        response = json_response(refusal.status, dict(refusal.body), refusal.headers)
        if refusal.retry_after is not None:
            response.headers["Retry-After"] = str(refusal.retry_after)
        return response
    extra: dict[str, Any] = {}
    if refusal.retry_after is not None:
        extra["retryAfter"] = refusal.retry_after
    response = error_response(refusal.status, refusal.return_code, refusal.message, **extra)
    if refusal.retry_after is not None:
        response.headers["Retry-After"] = str(refusal.retry_after)
    return response


def masked_error(response: Response, redact: Callable[[str], str]) -> Response:
    """An error answer of the fake (status >= 400, a JSON body) with every secret the
    service knows masked in its strings: messages quote what the client sent (a
    username, a path, a header), and a client that put a secret there must not get it
    echoed. Other answers (a route handler's, a grant's token) pass unchanged."""
    if response.status_code < 400 or response.mimetype != "application/json":
        return response
    try:
        body = json.loads(response.get_data())
    except ValueError:
        return response
    masked = _mask_json(body, redact)
    if masked != body:
        response.set_data(json.dumps(masked))
    return response


def _mask_json(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_mask_json(v, redact) for v in value]
    if isinstance(value, dict):
        return {redact(k): _mask_json(v, redact) for k, v in value.items()}
    return value
