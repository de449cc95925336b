"""Name resolution of the service's hosts in the process that runs the tests.

Clients that ignore the proxy variables (aiohttp with its default ``trust_env=False``, a
client with a connection pool of its own, ``http.client``) look the service's hosts up
themselves. While a test uses the fake, Python's own lookups answer for those hosts:

* under interception (:func:`resolve_to_fake`), ``socket.getaddrinfo``,
  ``gethostbyname`` and ``gethostbyname_ex`` answer each service host with
  :data:`ADDRESS`, a loopback address nothing listens on, and ``socket.socket.connect``
  and ``connect_ex`` send a connection to its port 443 to the fake's TLS listener for
  the service's hosts (port 80: the proxy, which serves plain HTTP for them). Every
  client on Python's sockets goes through these: http.client and urllib, urllib3 and
  requests, httpx (anyio keeps only the address of a lookup and connects to the URL's
  port), asyncio (its ``getaddrinfo`` runs ``socket.getaddrinfo`` in a thread), aiohttp.
* without it (:func:`refuse_lookups`), a lookup of a service host raises
  :class:`HostNotIntercepted` (a ``socket.gaierror``) that says how to intercept, and
  nothing is sent.

``gethostbyaddr`` (and so ``getfqdn``) answer or refuse the service's hosts the same way.
``connect`` and ``connect_ex`` also take a service host's name itself, which CPython
resolves inside C without ``getaddrinfo`` (``sock.connect((host, 443))``, and
``ssl``'s ``wrap_socket(...).connect(...)``, which calls it): sent to the fake, or
refused. A name is compared as C looks it up: a ``str`` after Python's IDNA codec, which
maps full-width letters, ``。`` dots, soft hyphens and zero-width spaces onto ASCII.

The functions are replaced while a test needs them and put back after. A replacement put
over ours meanwhile (a test's ``monkeypatch``) is left alone; ours, put back later by
its undo, then passes every call through.
"""

from __future__ import annotations

import _socket
import contextlib
import dataclasses
import errno
import socket
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

#: What the service's hosts resolve to under interception: a loopback address that no
#: server listens on (a connection to it is sent to the fake, see :func:`_redirect`).
ADDRESS = "127.0.43.1"
#: The same for an IPv6 socket (IPv4-mapped).
_MAPPED = f"::ffff:{ADDRESS}"


class HostNotIntercepted(socket.gaierror):
    """A lookup of one of the service's hosts while a test uses the fake without
    interception: refused, so that nothing reaches the real service."""

    def __init__(self, host: str) -> None:
        super().__init__(
            socket.EAI_NONAME,
            f"pytest-mgmtauth refused to look up {host}: it is a host of the service this "
            "test fakes, and the test does not intercept it, so nothing may go to the real "
            "service. Send the request to mgmt_server.url, or intercept the service's "
            "hosts: @pytest.mark.mgmtauth(intercept=True), --mgmtauth-intercept or the ini "
            "setting mgmtauth_intercept = true",
        )


@dataclasses.dataclass(frozen=True, eq=False)
class _Plan:
    """What one test's lookups of the service's ``hosts`` get: per port of
    :data:`ADDRESS`, the ``(host, port)`` a connection goes to; none: refused."""

    hosts: frozenset[str]
    ports: Mapping[int, tuple[str, int]]


def resolve_to_fake(
    hosts: Iterable[str], *, https: tuple[str, int], http: tuple[str, int]
) -> Callable[[], None]:
    """Resolve ``hosts`` to the fake in this process: a connection to port 443 goes to
    ``https`` (the listener whose TLS serves the hosts' names), to port 80 to ``http``;
    returns what puts everything back."""
    return _activate(_Plan(_names(hosts), {443: https, 80: http}))


def refuse_lookups(hosts: Iterable[str]) -> Callable[[], None]:
    """Refuse lookups of ``hosts`` in this process (:class:`HostNotIntercepted`);
    returns what puts everything back."""
    return _activate(_Plan(_names(hosts), {}))


def _names(hosts: Iterable[str]) -> frozenset[str]:
    return frozenset(host.lower() for host in hosts)


# -- the replacements --------------------------------------------------------------

#: The plans of the tests using the fake now, newest last (the newest one answers).
_plans: list[_Plan] = []
_lock = threading.Lock()
#: What each replacement calls through to: what was there when it was put in place.
_through: dict[str, Any] = {
    "getaddrinfo": socket.getaddrinfo,
    "gethostbyname": socket.gethostbyname,
    "gethostbyname_ex": socket.gethostbyname_ex,
    "gethostbyaddr": socket.gethostbyaddr,
    "connect": _socket.socket.connect,
    "connect_ex": _socket.socket.connect_ex,
}
#: The C functions, called instead when a call comes back through a replacement put over
#: ours that calls ours (no loop).
_BUILTIN = dict(_through)
_inside = threading.local()
#: Set while a thread is :func:`outside`.
_outside = threading.local()
_MISSING = object()
#: Per replaced name: what its owner's namespace held before (or _MISSING).
_before: dict[str, object] = {}


