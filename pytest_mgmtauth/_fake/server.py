"""``MgmtServer``: the fake service of one test, as users see it (the ``mgmt_server``
fixture). It joins the domain state of this test to the session's HTTP server: where it
answers and its lifecycle here, its parts by concern beside it (``routes.py``,
``accounts.py``, ``faults.py``, ``assertions.py``), one class to its users."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .._http.binding import Binding
from .._service.flows import registry
from .._service.flows.registry import (
    fixed_hosts,
    service_hosts,
)
from .._service.service import AuthService
from .._service.timeline import system_clock
from .._verdicts import findings
from .._verdicts.evidence import AuthSummary, summarize
from .accounts import Accounts
from .assertions import Assertions
from .faults import Faults
from .resolution import refuse_lookups
from .routes import Routes
from .session import intercept_environment, intercept_process, loopback

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable

    from .._http.forward import LiveRun
    from .._service.exchange_shape import Exchange
    from .._service.options import Options
    from .._service.timeline import Clock
    from .session import SessionResources


class MgmtServer(Accounts, Routes, Faults, Assertions):
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
        host = loopback(self._proxy.host)
        host = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
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

    def record_exchanges(self) -> list[Exchange]:
        """Keep this test's exchanges from now on (drift; internal): the list they go to."""
        if self._binding.exchanges is None:
            self._binding.exchanges = []
        return self._binding.exchanges

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

    def __repr__(self) -> str:
        return f"<MgmtServer {self.url} {self.options.describe()}>"
