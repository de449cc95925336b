"""What is wrong with a request, and every JSON error body that says so.

Strictness about the request's header section, so that a client's mistake gets named
instead of half-parsed (:func:`framing_problem`, checked by the server before the app
sees the request), and about the largest body (:func:`read_limited_body`).

``{"returnCode": ..., "message": ...}`` is built here only, and so is the fake's own
header that carries an error's diagnosis (:data:`DIAGNOSIS_HEADER`), which stays where a
flow's published error body has no room for it (v3's ``{"message": "Unauthorized"}``).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from werkzeug import Response

from .._service.flows.base import HTTP_WHITESPACE
from .._service.records import status_code

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from werkzeug import Request

    from .._service.records import Refusal

# -- headers and framing ----------------------------------------------------------


#: A field name (RFC 9110 5.1: a token).
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _named(name: str) -> str:
    """A header's name for a message: a plain token as it is, anything else unnamed."""
    return f"the {name} header" if _TOKEN.fullmatch(name) and len(name) <= 64 else "a header"


def _unparsed_problem(line: str) -> str:
    """Why a header line that http.server could not read as ``name: value`` is invalid
    (without repeating its value: any header may carry a secret)."""
    name, colon, _ = line.partition(":")
    if colon and name.strip(HTTP_WHITESPACE) and name != name.rstrip(HTTP_WHITESPACE):
        bare = name.strip(HTTP_WHITESPACE)
        shown = repr(bare) if _TOKEN.fullmatch(bare) and len(bare) <= 64 else "a header"
        return (
            f"the header line of {shown} has whitespace between the name and the colon; "
            "RFC 9112 5.1 has servers refuse it (a proxy may read it differently): write "
            "'Name: value'"
        )
    if line[:1] in (" ", "\t"):
        return (
            "the first header line starts with whitespace (a continuation of nothing); "
            "each header line is 'Name: value' (RFC 9112 5)"
        )
    return (
        "a header line is not 'Name: value' (RFC 9112 5): the name must be a token "
        "(letters, digits and !#$%&'*+-.^_`|~) followed directly by ':', and a line must "
        "end in CRLF (a bare CR is not allowed, RFC 9112 2.2); the lines after it were "
        "not understood, so where the request ends is unknown"
    )


#: Transfer codings registered for HTTP (RFC 9110 18.3 / RFC 9112 7): the fake decodes
#: chunked only.
_KNOWN_CODINGS = ("compress", "deflate", "gzip", "x-compress", "x-gzip", "trailers")


def _transfer_coding_problem(
    version: str, codings: list[str], has_length: bool
) -> tuple[int, str] | None:
    """Why the Transfer-Encoding of a request makes it invalid (RFC 9112 6.1, 6.3, 7)."""
    if version in ("HTTP/0.9", "HTTP/1.0"):
        return 400, (
            f"this {version} request has a Transfer-Encoding header, which HTTP/1.0 does "
            "not have (RFC 9112 6.1: its framing is faulty): send HTTP/1.1, or a "
            "Content-Length"
        )
    names = [c.split(";", 1)[0].strip(HTTP_WHITESPACE).lower() for c in codings]
    names = [n for n in names if n]
    if not names:
        return 400, "the Transfer-Encoding header is empty; send 'Transfer-Encoding: chunked'"
    if has_length:
        return 400, (
            "this request has both Transfer-Encoding and Content-Length; send one of them "
            "(RFC 9112 6.1: the two disagree on where the body ends)"
        )
    if names[-1] != "chunked":
        return 400, (
            f"the Transfer-Encoding header lists {', '.join(map(repr, names))}: chunked must "
            "be the last coding, else the body's length cannot be known (RFC 9112 6.3)"
        )
    if names.count("chunked") > 1:
        return 400, (
            f"the Transfer-Encoding header lists chunked {names.count('chunked')} times; "
            "a body is chunked once (RFC 9112 7)"
        )
    others = [n for n in names if n != "chunked"]
    if others:
        known = [n for n in others if n in _KNOWN_CODINGS]
        what = (
            f"the transfer coding {known[0]!r}"
            if known
            else ("an unknown transfer coding" if len(others) == 1 else "unknown transfer codings")
        )
        return 501, (
            f"this fake does not implement {what} (RFC 9112 6.1: 501); send the body with "
            "'Transfer-Encoding: chunked' alone, or with a Content-Length (a compressed body "
            "goes with Content-Encoding, not Transfer-Encoding)"
        )
    if ";" in codings[-1]:
        return 400, "the chunked transfer coding takes no parameters (RFC 9112 7)"
    return None


