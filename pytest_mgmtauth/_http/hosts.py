"""Which host of the service a request reached, the refusal of one that reached a host
its endpoint or route does not answer on, and the fake as an HTTP proxy for those hosts
(the ``intercept`` option).

A request reached a named host when it came through a tunnel of the proxy
(``CONNECT api.tealiumiq.com:443``), in absolute form (``GET http://host/...``), or with a
``Host`` header naming a host of the service; otherwise it reached an address of the
fake: the region address (the second listener, which stands for the ``v3_host`` when the
fake does not intercept) or the fake's own address, which stands for every other host.
The rules themselves are the domain's (``_service/flows/registry.py``, the flows' declarations).

The proxy: clients that hard-code ``https://api.tealiumiq.com`` reach the fake through
the usual proxy variables: a ``CONNECT`` to one of its hosts on port 443 is answered
``200`` and the tunnel ends here, in TLS for that host name from the test CA (the
handshake must name it by SNI); the requests inside are served as if they came to that
host. A plain HTTP request in absolute form (``GET http://api.tealiumiq.com/...``) is
served for its host too. Everything else is refused with a status and a body that say
why, or, where no HTTP answer fits (a TLS handshake that cannot succeed, a client that
never starts TLS), by closing the connection within :data:`HANDSHAKE_TIMEOUT`. Nothing
is ever forwarded: the fake opens no connection of its own.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .._service.flows.base import Where
from .._service.flows.registry import service_hosts
from .arrival import REGION_LISTENER
from .connections import ConnectionWriter, handshake_of
from .errors import BadInput

if TYPE_CHECKING:
    from collections.abc import Iterable

    from werkzeug import Request

    from .arrival import Arrival
    from .binding import Binding
    from .handler import ConnectionHandler


def host_name(header: str) -> str:
    """The host name of a ``Host`` value: no port, no brackets, lower case, no final dot
    (``api.tealiumiq.com.`` is the same host). The one parser: the control API's guard
    uses it too."""
    header = header.strip()
    if header.startswith("["):
        return header[1 : header.find("]")].lower() if "]" in header else header.lower()
    if header.count(":") == 1:
        header = header.rsplit(":", 1)[0]
    return header.lower().rstrip(".")


def fake_host(request: Request) -> str:
    """The fake's own ``host:port`` (where it listens), for v3's ``host`` field. A
    wildcard listening address (the standalone ``--host 0.0.0.0``) names no host a
    client can use: then the host the client reached it by (its ``Host`` header)."""
    environ = request.environ
    name = str(environ.get("SERVER_NAME") or "")
    if name in ("", "0.0.0.0", "::"):
        return request.host
    if ":" in name:
        name = f"[{name}]"  # an IPv6 address
    return f"{name}:{environ.get('SERVER_PORT', '80')}"


def where(binding: Binding, request: Request, arrival: Arrival) -> Where:
    """Where ``request`` arrived (see the module's text): worked out once per request,
    when the test it belongs to is known (its options name the hosts)."""
    tunnel = arrival.tunnel_host
    if tunnel is not None:
        return Where(tunnel, tunnel)
    # The transport's reading first, then the domain's look-ups together.
    name, own = host_name(request.host), fake_host(request)
    if name in service_hosts(binding.service.options):
        return Where(name, name)
    if arrival.listener == REGION_LISTENER:
        return Where(binding.hosts.region_host, region_address(binding, request))
    return Where(None, own)


def _with_port(request: Request, port: int) -> str:
    """The fake's address as this request's client reached it (the same host), with
    ``port``."""
    own = fake_host(request)
    host = own[: own.rfind(":")] if own.rfind(":") > own.rfind("]") else own
    return f"{host}:{port}"


def region_address(binding: Binding, request: Request) -> str:
    """The region address (``host:port`` of the second listener) as this request's
    client can reach it."""
    return _with_port(request, binding.region_port())


def region_host(binding: Binding, request: Request) -> str:
    """The ``host`` of a v3 auth answer: the region host under interception, else the
    region address."""
    if binding.hosts.intercept:
        return binding.hosts.region_host
    return region_address(binding, request)


def shown(binding: Binding, request: Request, arrival: Arrival, hosts: tuple[str, ...]) -> str:
    """``hosts`` as this request's client can reach them: the names under interception,
    else the addresses of the fake that stand for them (its own address for every host
    but the region host)."""
    if binding.hosts.intercept:
        return " or ".join(hosts)
    region = binding.hosts.region_host
    own = fake_host(request)
    if arrival.listener == REGION_LISTENER and binding.main_port:
        own = _with_port(request, binding.main_port)
    addresses = [region_address(binding, request) if h == region else own for h in hosts]
    return " or ".join(dict.fromkeys(addresses))


def foreign_target(binding: Binding, target: str | None) -> str | None:
    """Why an absolute-form request ``target`` naming a host the fake does not stand in
    for is refused (it is never forwarded), or None."""
    if target is None or target.startswith("/") or "://" not in target:
        return None
    hosts = service_hosts(binding.service.options)
    host = (urlsplit(target).hostname or "").lower()
    return None if host in hosts else foreign_host(host or target, hosts)


# -- the proxy of the intercept option --------------------------------------------

#: The only port a tunnel may be opened to: the service is HTTPS on 443.
TUNNEL_PORT = 443

#: Seconds a tunnel waits, from the ``200`` on, for the first byte of the client's TLS
#: handshake: a client that never starts TLS has its connection closed after this.
HANDSHAKE_TIMEOUT = 3.0

#: Seconds the TLS handshake of a tunnel may take once its first byte came: generous, as
#: on a loaded machine (a hundred tunnels at once) one can take seconds.
HANDSHAKE_LIMIT = 30.0

#: What the answers and texts call the proxy.
_WHO = "the fake's proxy (intercept option)"


def tunnel_host(target: str, hosts: tuple[str, ...]) -> str:
    """The host (lower case) of a ``CONNECT`` target (``host:port``, RFC 9110 9.3.6);
    :class:`BadInput` saying what is wrong with it: 400 when malformed, 403 unless
    it is one of the service's ``hosts`` on :data:`TUNNEL_PORT`."""
    host, sep, port = target.rpartition(":")
    if not sep or not host or "/" in target or "@" in target:
        raise BadInput(
            400,
            f"CONNECT {target!r} is malformed: a CONNECT names host:port, like "
            "CONNECT api.tealiumiq.com:443",
        )
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise BadInput(400, f"CONNECT {target!r} is malformed: {port!r} is no port (1 to 65535)")
    host, number = host.lower(), int(port)
    if host not in hosts:
        raise BadInput(403, foreign_host(host, hosts))
    if number != TUNNEL_PORT:
        raise BadInput(
            403,
            f"{_WHO} opens tunnels to port {TUNNEL_PORT} of the service's hosts only, not "
            f"{host}:{number}: the service is HTTPS on {TUNNEL_PORT}",
        )
    return host


def foreign_host(host: str, hosts: Iterable[str]) -> str:
    """Why a request for ``host`` is refused: the fake stands in for ``hosts`` only."""
    return (
        f"{_WHO} stands in for {', '.join(hosts)} only, not {host}; it forwards nothing. "
        "Reach other hosts directly: name them in NO_PROXY (mgmt_server.env has it)"
    )


def serve_connect(handler: ConnectionHandler) -> None:
    """Answer a ``CONNECT``: refuse it, or open the TLS tunnel and serve the requests
    that come through it until the connection closes."""
    handler.close_connection = True
    binding, target, contexts = handler.binding, handler.path, handler.server.tunnel_context
    try:
        if contexts is None:
            raise BadInput(
                405,
                "this address of the fake is no proxy: CONNECT goes to the proxy of the "
                "intercept option (HTTPS_PROXY in mgmt_server.env), or call mgmt_server.url "
                "directly",
            )
        if handler.tunnel_host is not None:
            raise BadInput(400, f"a CONNECT inside the tunnel to {handler.tunnel_host}")
        if binding is None or binding.closed.is_set():
            raise BadInput(
                503,
                "no test is using the fake service right now: the CONNECT arrived outside "
                "the test that owns the mgmt_server fixture",
            )
        host = tunnel_host(target, service_hosts(binding.service.options))
    except BadInput as refusal:
        if binding is not None and not binding.closed.is_set():
            binding.service.timeline.record_bad_request(
                "CONNECT", target, refusal.status, refusal.reason
            )
            binding.log_refused("CONNECT", target, tuple(handler.headers.items()), refusal.status)
        handler.send_json_error(refusal.status, refusal.reason)
        return
    handler.send_response(200, "Connection Established")  # the tunnel is open
    handler.end_headers()
    handler.wfile.flush()
    tunnel = _handshake(handler, contexts(host), host, binding)
    if tunnel is None:
        return
    writer = ConnectionWriter(tunnel)
    try:
        handler.connection = tunnel
        handler.rfile = tunnel.makefile("rb", -1)
        handler.wfile = writer
        handler.tunnel_host = host
        handler.close_connection = False
        while not handler.close_connection:
            handler.handle_one_request()
    finally:
        handler.close_connection = True
        with contextlib.suppress(OSError, ValueError):
            writer.release()  # an answer still deferred (ConnectionWriter.defer)
        tunnel.close()


def _handshake(
    handler: ConnectionHandler, context: ssl.SSLContext, host: str, binding: Binding
) -> ssl.SSLSocket | None:
    """The server side of the tunnel's TLS, or None (the connection closed, the reason in
    the timeline) when the handshake fails or does not come in time."""
    raw: socket.socket = handler.connection
    tunnel = context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
    started = False
    try:
        # The first byte within HANDSHAKE_TIMEOUT (peeked below TLS, left for it), then
        # the handshake within its own, generous bound.
        tunnel.settimeout(HANDSHAKE_TIMEOUT)
        started = bool(socket.socket.recv(tunnel, 1, socket.MSG_PEEK))
        tunnel.settimeout(HANDSHAKE_LIMIT)
        tunnel.do_handshake()
    except (OSError, ValueError) as exc:
        if isinstance(exc, socket.timeout):
            reason = (
                f"the TLS handshake with {host} did not finish within {HANDSHAKE_LIMIT:g} s "
                "of its first byte"
                if started
                else f"the client sent no TLS handshake within {HANDSHAKE_TIMEOUT:g} s of "
                "the 200 answer; the tunnel speaks TLS only"
            )
        elif not started:
            reason = "the client closed the tunnel before its TLS handshake"
        elif isinstance(exc, ssl.SSLError) and exc.reason == "HTTP_REQUEST":
            reason = (
                f"plain HTTP arrived in the tunnel to {host}, which speaks TLS: a client "
                "tunnels https:// URLs only"
            )
        else:
            reason = handshake_of(tunnel).sni_problem or (
                f"the TLS handshake failed ({exc}); the tunnel speaks TLS for {host} with "
                "the test CA's certificate (trust mgmt_server.ca_bundle)"
            )
        if not binding.closed.is_set():
            binding.service.timeline.record_tunnel_closed(f"{host}:{TUNNEL_PORT}", reason)
        with contextlib.suppress(OSError):
            tunnel.close()
        return None
    tunnel.settimeout(handler.timeout)
    return tunnel
