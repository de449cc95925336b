"""The assertions in auth terms of ``mgmt_server`` (``assert_credential_reused``,
``assert_auth_count``, ...), its timeline, and the evidence they judge (the events,
options and times of the test's service). A base of :class:`~.server.MgmtServer`, which
users see as one object."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._verdicts import checks
from .._verdicts.evidence import Evidence, format_timeline

if TYPE_CHECKING:
    from .._service.options import Options
    from .._service.service import AuthService


class AssertionMethods:
    """``MgmtServer``'s assertions and timeline; they judge the test's service, which
    ``MgmtServer`` sets up, and note in ``_checked`` the kinds of finding the test
    checked itself (the teardown check leaves them out)."""

    options: Options
    _service: AuthService
    _checked: set[str]

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
