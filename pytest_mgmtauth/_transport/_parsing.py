"""Reading what a client sent, strictly, so that its mistakes get named.

Werkzeug's ``request.form`` silently yields an empty form for a missing or wrong
Content-Type and for a body with one non-UTF-8 byte; a fake that trusted it would
answer "missing field" to a client that sent every field. So we read the raw body.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote_plus

from .._domain._diagnosis import ClientKind, form_idiom
from ._errors import BodyTooLarge, read_limited_body

if TYPE_CHECKING:
    from collections.abc import Sequence

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


class BadInput(Exception):
    """The request is malformed; ``status`` is the 4xx to answer, ``str()`` says why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


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


def read_form(request: Request, endpoint: str, fields: tuple[str, ...]) -> dict[str, str]:
    """The named fields of a URL-encoded form body; :class:`BadInput` if anything is off."""
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
        hint = ""
        if endpoint == "/v2/auth" and "password" in names:
            hint = " (/v2/auth takes the API key as 'key'; passwords go to /v1/login)"
        elif endpoint == "/v1/login" and "key" in names:
            hint = " (/v1/login takes 'password'; API keys go to /v2/auth as 'key')"
        raise BadInput(
            400,
            f"{endpoint}: missing form field {', '.join(repr(m) for m in missing)}; "
            f"fields received: {got}{hint}",
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
    try:
        return read_limited_body(request)
    except BodyTooLarge as exc:
        raise BadInput(413, str(exc)) from None


#: What may surround a header value (RFC 9110 5.5: optional whitespace is SP and HTAB).
#: str.strip() also strips NBSP, VT, FF, NEL (U+0085) and U+001C..U+001F.
HTTP_WHITESPACE = " \t"

#: Characters without a Unicode name that a client lets into a header value by mistake.
_CHAR_NAMES = {
    "\x00": "a NUL byte",
    "\x0b": "a vertical tab",
    "\x0c": "a form feed",
    "\x1c": "a file separator",
    "\x1d": "a group separator",
    "\x1e": "a record separator",
    "\x1f": "a unit separator",
    "\x7f": "a DEL character",
    "\x85": "a next-line character (NEL)",
}


def _odd_char(value: str) -> tuple[int, str] | None:
    """The first character of a header value that is neither visible ASCII nor SP or
    HTAB (str.strip() and str.split() treat NBSP, VT, FF, NEL and U+001C..U+001F as
    whitespace; HTTP does not), and its description."""
    for index, char in enumerate(value):
        if char in HTTP_WHITESPACE or (char.isascii() and char.isprintable()):
            continue
        return index, _describe_char(value, index)
    return None


def _describe_char(value: str, index: int) -> str:
    char, how = value[index], ""
    if "\xc2" <= char <= "\xf4":
        # Header values arrive as latin-1: a UTF-8 sequence shows as 2 to 4 characters.
        raw = value[index : index + 4].encode("latin-1", "replace")
        for size in (2, 3, 4):
            try:
                decoded = raw[:size].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(decoded) == 1:
                char, how = decoded, ", sent as UTF-8"
            break
    name = _CHAR_NAMES.get(char)
    if name is None:
        unicode_name = unicodedata.name(char, "").lower()
        if not unicode_name:
            name = "the character"
        else:
            name = f"{'an' if unicode_name[0] in 'aeiou' else 'a'} {unicode_name}"
    return f"{name} (U+{ord(char):04X}{how})"


def framing_problem(version: str, headers: Sequence[tuple[str, str]]) -> str | None:
    """Why the request's Host or Content-Length headers make it invalid (RFC 9112), or
    None. The server answers such a request 400 and closes the connection.

    Two ``Content-Length`` headers are refused even when their values are equal: RFC
    9110 8.6 lets a recipient collapse identical ones, but a client that sends two has a
    bug that a proxy in front of the real service may refuse; the fake points it out.
    """
    hosts = [value for name, value in headers if name.lower() == "host"]
    if not hosts and version not in ("HTTP/0.9", "HTTP/1.0"):
        return (
            f"this {version} request has no Host header; HTTP/1.1 requires one (RFC 9112 "
            "3.2): send 'Host: <host>:<port>' (HTTP libraries do; a hand-written request "
            "may not)"
        )
    if len(hosts) > 1:
        return f"this request has {len(hosts)} Host headers; send exactly one (RFC 9112 3.2)"
    lengths = [value for name, value in headers if name.lower() == "content-length"]
    if len(lengths) > 1:
        same = "equal" if len({v.strip(HTTP_WHITESPACE) for v in lengths}) == 1 else "different"
        return (
            f"this request has {len(lengths)} Content-Length headers ({same} values); send "
            "exactly one: the body's length is ambiguous (RFC 9112 6.3), the fake refuses "
            "duplicates even when they are equal"
        )
    if lengths and not _ASCII_DIGITS.fullmatch(lengths[0].strip(HTTP_WHITESPACE)):
        return (
            "the Content-Length header is not a number of bytes (digits only, RFC 9110 8.6): "
            f"{_not_digits(lengths[0])}"
        )
    return None


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


def bearer_token(request: Request) -> tuple[str | None, str | None]:
    """``(token, None)``, or ``(token or None, why not)`` for a missing or malformed
    header; with a problem, the token is the JWT found in the header anyway (it lets
    the service attribute the refusal to an account)."""
    values = request.headers.getlist("Authorization")
    if not values:
        hint = ""
        if "JSESSIONID" in request.cookies:
            hint = (
                " (this request carries a JSESSIONID cookie: v1 sessions work on /v1/ routes only)"
            )
        return None, (
            "no Authorization header: send 'Authorization: Bearer <token>' with the token "
            f"from /v2/auth{hint}"
        )
    # The WSGI server joins repeated headers into one with ", " (a JWT has no comma).
    values = [part for joined in values for part in joined.split(",")]
    if len(values) > 1:
        return None, (
            f"{len(values)} Authorization values (repeated headers, or commas in one); "
            "send exactly one 'Authorization: Bearer <token>'"
        )
    value = values[0].strip(HTTP_WHITESPACE)
    odd = _odd_char(value)
    if odd is not None:
        index, char = odd
        # The token found anyway, without the odd characters, attributes the refusal.
        dropped = "".join(c for c in value if c.isascii() and (c.isprintable() or c == "\t"))
        words = [re.sub(r"(?i)^bearer", "", word) for word in dropped.split()]
        found = next((w for w in words if w.count(".") == 2), None)
        where = _where(value, index)
        rule = (
            "a JWT holds only letters, digits, '-', '_' and '.'"
            if where.startswith("inside")
            else "HTTP allows only spaces and tabs there"
        )
        return found, (
            f"the Authorization header contains {char} {where}; {rule}: send "
            "'Authorization: Bearer <token>' with the token exactly as /v2/auth returned it"
        )
    scheme, _, rest = value.partition(" ")
    rest = rest.strip(HTTP_WHITESPACE)
    if not rest:
        if value.count(".") == 2:
            return value, (
                "the Authorization header holds the token without the 'Bearer' scheme: "
                "send 'Authorization: Bearer <token>'"
            )
        if scheme.lower() == "bearer":
            return None, "the Authorization header says 'Bearer' but no token follows it"
        return None, "the Authorization header is not 'Bearer <token>'"
    if scheme.lower() != "bearer":
        # The scheme is named, never a secret; the value after it is.
        shown = scheme if len(scheme) <= 20 and scheme.isascii() else f"{scheme[:8]}..."
        return (rest if rest.count(".") == 2 else None), (
            f"the Authorization scheme is {shown!r}, not 'Bearer': v2 calls take "
            "'Authorization: Bearer <token>'"
        )
    if " " in rest or "\t" in rest:
        return (
            None,
            "the bearer token contains a space or a tab; send the token exactly as /v2/auth "
            "returned it",
        )
    return rest, None


def _where(value: str, index: int) -> str:
    """Where in 'Bearer <token>' the character at ``index`` is."""

    def visible(text: str) -> str:
        return "".join(c for c in text if c.isascii() and c.isprintable() and c != " ")

    before = visible(value[:index])
    if not before:
        return "at its start, before the scheme"
    if not visible(value[index + 1 :]):
        return "at its end, after the token"
    if before.lower() == "bearer":
        return "between 'Bearer' and the token"
    return f"inside the value (character {index + 1})"


def session_credentials(request: Request) -> tuple[str | None, str | None, str | None]:
    """``(JSESSIONID, utk, problem)`` of a v1 call."""
    session_id = request.cookies.get("JSESSIONID")
    utk = request.args.get("utk")
    if session_id:
        if not utk:
            misplaced = _misplaced_utk(request)
            if misplaced:
                return (
                    session_id,
                    None,
                    (
                        f"utk arrived {misplaced}, not in the query string: v1 calls take it as "
                        "the query parameter ?utk=<the utk of /v1/login's answer>"
                    ),
                )
        return session_id, utk, None
    if request.headers.get("Authorization", "").lower().startswith("bearer "):
        return (
            None,
            utk,
            (
                "this is a v1 route: it takes the JSESSIONID cookie and utk of /v1/login, "
                "not a bearer token"
            ),
        )
    return None, utk, missing_session_cookie(request)


def missing_session_cookie(request: Request) -> str:
    """Why a client's cookie jar did not send JSESSIONID back, for this very request."""
    causes = []
    if not request.path.startswith("/urest_service/"):
        causes.append(f"its Path=/urest_service does not cover {request.path}")
    if request.scheme != "https":
        causes.append("it is Secure and this request came over http://")
    why = (
        f"a cookie jar does not send it back here: {' and '.join(causes)}"
        if causes
        else "this client does not keep cookies between calls"
    )
    others = sorted(name for name in request.cookies if name != "JSESSIONID")
    sent = f" (cookies sent: {', '.join(others)})" if others else ""
    return (
        f"no JSESSIONID cookie was sent{sent}. /v1/login sets it with Path=/urest_service; "
        f"Secure; HttpOnly, so {why}. Take JSESSIONID from /v1/login's Set-Cookie header "
        "and send 'Cookie: JSESSIONID=<id>' yourself, with utk as a query parameter"
    )


def _misplaced_utk(request: Request) -> str | None:
    """Where a utk that is not in the query string arrived instead, if anywhere."""
    for name in request.headers.keys():  # noqa: SIM118 (werkzeug Headers)
        if "utk" in name.lower():
            return f"in the header {name!r}"
    if request.mimetype == FORM_TYPE and b"utk=" in request.get_data(cache=True):
        return "in the form body"
    return None
