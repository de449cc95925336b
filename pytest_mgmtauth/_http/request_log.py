"""The request log of one test: every request the fake answered for it, as it arrived
(``mgmt_server.requests``, ``GET /_mgmtauth/requests``), refused ones included.

Entries are kept as they arrived and masked when read, with the test's secret masker:
a secret handed out after a request (a session's id, say) is masked in it too, and the
requests of a test cost no masking unless the test reads them.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

#: Most requests one test's log keeps; beyond it, the oldest are dropped.
REQUEST_LOG_SIZE = 1000


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """One request the fake answered for a test, as it arrived, secrets masked.

    ``path`` and ``query`` are the request target's as sent (percent-escapes kept;
    routes match the decoded path); ``headers`` every header line in order, repeated
    ones included; ``body`` the body as the fake read it (UTF-8, undecodable bytes as
    ``\\xNN``), or ``None`` when the answer did not need it (an unknown route, a framing
    error, a body over the size limit); ``status`` the fake's answer (``None``: a
    scripted reset, no answer); ``at`` the fake's time of arrival; ``test`` the node id
    of the test it belongs to (``None`` in mgmtauth-server).
    """

    method: str
    host: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: str | None
    status: int | None
    at: datetime
    test: str | None = None

    def header(self, name: str) -> str | None:
        """The first value of the header ``name`` (any case), or None."""
        lowered = name.lower()
        return next((v for k, v in self.headers if k.lower() == lowered), None)

    def masked(self, mask: Callable[[str], str]) -> RecordedRequest:
        """This entry with ``mask`` applied to every text that came from the client."""
        return dataclasses.replace(
            self,
            host=mask(self.host),
            path=mask(self.path),
            query=mask(self.query),
            headers=tuple((mask(k), mask(v)) for k, v in self.headers),
            body=None if self.body is None else mask(self.body),
        )


class RequestLog:
    """The last :data:`REQUEST_LOG_SIZE` requests of one test, oldest first."""

    def __init__(self, size: int = REQUEST_LOG_SIZE) -> None:
        self._lock = threading.Lock()
        self._entries: collections.deque[RecordedRequest] = collections.deque(maxlen=size)

    def add(self, entry: RecordedRequest) -> None:
        with self._lock:
            self._entries.append(entry)

    def entries(self, mask: Callable[[str], str]) -> list[RecordedRequest]:
        """Every entry kept, oldest first, masked with ``mask``."""
        with self._lock:
            entries = list(self._entries)
        return [entry.masked(mask) for entry in entries]
