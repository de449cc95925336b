"""The lifecycle of the developer portal's calendar-versioned APIs, on the simulated clock
(dev-portal-api-versioning and dev-portal-api-lifecycle, repository Tealium/docs-site).

A call ``/v{YYYY-MM}/{apiFamily}/...`` names its version. The version is Active for 24
months from the first day of its month, in End of Support for the 12 months after ("The
API remains functional ... Responses include ``Sunset`` and ``Deprecation`` headers ...
a successor version is identified automatically"), then at End of Life ("Requests
return HTTP 410"). A version whose End of Life would fall after year 9999, the last
``datetime`` counts, stays Active. Every answer in End of Support carries::

    Sunset: <the End of Life date, an HTTP-date>
    Deprecation: true
    Link: </v{successor}/{apiFamily}/...>; rel="successor-version"

The ``Link`` is built from the path as the client sent it (its percent-escapes kept),
with every other byte a URI may not hold percent-encoded: always ASCII, never a CR, LF,
space or ``>``.

A call to a version past Active is a :class:`~.call_events.DeprecatedVersionCall` in the
timeline (a finding of the teardown check, option ``sunset_check``). Pure: the transport
asks :func:`version_call` before it answers a declared route.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import MAXYEAR, datetime, timezone
from email.utils import format_datetime
from typing import TYPE_CHECKING

from .events import DeprecatedVersionCall
from .flows.base import Sets
from .timeline import to_datetime

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .options import Options
    from .timeline import Timeline

#: Months a version is Active, and in End of Support after that (the lifecycle page).
ACTIVE_MONTHS = 24
SUPPORT_MONTHS = 12
#: The headers the lifecycle sets on a versioned call's answer, as a snapshot records
#: them: present in End of Support (option ``api_lifecycle``), absent without it.
#: ``api_successor`` and ``api_link_v`` change only the ``Link`` target, never recorded.
LIFECYCLE_SETS = (
    Sets("api_lifecycle", "headers.sunset", ((True, "http-date"), (False, None))),
    Sets("api_lifecycle", "headers.deprecation", ((True, "true"), (False, None))),
    Sets("api_lifecycle", "headers.link", ((True, ["successor-version"]), (False, None))),
)

# ASCII digits only: \d would take full-width and other Unicode digits too.
_VERSIONED = re.compile(
    r"^/v(?P<year>[0-9]{4})-(?P<month>0[1-9]|1[0-2])/(?P<family>[^/]+)(?P<rest>/.*)?$"
)


@dataclasses.dataclass(frozen=True)
class ApiVersion:
    """The version a call's path names: ``2026-06`` of the API family ``cdp``, and the
    rest of the path after the family (``/audiences``)."""

    year: int
    month: int
    family: str
    rest: str

    @property
    def name(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    def months_later(self, months: int) -> datetime | None:
        """The first moment (UTC) of the month ``months`` after this version's, or None
        after year 9999 (``datetime.MAXYEAR``)."""
        index = self.year * 12 + self.month - 1 + months
        if index // 12 > MAXYEAR:
            return None
        return datetime(index // 12, index % 12 + 1, 1, tzinfo=timezone.utc)

    @property
    def ends(self) -> tuple[datetime, datetime] | None:
        """Its End of Support and End of Life (what the ``Sunset`` header says), or
        None when the End of Life falls after year 9999: Active as long as the clock
        can count."""
        support = self.months_later(ACTIVE_MONTHS)
        life = self.months_later(ACTIVE_MONTHS + SUPPORT_MONTHS)
        return None if support is None or life is None else (support, life)

    def phase(self, now: float) -> str:
        """``"active"`` (also before its month: a version not yet released is no
        deprecated one), ``"end_of_support"`` or ``"end_of_life"`` at ``now``."""
        ends = self.ends
        if ends is None or now < ends[0].timestamp():
            return "active"
        return "end_of_support" if now < ends[1].timestamp() else "end_of_life"


def parse_version(path: str) -> ApiVersion | None:
    """The calendar version ``path`` names (``/v2026-06/cdp/audiences``), or ``None``."""
    found = _VERSIONED.match(path)
    if found is None:
        return None
    return ApiVersion(int(found["year"]), int(found["month"]), found["family"], found["rest"] or "")


def successor(version: ApiVersion, declared: Iterable[str], option: str) -> str:
    """The successor version: the option ``api_successor`` if set; else the newest
    version of the same API family among the test's declared routes (their paths), if
    newer; else the month this version entered End of Support, the version a client
    would have moved to then ("identified automatically": the fake's choice)."""
    if option:
        return option
    newer = [
        other.name
        for other in (parse_version(path) for path in declared)
        if other is not None and other.family == version.family and other.name > version.name
    ]
    if newer:
        return max(newer)
    entered = version.months_later(ACTIVE_MONTHS)
    if entered is None:  # Active for good: no successor named by the lifecycle
        return version.name
    return f"{entered.year:04d}-{entered.month:02d}"


#: The bytes a URI's path may hold as they are (RFC 3986: unreserved, sub-delims, ':',
#: '@' and '/'); '%' only when it starts an escape.
_PATH_BYTES = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/"
)
_HEX = frozenset(b"0123456789ABCDEFabcdef")


