"""What a test session shares: the HTTP(S) servers, the signing key, the test CA, and
the process environment of interception (the ``intercept`` option: the proxy and CA
variables set for a test and restored after, aiohttp's default SSL context, which is
made once, when aiohttp is imported, and the name resolution of ``resolution.py``).

Each piece is made the first time a test needs it, so a suite that installs the plugin
but never uses its fixtures starts no server and generates no key. The signing key
(``key_cache.py``) may be started earlier, in a background thread: the plugin starts it
at the end of collection when a test uses its fixtures.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING

from .._http.arrival import REGION_LISTENER
from .._http.binding import LateErrors
from .._http.server import FakeHTTPServer, TestCA
from .._service.account_book import sign_first_token_ahead
from .._service.accounts import generate_username
from .._service.tokens import TokenSigner
from .key_cache import SigningKey
from .resolution import resolve_to_fake

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from concurrent.futures import Future

    from .._service.options import Options
    from .._service.token_format import Claims


#: Servers of ended live tests kept listening (a test has up to four: its own address,
#: the region address, and under interception the proxy and the direct listener).
RETIRED_SERVERS = 32


class SessionResources:
    def __init__(
        self,
        signing_key: SigningKey | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        #: The signing key, maybe being made already (the plugin starts it at
        #: collection); without one, a new key kept in memory, made on first use.
        self.signing_key = signing_key or SigningKey()
        # Where the servers listen: any free loopback port under pytest; the standalone
        # server passes its --host/--port.
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._signer: TokenSigner | None = None
        self._ca: TestCA | None = None
        #: By role and scheme: the fake's own address ("main"), the region address
        #: that stands for the v3 region host ("region", sharing the main one's app),
        #: the proxy of the intercept option ("proxy", plain HTTP).
        self._servers: dict[tuple[str, bool], FakeHTTPServer] = {}
        #: Servers of live tests that have ended (:meth:`retire_servers`), oldest first.
        self._retired: list[FakeHTTPServer] = []
        #: Errors raised in the server for a test that had already ended.
        self.late_errors = LateErrors()
        #: The username of the next test's first generated account, reserved by
        #: sign_ahead_for_next_test; None: generated when the account is added.
        self._first_username: str | None = None

    @property
    def signer(self) -> TokenSigner:
        with self._lock:
            if self._signer is None:
                self._signer = TokenSigner(self.signing_key.key())
            return self._signer

    @property
    def ca(self) -> TestCA:
        with self._lock:
            if self._ca is None:
                self._ca = TestCA()
            return self._ca

    def server(self, *, https: bool) -> FakeHTTPServer:
        ca = self.ca if https else None
        with self._lock:
            server = self._servers.get(("main", https))
            if server is None:
                server = FakeHTTPServer(
                    host=self._host,
                    port=self._port,
                    ssl_context=ca.server_context() if ca else None,
                )
                self._servers[("main", https)] = server
        server.start()
        return server

    def region_server(self, *, https: bool) -> FakeHTTPServer:
        """The second address of the fake (any free port), which stands for the v3
        region host without interception: it answers for the same test as
        :meth:`server`, whose app it shares. Started on first use."""
        main = self.server(https=https)
        with self._lock:
            server = self._servers.get(("region", https))
            if server is None:
                server = FakeHTTPServer(
                    host=self._host,
                    port=0,
                    ssl_context=main.ssl_context,
                    app=main.app,
                    listener=REGION_LISTENER,
                )
                self._servers[("region", https)] = server
        server.start()
        return server

    def proxy_server(self) -> FakeHTTPServer:
        """The HTTP proxy of the intercept option (plain HTTP, any free port): tunnels to
        the service's hosts end in it, in TLS from the test CA. Started on first use."""
        ca = self.ca
        with self._lock:
            server = self._servers.get(("proxy", False))
            if server is None:
                server = FakeHTTPServer(host=self._host, port=0, tunnel_context=ca.host_context)
                self._servers[("proxy", False)] = server
        server.start()
        return server

    def direct_server(self) -> FakeHTTPServer:
        """Where this process's connections to the service's hosts go under interception
        (``resolution.py``): TLS whose SNI chooses the host's certificate, answering for
        the same test as the proxy, whose app it shares. Started on first use."""
        proxy = self.proxy_server()
        context = self.ca.by_name_context
        with self._lock:
            server = self._servers.get(("direct", True))
            if server is None:
                server = FakeHTTPServer(
                    host=self._host, port=0, ssl_context=context(), app=proxy.app
                )
                self._servers[("direct", True)] = server
        server.start()
        return server

    def take_first_username(self) -> str | None:
        """The username reserved for a new test's first generated account, if any: each
        is taken by one test."""
        with self._lock:
            username, self._first_username = self._first_username, None
        return username

    def sign_ahead_for_next_test(
        self, options: Options, now: float
    ) -> Future[tuple[str, Claims]] | None:
        """Reserve the username of the next test's first generated account and start
        signing its first token, as if granted at ``now`` under ``options``: a test whose
        first account was generated is most often followed by one that asks for such a
        token soon. Signed while pytest reports this test and sets up the next one, it is
        ready when that client asks, and does not compete for the CPU with the client and
        the server thread (a signature begun when the account is added runs beside them).
        A next test whose claims differ (another second, lifetime or issuer) has its own
        signed on demand, as without this. The token's future, or None (see
        ``TokenSigner.prefetch``)."""
        username = generate_username(1)
        with self._lock:
            self._first_username = username
        return sign_first_token_ahead(self.signer, options, username, now)

    def drop_idle_connections(self) -> None:
        """Close the kept-alive connections idle now on every listener (a test's end)."""
        with self._lock:
            servers = list(self._servers.values())
        for server in servers:
            server.drop_idle_connections()

    def retire_servers(self) -> None:
        """Set aside the servers of the test that just ended (a live run), still bound to
        it: its late requests (a thread it started, still calling) are refused there, and
        the next test listens on new addresses, so none of them reaches its recording.
        The oldest retired servers stop past :data:`RETIRED_SERVERS`."""
        with self._lock:
            self._retired += self._servers.values()
            self._servers.clear()
            stopped = self._retired[:-RETIRED_SERVERS]
            del self._retired[:-RETIRED_SERVERS]
        for server in stopped:
            if server.is_running():
                server.stop()

    def close(self) -> None:
        with self._lock:
            servers = [*self._retired, *self._servers.values()]
            self._retired.clear()
            self._servers.clear()
            ca, self._ca = self._ca, None
        for server in servers:
            if server.is_running():
                server.stop()
        if ca is not None:
            ca.close()