def framing_problem(
    version: str, headers: Sequence[tuple[str, str]], *, unparsed: str | None = None
) -> tuple[int, str] | None:
    """The status and why the request's header section makes its framing invalid (RFC
    9112), or None: a header line that is not ``name: value`` (``unparsed``: the first
    such line), a NUL in a value, a missing or repeated Host, a repeated or malformed
    Content-Length, a Transfer-Encoding that is not chunked alone (501 for a coding the
    fake does not implement). The server answers such a request and closes the
    connection.

    Two ``Content-Length`` headers are refused even when their values are equal: RFC
    9110 8.6 lets a recipient collapse identical ones, but a client that sends two has a
    bug that a proxy in front of the real service may refuse; the fake points it out.
    """
    if unparsed is not None:
        return 400, _unparsed_problem(unparsed)
    # One pass over the headers (every request's): what the checks below read.
    hosts: list[str] = []
    lengths: list[str] = []
    codings: list[str] | None = None  # None: no Transfer-Encoding header
    bad: tuple[str, str] | None = None  # the first header with a NUL or a CR
    for name, value in headers:
        lowered = name.lower()
        if lowered == "host":
            hosts.append(value)
        elif lowered == "content-length":
            lengths.append(value)
        elif lowered == "transfer-encoding":
            codings = [*(codings or ()), *value.split(",")]
        if bad is None and ("\x00" in value or "\r" in value):
            bad = (name, value)
    if not hosts and version not in ("HTTP/0.9", "HTTP/1.0"):
        return 400, (
            f"this {version} request has no Host header; HTTP/1.1 requires one (RFC 9112 "
            "3.2): send 'Host: <host>:<port>' (HTTP libraries do; a hand-written request "
            "may not)"
        )
    if len(hosts) > 1:
        return 400, f"this request has {len(hosts)} Host headers; send exactly one (RFC 9112 3.2)"
    if len(lengths) > 1:
        same = "equal" if len({v.strip(HTTP_WHITESPACE) for v in lengths}) == 1 else "different"
        return 400, (
            f"this request has {len(lengths)} Content-Length headers ({same} values); send "
            "exactly one: the body's length is ambiguous (RFC 9112 6.3), the fake refuses "
            "duplicates even when they are equal"
        )
    if lengths and not _ASCII_DIGITS.fullmatch(lengths[0].strip(HTTP_WHITESPACE)):
        return 400, (
            "the Content-Length header is not a number of bytes (digits only, RFC 9110 8.6): "
            f"{_not_digits(lengths[0])}"
        )
    if bad is not None:
        name, value = bad
        what = "a NUL byte" if "\x00" in value else "a bare CR"
        return 400, (
            f"{_named(name)} contains {what}; RFC 9110 5.5 has recipients refuse field "
            "values with NUL, CR or LF: remove it"
        )
    if codings is not None:
        return _transfer_coding_problem(version, codings, bool(lengths))
    return None


def chunked(headers: Sequence[tuple[str, str]]) -> bool:
    """Whether the request's body is chunked (its framing already checked)."""
    # A list, not any() of a generator (a call per header): it is on every request.
    return "transfer-encoding" in [name.lower() for name, _ in headers]


#: str.isdigit() also takes '²' and other Unicode digits, which int() then refuses.
_ASCII_DIGITS = re.compile(r"[0-9]+")


def _not_digits(value: str) -> str:
    """What is wrong with a Content-Length value, without repeating it (any header may
    carry a secret)."""
    value = value.strip(HTTP_WHITESPACE)
    if not value:
        return "it is empty"
    if "," in value:
        return "it holds several values separated by commas"
    if value[0] in "+-":
        return f"it has a sign ({value[0]!r})"
    return f"{len(value)} character(s), not all digits"


# -- bodies and error answers -----------------------------------------------------

#: Largest request body the fake reads; larger ones get 413 (a form of the service's
#: is a few hundred bytes).
MAX_BODY_BYTES = 64 * 1024
#: Largest control request body read, in bytes.
MAX_CONTROL_BODY = MAX_BODY_BYTES
#: Deepest nesting of arrays and objects a control request body may have.
MAX_CONTROL_DEPTH = 32


class BadInput(Exception):
    """The request is malformed; ``status`` is the 4xx to answer, ``str()`` says why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class BodyTooLarge(BadInput):
    """The request body is over the limit; ``str()`` says by how much (answer 413)."""

    def __init__(self, reason: str) -> None:
        super().__init__(413, reason)


def read_limited_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, or :class:`BodyTooLarge` if it is over ``limit`` bytes (by its
    Content-Length, or as read: a chunked body has none)."""
    length = request.content_length
    if length is not None and length > limit:
        raise BodyTooLarge(f"the body is {length} bytes; the fake reads at most {limit}")
    body = request.get_data(cache=True)
    if len(body) > limit:
        raise BodyTooLarge(f"the body is over {limit} bytes")
    return body


