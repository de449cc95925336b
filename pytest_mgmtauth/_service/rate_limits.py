"""The rate-limit rule of API calls, opt-in: a route's own ``rate_limit="50/s"``, or,
with the option ``rate_limits``, the figures the service publishes for the API family a
path belongs to (:data:`FAMILIES`).

Contracts:

- The transport asks :meth:`RateLimits.admit` once per call to a declared route, after
  the call is authenticated and before its handler runs; an admitted call counts at once
  (whatever its handler answers), a refused one does not count.
- Windows slide over the timeline's clock: ``mgmt_clock`` when the test uses it (no
  time passes between calls unless the test moves it), else the real clock.
- A call past the limit is refused with 429 and ``Retry-After``: whole seconds, at least
  1, until the window admits a call again. A bulk call of more events than its family
  takes in one call is refused with 400.
- A call refused again inside the ``Retry-After`` of an earlier 429 of the same window
  is told so (a client that retries at once), as a throttled authentication is.
- A route's own limit counts the calls to that route; a family's, the requests (Collect:
  the events) to any route of its paths, per account named in the path
  (``/accounts/{account}/``), and per publish id for publish status.

No HTTP here: the transport passes the call's method, path and body and renders the
:class:`~.records.Refusal`, in the route's flow's error shape.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import deque
from typing import TYPE_CHECKING, NoReturn, TypeAlias

from .events import RateLimited, retried_too_soon
from .limits import MAX_COUNT, shown
from .timeline import real_seconds, to_datetime

if TYPE_CHECKING:
    import threading

    from .options import Options
    from .timeline import Timeline

#: How a rate is written, for messages.
RATE_FORM = "'<N>/s' or '<N>/min' (like '50/s'), N a whole number from 1 to 1000000"

#: Who called what: username, the route's flow, method, path, the credential's label.
_Call: TypeAlias = "tuple[str | None, str, str, str, str | None]"

_UNITS = {"s": 1.0, "min": 60.0}
_RATE = re.compile(r"([0-9]+)/(s|min)")


@dataclasses.dataclass(frozen=True)
class Rate:
    """At most ``count`` requests (or events) within any ``per`` seconds."""

    count: int
    unit: str

    @property
    def per(self) -> float:
        return _UNITS[self.unit]

    def __str__(self) -> str:
        return f"{self.count}/{self.unit}"


def parse_rate(value: object, *, what: str) -> Rate:
    """``"50/s"`` or ``"5/min"`` as a :class:`Rate`, or a TypeError/ValueError that names
    ``what``, the value and the accepted form."""
    if isinstance(value, Rate):
        return value
    if not isinstance(value, str):
        raise TypeError(f"{what} takes a rate like '50/s' ({RATE_FORM}), got {shown(value)}")
    match = _RATE.fullmatch(value.strip())
    count = int(match.group(1)) if match and len(match.group(1)) <= 7 else 0
    if match is None or not 1 <= count <= MAX_COUNT:
        raise ValueError(f"{what} must be a rate {RATE_FORM}, got {shown(value)}")
    return Rate(count, match.group(2))


@dataclasses.dataclass(frozen=True)
class Family:
    """An API whose calls the service limits, with the figure its page publishes."""

    #: How messages and the timeline name it.
    title: str
    #: The paths it answers, as its pages write them (the reference lists them).
    paths: tuple[str, ...]
    #: Which request paths are its own; the group ``key``, when there is one, names the
    #: window's own key (publish status: its publish id).
    pattern: re.Pattern[str]
    rate: Rate
    #: The page that publishes the figure (docs.tealium.com).
    page: str
    #: What the rate counts: ``"request"``, or ``"event"`` (Collect: a bulk call counts
    #: the events it carries).
    counts: str = "request"
    #: The most events one bulk call may carry (Collect: 10); ``None``: no such limit.
    per_call: int | None = None


_ACCOUNT = r"/accounts/(?P<account>[^/]+)/profiles/"

#: The published figures (the option ``rate_limits``), first match wins.
FAMILIES: tuple[Family, ...] = (
    Family(
        "Hosted Data Layer API (v2)",
        ("/v2/dle/accounts/{account}/profiles/{profile}/datalayers/{datalayer_id}",),
        re.compile(rf"/v2/dle{_ACCOUNT}"),
        Rate(100, "s"),
        "api/v2/hosted-data-layer/endpoints",
    ),
    Family(
        "Collect HTTP API (v3)",
        (
            "/v3/collect/event",
            "/v3/collect/regional/event",
            "/v3/collect/bulk-event",
            "/v3/collect/regional/bulk-event",
            "/v3/collect/integration/event/accounts/{account}/profiles/{profile}/datasources/"
            "{datasourceID}",
            "/v3/collect/regional/integration/event/accounts/{account}/profiles/{profile}/"
            "datasources/{datasourceID}",
        ),
        re.compile(rf"/v3/collect/(?:.*?{_ACCOUNT})?"),
        Rate(100, "s"),
        "api/v3/http-api/about",
        counts="event",
        per_call=10,
    ),
    Family(
        "Visitor Profile API (v3)",
        (
            "/v3/customer/visitor/accounts/{account}/profiles/{profile}",
            "/v3/visitor/accounts/{account}/profiles/{profile}",
        ),
        re.compile(rf"/v3/(?:customer/)?visitor{_ACCOUNT}"),
        Rate(50, "s"),
        "api/v3/visitor-profile/about",
    ),
    Family(
        "Visitor Privacy API (v3)",
        ("/v3/privacy/visitor/accounts/{account}/profiles/{profile}",),
        re.compile(rf"/v3/privacy/(?:.*?{_ACCOUNT})?"),
        Rate(50, "s"),
        "api/v3/visitor-privacy/about",
    ),
    Family(
        "iQ Publish API's publish status (v3)",
        ("/v3/tiq/accounts/{account}/profiles/{profile}/publish/{publish_id}/status",),
        re.compile(rf"/v3/tiq{_ACCOUNT}[^/]+/publish/(?P<key>[^/]+)/status/?$"),
        Rate(1, "s"),
        "api/v3/iq-profiles/iq-publish-api",
    ),
)


def family_of(path: str) -> tuple[Family, tuple[str, ...]] | None:
    """The family whose paths ``path`` is one of, and its window's key; ``None`` if none."""
    for family in FAMILIES:
        match = family.pattern.match(path)
        if match is not None:
            groups = match.groupdict()
            key = tuple(groups.get(name) or "" for name in ("account", "key"))
            return family, (family.title, *key)
    return None


