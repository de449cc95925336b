"""What the service answers and keeps: refusals and their codes, token and session
records, authorizations."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .accounts import fingerprint

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .limits import EndReason
    from .token_format import Claims


AUTH_FAILED = 1401
LOCKED_OUT = 1402
FORBIDDEN = 1469

#: The service's fixed texts; the fake appends its diagnosis after a colon.
SERVICE_MESSAGES = {
    AUTH_FAILED: "Authentication failed",
    LOCKED_OUT: "Too many unsuccessful login attempts; try again in {minutes} minutes",
    FORBIDDEN: "User is authenticated but the request is denied for lack of proper permissions",
}

#: The ``returnCode`` the service's pages show for an HTTP status (the v1 and v2 Hosted
#: Data Layer pages: 1400 for 400, 1404 for 404, 1464 for the 405 of a PUT where POST is
#: due): the fake's own errors of those statuses carry them; other statuses, whose codes
#: no page shows, carry the status itself.
STATUS_CODES = {400: 1400, 404: 1404, 405: 1464}


def status_code(status: int) -> int:
    """The ``returnCode`` of an error the fake answers with HTTP ``status``."""
    return STATUS_CODES.get(status, status)


#: Throttling counts premature grants within this window of simulated time.
THROTTLE_WINDOW = 60.0

#: A wrong API key or password is diagnosed (compared with the account's, see
#: secret_text.py) for at most this many failures per account and secret within
#: DIAGNOSIS_WINDOW seconds of simulated time; later failures get a plain 1401, so that
#: the diagnoses cannot be used as an oracle to recover the secret.
DIAGNOSIS_BUDGET = 5
DIAGNOSIS_WINDOW = 60.0


class Refusal(Exception):
    """The service says no. The transport renders it as ``status`` with a JSON body."""

    def __init__(
        self,
        status: int,
        return_code: int,
        reason: str,
        *,
        message: str | None = None,
        retry_after: int | None = None,
        body: Mapping[str, object] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.return_code = return_code
        self.reason = reason
        base = message if message is not None else SERVICE_MESSAGES.get(return_code, "")
        self.message = f"{base}: {reason}" if base else reason
        self.retry_after = retry_after
        #: The whole JSON body, for a flow that answers errors in another shape than
        #: ``{"returnCode", "message"}`` (OAuth's RFC 6749/6750 errors); ``None``: that one.
        self.body = body
        #: Headers the answer carries besides ``Retry-After`` (``WWW-Authenticate``).
        self.headers = headers

    def shaped(self, body: Mapping[str, object], headers: tuple[tuple[str, str], ...]) -> Refusal:
        """The same refusal answered as ``body`` with ``headers`` (a flow's error shape)."""
        return Refusal(
            self.status,
            self.return_code,
            self.reason,
            retry_after=self.retry_after,
            body=body,
            headers=headers,
        )


@dataclasses.dataclass
class TokenRecord:
    label: str
    token: str = dataclasses.field(repr=False)
    claims: Claims
    username: str
    uses: int = 0
    revoked_at: float | None = None
    #: When ``mgmt_server.expire`` ended it ahead of its ``exp``.
    expired_at: float | None = None
    #: Order of grants in this test (tokens and sessions share it): a 1401 refusal
    #: releases the credentials granted before it (the grant rule, grants.py).
    serial: int = 0
    #: Tick at which it was issued, to tell which requests were in flight meanwhile.
    issued_tick: int = 0
    #: The flow that granted it (with the account and profile of its auth path, if any).
    version: str = ""
    account: str | None = None
    profile: str | None = None
    #: The fake's time of issue (``claims.iat`` is it truncated to the second).
    issued_at: float = 0.0
    #: A scheduled ``expire`` moved the clock to its ``exp`` while the request that
    #: granted it was still being answered: no client could have renewed it in time, so
    #: the call that presents it is refused but is no expired-credential use.
    expired_in_flight: bool = False
    #: The scopes it grants, for a flow whose tokens carry scopes (OAuth), in the
    #: order granted; ``()`` for the others.
    scopes: tuple[str, ...] = ()

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.token)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis and IPython print dataclasses field by field, repr=False ones too.
        printer.text(repr(self))

    @property
    def scope(self) -> str:
        """``account/profile`` of a token bound to a profile, else ``""``."""
        return f"{self.account}/{self.profile}" if self.account is not None else ""


@dataclasses.dataclass
class SessionRecord:
    label: str
    session_id: str = dataclasses.field(repr=False)
    utk: str = dataclasses.field(repr=False)
    username: str
    started_at: float
    last_used: float
    uses: int = 0
    ended_at: float | None = None
    end_reason: EndReason | None = None
    serial: int = 0
    issued_tick: int = 0
    #: The flow that granted it.
    version: str = ""

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.session_id)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@dataclasses.dataclass(frozen=True)
class Authorization:
    """Who a protected call authenticated as, and with which credential."""

    username: str
    version: str
    credential: str