# -- the process environment of interception --------------------------------------

#: The proxy variables, in both cases: curl reads only lower-case ``http_proxy``;
#: Python's urllib reads both, and lower-case first.
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")
#: Where requests, Python's ssl (urllib, httpx, aiohttp at import), curl and Node find the
#: CA certificates they trust.
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
#: Reached directly, never through the proxy: the loopback names and addresses, so that
#: local services (and ``mgmt_server.url``) keep working. Added to the user's own.
NO_PROXY = "localhost,127.0.0.1,::1"

_environ_lock = threading.Lock()


def intercept_environment(
    proxy_url: str, ca: TestCA, hosts: Iterable[str], environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The variables that point unchanged clients at the fake's proxy and CA, made from
    the user's (``environ``): ``NO_PROXY`` keeps the user's entries and adds the loopback
    ones, and each CA variable names a bundle of the test CA and what the user's
    variable named (else the system's CA certificates), so that what the user reached
    directly and trusted stays so."""
    bypass = no_proxy(environ, tuple(hosts))
    env = {}
    for name in PROXY_VARIABLES:
        env[name] = bypass if name.lower() == "no_proxy" else proxy_url
    for name in CA_VARIABLES:
        env[name] = ca.bundle_with(environ.get(name))
    return env


def no_proxy(environ: Mapping[str, str], hosts: tuple[str, ...]) -> str:
    """``NO_PROXY`` under interception: the user's entries (of ``no_proxy`` and
    ``NO_PROXY``: clients read either), then :data:`NO_PROXY`'s. An entry that would
    send one of the service's ``hosts`` around the proxy (``.tealiumiq.com``, ``*``) is
    left out: those requests would go to the real service."""
    entries: list[str] = []
    for name in ("no_proxy", "NO_PROXY"):
        for entry in environ.get(name, "").split(","):
            entry = entry.strip()
            if entry and entry not in entries and not _bypasses(entry, hosts):
                entries.append(entry)
    entries += [entry for entry in NO_PROXY.split(",") if entry not in entries]
    return ",".join(entries)


def _bypasses(entry: str, hosts: tuple[str, ...]) -> bool:
    """Whether a ``NO_PROXY`` entry covers one of ``hosts`` (a name, ``.domain`` or
    ``*.domain`` for its subdomains as clients read them, maybe with a port, or ``*``)."""
    name = entry.lower()
    if name == "*":
        return True
    head, sep, port = name.rpartition(":")
    if sep and port.isdigit() and "]" not in port:
        name = head
    name = name.removeprefix("*").lstrip(".")
    return bool(name) and any(host == name or host.endswith("." + name) for host in hosts)


def intercept_process(
    pool: SessionResources, env: Mapping[str, str], hosts: Iterable[str]
) -> Callable[[], None]:
    """Intercept the service's ``hosts`` in this process for a test: set ``env`` (the
    proxy and CA variables), have aiohttp's default SSL context trust the test CA, and
    resolve the hosts to the fake (``resolution.py``) for clients that ignore the
    variables; returns what restores it all."""
    proxy, direct = pool.proxy_server(), pool.direct_server()  # first: they may fail
    trust_in_aiohttp(pool.ca.ca_bundle)
    restore_environment = set_environment(env)
    restore_names = resolve_to_fake(
        hosts, https=(loopback(direct.host), direct.port), http=(loopback(proxy.host), proxy.port)
    )

    def restore() -> None:
        restore_names()
        restore_environment()

    return restore


def loopback(host: str) -> str:
    """Where this process reaches a listener of ``host`` (any address: loopback)."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def set_environment(env: Mapping[str, str]) -> Callable[[], None]:
    """Set ``env`` in ``os.environ``; returns what restores each variable as it was
    (unset again where it was unset).

    urllib's global opener is set aside for the test and restored after it: ``urlopen``
    builds it on first use with the proxies of that moment and keeps it, so one built
    before the test would go around the proxy (to the real host), and one built during
    the test would send every later test's requests to this test's proxy."""
    settle_environment()
    urllib_request = sys.modules.get("urllib.request")
    opener = getattr(urllib_request, "_opener", None)
    with _environ_lock:
        before = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        _restored.clear()
        if urllib_request is not None:
            urllib_request._opener = None  # type: ignore[attr-defined]

    def restore() -> None:
        with _environ_lock:
            for name, value in before.items():
                _put(name, value)
                _restored[name] = (env[name], value)
        module = sys.modules.get("urllib.request")
        if module is not None and getattr(module, "_opener", None) is not opener:
            module._opener = opener  # type: ignore[attr-defined]

    return restore