def _looked_up(host: object) -> str | None:
    """The name C looks ``host`` up by, in lower case without a trailing dot: a
    non-ASCII ``str`` through the IDNA codec (as ``getaddrinfo``, ``gethostbyname`` and
    ``connect`` encode it), ``bytes`` as they are; None for anything else, or a name the
    codec refuses (C refuses it too, before any lookup)."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return host.lower().removesuffix(".")


@contextlib.contextmanager
def outside() -> Iterator[None]:
    """This thread's lookups and connections go where they name while in the block, for
    the service's hosts too: a live run's forwarding to the service itself, neither sent
    back to the fake nor refused."""
    before = getattr(_outside, "on", False)
    _outside.on = True
    try:
        yield
    finally:
        _outside.on = before


def _plan_for(host: object) -> _Plan | None:
    """The plan that sends ``host`` (a name as a lookup got it) to the fake, or None:
    not a service host; :class:`HostNotIntercepted` for one without interception."""
    plans = _plans
    if not plans or getattr(_outside, "on", False):
        return None
    plan = plans[-1]
    name = _looked_up(host)
    if name is None or name not in plan.hosts:
        return None
    if not plan.ports:
        raise HostNotIntercepted(str(host))
    return plan


def _call(name: str, *args: Any) -> Any:
    """Call what the replacement of ``name`` replaced (the C function when re-entered)."""
    if getattr(_inside, name, False):
        return _BUILTIN[name](*args)
    setattr(_inside, name, True)
    try:
        return _through[name](*args)
    finally:
        setattr(_inside, name, False)


def _getaddrinfo(
    host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
) -> Any:
    if _plan_for(host) is not None:
        # The numeric address, answered without any lookup, in the shapes asked for.
        host = _MAPPED if family == socket.AF_INET6 else ADDRESS
    return _call("getaddrinfo", host, port, family, type, proto, flags)


def _lookup(name: str, answer: Callable[[str], object]) -> Callable[[str], Any]:
    """The replacement of ``socket.<name>``: for a service host ``answer(host)`` under
    interception, :class:`HostNotIntercepted` without it; other hosts looked up."""

    def lookup(host: str) -> Any:
        return _call(name, host) if _plan_for(host) is None else answer(host)

    return lookup


def _own_name(host: str) -> tuple[str, list[str], list[str]]:
    # gethostbyname_ex, and gethostbyaddr (getfqdn calls it): a service host's name is
    # its own, fully qualified.
    return _looked_up(host) or host, [], [ADDRESS]


def _redirect(sock: socket.socket, address: Any) -> Any:
    """Where a connection to ``address`` goes: to the fake when it is :data:`ADDRESS`
    or names a service host (C would look the name up without ``getaddrinfo``); a
    service host without interception: :class:`HostNotIntercepted`; another port of
    the fake's: :class:`ConnectionRefusedError`."""
    plans = _plans
    if not (plans and isinstance(address, tuple) and len(address) >= 2):
        return address
    if getattr(_outside, "on", False):
        return address
    plan = plans[-1] if address[0] in (ADDRESS, _MAPPED) else _plan_for(address[0])
    if plan is None:
        return address
    target = plan.ports.get(address[1])
    if target is None:
        raise ConnectionRefusedError(
            errno.ECONNREFUSED,
            f"pytest-mgmtauth: {address[0]} stands for the service's hosts in this test, "
            f"which the fake serves on port 443 (and plain HTTP on 80), not {address[1]}",
        )
    host, port = target
    if sock.family == socket.AF_INET6:
        return (f"::ffff:{host}", port, *address[2:])
    return host, port


def _connect(self: socket.socket, address: Any) -> None:
    _call("connect", self, _redirect(self, address))


def _connect_ex(self: socket.socket, address: Any) -> int:
    try:
        target = _redirect(self, address)
    except ConnectionRefusedError:
        # connect_ex reports a refused connection by its errno (a refused lookup is
        # still raised, as C raises socket.gaierror).
        return errno.ECONNREFUSED
    return int(_call("connect_ex", self, target))


#: (owner, name, replacement) of each function replaced.
_REPLACED: tuple[tuple[Any, str, Any], ...] = (
    (socket, "getaddrinfo", _getaddrinfo),
    (socket, "gethostbyname", _lookup("gethostbyname", lambda host: ADDRESS)),
    (socket, "gethostbyname_ex", _lookup("gethostbyname_ex", _own_name)),
    (socket, "gethostbyaddr", _lookup("gethostbyaddr", _own_name)),
    (socket.socket, "connect", _connect),
    (socket.socket, "connect_ex", _connect_ex),
)


def _install() -> None:
    for owner, name, ours in _REPLACED:
        if getattr(owner, name) is ours:
            continue  # left in place by a monkeypatch's undo: _through is still right
        _through[name] = getattr(owner, name)
        _before[name] = vars(owner).get(name, _MISSING)
        setattr(owner, name, ours)


def _uninstall() -> None:
    for owner, name, ours in _REPLACED:
        if vars(owner).get(name) is not ours:
            continue  # replaced over ours: left alone, ours passes calls through
        before = _before.get(name, _MISSING)
        if before is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, before)


def _activate(plan: _Plan) -> Callable[[], None]:
    with _lock:
        if not _plans:
            _install()
        _plans.append(plan)

    def restore() -> None:
        with _lock:
            if any(p is plan for p in _plans):
                _plans[:] = [p for p in _plans if p is not plan]
                if not _plans:
                    _uninstall()

    return restore
