"""``MgmtServer``: the fake service of one test, as users see it (the ``mgmt_server``
fixture). It joins the domain state of this test to the session's HTTP server."""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING

from . import _assertions
from ._domain import _faults
from ._domain._accounts import Account
from ._domain._clock import system_clock
from ._domain._service import AuthService
from ._domain._v3 import V3_AUTH_PREFIX
from ._transport._app import BUILTIN_PATHS, CONTROL_PREFIX, Binding, RouteHandler

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Iterable

    from ._domain._clock import Clock
    from ._domain._events import Event
    from ._domain._faults import ScheduledFault, ScriptedFault
    from ._domain._options import Options
    from ._pool import SessionPool

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


class MgmtServer:
    """The fake management auth service of one test.

    Internal constructor, may change: use the ``mgmt_server`` fixture.
    """

    def __init__(
        self,
        options: Options,
        pool: SessionPool,
        clock: Clock | None = None,
        *,
        test_id: str = "",
    ) -> None:
        self.options = options
        self._pool = pool
        self._http = pool.server(https=options.https)
        # No clock: the process's time (what mgmt_clock / freezegun move). The
        # standalone server passes a clock its control API can advance.
        self._service = AuthService(options, pool.signer, clock or system_clock)
        # test_id names the test in errors raised after it ended (see LateErrors).
        self._binding = Binding(self._service, owner=test_id, late=pool.late_errors)
        #: Kinds of finding the test checked itself (assert_token_reused: "churn",
        #: assert_no_expired_token_used: "expired_use", assert_logged_out: "open_session"):
        #: the teardown check leaves them out.
        self._checked: set[str] = set()
        self._http.app.bind(self._binding)

    # -- where ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The service's base URL: endpoints are ``{url}/v2/auth``, ``{url}/v1/login``..."""
        return self._http.base_url

    def url_for(self, path: str) -> str:
        return self.url + ("" if path.startswith("/") else "/") + path

    @property
    def ca_bundle(self) -> str | None:
        """Path of the test CA's certificate (PEM) when serving HTTPS, else ``None``."""
        return self._pool.ca.ca_bundle if self.options.https else None

    def client_ssl_context(self) -> ssl.SSLContext | None:
        """A new client ``SSLContext`` that trusts the test CA (HTTPS only, else None)."""
        return self._pool.ca.client_context() if self.options.https else None

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

    def route(
        self,
        method: str,
        path: str | re.Pattern[str],
        *,
        permission: str | None = None,
        auth: str | None = None,
    ) -> RouteHandler:
        """Declare an operation of the management API the client under test calls.

        Every call is authenticated first: paths under ``/v1/`` by the v1 session
        (JSESSIONID cookie + ``utk`` query parameter), paths under ``/v3/`` by a v3
        bearer token (for the account and profile the path names), all others by the v2
        bearer token; ``auth="v1"``/``"v2"``/``"v3"`` overrides. Returns a
        pytest-httpserver handler: ``.respond_with_json(...)``, ``.respond_with_data(...)``,
        ``.respond_with_handler(fn)``.
        """
        __tracebackhide__ = True
        if not isinstance(method, str) or method.upper() not in _METHODS:
            raise ValueError(
                f"route(): method must be one of {', '.join(_METHODS)}, got {method!r}"
            )
        if isinstance(path, str):
            if not path.startswith("/"):
                raise ValueError(f"route(): path must start with '/', got {path!r}")
            if path in BUILTIN_PATHS or path.startswith(V3_AUTH_PREFIX):
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
            auth = "v1" if pattern.startswith("/v1/") else "v2"
            if pattern.startswith("/v3/"):
                auth = "v3"
        if auth not in ("v1", "v2", "v3"):
            raise ValueError(f"route(): auth must be 'v1', 'v2', 'v3' or None, got {auth!r}")
        handler = RouteHandler(method.upper(), path, permission=permission, auth=auth)
        with self._binding.lock:
            self._binding.routes.append(handler)
        return handler

    # -- what happened -------------------------------------------------------------

    @property
    def events(self) -> list[Event]:
        """The timeline of this test, oldest first: typed, immutable records."""
        return self._service.events

    def auth_count(self, *, version: str | None = None, username: str | None = None) -> int:
        """Successful credential grants: ``/v2/auth`` tokens, v3 tokens and ``/v1/login``
        sessions (``version`` ``"v2"``, ``"v3"``, ``"v1"``; ``None``: all)."""
        return self._service.auth_count(version=version, username=username)

    # -- faults on cue (docs/faults.md) ----------------------------------------------
    #
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
        self._service.faults.add(
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
        self._service.faults.add(_faults.hang(seconds, clock=clock, count=count, version=version))

    def drop_connection_next(self, count: int = 1, *, version: str | None = None) -> None:
        """The next ``count`` auth/login calls get their TCP connection reset (RST)
        without an answer."""
        __tracebackhide__ = True
        self._service.faults.add(_faults.reset(count=count, version=version))

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
        self._service.faults.add(_faults.malformed(count=count, version=version))

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
        self._service.schedule(fault)
        return fault

    @property
    def scheduled_faults(self) -> list[ScheduledFault]:
        """Scheduled faults whose point has not come (yet)."""
        return self._service.faults.scheduled()

    @property
    def protected_calls(self) -> int:
        """Calls to declared routes so far (the ``callK`` points count these)."""
        return self._service.faults.protected_calls

    @property
    def auth_calls(self) -> int:
        """``/v2/auth`` and ``/v1/login`` requests so far, granted or not (the ``authK``
        points count these)."""
        return self._service.faults.auth_calls

    @property
    def pending_faults(self) -> list[ScriptedFault]:
        """Scripted faults that have not fired (yet), with the calls each still applies to."""
        return self._service.faults.pending()

    def clear_faults(self) -> None:
        """Drop every scripted or scheduled fault that has not fired."""
        self._service.faults.clear()

    def expire(self, credential: str) -> str:
        """Make a token or session expire now; ``credential`` is the token (JWT), the
        JSESSIONID (or utk) or a label from the timeline (``"T1"``, ``"S1"``). Later calls
        with it get 401 (1401); re-authenticating is not churn. Returns the label."""
        __tracebackhide__ = True
        return self._service.expire(credential)

    def revoke(self, credential: str) -> str:
        """Revoke a token or session now (as :meth:`expire`, recorded as a revocation).
        Returns the label."""
        __tracebackhide__ = True
        return self._service.revoke(credential)

    def lock(self, account: Account | str, *, seconds: float | None = None) -> None:
        """Lock an account now: ``/v1/login`` answers 1402 until :meth:`unlock`, or for
        ``seconds`` of simulated time. ``/v2/auth`` is not affected (use
        ``fail_next(error=1402, version="v2")`` for that)."""
        __tracebackhide__ = True
        self._service.lock(_username(account), seconds=seconds)

    def unlock(self, account: Account | str) -> None:
        """End any lock of the account (on cue or after failed logins) and reset its
        failed-login count."""
        __tracebackhide__ = True
        self._service.unlock(_username(account))

    def rotate_key(self, account: Account | str, new_key: str | None = None) -> Account:
        """Give the account a new API key (generated unless given) and return the updated
        ``Account``; the old key gets 1401 from now on. Tokens already issued stay valid
        (``revoke`` them too to simulate a compromised key)."""
        __tracebackhide__ = True
        return self._service.rotate_secret(_username(account), "API key", new_key)

    def rotate_password(self, account: Account | str, new_password: str | None = None) -> Account:
        """Give the account a new password and return the updated ``Account``; the old
        password gets 1401 (and counts towards a lockout) from now on. Sessions already
        started stay valid."""
        __tracebackhide__ = True
        return self._service.rotate_secret(_username(account), "password", new_password)

    # -- assertions in auth terms (messages: see _assertions) -----------------------

    # -- for the plugin and mgmtauth-server (internal: not part of the public API) --------
    # The lifecycle the pytest glue drives: use_clock_mover() at setup, check() and
    # teardown_findings() after the test, report_section() and summary() for the
    # reports, close() last. Public names so that the glue calls no private method.

    def scene(self) -> _assertions.Scene:
        """What the assertions judge: the events, options and times of this fake."""
        service = self._service
        events = service.events
        # At teardown mgmt_clock may have stopped already (it is torn down first when
        # requested after mgmt_server): never let "now" fall before what happened.
        latest = max((e.at.timestamp() for e in events), default=service.started_at)
        return _assertions.Scene(
            events=events,
            options=self.options,
            started_at=service.started_at,
            now=max(service.now(), latest),
        )

    def _known_username(self, username: str | None) -> None:
        __tracebackhide__ = True
        if username is None:
            return
        names = [a.username for a in self._service.account_list()]
        if username not in names:
            known = ", ".join(repr(u) for u in names) or "none"
            raise ValueError(
                self._service.redact(f"no account {username!r} in this test; accounts: {known}")
            )

    def timeline(self, username: str | None = None) -> str:
        """This test's timeline (of one account, or all) in simulated time since the
        test started, with each credential's uses and end; secrets as fingerprints."""
        self._known_username(username)
        # Every line: it is where the cut timelines of failure messages send the reader.
        return _assertions.format_timeline(self.scene(), username=username, whole=True)

    def assert_credential_reused(self, *, username: str | None = None) -> None:
        """Fail if an account was granted a new credential while it still held a valid
        one (churn; see docs/token-reuse.md). Takes over the teardown check."""
        __tracebackhide__ = True
        self._known_username(username)
        self._checked.add("churn")
        _assertions.check_token_reused(self.scene(), username=username)

    def assert_auth_count(
        self, n: int, *, version: str | None = None, username: str | None = None
    ) -> None:
        """Exactly ``n`` credential grants (``version`` ``"v1"``/``"v2"``/``"v3"``, one
        account)."""
        __tracebackhide__ = True
        self._known_username(username)
        _assertions.check_auth_count(self.scene(), n, version=version, username=username)

    def assert_no_expired_credential_used(self, *, username: str | None = None) -> None:
        """Fail if the client presented an expired bearer token or an ended v1 session.
        Takes over the teardown check of expired-credential use."""
        __tracebackhide__ = True
        self._known_username(username)
        self._checked.add("expired_use")
        _assertions.check_no_expired_credential_used(self.scene(), username=username)

    #: Alias of :meth:`assert_credential_reused` (it covers v1 sessions and v3 tokens
    #: too); kept, no warning.
    assert_token_reused = assert_credential_reused
    #: Alias of :meth:`assert_no_expired_credential_used`; kept, no warning.
    assert_no_expired_token_used = assert_no_expired_credential_used

    def assert_logged_out(self, *, username: str | None = None) -> None:
        """Fail if a v1 session opened in this test was not ended with /v1/logout.
        Takes over the teardown check of ``require_logout``."""
        __tracebackhide__ = True
        self._known_username(username)
        self._checked.add("open_session")
        _assertions.check_logged_out(self.scene(), username=username)

    def assert_single_flight(self, *, username: str | None = None) -> None:
        """Fail if a grant was requested while another grant to the same account was in
        flight (a thundering herd of threads or tasks refreshing together)."""
        __tracebackhide__ = True
        self._known_username(username)
        _assertions.check_single_flight(self.scene(), username=username)

    def teardown_findings(self) -> list[_assertions.Finding]:
        """The teardown check: the findings of the kinds the options count, except those
        the test checked itself with the matching assertion."""
        kinds = [k for k in _assertions.default_kinds(self.options) if k not in self._checked]
        return _assertions.findings(self.scene(), kinds=kinds) if kinds else []

    def report_section(self) -> str:
        """The text of the test's ``mgmtauth timeline`` report section."""
        return _assertions.report_section(self.scene())

    def summary(self) -> _assertions.AuthSummary:
        """The figures of this fake for the terminal summary and JUnit (internal)."""
        return _assertions.summarize(self._service.events)

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
        return _assertions.format_timeline(self.scene(), username=username, whole=True)

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
        self._binding.close()  # requests held by a scripted hang give up now
        # Kept-alive connections idle now are closed, as a server's idle timeout would:
        # the next test's requests come on new connections (clients reconnect).
        self._http.drop_idle_connections()

    def __repr__(self) -> str:
        return f"<MgmtServer {self.url} {self.options.describe()}>"


def _username(account: Account | str) -> str:
    if isinstance(account, Account):
        return account.username
    if isinstance(account, str):
        return account
    raise TypeError(f"expects an Account or a username, got {account!r}")
