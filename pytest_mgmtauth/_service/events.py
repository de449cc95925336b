"""The timeline: typed, immutable records of what happened to the fake in one test.

Every event has ``at`` (the simulated time, an aware UTC datetime) and ``username``
(``None`` when the request named no known account). Credentials are named by their
per-test label (``T1``, ``T2`` for bearer tokens, ``S1`` for sessions) and a short
fingerprint; secrets never appear whole. :class:`Event`'s ``describe(when)`` and
``line(when)`` are the one event-to-text path.

Here: the base :class:`Event`, its text helpers, and the events of authentication and
credentials, in two families: what clients' requests bring about, and what the test
brings about on cue; then the events of calls (API calls, wrong hosts, bad requests,
unknown routes, closed tunnels, calls to API versions past Active) and of faults.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING, ClassVar, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: How a text shows a moment: the timeline's offsets, ISO 8601 in the control API.
TimeFormat: TypeAlias = "Callable[[datetime], str]"


def iso_time(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``: the default :data:`TimeFormat`."""
    return value.isoformat().replace("+00:00", "Z")


def format_offset(seconds: float) -> str:
    """Simulated time since the test started, as ``HH:MM:SS``."""
    sign = "-" if seconds < 0 else ""
    total = int(abs(seconds))
    return f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


#: Seconds from time zero from which a timeline shows a moment as the simulated date and
#: time instead of an offset: a test that moved its clock by months would read
#: ``13675:25:25``.
OFFSET_LIMIT = 100 * 3600


def format_moment(timestamp: float, origin: float) -> str:
    """A moment of a timeline whose time zero is ``origin``: ``HH:MM:SS`` since it, or,
    100 hours or more away, the simulated time in UTC (``2028-06-01T00:00:00Z``)."""
    seconds = timestamp - origin
    if abs(seconds) < OFFSET_LIMIT:
        return format_offset(seconds)
    whole = datetime.fromtimestamp(math.floor(timestamp), tz=timezone.utc)
    return iso_time(whole)


def shown(text: str) -> str:
    """A text that came from a request (a path, a method, a v3 account or profile name,
    a reason quoting them) as a timeline or message shows it: as it is when every
    character is printable, else escaped with ``repr`` (as usernames are), so that a
    ``%0A`` in a path cannot start a line that passes for an event."""
    return text if text.isprintable() else repr(text)


def timeline_origin(events: Sequence[Event], started_at: float) -> float:
    """Time zero of a timeline: the test's start, or an earlier event if the clock was
    moved back (``mgmt_clock.move_to``), so offsets stay readable. Whole seconds, like a
    wall clock: without a frozen clock the test starts mid-second, and a token's exp
    (whole seconds) would show as 00:29:59; never "-00:00:00"."""
    first = min((e.at.timestamp() for e in events), default=started_at)
    return math.floor(min(started_at, first))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    """A record of the timeline (``mgmt_server.events``): a frozen, keyword-only
    dataclass; every event class below is a subclass."""

    at: datetime
    """When it happened, in simulated time: an aware UTC ``datetime``."""
    username: str | None
    """The account it concerns, or ``None`` when the request named no known account."""

    #: Whether a timeline line says "[no known account]" when ``username`` is None.
    _names_account: ClassVar[bool] = True

    def describe(self, when: TimeFormat = iso_time) -> str:
        """What happened, as complete text; ``when`` formats the moments it names."""
        return type(self).__name__

    def line(self, when: TimeFormat) -> str:
        """One line of a timeline (assertions, reports, sweeps), without the time."""
        text = self._timeline_text(when)
        if self.username is None and self._names_account:
            text += "  [no known account]"
        return text

    def _timeline_text(self, when: TimeFormat) -> str:
        return self.describe(when)


