"""The fake auth service: accounts, tokens, sessions, lockout, throttling, events.

Pure Python, no HTTP and no pytest: the transport turns requests into these calls and
:class:`Refusal` into error answers. One instance holds one test's state; the signing
key (the expensive part) is shared across tests through the :class:`TokenSigner`.
All public methods are thread-safe: the HTTP server calls them from many threads.
"""

from __future__ import annotations

from .bearer import BearerDesk
from .events import format_offset
from .records import (
    AUTH_FAILED,
    DIAGNOSIS_BUDGET,
    DIAGNOSIS_WINDOW,
    FORBIDDEN,
    LOCKED_OUT,
    SERVICE_MESSAGES,
    THROTTLE_WINDOW,
    Authorization,
    Refusal,
    SessionRecord,
    TokenRecord,
)
from .sessions import SessionDesk

__all__ = [
    "AUTH_FAILED",
    "DIAGNOSIS_BUDGET",
    "DIAGNOSIS_WINDOW",
    "FORBIDDEN",
    "LOCKED_OUT",
    "SERVICE_MESSAGES",
    "THROTTLE_WINDOW",
    "AuthService",
    "Authorization",
    "Refusal",
    "SessionRecord",
    "TokenRecord",
    "format_offset",
]


class AuthService(BearerDesk, SessionDesk):
    """The facade the transport and the fake call: one lock, one state, and the parts
    (timeline, accounts, grant ordering, fault desk, session desk, bearer desk) that
    each own one responsibility. Every public method takes the lock."""
