"""The credentials a protected call presents: the bearer token of a v2/v3 call
(``Authorization: Bearer <token>``) and the JSESSIONID cookie and utk of a v1 call, each
with why it is missing or malformed, in terms of what the client did.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .._service.flows.base import Presented
from .errors import HTTP_WHITESPACE, odd_char
from .parsing import FORM_TYPE, BadInput

if TYPE_CHECKING:
    from collections.abc import Callable

    from werkzeug import Request


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
    odd = odd_char(value)
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
    utks = request.args.getlist("utk")
    if len(utks) > 1:
        # Werkzeug's args.get() takes the first: which one the real service reads is not
        # published, so neither is guessed.
        raise BadInput(
            400,
            f"the query parameter 'utk' appears {len(utks)} times; send it once "
            "(?utk=<the utk of /v1/login's answer>)",
        )
    utk = utks[0] if utks else None
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


def _bearer(request: Request) -> Presented:
    token, problem = bearer_token(request)
    missing = not request.headers.getlist("Authorization")
    return Presented(token=token, problem=problem, missing=missing)


def _session(request: Request) -> Presented:
    session_id, utk, problem = session_credentials(request)
    return Presented(session_id=session_id, utk=utk, problem=problem)


#: How a protected call presents its credential, by a flow's ``presents``.
READERS: dict[str, Callable[[Request], Presented]] = {"bearer": _bearer, "session": _session}
