"""The control API's guard against a web page in the developer's browser: which ``Host``
headers it answers (DNS rebinding) and which POSTs (JSON only, which a page cannot send
without a CORS preflight)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from .._http.errors import error_response

if TYPE_CHECKING:
    from collections.abc import Iterable

    from werkzeug import Request, Response

#: Hosts that are always loopback (RFC 6761: ``localhost`` and names under it).
_LOOPBACK_NAMES = ("localhost",)
_WILDCARDS = ("", "0.0.0.0", "::")


def _host_name(header: str) -> str:
    """The host part of a ``Host`` header (no port, no brackets), lower case."""
    header = header.strip()
    if header.startswith("["):
        return header[1 : header.find("]")].lower() if "]" in header else header.lower()
    if header.count(":") == 1:
        header = header.rsplit(":", 1)[0]
    return header.lower().rstrip(".")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def host_allowed(header: str | None, bound: str, extra: Iterable[str] = ()) -> bool:
    """Whether a control request with this ``Host`` header may be served by a server
    listening on ``bound``: a loopback name or address, the address it was started on,
    or (started on a wildcard address) any IP address, or a name in ``extra``
    (``--allow-host``). A name that only DNS says is this machine (a DNS-rebinding
    page) is refused."""
    if header is None:
        return True  # no Host header: not a browser (HTTP/1.0 tools)
    name = _host_name(header)
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    if name and (name == _host_name(bound) or name in {_host_name(h) for h in extra}):
        return True
    address = _ip(name)
    if address is None:
        return False
    return address.is_loopback or bound in _WILDCARDS


def refuse_foreign(
    request: Request, endpoint: str, host: str, allowed_hosts: Iterable[str]
) -> Response | None:
    """The answer to a request a web page may have sent, or None to serve it: a
    DNS-rebinding page (its own name in ``Host``) gets 403, and a POST that is not
    ``application/json`` (which a page can only send after a CORS preflight that this
    server never grants) 415. ``host`` is the address the server listens on,
    ``allowed_hosts`` the names ``--allow-host`` adds."""
    sent_host = request.headers.get("Host")
    if not host_allowed(sent_host, host, allowed_hosts):
        shown = sent_host if len(sent_host or "") <= 100 else f"{(sent_host or '')[:100]}..."
        return error_response(
            403,
            403,
            f"{endpoint}: refused the Host {shown!r}: the control API answers only "
            f"to localhost, a loopback address or the address it listens on "
            f"({host}), so that a web page cannot reach it through DNS rebinding; "
            "start mgmtauth-server with --allow-host NAME to allow another name",
        )
    if request.method == "POST" and request.mimetype != "application/json":
        sent = request.headers.get("Content-Type")
        return error_response(
            415,
            415,
            f"{endpoint}: send the body as JSON with 'Content-Type: application/json' "
            f"(got {'no Content-Type' if sent is None else repr(sent[:100])}); control "
            "POSTs take JSON only, so that a web page cannot send them. "
            "curl: -H 'Content-Type: application/json' -d '{}'",
        )
    return None