def bulk_events(body: bytes) -> int:
    """The events a Collect call carries: the length of a bulk body's ``events`` list,
    else 1 (a malformed body is its handler's to refuse, not the rate rule's)."""
    if b'"events"' not in body:
        return 1
    try:
        data = json.loads(body)
    except ValueError:
        return 1
    events = data.get("events") if isinstance(data, dict) else None
    return max(1, len(events)) if isinstance(events, list) else 1


@dataclasses.dataclass
class _Window:
    #: (when, how much) of each admitted call still inside the window, oldest first.
    calls: deque[tuple[float, int]] = dataclasses.field(default_factory=deque)
    #: Their sum: what the window holds now (kept, not summed per call).
    used: int = 0
    #: The last 429 of this window: simulated time, real time, its Retry-After.
    refused: tuple[float, float, int] | None = None


class RateLimits:
    """One test's windows of API calls (see the module's contracts)."""

    def __init__(self, timeline: Timeline, options: Options, lock: threading.RLock) -> None:
        self._timeline = timeline
        self._options = options
        self._lock = lock
        self._windows: dict[tuple[str, ...], _Window] = {}

    def admit(
        self,
        *,
        username: str | None,
        version: str,
        method: str,
        path: str,
        body: bytes = b"",
        own: Rate | None = None,
        route: str = "",
        credential: str | None = None,
    ) -> None:
        """Count one authenticated call, or refuse it (429, or 400 for a bulk call over
        its family's events per call). ``own``: the route's own ``rate_limit`` (it wins
        over its family's figure), ``route``: how messages name that route, ``credential``:
        the label of the credential the call presented (for the timeline)."""
        if own is not None:
            call = (username, version, method, path, credential)
            limit = f"route {route}, {own}"
            self._take(("route", route), own, 1, limit, f"calls to route {route}", call)
            return
        if not self._options.rate_limits:
            return
        found = family_of(path)
        if found is None:
            return
        family, key = found
        call = (username, version, method, path, credential)
        limit = f"{family.title}, {family.rate}"
        cost = bulk_events(body) if family.per_call is not None else 1
        if family.per_call is not None and cost > family.per_call:
            reason = (
                f"a bulk call carries at most {family.per_call} events (the {family.title}, "
                f"page {family.page}), this one carried {cost}: split it"
            )
            self._refuse(call, limit, 0, reason, status=400)
        what = f"{family.counts}s to the {family.title}"
        if key[2]:
            what += f" for publish id {shown(key[2])}"
        elif key[1]:
            what += f" for account {shown(key[1])}"
        self._take(key, family.rate, cost, limit, what, call)

    def _take(
        self,
        key: tuple[str, ...],
        rate: Rate,
        cost: int,
        limit: str,
        what: str,
        call: _Call,
    ) -> None:
        with self._lock:
            now = self._timeline.now()
            window = self._windows.setdefault(key, _Window())
            calls = window.calls
            while calls and calls[0][0] <= now - rate.per:
                window.used -= calls.popleft()[1]
            used = window.used
            if used + cost <= rate.count:
                calls.append((now, cost))
                window.used += cost
                return
            # When enough of the window has passed for this call to fit.
            freed, retry_at = 0, now + rate.per
            for at, taken in calls:
                freed += taken
                if used - freed + cost <= rate.count:
                    retry_at = at + rate.per
                    break
            retry_after = max(1, math.ceil(retry_at - now))
            waited = asked = real = None
            if window.refused is not None:
                fired_at, real_at, previous = window.refused
                if now < fired_at + previous:
                    # Retried inside the Retry-After of the last 429: at once, or having
                    # slept in real time while the test's clock stood still.
                    waited, asked = round(now - fired_at, 3), previous
                    slept = real_seconds() - real_at
                    real = round(slept, 3) if slept >= previous else None
            window.refused = (now, real_seconds(), retry_after)
            reason = (
                f"{used} {what} within the last {rate.per:g} s, the limit is {rate}: wait "
                f"Retry-After ({retry_after} s) before calling again"
            )
            if waited is not None:
                reason = f"{retried_too_soon(waited, asked, real)}; {reason}"
            self._refuse(
                call,
                limit,
                used,
                reason,
                retry_after=retry_after,
                retried=(waited, asked, real),
            )

    def _refuse(
        self,
        call: _Call,
        limit: str,
        counted: int,
        reason: str,
        *,
        status: int = 429,
        retry_after: int | None = None,
        retried: tuple[float | None, int | None, float | None] = (None, None, None),
    ) -> NoReturn:
        username, version, method, path, credential = call
        waited, asked, real = retried
        event = RateLimited(
            at=to_datetime(self._timeline.now()),
            username=username,
            method=method,
            path=path,
            version=version,
            limit=limit,
            counted=counted,
            status=status,
            retry_after=retry_after,
            waited=waited,
            asked=asked,
            waited_real=real,
            reason=reason,
            credential=credential,
        )
        message = "Too many requests" if status == 429 else "Bad Request"
        self._timeline.refuse(
            event,
            status,
            reason,
            status=status,
            message=message,
            retry_after=retry_after,
        )