#: The fake's own header on every error answer it makes itself: the diagnosis (why, and
#: the fix), masked like the body. Named for the project, as no header of the service is.
DIAGNOSIS_HEADER = "X-Mgmtauth-Diagnosis"
#: The longest diagnosis the header carries (clients refuse header lines of 8 KiB); a
#: longer one is cut, and is whole in the timeline and the body where the body has it.
MAX_DIAGNOSIS = 2000
_CUT = " [...cut: the whole diagnosis is in the timeline]"
#: What a header value may hold as it is: visible ASCII and spaces (RFC 9110 5.5).
_NOT_VISIBLE = re.compile(r"[^\x20-\x7e]")


def diagnosis_value(text: str) -> str:
    """``text`` as a header value: each character a header may not hold escaped
    (``\\n``, ``\\xNN``, ``\\uNNNN``), cut at :data:`MAX_DIAGNOSIS`. Mask it first: an
    escaped or cut secret is no longer found."""
    value = _NOT_VISIBLE.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)
    if len(value) > MAX_DIAGNOSIS:
        value = value[: MAX_DIAGNOSIS - len(_CUT)] + _CUT
    return value


def with_diagnosis(response: Response, diagnosis: str) -> Response:
    """``response`` with the :data:`DIAGNOSIS_HEADER` of ``diagnosis``, kept whole on the
    response too, so that :func:`masked_error` masks it before it is cut."""
    response.headers[DIAGNOSIS_HEADER] = diagnosis_value(diagnosis)
    setattr(response, _RAW_DIAGNOSIS, diagnosis)
    return response


_RAW_DIAGNOSIS = "_mgmtauth_diagnosis"


def error_body(return_code: int, message: str, **extra: Any) -> dict[str, Any]:
    """The body of every error answer: ``returnCode``, ``message`` and any extras. A
    ``returnCode`` that is an HTTP status whose code the service's pages show is that
    code (``records.STATUS_CODES``: 400 is 1400)."""
    return {"returnCode": status_code(return_code), "message": message, **extra}


def json_response(status: int, body: Any, headers: Sequence[tuple[str, str]] = ()) -> Response:
    response = Response(json.dumps(body), status=status, content_type="application/json")
    for name, value in headers:
        response.headers.add(name, value)
    return response


def error_response(status: int, return_code: int, message: str, **extra: Any) -> Response:
    """Every error the fake answers has ``returnCode`` and ``message``; for answers the
    interface document does not show, ``returnCode`` is the HTTP status."""
    response = json_response(status, error_body(return_code, message, **extra))
    return with_diagnosis(response, message)


def refusal_response(refusal: Refusal) -> Response:
    """The answer to a refusal of the service: its status, return code and message, and
    ``retryAfter`` with a ``Retry-After`` header when it has one; or the body and
    headers a flow's own error shape gave it (OAuth's RFC 6749/6750 errors)."""
    if refusal.body is not None:
        body = dict(refusal.body)
    else:
        retry = {} if refusal.retry_after is None else {"retryAfter": refusal.retry_after}
        body = error_body(refusal.return_code, refusal.message, **retry)
    response = json_response(refusal.status, body, refusal.headers)
    if refusal.retry_after is not None:
        response.headers["Retry-After"] = str(refusal.retry_after)
    return with_diagnosis(response, refusal.reason)


def masked_error(response: Response, redact: Callable[[str], str]) -> Response:
    """An error answer of the fake (status >= 400, a JSON body) with every secret the
    service knows masked in its strings: messages quote what the client sent (a
    username, a path, a header), and a client that put a secret there must not get it
    echoed. Other answers (a route handler's, a grant's token) pass unchanged."""
    raw = getattr(response, _RAW_DIAGNOSIS, None)
    if isinstance(raw, str):
        response.headers[DIAGNOSIS_HEADER] = diagnosis_value(redact(raw))
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


def with_headers(response: Response, headers: tuple[tuple[str, str], ...]) -> Response:
    """``response`` with ``headers`` set (End of Support's ``Sunset``...): a copy, as a
    route's handler hands the same answer object to every call."""
    if not headers:
        return response
    copy = Response(
        response.response,
        status=response.status,
        headers=response.headers.copy(),
        direct_passthrough=response.direct_passthrough,
    )
    for name, value in headers:
        copy.headers[name] = value
    raw = getattr(response, _RAW_DIAGNOSIS, None)
    if isinstance(raw, str):
        setattr(copy, _RAW_DIAGNOSIS, raw)
    return copy
