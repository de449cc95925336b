"""``MgmtServer``'s timeline and assertions: what happened in a test (events, requests,
counts, waiting for them) and the checks of it in auth terms."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._service import events as _events
from .._service.flows.registry import check_grants, check_version
from .._service.limits import check_count, check_seconds
from .._service.timeline import real_seconds
from .._verdicts import checks
from .._verdicts.evidence import Evidence, format_timeline

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._http.binding import Binding, LoggedRequests
    from .._service.events import Event
    from .._service.options import Options
    from .._service.service import AuthService


class Assertions:
    """The timeline of a test and the assertions on it (a part of ``MgmtServer``)."""

    options: Options
    _service: AuthService
    _binding: Binding
    _checked: set[str]

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
                timeline.wait(left)
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
    given = (("grants", grants), ("calls", calls), ("version", version), ("username", username))
    parts = [f"{name}={value!r}" for name, value in given if value is not None]
    if until is not None and not callable(until):
        raise TypeError(f"mgmt_server.wait() until= takes a function of the events, got {until!r}")
    if until is not None:
        parts.append(f"until={getattr(until, '__name__', 'a test')}")
    return ", ".join(parts)
