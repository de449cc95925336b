"""``MgmtServer``: the fake service of one test, as users see it (the ``mgmt_server``
fixture). It joins the domain state of this test to the session's HTTP server."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .._http.app import CONTROL_PREFIX
from .._http.binding import Binding, RouteHandler
from .._http.parsing import unreachable_path
from .._service.flows.oauth import OAuthFlow
from .._service.flows.registry import (
    builtin_paths,
    check_version,
    endpoint_families,
    fixed_hosts,
    flow_class,
    route_flow,
    service_hosts,
)
from .._service.service import AuthService
from .._service.timeline import system_clock
from .._verdicts import findings
from .._verdicts.evidence import AuthSummary, format_timeline, summarize
from .assertions import AssertionMethods
from .faults import FaultMethods
from .session import intercept_environment, set_environment, trust_in_aiohttp

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Iterable

    from .._http.binding import RecordedRequest
    from .._service.accounts import Account
    from .._service.events import Event
    from .._service.flows.oauth_clients import OAuthClient
    from .._service.options import Options
    from .._service.timeline import Clock
    from .session import SessionResources

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


class MgmtServer(FaultMethods, AssertionMethods):
    """The fake management auth service of one test.

    Internal constructor, may change: use the ``mgmt_server`` fixture.
    """

    def __init__(
        self,
        options: Options,
        pool: SessionResources,
        clock: Clock | None = None,
        *,
        test_id: str = "",
    ) -> None:
        if options.v3_host in fixed_hosts():
            raise ValueError(
                f"mgmtauth option 'v3_host' must be a region host of its own, not "
                f"{options.v3_host} (a host of v1, v2 or v3 auth)"
            )
        self.options = options
        self._pool = pool
        self._http = pool.server(https=options.https)
        # No clock: the process's time (what mgmt_clock / freezegun move). The
        # standalone server passes a clock its control API can advance.
        self._service = AuthService(options, pool.signer, clock or system_clock)
        # test_id names the test in errors raised after it ended (see LateErrors).
        self._binding = Binding(self._service, owner=test_id, late=pool.late_errors)
        #: Kinds of finding the test checked itself (assert_token_reused: "churn",
        #: assert_no_expired_token_used: "expired_use", assert_no_refused_calls and
        #: expect_refusals: "refused_call", assert_logged_out: "open_session"): the
        #: teardown check leaves them out.
        self._checked: set[str] = set()
        # Not a bound method: the binding (which a connection's thread may hold a while
        # after the test) must not keep this fake alive.
        https = options.https
        self._binding.region_port = lambda: pool.region_server(https=https).port
        self._binding.main_port = self._http.port
        self._http.app.bind(self._binding)
        #: The proxy of the intercept option; None without it.
        self._proxy = pool.proxy_server() if options.intercept else None
        if self._proxy is not None:
            self._proxy.app.bind(self._binding)

    # -- where ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The service's base URL: endpoints are ``{url}/v2/auth``, ``{url}/v1/login``..."""
        return self._http.base_url

    @property
    def region_url(self) -> str:
        """The base URL of the fake's region address: where v3 API calls go without
        interception (``https://`` + the ``host`` of a v3 auth answer). The fake's own
        address (:attr:`url`) refuses them, as the real v3 auth host would."""
        return self._http.base_url.rsplit(":", 1)[0] + f":{self._binding.region_port()}"

    def url_for(self, path: str) -> str:
        return self.url + ("" if path.startswith("/") else "/") + path

    @property
    def ca_bundle(self) -> str | None:
        """Path of the test CA's certificate (PEM) when serving HTTPS or intercepting,
        else ``None``."""
        return self._pool.ca.ca_bundle if self._uses_ca else None

    def client_ssl_context(self) -> ssl.SSLContext | None:
        """A new client ``SSLContext`` that trusts the test CA (HTTPS or interception
        only, else None)."""
        return self._pool.ca.client_context() if self._uses_ca else None

    @property
    def _uses_ca(self) -> bool:
        return self.options.https or self.options.intercept

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts of the service the fake stands in for (names, no scheme or port):
        ``api.tealiumiq.com``, ``platform.tealiumapis.com``, ``api.tealiumapis.com``,
        ``my.tealiumiq.com``, ``sso.tealiumiq.com`` and the region host of v3 API calls
        (the option ``v3_host``). See docs/hosts.md."""
        return service_hosts(self.options)

    @property
    def proxy_url(self) -> str | None:
        """The URL of the fake's HTTP proxy (``HTTPS_PROXY``) under the intercept
        option, else ``None``."""
        if self._proxy is None:
            return None
        host = self._proxy.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self._proxy.port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment variables of interception, for subprocesses: the proxy
        variables (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``, also in lower case)
        and the CA variables (``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``,
        ``CURL_CA_BUNDLE``, ``NODE_EXTRA_CA_CERTS``). The plugin sets them in this
        process for the test's duration. Only with the intercept option."""
        __tracebackhide__ = True
        if self.proxy_url is None:
            raise ValueError(
                "mgmt_server.env holds the variables of interception: turn it on with "
                "@pytest.mark.mgmtauth(intercept=True) (or use mgmt_server.url directly)"
            )
        return intercept_environment(self.proxy_url, self._pool.ca.intercept_bundle)

    def apply_environment(self) -> Callable[[], None]:
        """Under interception, set :attr:`env` in this process (and have aiohttp's
        default SSL context trust the test CA); returns what restores the variables
        (internal: the plugin calls it around the test)."""
        if self._proxy is None:
            return lambda: None
        env = self.env
        trust_in_aiohttp(env["SSL_CERT_FILE"])
        return set_environment(env)

    # -- setup ---------------------------------------------------------------------

    def add_account(
        self,
        username: str | None = None,
        *,
        api_key: str | None = None,
        password: str | None = None,
        permissions: Iterable[str] | None = None,
        profiles: Iterable[str | tuple[str, str]] | None = None,
    ) -> Account:
        """Register an account; anything left out is generated (API keys contain
        characters that must be URL-encoded). ``permissions=None``: every permission.
        ``profiles``: the v3 ``"account/profile"`` pairs (or ``(account, profile)``
        tuples; ``"account/*"`` for all of an account's) it may get tokens for;
        ``None``: any."""
        return self._service.add_account(
            username,
            api_key=api_key,
            password=password,
            permissions=permissions,
            profiles=profiles,
        )

    @property
    def accounts(self) -> list[Account]:
        return self._service.account_list()

    # -- OAuth clients (the developer portal's client credentials, docs/oauth.md) ------

    def add_client(
        self,
        scopes: Iterable[str] | None = None,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
    ) -> OAuthClient:
        """Register an OAuth client that may get tokens for ``scopes`` (``None``: the
        default scope ``acme:main:tiq:2026-07:profiles:manage``); the id and secret are
        generated unless given (the secret of letters and digits, as the
        developer portal's)."""
        return self._service.flow(OAuthFlow).add_client(
            scopes, client_id=client_id, client_secret=client_secret
        )

    @property
    def clients(self) -> list[OAuthClient]:
        """The OAuth clients of this test, oldest first."""
        with self._service.mutex:
            return list(self._service.flow(OAuthFlow).clients.values())

    def rotate_client_secret(
        self, client: OAuthClient | str, new_secret: str | None = None
    ) -> OAuthClient:
        """Give the client a new secret (generated unless given); the old one gets
        invalid_client from now on. Tokens already granted stay valid."""
        return self._service.flow(OAuthFlow).rotate_client_secret(_client_id(client), new_secret)

    def revoke_client(self, client: OAuthClient | str) -> None:
        """The client gets no more tokens (invalid_grant); those it holds stay valid
        until they expire (``revoke(token)`` ends one)."""
        self._service.flow(OAuthFlow).revoke_client(_client_id(client))

    def route(
        self,
        method: str,
        path: str | re.Pattern[str],
        *,
        permission: str | None = None,
        auth: str | None = None,
        host: str | None = None,
        scope: str | None = None,
    ) -> RouteHandler:
        """Declare an operation of the management API the client under test calls.

        Every call is authenticated first: paths under ``/v1/`` by the v1 session
        (JSESSIONID cookie + ``utk`` query parameter), paths under ``/v3/`` by a v3
        bearer token (for the account and profile the path names), all others by the v2
        bearer token; ``auth="v1"``/``"v2"``/``"v3"``/``"oauth"`` overrides. A route with
        ``scope`` takes an OAuth access token whose scopes cover it (``{name}`` parts are
        filled from a regex path's named groups). Returns a
        pytest-httpserver handler: ``.respond_with_json(...)``, ``.respond_with_data(...)``,
        ``.respond_with_handler(fn)``.

        The route answers on the hosts of its flow (v1: ``api.tealiumiq.com``,
        ``my.tealiumiq.com`` and ``sso.tealiumiq.com``, v2: ``api.tealiumiq.com``, v3:
        the region host, OAuth: ``api.tealiumapis.com``); ``host=`` (one of
        :attr:`hosts`) makes it answer on that host only. An ``auth="oauth"`` route on
        ``/v{YYYY-MM}/{apiFamily}/accounts/{a}/profiles/{p}/{resource}`` needs the scope
        its path and method say unless ``scope`` says otherwise (docs/oauth.md).
        """
        __tracebackhide__ = True
        if not isinstance(method, str) or method.upper() not in _METHODS:
            raise ValueError(
                f"route(): method must be one of {', '.join(_METHODS)}, got {method!r}"
            )
        if isinstance(path, str):
            if not path.startswith("/"):
                raise ValueError(f"route(): path must start with '/', got {path!r}")
            unreachable = unreachable_path(path)
            if unreachable is not None:
                raise ValueError(f"route(): no request can reach {path!r}: {unreachable}")
            if path in builtin_paths(self.options) or path.startswith(endpoint_families()):
                raise ValueError(
                    f"route(): {path} is the fake's own endpoint; declare the API's other "
                    "operations"
                )
        elif not isinstance(path, re.Pattern):
            raise TypeError(f"route(): path must be a str or a compiled regex, got {path!r}")
        pattern = path if isinstance(path, str) else path.pattern.lstrip("^")
        if pattern.startswith(CONTROL_PREFIX):
            # mgmtauth-server answers everything under it itself: the route could never
            # be reached there, so it is refused everywhere.
            raise ValueError(
                f"route(): {CONTROL_PREFIX}/ is reserved for mgmtauth-server's control API; "
                f"declare the route under another path, got {pattern!r}"
            )
        if auth is None:
            auth = route_flow(pattern, scope=scope)
        check_version(auth, what="route(): auth", none="by the path")
        if host is not None and host not in self.hosts:
            raise ValueError(
                f"route(): host must be one of the service's hosts ({', '.join(self.hosts)}), "
                f"got {host!r}"
            )
        flow_class(auth).check_route(permission, scope)
        if scope is not None and "{" in scope:
            names = set(re.findall(r"\{(\w+)\}", scope))
            groups = set(path.groupindex) if isinstance(path, re.Pattern) else set()
            if not names <= groups:
                raise ValueError(
                    f"route(scope={scope!r}): {', '.join(sorted(names - groups))} must be "
                    "named groups of a regex path, e.g. re.compile(r'/(?P<profile>[^/]+)/')"
                )
        handler = RouteHandler(
            method.upper(), path, permission=permission, auth=auth, host=host, scope=scope
        )
        with self._binding.lock:
            self._binding.routes.append(handler)
        return handler

    # -- what happened -------------------------------------------------------------

    @property
    def events(self) -> list[Event]:
        """The timeline of this test, oldest first: typed, immutable records."""
        return self._service.events

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests the fake answered in this test, oldest first (the last 1000), as
        they arrived, secrets masked as in :attr:`events`; refused ones (bad input,
        unknown routes) included. Like pytest-httpserver's ``log`` and respx's
        ``calls``."""
        return self._binding.requests.entries(self._service.redact)

    def auth_count(self, *, version: str | None = None, username: str | None = None) -> int:
        """Successful credential grants: ``/v2/auth`` tokens, v3 tokens, ``/v1/login``
        sessions and OAuth access tokens (``version`` ``"v2"``, ``"v3"``, ``"v1"``,
        ``"oauth"``; ``None``: all; ``username``: an account or a client id)."""
        return self._service.auth_count(version=version, username=username)

    # -- faults on cue: inherited from FaultMethods (_fake/faults.py, docs/faults.md) -------

    # -- assertions in auth terms, the timeline, the evidence they judge: inherited from
    # AssertionMethods (_fake/assertions.py) ------------------------------------------

    # -- for the plugin and mgmtauth-server (internal: not part of the public API) --------
    # The lifecycle the pytest glue drives: use_clock_mover() at setup, check() and
    # teardown_findings() after the test, report_section() and summary() for the
    # reports, close() last. Public names so that the glue calls no private method.

    def teardown_findings(self) -> list[findings.Finding]:
        """The teardown check: the findings of the kinds the options count, except those
        the test checked itself with the matching assertion."""
        kinds = [k for k in findings.default_kinds(self.options) if k not in self._checked]
        return findings.findings(self.evidence(), kinds=kinds) if kinds else []

    def report_section(self) -> str:
        """The text of the test's ``mgmtauth timeline`` report section."""
        return findings.report_section(self.evidence())

    def summary(self) -> AuthSummary:
        """The figures of this fake for the terminal summary and JUnit (internal)."""
        return summarize(self._service.events)

    def use_clock_mover(self, mover: Callable[[float], bool] | None) -> None:
        """How a scripted hang on the ``mgmt_clock`` moves the clock: ``mover(seconds)``
        returns whether it did (the plugin's frozen clock); None: it waits in real time."""
        self._service.advance = mover

    def keep_masking(self, old: MgmtServer) -> None:
        """Mask the secrets ``old`` handed out too (mgmtauth-server's reset; internal)."""
        self._service.keep_masking(old._service)

    def whole_timeline(self, username: str | None = None) -> str:
        """Every line of the timeline, not cut (mgmtauth-server's; internal)."""
        __tracebackhide__ = True
        self._known_username(username)
        return format_timeline(self.evidence(), username=username, whole=True)

    def check(self) -> None:
        """Re-raise in the test what went wrong in the server thread (internal)."""
        binding = self._binding
        with binding.lock:
            errors, binding.errors = binding.errors, []
        if errors:
            first = errors[0]
            if len(errors) > 1 and hasattr(first, "add_note"):  # Python 3.11+
                first.add_note(
                    f"pytest-mgmtauth: {len(errors) - 1} more error(s) were raised while "
                    "answering requests in this test"
                )
            raise first

    def close(self) -> None:
        """Stop answering for this test (internal: the fixture and mgmtauth-server)."""
        self._http.app.unbind(self._binding)
        if self._proxy is not None:
            self._proxy.app.unbind(self._binding)
        self._binding.close()  # requests held by a scripted hang give up now
        # Kept-alive connections idle now are closed, as a server's idle timeout would:
        # the next test's requests come on new connections (clients reconnect).
        self._http.drop_idle_connections()
        for other in (self._pool.started_region(https=self.options.https), self._proxy):
            if other is not None:
                other.drop_idle_connections()

    def __repr__(self) -> str:
        return f"<MgmtServer {self.url} {self.options.describe()}>"


def _client_id(client: OAuthClient | str) -> str:
    return client if isinstance(client, str) else client.client_id
