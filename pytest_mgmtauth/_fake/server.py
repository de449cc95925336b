"""``MgmtServer``: the fake service of one test, as users see it (the ``mgmt_server``
fixture). It joins the domain state of this test to the session's HTTP server."""

from __future__ import annotations

import re
import time
import warnings
from typing import TYPE_CHECKING

from .._http.app import CONTROL_PREFIX
from .._http.binding import Binding, RouteHandler
from .._http.parsing import unreachable_path
from .._service import events as _events, faults as _faults
from .._service.accounts import Account
from .._service.flows import registry
from .._service.flows.base import ClientFlow
from .._service.flows.registry import (
    builtin_paths,
    check_grants,
    check_version,
    client_flow,
    endpoint_families,
    fixed_hosts,
    flow_class,
    route_flow,
    service_hosts,
)
from .._service.limits import check_count, check_seconds
from .._service.rate_limits import parse_rate
from .._service.service import AuthService
from .._service.timeline import real_seconds, system_clock
from .._verdicts import checks, findings
from .._verdicts.evidence import AuthSummary, Evidence, format_timeline, summarize
from .resolution import refuse_lookups
from .session import intercept_environment, intercept_process

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Iterable

    from .._http.binding import LoggedRequests
    from .._http.forward import LiveRun
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
        live: LiveRun | None = None,
    ) -> None:
        if options.v3_host in fixed_hosts():
            raise ValueError(
                f"mgmtauth option 'v3_host' must be a region host of its own, not "
                f"{options.v3_host} (a host of v1, v2 or v3 auth)"
            )
        self.options = options
        """The :class:`~pytest_mgmtauth.Options` in force for this test (defaults, ini,
        command line and markers merged)."""
        self._pool = pool
        # On the process's time (the pytest fixture's, mgmt_clock's freezegun included),
        # the next test's first token can be signed ahead as this test ends (close()).
        self._on_process_time = clock is None
        self._http = pool.server(https=options.https)
        # No clock: the process's time (what mgmt_clock / freezegun move). The
        # standalone server passes a clock its control API can advance.
        self._service = AuthService(
            options,
            pool.signer,
            clock or system_clock,
            first_username=None if live is not None else pool.take_first_username(),
        )
        # While it runs, the list of flows it was made from stays as it is.
        registry.opened(self._service)
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
        #: The report section's drift verdict (internal: the glue sets it for a test a
        #: snapshot records): the lines of the comparison so far, or why none is made.
        self.drift_verdict: Callable[[], list[str]] | str = findings.NO_RECORDING
        if live is not None:  # every request goes to the service (_http/forward.py)
            from .._http.forward import LiveTest

            self._binding.live = LiveTest(live)
            self._service.timeline.hold_secrets(*live.secrets)
        if bind:  # else mgmtauth-server sets it up first, then take_over()
            self.take_over(None)

    @property
    def live(self) -> bool:
        """Whether this is a live run (``--mgmtauth-live``): every request goes to the
        service itself (the page Checked against the service)."""
        return self._binding.live is not None

    # -- where ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The service's base URL, ``{base_url}`` of the interface document, e.g.
        ``http://127.0.0.1:40123`` (no trailing slash). Endpoints are ``{url}/v2/auth``,
        ``{url}/v3/auth/accounts/{account}/profiles/{profile}`` (v3 auth),
        ``{url}/v1/login`` and ``{url}/v1/logout``."""
        return self._http.base_url

    @property
    def region_url(self) -> str:
        """The base URL of the fake's region address: where v3 API calls go without
        interception (``https://`` + the ``host`` of a v3 auth answer). The fake's own
        address (:attr:`url`) refuses them, as the real v3 auth host would."""
        return self._http.base_url.rsplit(":", 1)[0] + f":{self._binding.region_port()}"

    def url_for(self, path: str) -> str:
        """:attr:`url` joined with ``path`` (a leading ``/`` is optional)."""
        return self.url + ("" if path.startswith("/") else "/") + path

    @property
    def ca_bundle(self) -> str | None:
        """With ``https=True`` or ``intercept=True``: the path of the test CA's
        certificate (PEM), for ``verify=`` (requests, httpx) or ``cafile=``; else
        ``None``."""
        return self._pool.ca.ca_bundle if self._uses_ca else None

    def client_ssl_context(self) -> ssl.SSLContext | None:
        """With ``https=True`` or ``intercept=True``: a new client ``ssl.SSLContext``
        that trusts the test CA and nothing else; else ``None``."""
        return self._pool.ca.client_context() if self._uses_ca else None

    @property
    def _uses_ca(self) -> bool:
        return self.options.https or self.options.intercept

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts of the service the fake stands in for (names, no scheme or port):
        ``api.tealiumiq.com``, ``platform.tealiumapis.com``, ``api.tealiumapis.com``,
        ``my.tealiumiq.com``, ``sso.tealiumiq.com`` and the region host of v3 API calls
        (the option ``v3_host``), a tuple, the same with or without interception. See
        docs/hosts.md."""
        return service_hosts(self.options)

    @property
    def proxy_url(self) -> str | None:
        """With ``intercept=True``: the URL of the fake's HTTP proxy
        (``http://127.0.0.1:<port>``, what ``HTTPS_PROXY`` names); else ``None``."""
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
        the intercept option: without it, ``ValueError``."""
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
        characters that must be URL-encoded; see :class:`~pytest_mgmtauth.Account`).

        ``username`` must be an e-mail address (contain ``@``) and be new in this test;
        ``api_key`` and ``password`` non-empty strings; ``permissions`` an iterable of
        permission names (``None``: every permission, ``[]``: none); ``profiles`` the v3
        pairs it may get tokens for, an iterable of ``"account/profile"`` strings or
        ``(account, profile)`` tuples, ``"account/*"`` for every profile of an account
        (``None``: any pair). Wrong values raise ``ValueError`` or ``TypeError`` in the
        test."""
        return self._service.accounts.add_account(
            username,
            api_key=api_key,
            password=password,
            permissions=permissions,
            profiles=profiles,
        )

    @property
    def accounts(self) -> list[Account]:
        """The accounts of this test, in the order they were added (a new list)."""
        return self._service.accounts.account_list()

    # -- OAuth clients (the developer portal's client credentials, docs/oauth.md) ------

    def add_client(
        self,
        scopes: Iterable[str] | None = None,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
    ) -> OAuthClient:
        """Register an OAuth client of the developer portal (docs/oauth.md) that may get
        tokens for ``scopes``, an iterable of scope strings (``None``: the default scope
        ``acme:main:tiq:2026-07:profiles:manage``; ``[]``: none, so the client gets
        ``unauthorized_client``); the id and secret are generated unless given (the
        secret of letters and digits, as the developer portal's; see
        :class:`~pytest_mgmtauth.OAuthClient`). A malformed scope, a ``str`` for
        ``scopes`` or an id in use raises ``ValueError`` or ``TypeError``."""
        return self._client_flow().add_client(
            scopes, client_id=client_id, client_secret=client_secret
        )

    @property
    def clients(self) -> list[OAuthClient]:
        """The OAuth clients of this test, in the order they were added (a new list)."""
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
        rate_limit: str | None = None,
    ) -> RouteHandler:
        """Declare one operation of the API besides the authentication endpoints, which
        the fake owns. Every call to it is authenticated first (see Routes below).

        :param method: one of ``GET``, ``POST``, ``PUT``, ``PATCH``, ``DELETE``, ``HEAD``,
            ``OPTIONS`` (any case).
        :param path: a path starting with ``/``, matched exactly, or a compiled
            ``re.Pattern`` matched against the path with ``pattern.match`` (anchored at the
            start only: end it with ``$`` to match whole paths). The query string is not
            part of the match. ``/v2/auth``, ``/v1/login``, ``/v1/logout`` and paths under
            ``/v3/auth/`` are refused (``ValueError``), and so is any path (or pattern)
            under ``/_mgmtauth``, which ``mgmtauth-server``'s control API owns.
        :param permission: a permission name the account must have; ``None``: any
            authenticated account may call it. Names are free-form strings you choose;
            they only have to match ``add_account(permissions=...)``.
        :param auth: ``"v1"``, ``"v2"``, ``"v3"`` or ``"oauth"``: which credential the
            route takes. ``None`` (default) chooses by ``scope`` (a route with one takes
            OAuth access tokens), else by path: a path (or a pattern, leading ``^``
            ignored) that starts with ``/v1/`` takes the v1 session, one that starts with
            ``/v3/`` a v3 token, every other path the v2 bearer token. A v1 API on another
            path (the service's ``/urest/...``) is a v2 route unless it says
            ``auth="v1"``: ``route("GET", "/urest/things", auth="v1")``.
        :param host: one of :attr:`hosts`: the route answers on that host only; ``None``
            (default): on the hosts of its flow (v1: ``api.tealiumiq.com``,
            ``my.tealiumiq.com`` and ``sso.tealiumiq.com``, v2: ``api.tealiumiq.com``, v3:
            the region host (and ``platform.tealiumapis.com`` with ``v3_global_host``),
            OAuth: ``api.tealiumapis.com``). Another value raises ``ValueError``. See the
            page Hosts and interception.
        :param scope: the OAuth scope a call needs
            (``"acme:main:tiq:2026-07:profiles:read"``): the access token must have a scope
            that covers it (the page OAuth client credentials, "API calls and scopes").
            ``{name}`` parts are filled from the named groups of a regex ``path``. Only
            OAuth routes take it, and they take no ``permission`` (``ValueError``
            otherwise, also for a malformed scope). Without it, an ``auth="oauth"`` route
            on ``/v{YYYY-MM}/{apiFamily}/accounts/{account}/profiles/{profile}/{resource}...``
            needs the scope its path and method say (GET read; POST, PUT, DELETE write), an
            engine path ``.../engines/{engineId}/...`` the engine's; any other OAuth route
            any live access token.
        :param rate_limit: at most this many calls to the route within a second or a
            minute (``"50/s"``, ``"5/min"``); a call past it answers 429 with
            ``Retry-After`` in its flow's error shape (see the page Faults and throttling,
            "Rate limits of API calls"). It wins over the family figures of the option
            ``rate_limits``. ``None`` (default): no limit of its own. A malformed rate
            raises ``ValueError`` naming the accepted form.
        :returns: the route's :class:`~pytest_mgmtauth.RouteHandler`; declare its answer
            with its ``respond_with_*`` methods, which return it.
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
        rate = None if rate_limit is None else parse_rate(rate_limit, what="route(): rate_limit")
        handler = RouteHandler(
            method.upper(),
            path,
            permission=permission,
            auth=auth,
            host=host,
            scope=scope,
            rate_limit=rate,
        )
        with self._binding.lock:
            self._binding.routes.append(handler)
        return handler

    # -- what happened -------------------------------------------------------------

    @property
    def events(self) -> list[Event]:
        """The timeline of this test, oldest first: a new list of typed, immutable
        records (the events, subclasses of :class:`~pytest_mgmtauth.Event`)."""
        return self._service.timeline.events

    @property
    def requests(self) -> LoggedRequests:
        """The requests the fake answered in this test, oldest first, as they arrived,
        secrets masked as in :attr:`events`, refused ones included; the last 1000 within
        4 MiB (``.dropped`` counts earlier ones; long texts are cut, and say so). Like
        pytest-httpserver's ``log`` and respx's ``calls``.

        A new sequence (index, slice, iterate, ``len``, ``==`` a list; ``list(...)`` makes
        a list) of ``RecordedRequest``: an entry's secrets are masked when it is read, so
        ``len`` and ``.dropped`` cost nothing."""
        timeline = self._service.timeline
        return self._binding.requests.entries(timeline.redact, timeline.masking_generation)

    def auth_count(self, *, version: str | None = None, username: str | None = None) -> int:
        """Successful credential grants of the flow named ``version`` (built in:
        ``"v2"`` tokens of ``/v2/auth``, ``"v3"`` tokens, ``"v1"`` sessions of
        ``/v1/login``, ``"oauth"`` access tokens; or a registered flow's name), or of all
        flows (``None``); ``username``: one account or OAuth client (its ``client_id``).
        A name that is no registered flow, or a flow that grants nothing, raises
        ``ValueError``."""
        return self._service.auth_count(version=version, username=username)

    def wait(
        self,
        *,
        grants: int | None = None,
        calls: int | None = None,
        version: str | None = None,
        username: str | None = None,
        until: Callable[[list[Event]], bool] | None = None,
        timeout: float = 5.0,
    ) -> list[Event]:
        """Block until the fake has seen what a client on another thread, a scheduler or
        another process should have done; fail after ``timeout`` seconds if it has not.

        Every condition given must hold: at least ``grants`` credential grants (counted as
        :meth:`auth_count` counts them), at least ``calls`` calls to declared routes
        (:class:`~pytest_mgmtauth.ApiCall` events, answered or refused), and
        ``until(events)`` true. ``version`` (a flow: ``"v1"``, ``"v2"``, ``"v3"``,
        ``"oauth"``) and ``username`` (an account or OAuth client id) narrow both
        counts. Counts run from the test's start, like :meth:`auth_count`: what the
        client did before the wait still counts, so there is no race to lose.

        The wait sleeps until an event is recorded (no polling), and ``timeout`` is real
        time: it runs out under a frozen ``mgmt_clock`` as well. Like mock-oauth2-server's
        ``takeRequest(timeout)`` it returns what it waited for: the timeline's events
        (:attr:`events`) at that moment.

        :param grants: credential grants to wait for (1 or more).
        :param calls: calls to declared routes to wait for (1 or more).
        :param version: count only this flow's grants and calls.
        :param username: count only this account's (or OAuth client's).
        :param until: a test of the events (oldest first) that must return true.
        :param timeout: seconds of real time, at most 3600.
        :returns: the events once every condition holds.
        :raises AssertionError: on timeout, saying what was waited for, the counts the
            fake saw and its timeline.
        :raises ValueError: for no condition, a count below 1, an unknown flow or
            account, or a timeout out of range.
        """
        __tracebackhide__ = True
        wanted = _wanted(
            grants=grants, calls=calls, version=version, username=username, until=until
        )
        self._known_username(username)
        seconds = check_seconds("timeout", timeout, maximum=3600, what="mgmt_server.wait()")
        timeline = self._service.timeline

        def seen(events: list[Event]) -> tuple[int, int]:
            granted = len(_events.grants(events, version=version, username=username))
            called = sum(
                isinstance(e, _events.ApiCall)
                and (version is None or e.version == version)
                and (username is None or e.username == username)
                for e in events
            )
            return granted, called

        def done(events: list[Event]) -> bool:
            granted, called = seen(events)
            return (
                granted >= (grants or 0)
                and called >= (calls or 0)
                and (until is None or until(events))
            )

        deadline = real_seconds() + seconds
        with timeline.recorded:  # held only while reading: wait() lets it go
            while not done(events := timeline.events):
                left = deadline - real_seconds()
                if left <= 0:
                    break
                timeline.recorded.wait(left)
            else:
                return events
        granted, called = seen(events)
        saw = f"{granted} grant(s) and {called} call(s)"
        if version is not None or username is not None:
            saw += f" of those counted ({len(_events.grants(events))} and "
            saw += f"{sum(isinstance(e, _events.ApiCall) for e in events)} in all)"
        if until is not None:
            saw += f"; until() is {bool(until(events))}"
        raise AssertionError(
            f"mgmt_server.wait({wanted}) timed out after {seconds:g} s of real time: the "
            f"fake saw {saw}.\n" + format_timeline(self.evidence(), username=username)
        )

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
        drift = self.drift_verdict
        if self.live:
            drift = "not checked: a live run records the service's answers"
        return findings.report_section(
            self.evidence(), drift=drift if isinstance(drift, str) else drift()
        )

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

    def stop_forwarding(self) -> None:
        """A live test has ended: forward none of its requests from now on (internal:
        the live glue, before it reads the test's exchanges)."""
        if self._binding.live is not None:
            self._binding.live.ended = True

    def not_forwarded(self) -> str | None:
        """In a live run, the first request the fake answered itself instead of the
        service (``POST /v2/auth -> 502``), or None (internal: the live glue)."""
        live = self._binding.live
        return None if live is None else live.answered_here

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
        registry.closed(self._service)
        live = self._binding.live
        for server in filter(None, (self._http, self._proxy)):
            if live is None:  # a live test's servers stay bound to it: retired below
                server.app.unbind(self._binding)
        self._binding.close()  # requests held by a scripted hang give up now
        # Kept-alive connections idle now are closed, as a server's idle timeout would:
        # the next test's requests come on new connections (clients reconnect).
        self._pool.drop_idle_connections()
        if live is not None:
            live.ended = True
            # Its late requests are refused at its own addresses (ended_message), never
            # seen by the next test, which gets new ones.
            self._pool.retire_servers()
        if (
            self._on_process_time
            and self._binding.live is None
            and self._service.accounts.first_generated
        ):
            # The next test most likely generates its first account too: its first
            # token is signed ahead from now, at real time, which the next test's clock
            # reads or starts frozen at (mgmt_clock), whatever this test's reads now.
            now = time.clock_gettime(time.CLOCK_REALTIME)  # freezegun does not move it
            self._pool.sign_ahead_for_next_test(self.options, now)

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
        service error (1401 wrong credentials, 1402 locked out, both as HTTP 401).

        Scripted faults (this and the ``*_next`` methods below) apply to the next
        ``count`` calls of ``/v2/auth`` (``version="v2"``), v3 auth (``"v3"``),
        ``/v1/login`` (``"v1"``), the OAuth token endpoint (``"oauth"``, answered in its
        RFC 6749 error shape) or any of them (``None``), in the order scripted. They
        never change the service's state, and each one that fires is a
        :class:`~pytest_mgmtauth.FaultInjected` event. Their numbers are checked before
        anything changes: ``count`` an int from 1 to 1000000 (0 is refused, not taken as
        1), ``seconds`` of a hang a finite number > 0 and at most 10 years (315360000
        s), ``retry_after`` an int from 0 to 315360000; a refused call raises
        ``ValueError`` or ``TypeError`` naming the argument, the value and the range,
        and scripts nothing."""
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
        * ``"busy"`` at ``"call3"``: protected call 3 answers 503 (an exploration's
          fault; sweeps do not take it);
        * ``"throttle"`` / ``"unavailable"`` at ``"auth2"``: authentication call 2
          (``/v2/auth`` and ``/v1/login`` requests, counted together) answers 429 with
          ``Retry-After`` / 503.

        Calls are counted from the start of the test; an int ``at`` is the point of the
        kind's own sort. Returns the scheduled fault (see :attr:`scheduled_faults`)."""
        __tracebackhide__ = True
        fault = _faults.scheduled(kind, at)
        self._service.fault_runner.schedule(fault)
        return fault

    def schedule_clock_move(self, seconds: float, *, at: str | int) -> None:
        """Move ``mgmt_clock`` on by ``seconds`` just before protected call ``at``
        (``"call2"`` or ``2``: when call 1 has been answered, while the client reads the
        answer; before call 1, at the first grant): time passing between two calls, as
        an exploration's ``clock`` event does (docs/explore.md). Recorded as a
        ``ScheduledFaultFired`` event with ``fault="clock"``; a test not on
        ``mgmt_clock`` gets the event, and no move."""
        __tracebackhide__ = True
        try:
            index = _faults.scheduled("reset", at).index  # the points of a call's fault
        except ValueError:
            raise ValueError(
                "schedule_clock_move(): at must be a protected call like 'call2' (calls "
                f"counted from 1) or an int >= 1, got {at!r}"
            ) from None
        seconds = check_seconds("seconds", seconds, what="schedule_clock_move()")
        self._service.fault_runner.schedule_move(seconds, index)

    @property
    def scheduled_faults(self) -> list[ScheduledFault]:
        """Scheduled faults whose point has not come (yet):
        :class:`~pytest_mgmtauth.ScheduledFault` records (``kind``, ``on``: ``"call"`` or
        ``"auth"``, ``index``, property ``point``)."""
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
        """Scripted faults that have not fired (yet), with the calls each still applies
        to: :class:`~pytest_mgmtauth.ScriptedFault` records (``kind``, ``count``,
        ``version``, ...)."""
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
        """Lock an account (an ``Account`` or a username) now, until :meth:`unlock` or
        for ``seconds`` of simulated time: every flow that locks out (``/v1/login`` among
        the built-in ones, and a registered flow that checks a secret) answers its
        authentications 1402. ``/v2/auth`` does not lock out (use
        ``fail_next(error=1402, version="v2")`` for that)."""
        __tracebackhide__ = True
        self._service.lockout.lock(_username(account), seconds=seconds)

    def unlock(self, account: Account | str) -> None:
        """End any lock of the account (on cue or after failed authentications) and
        reset its count of failed authentications."""
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
        """The timeline text the assertions show, for one account or all, every line
        of it (failure messages cut a long one around the event they are about): in
        simulated time since the test started, with each credential's uses and end;
        secrets as fingerprints."""
        self._known_username(username)
        # Every line: it is where the cut timelines of failure messages send the reader.
        return format_timeline(self.evidence(), username=username, whole=True)

    def assert_credential_reused(self, *, username: str | None = None) -> None:
        """Fail if an account was granted a new credential (token or session) while it
        still held a valid one, more than ``refresh_margin`` before its expiry and not
        refused by the service (churn; see docs/token-reuse.md). Calling it, passing or
        failing, replaces the teardown check of churn in this test. Alias:
        ``assert_token_reused`` (kept, no warning)."""
        __tracebackhide__ = True
        self._known_username(username)
        self._checked.add("churn")
        checks.check_token_reused(self.evidence(), username=username)

    def assert_auth_count(
        self, n: int, *, version: str | None = None, username: str | None = None
    ) -> None:
        """Fail unless the number of grants (as :meth:`auth_count` counts them, of the
        flow ``version`` and the account ``username`` when given) is exactly ``n``."""
        __tracebackhide__ = True
        self._known_username(username)
        checks.check_auth_count(self.evidence(), n, version=version, username=username)

    def assert_no_expired_credential_used(self, *, username: str | None = None) -> None:
        """Fail if the client presented an expired bearer token or an ended v1 session
        (``ApiCall.credential_expired``). Not counted: the one call that revealed a
        session the service ended idle, when the account then logged in again before
        presenting that session again (the interface document: "The user is logged out
        automatically; logout call is optional"). Calling it replaces the teardown check
        of expired-credential use. Alias: ``assert_no_expired_token_used`` (kept, no
        warning)."""
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
        wrong credential (``ApiCall.wrong_credential``): none, a malformed or unknown
        token, another flow's, account's or profile's token, an OAuth token without a
        scope its client could have asked for (403 ``insufficient_scope``), a v1 call
        without its JSESSIONID cookie or utk.

        Not counted: refusals the test brought about (``expire``, ``revoke``, rotated
        secrets, locks, scripted and scheduled faults, sweep points), expired
        credentials (their own kind) and a right the principal lacks (v1/v2/v3's 1469,
        a 403 ``insufficient_scope`` for a scope the client may not get: the credential
        was good). Calling it replaces the teardown check of refused calls."""
        __tracebackhide__ = True
        self._known_username(username)
        self._checked.add("refused_call")
        checks.check_no_refused_calls(self.evidence(), username=username)

    def expect_refusals(self) -> None:
        """Say that this test sends wrong credentials on purpose: the calls the service
        refuses for them are no finding at teardown (the refusals stay in the timeline,
        and the other checks still run). One line at the top of such a test."""
        self._checked.add("refused_call")

    def assert_logged_out(self, *, username: str | None = None) -> None:
        """Fail if a v1 session started in this test was still held at the end and not
        ended with ``/v1/logout``. Not open: a session the service ended (idle timeout:
        logout is optional then), one the test ended (``expire``, ``revoke``), and one a
        refused call of its account lost (that refusal is the finding). Calling it
        replaces the teardown check of ``require_logout``."""
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


def _wanted(
    *, grants: object, calls: object, version: object, username: object, until: object
) -> str:
    """What a :meth:`MgmtServer.wait` waits for, as its call reads; ValueError for
    nothing to wait for, a count below 1 or an unknown flow."""
    if grants is None and calls is None and until is None:
        raise ValueError(
            "mgmt_server.wait() needs something to wait for: grants=N, calls=N or until=..."
        )
    if grants is not None:
        check_count("grants", grants, what="mgmt_server.wait()")
        check_grants(version, what="mgmt_server.wait")
    if calls is not None:
        check_count("calls", calls, what="mgmt_server.wait()")
    check_version(version, what="mgmt_server.wait() version", none="every flow")
    parts = [
        f"{name}={value!r}"
        for name, value in (("grants", grants), ("calls", calls), ("version", version))
        if value is not None
    ]
    if username is not None:
        parts.append(f"username={username!r}")
    if until is not None and not callable(until):
        raise TypeError(f"mgmt_server.wait() until= takes a function of the events, got {until!r}")
    if until is not None:
        parts.append(f"until={getattr(until, '__name__', 'a test')}")
    return ", ".join(parts)


def _client_id(client: OAuthClient | str) -> str:
    return client if isinstance(client, str) else client.client_id


def _username(account: Account | str) -> str:
    if isinstance(account, Account):
        return account.username
    if isinstance(account, str):
        return account
    raise TypeError(f"expects an Account or a username, got {account!r}")
