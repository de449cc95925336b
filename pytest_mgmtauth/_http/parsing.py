"""Reading what a client sent, strictly, so that its mistakes get named: the body and
its URL-encoded form, and which client sent it (its idioms go into the fix hints).

Werkzeug's ``request.form`` silently yields an empty form for a missing or wrong
Content-Type and for a body with one non-UTF-8 byte; a fake that trusted it would
answer "missing field" to a client that sent every field. So we read the raw body.

Header values and the framing are checked in ``errors.py``, the credentials of a
protected call read in ``flows.py``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote_plus

from .._service.secret_text import ClientKind, form_idiom
from .arrival import FakeRequest
from .errors import BadInput, read_limited_body

if TYPE_CHECKING:
    from collections.abc import Callable

    from werkzeug import Request

FORM_TYPE = "application/x-www-form-urlencoded"

#: User-Agent prefixes (lower case) of the clients whose idioms the fix hints know.
#: aiohttp's is "Python/3.x aiohttp/3.x", so it is matched anywhere in the header.
_USER_AGENTS: tuple[tuple[str, ClientKind], ...] = (
    ("python-requests/", ClientKind.REQUESTS),
    ("python-httpx/", ClientKind.HTTPX),
    ("python-urllib/", ClientKind.URLLIB),
    ("curl/", ClientKind.CURL),
    ("go-http-client/", ClientKind.GO),
    ("java-http-client/", ClientKind.JAVA),  # java.net.http.HttpClient
    ("java/", ClientKind.JAVA),  # HttpURLConnection
    ("undici", ClientKind.NODE),
    ("node-fetch/", ClientKind.NODE),
    ("axios/", ClientKind.NODE),
)


def client_kind(request: Request) -> ClientKind:
    """Which client sent ``request``, from its User-Agent; OTHER when it does not tell."""
    agent = request.headers.get("User-Agent", "").strip().lower()
    if " aiohttp/" in f" {agent}":
        return ClientKind.AIOHTTP
    # Node's built-in fetch (undici) sends exactly "node".
    if agent == "node" or agent.startswith("node/"):
        return ClientKind.NODE
    for prefix, kind in _USER_AGENTS:
        if agent.startswith(prefix):
            return kind
    return ClientKind.OTHER


#: What each client does instead of sending JSON or an untyped string.
_NOT_JSON = {
    ClientKind.REQUESTS: "use data={...}, not json={...}",
    ClientKind.HTTPX: "use data={...}, not json={...}",
    ClientKind.AIOHTTP: "use data={...}, not json={...}",
    ClientKind.URLLIB: "send urllib.parse.urlencode({...}).encode(), not json.dumps(...)",
    ClientKind.NODE: "send body: new URLSearchParams({...}), not JSON.stringify(...)",
    ClientKind.CURL: "use --data-urlencode 'name=value' per field, not --json or a JSON -d",
    ClientKind.GO: "send url.Values{...}.Encode() (or http.PostForm), not json.Marshal(...)",
    ClientKind.JAVA: "send name=value pairs joined by '&', each value "
    "URLEncoder.encode(value, StandardCharsets.UTF_8), not JSON",
    ClientKind.OTHER: "send name=value pairs joined by '&' with each value percent-encoded, "
    "not JSON: data={...}, not json={...} in requests/httpx; new URLSearchParams({...}), not "
    "JSON.stringify(...) in JavaScript",
}


def _content_type_problem(request: Request, endpoint: str, fields: tuple[str, ...]) -> str:
    wanted = (
        f"{endpoint} takes a URL-encoded form ({', '.join(fields)}) with Content-Type: {FORM_TYPE}"
    )
    client = client_kind(request)
    raw = request.headers.get("Content-Type")
    if raw is None:
        hint = ""
        if request.content_length:
            hint = (
                " (requests sends no Content-Type when data= is a str or bytes: pass a dict, "
                "or set the header yourself)"
                if client in (ClientKind.REQUESTS, ClientKind.OTHER)
                else f" (set the header, or {form_idiom(client)})"
            )
        return f"{wanted}; this request has no Content-Type header{hint}"
    mimetype = raw.split(";", 1)[0].strip().lower()
    if mimetype == "application/json" or mimetype.endswith("+json"):
        return f"{wanted}; this request sent JSON ({_NOT_JSON[client]})"
    if mimetype == "multipart/form-data":
        if client in (ClientKind.REQUESTS, ClientKind.HTTPX, ClientKind.AIOHTTP):
            return f"{wanted}; this request sent multipart/form-data (use data=, not files=)"
        return f"{wanted}; this request sent multipart/form-data ({form_idiom(client)})"
    if client is ClientKind.NODE and mimetype == "text/plain":
        # fetch labels a string body text/plain: the template-string mistake.
        return (
            f"{wanted}; this request sent Content-Type: {raw}, which fetch sets for a string "
            "body: send body: new URLSearchParams({...}) (fetch then sets the form type and "
            "encodes the values)"
        )
    return f"{wanted}; this request sent Content-Type: {raw} ({form_idiom(client)})"


def read_form(
    request: Request,
    endpoint: str,
    fields: tuple[str, ...],
    *,
    hint: Callable[[list[str], list[str]], str] | None = None,
) -> dict[str, str]:
    """The named fields of a URL-encoded form body; :class:`BadInput` if anything is off.
    ``hint(missing, received)`` says why fields may be missing (the flows' words)."""
    raw_type = request.headers.get("Content-Type", "")
    if raw_type.split(";", 1)[0].strip().lower() != FORM_TYPE:
        raise BadInput(415, _content_type_problem(request, endpoint, fields))
    body = read_body(request)
    if not body.strip():
        raise BadInput(
            400, f"{endpoint}: the body is empty; send the form fields {', '.join(fields)}"
        )
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError as exc:
        raise BadInput(
            400,
            f"{endpoint}: byte {exc.start} of the body is not ASCII (0x{body[exc.start]:02x}); "
            "a URL-encoded body must percent-encode every non-ASCII byte: URL-encode the values",
        ) from None
    if text.lstrip().startswith(("{", "[")):
        raise BadInput(
            400,
            f"{endpoint}: the body is JSON but the Content-Type says {FORM_TYPE}: send the "
            f"fields {', '.join(fields)} as a URL-encoded form "
            f"({_NOT_JSON[client_kind(request)]})",
        )
    try:
        pairs = parse_qsl(text, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise BadInput(400, _undecodable_escape(endpoint, text)) from None
    names = [name for name, _ in pairs]
    missing = [f for f in fields if f not in names]
    if missing:
        # Stray field names can be pieces of an un-encoded secret: show plain names only.
        shown = [n for n in dict.fromkeys(names) if _PLAIN_NAME.fullmatch(n)]
        hidden = len(set(names)) - len(shown)
        got = ", ".join(repr(n) for n in shown) or "none"
        if hidden:
            got += f" and {hidden} other(s) not shown"
        why = hint(missing, names) if hint is not None else ""
        raise BadInput(
            400,
            f"{endpoint}: missing form field {', '.join(repr(m) for m in missing)}; "
            f"fields received: {got}{why}",
        )
    values: dict[str, str] = {}
    for name, value in pairs:
        if name not in fields:
            continue
        if name in values:
            raise BadInput(
                400,
                f"{endpoint}: form field {name!r} appears {names.count(name)} times; send it once",
            )
        values[name] = value
    empty = [f for f in fields if not values[f]]
    if empty:
        raise BadInput(400, f"{endpoint}: form field {empty[0]!r} is empty")
    return values


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")


def _undecodable_escape(endpoint: str, text: str) -> str:
    """Name the field whose '%XX' escape is not UTF-8 (usually an un-encoded secret)."""
    for pair in text.split("&"):
        name, _, value = pair.partition("=")
        try:
            unquote_plus(value, errors="strict")
        except UnicodeDecodeError:
            field = repr(name) if _PLAIN_NAME.fullmatch(name) else "a field"
            return (
                f"{endpoint}: in form field {field}, a '%XX' escape decodes to bytes that are "
                "not UTF-8. A value with a raw '%' was most likely written into the body "
                "without URL-encoding (a '%' must travel as %25): URL-encode the values"
            )
    return (
        f"{endpoint}: a percent-escape in the body decodes to bytes that are not UTF-8; "
        "encode the values as UTF-8 before URL-encoding them"
    )


def read_body(request: Request) -> bytes:
    """The body of a request to the fake, within the limit (else 413), kept in its
    Arrival for the request log."""
    body = read_limited_body(request)
    if isinstance(request, FakeRequest):
        request.arrival.body = body
    return body


_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def unreachable_path(path: str) -> str | None:
    """Why no request can reach a route declared with ``path``, or None.

    A route is matched against the request's path as Werkzeug reads it: percent-escapes
    decoded as UTF-8 (invalid bytes become U+FFFD), and a request target starting with
    ``//`` read as a host and a path (``//x/y`` is the path ``/x/y``).
    """
    for index, char in enumerate(path):
        if "\ud800" <= char <= "\udfff":
            return (
                f"the path contains a lone surrogate (U+{ord(char):04X}) at character "
                f"{index + 1}, which has no UTF-8 form: no request's path decodes to it"
            )
        if unicodedata.category(char) == "Cc":
            name = {"\n": "a line feed", "\r": "a carriage return", "\t": "a tab"}.get(
                char, "a control character"
            )
            return (
                f"the path contains {name} (U+{ord(char):04X}) at character {index + 1}: no "
                "client sends one in a path (only percent-encoded, which is not what this "
                "route means); remove it (a stray newline from a file or a shell, most likely)"
            )
    if path.startswith("//"):
        return (
            "the path starts with '//': a request target starting with '//' is read as a "
            "host and a path (a request for //x/y has the path /x/y), so no request's path "
            "starts with '//'; declare it with one '/'"
        )
    if "?" in path or "#" in path:
        char = "?" if "?" in path else "#"
        return (
            f"the path contains {char!r}: a route matches the path alone, without the query "
            "string or a fragment; declare the path before it"
        )
    escape = _ESCAPE.search(path)
    if escape is not None:
        return (
            f"the path contains the percent-escape {escape.group()!r}: a route matches the "
            "decoded path (a request for /a%40b has the path /a@b); write the character itself"
        )
    return None
