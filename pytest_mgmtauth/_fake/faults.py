"""``MgmtServer``'s faults on cue: scripted and scheduled faults, clock moves,
credentials ended, accounts locked and secrets rotated (docs/faults.md)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from .._service import faults as _faults
from .._service.accounts import Account
from .._service.limits import check_seconds

if TYPE_CHECKING:
    from .._http.server import FakeHTTPServer
    from .._service.faults import ScheduledFault, ScriptedFault
    from .._service.service import AuthService


class Faults:
    """The faults a test brings about (a part of ``MgmtServer``)."""

    _service: AuthService
    _http: FakeHTTPServer

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


def _username(account: Account | str) -> str:
    if isinstance(account, Account):
        return account.username
    if isinstance(account, str):
        return account
    raise TypeError(f"expects an Account or a username, got {account!r}")