# -- what clients' requests bring about --------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenIssued(Event):
    """When: ``/v2/auth``, v3 auth or the OAuth token endpoint granted a bearer token.

    Fields besides ``at`` and ``username``: ``token`` (label, ``"T1"``),
    ``fingerprint``, ``expires_at`` (``datetime``), ``while_valid`` (labels of tokens
    the account still held, valid and not within ``refresh_margin`` of expiry, of the
    same version and, for v3, the same account and profile; non-empty means the grant
    was premature), property ``premature``, ``concurrent_with`` (labels of grants to the
    account issued while this request was in flight: non-empty means a thundering herd),
    ``version`` (``"v2"``, ``"v3"`` or ``"oauth"``), ``account`` and ``profile`` (v3's
    pair, else ``None``), ``scopes`` (an OAuth token's scopes, else ``()``), property
    ``scope`` (``"account/profile"`` for v3, the scopes space-separated for OAuth,
    ``""`` for v2); the username of an OAuth grant is the client's id.
    """

    token: str
    fingerprint: str
    expires_at: datetime
    while_valid: tuple[str, ...] = ()
    concurrent_with: tuple[str, ...] = ()
    version: str = "v2"
    account: str | None = None
    profile: str | None = None
    scopes: tuple[str, ...] = ()

    @property
    def premature(self) -> bool:
        return bool(self.while_valid)

    @property
    def scope(self) -> str:
        """``account/profile`` of a v3 token, the scopes of an OAuth token (space
        separated), ``""`` for v2."""
        if self.account is None:
            return " ".join(self.scopes)
        return f"{shown(self.account)}/{shown(str(self.profile))}"

    def describe(self, when: TimeFormat = iso_time) -> str:
        kind = flow_credential(self.version)
        if self.scope:  # v3's and OAuth's name their flow and scope
            kind = f"{self.version} {kind}"
        scope = f" for {self.scope}" if self.scope else ""
        text = f"{kind} {self.token} ({self.fingerprint}){scope} issued, valid to "
        text += when(self.expires_at)
        if self.while_valid:
            text += f"  <-- premature: {', '.join(self.while_valid)} still valid"
        if self.concurrent_with:
            text += f"  <-- concurrent with {', '.join(self.concurrent_with)}"
        return text

    def _timeline_text(self, when: TimeFormat) -> str:
        source = flow_title(self.version) + (f" for {self.scope}" if self.scope else "")
        return (
            f"{self.token} issued by {source} ({self.fingerprint}), valid until "
            f"{when(self.expires_at)}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuthRejected(Event):
    """When: ``/v2/auth``, v3 auth or the OAuth token endpoint refused the request.

    Fields besides ``at`` and ``username``: ``return_code`` (1401; for OAuth the HTTP
    status), ``reason`` (the diagnosis), ``version``, ``account``, ``profile`` (as
    ``TokenIssued``), ``error`` (OAuth's RFC 6749 error code, else ``None``).
    """

    return_code: int
    reason: str
    version: str = "v2"
    account: str | None = None
    profile: str | None = None
    error: str | None = None

    def describe(self, when: TimeFormat = iso_time) -> str:
        scope = (
            f" for {shown(self.account)}/{shown(str(self.profile))}"
            if self.account is not None
            else ""
        )
        path = flow_title(self.version, path=True)
        code = self.error or self.return_code
        return f"{path}{scope} rejected ({code}): {shown(self.reason)}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoggedIn(Event):
    """When: ``/v1/login`` started a session.

    Fields besides ``at`` and ``username``: ``session`` (label, ``"S1"``),
    ``fingerprint``, ``while_valid``, property ``premature``, ``concurrent_with``.
    """

    session: str
    fingerprint: str
    while_valid: tuple[str, ...] = ()
    concurrent_with: tuple[str, ...] = ()
    #: The flow that started it.
    version: str = "v1"

    @property
    def premature(self) -> bool:
        return bool(self.while_valid)

    def describe(self, when: TimeFormat = iso_time) -> str:
        text = f"session {self.session} ({self.fingerprint}) started by /v1/login"
        if self.while_valid:
            text += f"  <-- premature: {', '.join(self.while_valid)} still active"
        if self.concurrent_with:
            text += f"  <-- concurrent with {', '.join(self.concurrent_with)}"
        return text

    def _timeline_text(self, when: TimeFormat) -> str:
        return f"{self.session} started by /v1/login ({self.fingerprint})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoginRejected(Event):
    """When: ``/v1/login`` refused.

    Fields besides ``at`` and ``username``: ``return_code`` (1401 wrong credentials,
    1402 locked out), ``reason``.
    """

    return_code: int
    reason: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"/v1/login rejected ({self.return_code}): {shown(self.reason)}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccountLocked(Event):
    """When: a failed authentication of a flow that locks out reached
    ``lockout_threshold``.

    Fields besides ``at`` and ``username``: ``failures``, ``until`` (``datetime``),
    ``version`` (the flow whose failed authentications locked it: ``"v1"`` among the
    built-in ones, or a registered flow).
    """

    failures: int
    until: datetime
    version: str = "v1"

    def describe(self, when: TimeFormat = iso_time) -> str:
        words = FLOW_WORDS.get(self.version)
        attempts = words.attempts if words is not None else "authentications"
        return (
            f"account locked after {self.failures} failed {attempts} in a row, until "
            f"{when(self.until)}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoggedOut(Event):
    """When: ``/v1/logout`` ended a session.

    Fields besides ``at`` and ``username``: ``session``.
    """

    session: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"session {self.session} ended by /v1/logout"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SessionExpired(Event):
    """When: a v1 session was idle for ``session_timeout`` (``at`` is the moment it
    expired).

    Fields besides ``at`` and ``username``: ``session``.
    """

    session: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"session {self.session} expired (idle timeout)"


#: Why a client that slept its Retry-After was throttled again under a frozen clock.
SLEPT_IN_REAL_TIME = (
    "the client waited in real time while the test froze time (mgmt_clock), so the "
    "fake saw no time pass; let it wait on mgmt_clock: give it a sleep that calls "
    "mgmt_clock.advance(seconds=...) (for urllib3, a Retry whose sleep() does: the recipe "
    '"Honour Retry-After on mgmt_clock" of the page Faults)'
)


def retried_too_soon(waited: float, asked: int | None, waited_real: float | None) -> str:
    """Why a retry inside a 429's ``Retry-After`` was refused again: the one text of
    :class:`Throttled` (authentication) and :class:`RateLimited` (API calls). A client that
    slept in real time while the test's clock stood still is told so."""
    text = f"retried {waited:g} s after a 429 with Retry-After {asked}s"
    if waited_real is not None:
        return (
            f"{text} on the test's clock, after {waited_real:.1f} s of real time: "
            f"{SLEPT_IN_REAL_TIME}"
        )
    return f"{text}; honour Retry-After"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Throttled(Event):
    """When: ``/v2/auth``, v3 auth or the OAuth token endpoint answered 429: after
    premature grants, or to a retry inside the ``Retry-After`` of a fault's 429.

    Fields besides ``at`` and ``username``: ``retry_after`` (seconds),
    ``premature_grants`` (in the last 60 s), ``version``, ``waited`` and ``asked`` (a
    retry inside a fault's ``Retry-After``: seconds after the 429, and its
    ``Retry-After``; else ``None``), ``waited_real`` (real seconds after the 429 when
    they were at least its ``Retry-After`` while the simulated clock stood still: the
    client slept in real time; else ``None``).
    """

    retry_after: int
    premature_grants: int
    version: str = "v2"
    waited: float | None = None
    asked: int | None = None
    waited_real: float | None = None

    def describe(self, when: TimeFormat = iso_time) -> str:
        path = flow_title(self.version, path=True)
        if self.waited is not None:
            return (
                f"{path} throttled again (429, Retry-After {self.retry_after}s): "
                + retried_too_soon(self.waited, self.asked, self.waited_real)
            )
        return (
            f"{path} throttled (429, Retry-After {self.retry_after}s) after "
            f"{self.premature_grants} premature grants within 60 s"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class LogoutRejected(Event):
    """When: ``/v1/logout`` without a live session (``LoggedOutRejected`` is a deprecated
    alias of the same class).

    Fields besides ``at`` and ``username``: ``reason``.
    """

    reason: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"/v1/logout rejected: {shown(self.reason)}"


@dataclasses.dataclass(frozen=True)
class FlowWords:
    """How texts name a flow: its authentication endpoint (and that endpoint's path),
    what it grants, and its failed authentications."""

    title: str
    path_title: str
    credential: str
    attempts: str


#: The words of every registered flow, by name. The flows record these events, so the
#: events cannot import them: the registry fills this table as it registers a flow.
FLOW_WORDS: dict[str, FlowWords] = {}


def flow_title(version: str, *, path: bool = False) -> str:
    """How texts name the authentication endpoint of the flow ``version`` (or its path)."""
    words = FLOW_WORDS.get(version)
    if words is None:
        return version
    return words.path_title if path else words.title


def flow_credential(version: str) -> str:
    """What the flow ``version`` grants: ``"token"`` or ``"session"``."""
    words = FLOW_WORDS.get(version)
    return words.credential if words is not None else "credential"


#: A successful credential grant.
Grant: TypeAlias = "TokenIssued | LoggedIn"


def grants(
    events: Sequence[Event], *, version: str | None = None, username: str | None = None
) -> list[Grant]:
    """Successful credential grants (``/v2/auth``, v3 auth, ``/v1/login``), in order."""
    return [
        e
        for e in events
        if isinstance(e, (TokenIssued, LoggedIn))
        and (username is None or e.username == username)
        and (version is None or e.version == version)
    ]


# -- what the test brings about ---------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class _CredentialEndedOnCue(Event):
    """A token (``version="v2"`` or ``"v3"``) or session (``"v1"``) the test ended on
    purpose."""

    credential: str
    version: str

    #: What happened to it, in the timeline line.
    _ended: ClassVar[str]

    def describe(self, when: TimeFormat = iso_time) -> str:
        kind = flow_credential(self.version)
        return f"{kind} {self.credential} {self._ended} on cue"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CredentialExpired(_CredentialEndedOnCue):
    """When: ``mgmt_server.expire(...)`` ended a token or session.

    Fields besides ``at`` and ``username``: ``credential`` (label), ``version``.
    """

    _ended: ClassVar[str] = "expired"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CredentialRevoked(_CredentialEndedOnCue):
    """When: ``mgmt_server.revoke(...)`` revoked a token or session.

    Fields besides ``at`` and ``username``: ``credential`` (label), ``version``.
    """

    _ended: ClassVar[str] = "revoked"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccountLockedManually(Event):
    """When: ``mgmt_server.lock(...)``.

    Fields besides ``at`` and ``username``: ``until`` (``datetime``, or ``None``: until
    ``unlock``).
    """

    until: datetime | None

    def describe(self, when: TimeFormat = iso_time) -> str:
        end = "until unlocked" if self.until is None else f"until {when(self.until)}"
        return f"account locked on cue, {end}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccountUnlocked(Event):
    """When: ``mgmt_server.unlock(...)``."""

    def describe(self, when: TimeFormat = iso_time) -> str:
        return "account unlocked on cue"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SecretRotated(Event):
    """When: ``mgmt_server.rotate_key(...)`` / ``rotate_password(...)`` /
    ``rotate_client_secret(...)``.

    Fields besides ``at`` and ``username``: ``secret`` (``"API key"``, ``"password"`` or
    ``"client secret"``), ``old_fingerprint``, ``new_fingerprint``, ``refused_with``
    (what the old one gets: ``"1401"``, ``"invalid_client"``).
    """

    secret: str
    old_fingerprint: str
    new_fingerprint: str
    refused_with: str = "1401"

    def describe(self, when: TimeFormat = iso_time) -> str:
        return (
            f"{self.secret} rotated on cue ({self.old_fingerprint} -> {self.new_fingerprint}); "
            f"the old one now gets {self.refused_with}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClientRevoked(Event):
    """When: ``mgmt_server.revoke_client(...)`` (``username`` is the client's id)."""

    def describe(self, when: TimeFormat = iso_time) -> str:
        return "OAuth client revoked on cue: token requests now get invalid_grant"


# -- calls and faults: calls to declared routes, calls refused before any auth decision
# (a wrong host, a malformed request, no route, a proxy tunnel that closed), and the
# faults the test scripted or scheduled as they answer or fire --------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Request(Event):
    """An event of one request: its ``method`` and ``path``, as they came."""

    method: str
    path: str

    @property
    def _request(self) -> str:
        return f"{shown(self.method)} {shown(self.path)}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApiCall(_Request):
    """When: a call to a declared route, authenticated or refused.

    Fields besides ``at`` and ``username``: ``method``, ``path``, ``version``
    (``"v1"``/``"v2"``/``"v3"``), ``credential`` (label, or ``None`` when the fake knows
    no credential of this test in it), ``status`` (what the client got), ``return_code``
    (``None``, or 1401/1469 when the fake refused the call), ``reason`` (why it was
    refused), ``credential_expired`` (the client presented an expired token or an ended
    session), ``wrong_credential`` (the client presented a credential that was never
    good for this call: a ``refused_call`` finding; ``False`` for refusals the test
    brought about, for expired credentials and for 1469), ``host`` (the host it reached
    where that is not its flow's usual one, else ``None``), ``error`` (an OAuth route's
    RFC 6750 error code: ``invalid_token``, ``insufficient_scope``, ``invalid_request``,
    or ``no token``; a v3 route's envelope message: ``Unauthorized``, ``Forbidden``;
    else ``None``), property ``authenticated``.
    """

    version: str
    credential: str | None
    status: int
    return_code: int | None = None
    reason: str | None = None
    credential_expired: bool = False
    wrong_credential: bool = False
    host: str | None = None
    error: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.return_code is None

    def describe(self, when: TimeFormat = iso_time) -> str:
        cred = self.credential or "no known credential"
        at = f" at {self.host}" if self.host else ""
        text = f"{self._request}{at} with {cred} -> {self.status}"
        if self.return_code is not None:
            text += f" ({self.error or self.return_code}: {shown(self.reason or '')})"
        return text


@dataclasses.dataclass(frozen=True, kw_only=True)
class RateLimited(_Request):
    """When: a call to a declared route was refused for its rate (the option
    ``rate_limits``, or the route's ``rate_limit=``): 429 past the limit, or 400 for a
    bulk call over the family's events per call.

    Fields besides ``at`` and ``username``: ``method``, ``path``, ``version`` (the
    route's flow), ``limit`` (what was exceeded: ``"Visitor Profile API (v3), 50/s"``
    or ``"route GET /things, 5/min"``), ``counted`` (requests or events already in the
    window), ``status`` (429, or 400), ``retry_after`` (seconds, ``None`` with a 400),
    ``waited`` and ``asked`` (a retry refused again inside the ``Retry-After`` of an
    earlier 429: seconds since it, and its ``Retry-After``; else ``None``),
    ``waited_real`` (real seconds since that 429 when they were at least its
    ``Retry-After`` while the simulated clock stood still; else ``None``), ``reason``,
    ``credential`` (the label of the credential the call presented).
    """

    version: str
    limit: str
    counted: int
    credential: str | None = None
    status: int = 429
    retry_after: int | None = None
    waited: float | None = None
    asked: int | None = None
    waited_real: float | None = None
    reason: str = ""

    def describe(self, when: TimeFormat = iso_time) -> str:
        call = self._request
        if self.credential:
            call += f" with {self.credential}"
        if self.status != 429:
            return f"{call} -> {self.status}: {shown(self.reason)}"
        head = f"{call} rate-limited (429, Retry-After {self.retry_after}s, {self.limit})"
        if self.waited is not None:
            return f"{head}: " + retried_too_soon(self.waited, self.asked, self.waited_real)
        return f"{head}: {shown(self.reason)}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class WrongHost(_Request):
    """When: a request at a host that does not serve it (404, the page Hosts).

    Fields besides ``at`` and ``username``: ``method``, ``path``, ``version``, ``went``
    and ``expected`` (where it went, where it belongs, as the client reaches them),
    ``credential`` (label, or ``None``), ``status``, ``reason``, ``api`` (an API call,
    not an authentication).
    """

    version: str
    went: str
    expected: str
    credential: str | None
    status: int
    reason: str
    api: bool = True

    def describe(self, when: TimeFormat = iso_time) -> str:
        cred = f" with {self.credential}" if self.credential else ""
        return (
            f"{self.method} {self.path} at {self.went}{cred} -> {self.status} wrong host: "
            f"{self.reason}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TunnelClosed(Event):
    """When: interception: a tunnel of the proxy closed before its first request (no SNI,
    another SNI, no TLS handshake in time, plain HTTP in it), or a connection that this
    process's lookup of a service host sent to the fake failed its TLS handshake (the
    client does not trust the test CA, no SNI).

    Fields besides ``at`` and ``username``: ``target`` (``host:443``), ``reason``,
    ``via`` (``"CONNECT"`` or ``"TLS"``).
    """

    _names_account: ClassVar[bool] = False

    target: str
    reason: str
    via: str = "CONNECT"

    def describe(self, when: TimeFormat = iso_time) -> str:
        closed = "tunnel closed" if self.via == "CONNECT" else "connection closed"
        return f"{self.via} {self.target} -> {closed}: {self.reason}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BadRequest(_Request):
    """When: a malformed request got a 4xx before any auth decision.

    Fields besides ``at`` and ``username``: ``method``, ``path``, ``status``,
    ``reason``.
    """

    _names_account: ClassVar[bool] = False

    status: int
    reason: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"{self._request} -> {self.status} bad request: {shown(self.reason)}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnknownRoute(_Request):
    """When: a request to a path no route declares (404) or with a method no route of that
    path declares (405).

    Fields besides ``at`` and ``username``: ``method``, ``path``, ``status``.
    """

    _names_account: ClassVar[bool] = False

    status: int

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"{self._request} -> {self.status}: no route declares it"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeprecatedVersionCall(_Request):
    """When: a call to a declared route on a ``/v{YYYY-MM}/`` version past Active (the page
    OAuth, "The lifecycle of API versions"): in End of Support (answered, with
    ``Sunset``, ``Deprecation`` and ``Link``) or at End of Life (410); ``username`` is
    ``None``.

    Fields besides ``at`` and ``username``: ``method``, ``path``, ``api_version``
    (``"2026-06"``), ``phase`` (``"end_of_support"`` or ``"end_of_life"``), ``sunset``
    (``datetime``, its End of Life), ``successor`` (the successor's path), ``status``
    (410 at End of Life, else ``None``).
    """

    _names_account: ClassVar[bool] = False

    api_version: str
    phase: str
    sunset: datetime
    successor: str
    status: int | None = None

    def describe(self, when: TimeFormat = iso_time) -> str:
        call = self._request
        sunset = self.sunset.date().isoformat()
        if self.status is not None:
            return (
                f"{call} -> {self.status}: API version {self.api_version} reached End of "
                f"Life on {sunset}; its successor: {shown(self.successor)}"
            )
        return (
            f"{call}: API version {self.api_version} is in End of Support (Sunset "
            f"{sunset}); its successor: {shown(self.successor)}"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FaultInjected(_Request):
    """When: a scripted fault (``fail_next``, ``hang_next``, ``drop_connection_next``,
    ``malformed_next``) answered a call.

    Fields besides ``at`` and ``username``: ``method``, ``path``, ``fault`` (``"fail"``,
    ``"hang"``, ``"reset"``, ``"malformed"``), ``detail`` (what the client got),
    ``ordinal`` and ``count`` (the ``ordinal``-th of the ``count`` calls scripted).
    """

    fault: str
    detail: str
    ordinal: int
    count: int

    def describe(self, when: TimeFormat = iso_time) -> str:
        fault = f"scripted fault ({self.ordinal} of {self.count})"
        return f"{self._request} -> {fault}: {shown(self.detail)}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScheduledFaultFired(Event):
    """When: a scheduled fault (``schedule_fault``, a sweep item's) reached its point.

    Fields besides ``at`` and ``username``: ``fault`` (``"expire"``, ``"revoke"``,
    ``"throttle"``, ``"unavailable"``, ``"reset"``; ``"clock"`` for a move of
    ``schedule_clock_move``, an exploration's), ``point`` (``"call3"``, ``"auth2"``),
    ``detail`` (what it did: "the clock moved on 1800 s to the end of token T1", "token
    T1 revoked on cue", "the clock moved on 1790 s", ...).
    """

    fault: str
    point: str
    detail: str

    def describe(self, when: TimeFormat = iso_time) -> str:
        return f"scheduled fault {self.fault}@{self.point}: {shown(self.detail)}"
