"""``MgmtServer``: the fake service of one test, as users see it (the ``mgmt_server``
fixture). It joins the domain state of this test to the session's HTTP server."""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING

from .._http.app import CONTROL_PREFIX
from .._http.binding import Binding, RouteHandler
from .._http.parsing import unreachable_path
from .._service import faults as _faults
from .._service.accounts import Account
from .._service.flows.base import ClientFlow
from .._service.flows.registry import (
    builtin_paths,
    check_version,
    client_flow,
    endpoint_families,
    fixed_hosts,
    flow_class,
    route_flow,
    service_hosts,
)
from .._service.service import AuthService
from .._service.timeline import system_clock
from .._verdicts import checks, findings
from .._verdicts.evidence import AuthSummary, Evidence, format_timeline, summarize
from .resolution import refuse_lookups
from .session import intercept_environment, intercept_process

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Iterable

    from .._http.binding import LoggedRequests
    from .._service.events import Event
    from .._service.exchange_shape import Exchange
    from .._service.faults import ScheduledFault, ScriptedFault
    from .._service.flows.oauth import OAuthClient
    from .._service.options import Options
    from .._service.timeline import Clock
    from .session import SessionResources

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


class MgmtServer:
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
        bind: bool = True,
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
        #: The proxy of the intercept option; None without it.
        self._proxy = pool.proxy_server() if options.intercept else None
        #: The variables of interception as set for the test (made from the user's
        #: before they were replaced); None until then.
        self._env: dict[str, str] | None = None
        if bind:  # else mgmtauth-server sets it up first, then take_over()
            self.take_over(None)

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
        ``CURL_CA_BUNDLE``, ``NODE_EXTRA_CA_CERTS``), extending the process's own (see
        docs/hosts.md). The plugin sets them in this process for the test. Only with
        the intercept option."""
        __tracebackhide__ = True
        if self.proxy_url is None:
            raise ValueError(
                "mgmt_server.env holds the variables of interception: turn it on with "
                "@pytest.mark.mgmtauth(intercept=True) (or use mgmt_server.url directly)"
            )
        if self._env is not None:
            return dict(self._env)
        return intercept_environment(self.proxy_url, self._pool.ca, self.hosts)

    def apply_environment(self) -> Callable[[], None]:
        """Under interception, set :attr:`env` in this process and resolve the service's
        hosts to the fake; without it, refuse lookups of them. Returns what restores it
        all (internal: the plugin calls it around the test; docs/hosts.md)."""
        if self._proxy is None:
            return refuse_lookups(self.hosts)
        self._env = self.env
        return intercept_process(self._pool, self._env, self.hosts)

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
        return self._service.accounts.add_account(
            username,
            api_key=api_key,
            password=password,
            permissions=permissions,
            profiles=profiles,
        )

    @property
    def accounts(self) -> list[Account]:
        return self._service.accounts.account_list()

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
        return self._client_flow().add_client(
            scopes, client_id=client_id, client_secret=client_secret
        )

    @property
    def clients(self) -> list[OAuthClient]:
        """The OAuth clients of this test, oldest first."""
        with self._service.mutex:
            return list(self._client_flow().clients.values())

    def rotate_client_secret(
        self, client: OAuthClient | str, new_secret: str | None = None
    ) -> OAuthClient:
        """Give the client a new secret (generated unless given); the old one gets
        invalid_client from now on. Tokens already granted stay valid."""
        return self._client_flow().rotate_client_secret(_client_id(client), new_secret)

    def revoke_client(self, client: OAuthClient | str) -> None:
        """The client gets no more tokens (invalid_grant); those it holds stay valid
        until they expire (``revoke(token)`` ends one)."""
        self._client_flow().revoke_client(_client_id(client))

    def _client_flow(self) -> ClientFlow[OAuthClient]:
        flow = self._service.flows[client_flow().name]
        assert isinstance(flow, ClientFlow)
        return flow

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
        return self._service.timeline.events

    @property
    def requests(self) -> LoggedRequests:
        """The requests the fake answered in this test, oldest first, as they arrived,
        secrets masked as in :attr:`events`, refused ones included; the last 1000 within
        4 MiB (``.dropped`` counts earlier ones; long texts are cut, and say so). Like
        pytest-httpserver's ``log`` and respx's ``calls``."""
        return self._binding.requests.entries(self._service.timeline.redact)

    def auth_count(self, *, version: str | None = None, username: str | None = None) -> int:
        """Successful credential grants: ``/v2/auth`` tokens, v3 tokens, ``/v1/login``
        sessions and OAuth access tokens (``version`` ``"v2"``, ``"v3"``, ``"v1"``,
        ``"oauth"``; ``None``: all; ``username``: an account or a client id)."""
        return self._service.auth_count(version=version, username=username)

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
        return summarize(self._service.timeline.events)

    def use_clock_mover(self, mover: Callable[[float], bool] | None) -> None:
        """How a scripted hang on the ``mgmt_clock`` moves the clock: ``mover(seconds)``
        returns whether it did (the plugin's frozen clock); None: it waits in real time."""
        self._service.fault_runner.advance = mover

    def take_over(self, old: MgmtServer | None) -> None:
        """Answer from now on in ``old``'s place: its secrets stay masked, requests on its
        connections come here, it is closed (internal: mgmtauth-server, bind=False)."""
        if old is not None:
            self._service.timeline.keep_masking(old._service.timeline)
            old._binding.successor = self._binding
        for server in filter(None, (self._http, self._proxy)):
            server.app.bind(self._binding)
        if old is not None:
            old.close()

    def whole_timeline(self, username: str | None = None) -> str:
        """Every line of the timeline, not cut (mgmtauth-server's; internal)."""
        __tracebackhide__ = True
        self._known_username(username)
        return format_timeline(self.evidence(), username=username, whole=True)

    def record_exchanges(self) -> list[Exchange]:
        """Keep this test's exchanges from now on (drift; internal): the list they go to."""
        from .._http.exchanges import record_exchanges

        return record_exchanges(self._binding)

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
        for server in filter(None, (self._http, self._proxy)):
            server.app.unbind(self._binding)
        self._binding.close()  # requests held by a scripted hang give up now
        # Kept-alive connections idle now are closed, as a server's idle timeout would:
        # the next test's requests come on new connections (clients reconnect).
        self._pool.drop_idle_connections()

    # -- faults on cue (docs/faults.md) ----------------------------------------------

    # Scripted faults apply to the next ``count`` calls of /v2/auth (version="v2"), v3
    # auth (version="v3"), /v1/login (version="v1") or any (None), in the order scripted. They
    # never change the service's state, and each one that fires is a FaultInjected event.

    def fail_next(
        self,
        count: int = 1,
        *,
        error: int = 503,
        version: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        """The next ``count`` auth/login calls answer ``error``: an HTTP status (e.g. 500,
        502, 503, 504; 429 comes with ``Retry-After``, 1 s unless ``retry_after``) or a
        service error (1401 wrong credentials, 1402 locked out, both as HTTP 401)."""
        __tracebackhide__ = True
        self._service.fault_runner.plan.add(
            _faults.failure(error, count=count, version=version, retry_after=retry_after)
        )

    def hang_next(
        self,
        count: int = 1,
        *,
        seconds: float,
        clock: str = "real",
        version: str | None = None,
    ) -> None:
        """The next ``count`` auth/login calls are held ``seconds`` before they are
        answered normally: on the ``"real"`` clock (the client's timeout fires first if
        it is shorter), or until the ``"simulated"`` clock has moved on ``seconds``
        (``mgmt_clock.advance`` from another thread). A hang ends when the test does."""
        __tracebackhide__ = True
        self._service.fault_runner.plan.add(
            _faults.hang(seconds, clock=clock, count=count, version=version)
        )

    def drop_connection_next(self, count: int = 1, *, version: str | None = None) -> None:
        """The next ``count`` auth/login calls get their TCP connection reset (RST)
        without an answer."""
        __tracebackhide__ = True
        self._service.fault_runner.plan.add(_faults.reset(count=count, version=version))

    def reset_next(self, count: int = 1, *, version: str | None = None) -> None:
        """Deprecated alias of :meth:`drop_connection_next` (a TCP reset, not the fresh
        state of ``POST /_mgmtauth/reset``)."""
        __tracebackhide__ = True
        warnings.warn(
            "mgmt_server.reset_next() is deprecated: use mgmt_server.drop_connection_next() "
            "(same arguments); 'reset' is the control API's fresh state",
            DeprecationWarning,
            stacklevel=2,
        )
        self.drop_connection_next(count, version=version)

    def drop_idle_connections(self) -> int:
        """Close the clients' kept-alive connections that are idle now, as a server's
        idle timeout would (a FIN, no answer pending): a client must notice and open a
        new connection for its next request. Returns how many were closed. (Idle
        connections are also closed when each test ends.)"""
        return self._http.drop_idle_connections()

    def malformed_next(self, count: int = 1, *, version: str | None = None) -> None:
        """The next ``count`` auth/login calls get 200 with a JSON body that stops in
        the middle (no credential is granted)."""
        __tracebackhide__ = True
        self._service.fault_runner.plan.add(_faults.malformed(count=count, version=version))

    def schedule_fault(self, kind: str, *, at: str | int) -> ScheduledFault:
        """Schedule a fault at a trigger point (what a sweep item does; docs/sweeps.md):

        * ``"expire"`` / ``"revoke"`` at ``"call3"``: the credential in use (the latest
          token or session granted) expires, as if its lifetime had passed (on
          ``mgmt_clock`` the clock moves on to its end; without it, it ends early on
          cue), or is revoked, just before protected call 3;
        * ``"reset"`` at ``"call3"``: the connection of protected call 3 is reset;
        * ``"throttle"`` / ``"unavailable"`` at ``"auth2"``: authentication call 2
          (``/v2/auth`` and ``/v1/login`` requests, counted together) answers 429 with
          ``Retry-After`` / 503.

        Calls are counted from the start of the test; an int ``at`` is the point of the
        kind's own sort. Returns the scheduled fault (see :attr:`scheduled_faults`)."""
        __tracebackhide__ = True
        fault = _faults.scheduled(kind, at)
        self._service.fault_runner.schedule(fault)
        return fault

    @property
    def scheduled_faults(self) -> list[ScheduledFault]:
        """Scheduled faults whose point has not come (yet)."""
        return self._service.fault_runner.plan.scheduled()

    @property
    def protected_calls(self) -> int:
        """Calls to declared routes so far (the ``callK`` points count these)."""
        return self._service.fault_runner.plan.protected_calls

    @property
    def auth_calls(self) -> int:
        """``/v2/auth`` and ``/v1/login`` requests so far, granted or not (the ``authK``
        points count these)."""
        return self._service.fault_runner.plan.auth_calls

    @property
    def pending_faults(self) -> list[ScriptedFault]:
        """Scripted faults that have not fired (yet), with the calls each still applies to."""
        return self._service.fault_runner.plan.pending()

    def clear_faults(self) -> None:
        """Drop every scripted or scheduled fault that has not fired."""
        self._service.fault_runner.plan.clear()

    def expire(self, credential: str) -> str:
        """Make a token or session expire now; ``credential`` is the token (JWT), the
        JSESSIONID (or utk) or a label from the timeline (``"T1"``, ``"S1"``). Later calls
        with it get 401 (1401); re-authenticating is not churn. Returns the label."""
        __tracebackhide__ = True
        return self._service.fault_runner.expire(credential)

    def revoke(self, credential: str) -> str:
        """Revoke a token or session now (as :meth:`expire`, recorded as a revocation).
        Returns the label."""
        __tracebackhide__ = True
        return self._service.fault_runner.revoke(credential)

    def lock(self, account: Account | str, *, seconds: float | None = None) -> None:
        """Lock an account now: ``/v1/login`` answers 1402 until :meth:`unlock`, or for
        ``seconds`` of simulated time. ``/v2/auth`` is not affected (use
        ``fail_next(error=1402, version="v2")`` for that)."""
        __tracebackhide__ = True
        self._service.lockout.lock(_username(account), seconds=seconds)

    def unlock(self, account: Account | str) -> None:
        """End any lock of the account (on cue or after failed logins) and reset its
        failed-login count."""
        __tracebackhide__ = True
        self._service.lockout.unlock(_username(account))

    def rotate_key(self, account: Account | str, new_key: str | None = None) -> Account:
        """Give the account a new API key (generated unless given) and return the updated
        ``Account``; the old key gets 1401 from now on. Tokens already issued stay valid
        (``revoke`` them too to simulate a compromised key)."""
        __tracebackhide__ = True
        return self._service.accounts.rotate_secret(_username(account), "API key", new_key)

    def rotate_password(self, account: Account | str, new_password: str | None = None) -> Account:
        """Give the account a new password and return the updated ``Account``; the old
        password gets 1401 (and counts towards a lockout) from now on. Sessions already
        started stay valid."""
        __tracebackhide__ = True
        return self._service.accounts.rotate_secret(_username(account), "password", new_password)

    # -- assertions in auth terms, the timeline and the evidence they judge ----------

    def evidence(self) -> Evidence:
        """What the assertions judge: the events, options and times of this fake."""
        service = self._service
        events = service.timeline.events
        # At teardown mgmt_clock may have stopped already (it is torn down first when
        # requested after mgmt_server): never let "now" fall before what happened.
        latest = max((e.at.timestamp() for e in events), default=service.timeline.started_at)
        return Evidence(
            events=events,
            options=self.options,
            started_at=service.timeline.started_at,
            now=max(service.timeline.now(), latest),
        )

    def _known_username(self, username: str | None) -> None:
        __tracebackhide__ = True
        if username is None:
            return
        names = self._service.principals()
        if username not in names:
            known = ", ".join(repr(u) for u in names) or "none"
            accounts = [a.username for a in self._service.accounts.account_list()]
            # OAuth clients are named too once there are any.
            who = "account" if names == accounts else "account or OAuth client"
            what = "accounts" if names == accounts else "known"
            raise ValueError(
                self._service.timeline.redact(
                    f"no {who} {username!r} in this test; {what}: {known}"
                )
            )

    def timeline(self, username: str | None = None) -> str:
        """This test's timeline (of one account, or all) in simulated time since the
        test started, with each credential's uses and end; secrets as fingerprints."""
        self._known_username(username)
        # Every line: it is where the cut timelines of failure messages send the reader.
        return format_timeline(self.evidence(), username=username, whole=True)

    def assert_credential_reused(self, *, username: str | None = None) -> None:
        """Fail if an account was granted a new credential while it still held a valid
        one (churn; see docs/token-reuse.md). Takes over the teardown check."""
        __tracebackhide__ = True
        self._known_username(username)
        self._checked.add("churn")
        checks.check_token_reused(self.evidence(), username=username)

    def assert_auth_count(
        self, n: int, *, version: str | None = None, username: str | None = None
    ) -> None:
        """Exactly ``n`` credential grants (``version`` ``"v1"``/``"v2"``/``"v3"``, one
        account)."""
        __tracebackhide__ = True
        self._known_username(username)
        checks.check_auth_count(self.evidence(), n, version=version, username=username)

    def assert_no_expired_credential_used(self, *, username: str | None = None) -> None:
        """Fail if the client presented an expired bearer token or an ended v1 session.
        Takes over the teardown check of expired-credential use."""
        __tracebackhide__ = True
        self._known_username(username)
        self._checked.add("expired_use")
        checks.check_no_expired_credential_used(self.evidence(), username=username)

    #: Alias of :meth:`assert_credential_reused` (it covers v1 sessions and v3 tokens
    #: too); kept, no warning.
    assert_token_reused = assert_credential_reused
    #: Alias of :meth:`assert_no_expired_credential_used`; kept, no warning.
    assert_no_expired_token_used = assert_no_expired_credential_used

    def assert_no_refused_calls(self, *, username: str | None = None) -> None:
        """Fail if the service refused a protected call because the client sent the
        wrong credential (none, a malformed or unknown one, another account's or
        profile's token, a v1 call without its session). Takes over the teardown check
        of refused calls."""
        __tracebackhide__ = True
        self._known_username(username)
        self._checked.add("refused_call")
        checks.check_no_refused_calls(self.evidence(), username=username)

    def expect_refusals(self) -> None:
        """Say that this test sends wrong credentials on purpose: the calls the service
        refuses for them are no finding at teardown (the refusals stay in the timeline,
        and the other checks still run)."""
        self._checked.add("refused_call")

    def assert_logged_out(self, *, username: str | None = None) -> None:
        """Fail if a v1 session opened in this test was not ended with /v1/logout.
        Takes over the teardown check of ``require_logout``."""
        __tracebackhide__ = True
        self._known_username(username)
        self._checked.add("open_session")
        checks.check_logged_out(self.evidence(), username=username)

    def assert_single_flight(self, *, username: str | None = None) -> None:
        """Fail if a grant was requested while another grant to the same account was in
        flight (a thundering herd of threads or tasks refreshing together)."""
        __tracebackhide__ = True
        self._known_username(username)
        checks.check_single_flight(self.evidence(), username=username)

    def __repr__(self) -> str:
        return f"<MgmtServer {self.url} {self.options.describe()}>"


def _client_id(client: OAuthClient | str) -> str:
    return client if isinstance(client, str) else client.client_id


def _username(account: Account | str) -> str:
    if isinstance(account, Account):
        return account.username
    if isinstance(account, str):
        return account
    raise TypeError(f"expects an Account or a username, got {account!r}")