#: Per variable, the value interception set and the one its restore put back, kept
#: until the next interception: see :func:`settle_environment`.
_restored: dict[str, tuple[str, str | None]] = {}


def _put(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def settle_environment() -> list[str]:
    """Put back the user's value of each variable that holds interception's value again
    after the restore (the names): a fixture torn down after ``mgmt_server`` (a
    ``monkeypatch`` listed before it, which set a variable during the test) writes
    back what it found, the fake's proxy or CA. Called once a test's teardown is done
    and before the next interception."""
    with _environ_lock:
        wrong = [name for name, (ours, _) in _restored.items() if os.environ.get(name) == ours]
        for name in wrong:
            _put(name, _restored[name][1])
        return wrong


def trust_in_aiohttp(ca_certificate: str) -> bool:
    """Add the test CA to aiohttp's default verified SSL context, if aiohttp is loaded:
    aiohttp makes that context once, at import, from the CA variables of that moment,
    so a client session created with default SSL settings would not trust the fake.
    The CA stays trusted by that context for the rest of the process (a context cannot
    forget a CA); it is the session's own test CA, whose key never leaves the process.
    Whether aiohttp was loaded."""
    connector = sys.modules.get("aiohttp.connector")
    context = getattr(connector, "_SSL_CONTEXT_VERIFIED", None)
    if context is None:
        return False
    context.load_verify_locations(cafile=ca_certificate)
    return True