def uri_path(path: bytes, *, escapes: bool) -> str:
    """``path`` as a URI path: every byte it may not hold percent-encoded. ``escapes``:
    ``path`` is as a client sent it, and its ``%XX`` escapes stand (else a ``%`` is
    a literal one, encoded too)."""
    out = []
    for i, byte in enumerate(path):
        following = path[i + 1 : i + 3]
        escape = escapes and byte == 0x25 and len(following) == 2 and set(following) <= _HEX
        if byte in _PATH_BYTES or escape:
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def successor_link(version: ApiVersion, after: str, raw_path: bytes | None) -> str:
    """The path of the successor's ``Link``: ``/v{after}`` and the rest of the path as
    the client sent it (``raw_path``, its escapes kept), or of the decoded path when
    the raw one is unknown or its first segment is not the version as sent plainly."""
    if raw_path is not None:
        first, slash, rest = raw_path.removeprefix(b"/").partition(b"/")
        if first == f"v{version.name}".encode() and slash:
            return f"/v{after}/" + uri_path(rest, escapes=True)
    decoded = f"{version.family}{version.rest}".encode("utf-8", "surrogateescape")
    return f"/v{after}/" + uri_path(decoded, escapes=False)


def lifecycle_headers(
    version: ApiVersion, successor_path: str, *, with_v: bool
) -> tuple[tuple[str, str], ...]:
    """The headers of an answer in End of Support (the lifecycle page's example:
    ``Link: </2026-10/cdp/audiences>``, without the ``v``, unless ``with_v``), with
    ``successor_path`` a URI path (:func:`successor_link`); none for a version Active
    for good."""
    ends = version.ends
    if ends is None:
        return ()
    link = successor_path if with_v else "/" + successor_path.lstrip("/").removeprefix("v")
    return (
        ("Sunset", format_datetime(ends[1], usegmt=True)),
        ("Deprecation", "true"),
        ("Link", f'<{link}>; rel="successor-version"'),
    )


def version_call(
    timeline: Timeline,
    options: Options,
    method: str,
    path: str,
    declared: Iterable[str],
    raw_path: bytes | None = None,
) -> tuple[tuple[str, str], ...]:
    """Before a declared route answers ``method path`` (``path`` decoded, ``raw_path``
    the same as the client sent it, if known): nothing for a version that is Active (or
    no calendar version, or the option ``api_lifecycle`` off); in End of Support,
    record the call and return the headers its answer carries; at End of Life, record
    it and refuse it with 410 (:class:`~.records.Refusal`)."""
    version = parse_version(path)
    if version is None or not options.api_lifecycle:
        return ()
    now = timeline.now()
    phase = version.phase(now)
    ends = version.ends
    if phase == "active" or ends is None:
        return ()
    after = successor(version, declared, options.api_successor)
    successor_path = f"/v{after}/{version.family}{version.rest}"
    link = successor_link(version, after, raw_path)
    headers = lifecycle_headers(version, link, with_v=options.api_link_v)
    event = DeprecatedVersionCall(
        at=to_datetime(now),
        username=None,
        method=method,
        path=path,
        api_version=version.name,
        phase=phase,
        sunset=ends[1],
        successor=successor_path,
        status=410 if phase == "end_of_life" else None,
    )
    if phase == "end_of_support":
        timeline.record(event)
        return headers
    reason = (
        f"API version {version.name} of {version.family!r} reached End of Life on {ends[1].date()} "
        f"(24 months Active, 12 in End of Support): call its successor, {successor_path}"
    )
    timeline.refuse(
        event,
        410,
        reason,
        status=410,
        body={"error": "gone", "message": reason},
        headers=headers,
    )
