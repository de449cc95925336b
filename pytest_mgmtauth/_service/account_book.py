"""The accounts part of the service: add, look up with did-you-mean, rotate secrets,
diagnose a wrong secret within its budget (locks are ``lockout.py``'s)."""

from __future__ import annotations

import dataclasses
import difflib
from collections import deque
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from .accounts import (
    Account,
    check_username,
    fingerprint,
    generate_api_key,
    generate_password,
    generate_username,
    make_account,
)
from .events import SecretRotated
from .records import DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW
from .secret_text import ClientKind, diagnose_secret, paused_diagnosis
from .timeline import to_datetime

if TYPE_CHECKING:
    import threading
    from collections.abc import Iterable
    from concurrent.futures import Future

    from .limits import SecretKind
    from .options import Options
    from .timeline import Timeline
    from .token_format import Claims
    from .tokens import TokenSigner


def sign_first_token_ahead(
    signer: TokenSigner, options: Options, username: str, now: float
) -> Future[tuple[str, Claims]] | None:
    """Start signing, in the background, the token a first grant to ``username`` at the
    clock second of ``now`` returns under ``options``: ``TokenSigner.prefetch``'s
    future, or None."""
    return signer.prefetch(username, int(now), int(options.token_ttl), issuer=options.issuer)


class AccountBook(Mapping[str, "Account"]):
    """The accounts of one test by username (a read-only mapping; change them through
    the methods), and what the service keeps about each: rotated-out secrets and
    diagnosed failures."""

    def __init__(
        self,
        timeline: Timeline,
        options: Options,
        signer: TokenSigner,
        lock: threading.RLock,
        *,
        first_username: str | None = None,
    ) -> None:
        self._timeline = timeline
        self._options = options
        self._signer = signer
        self._lock = lock
        #: The username of the first account if it is generated: one reserved before the
        #: test, whose first token may be signed already (``sign_first_token_ahead``).
        self._first_username = first_username
        #: Whether the first account's username was generated (the ``mgmt_account``
        #: fixture's, or ``add_account()`` without one).
        self.first_generated = False
        self._accounts: dict[str, Account] = {}
        # Secrets replaced by rotate_*(): (username, "API key"/"password") -> [(old, when)].
        self._rotated: dict[tuple[str, str], list[tuple[str, float]]] = {}
        # Times of the diagnosed failures, per (username, "API key"/"password").
        self._diagnosed: dict[tuple[str, str], deque[float]] = {}

    def __getitem__(self, username: str) -> Account:
        return self._accounts[username]

    def __iter__(self) -> Iterator[str]:
        return iter(self._accounts)

    def __len__(self) -> int:
        return len(self._accounts)

    def account_list(self) -> list[Account]:
        """The accounts of this test, oldest first: a snapshot taken under the lock (the
        dicts ``accounts``/``tokens``/``sessions`` change while the server runs)."""
        with self._lock:
            return list(self._accounts.values())

    def add_account(
        self,
        username: str | None = None,
        *,
        api_key: str | None = None,
        password: str | None = None,
        permissions: Iterable[str] | None = None,
        profiles: object = None,
    ) -> Account:
        with self._lock:
            serial = len(self._accounts) + 1
            if username is None:
                if serial == 1:
                    self.first_generated = True
                    username = self._first_username or generate_username(serial)
                else:
                    username = generate_username(serial)
            check_username(username)
            self._check_unused(username)
            now = self._timeline.now()
        # Its first token is most likely asked for soon, at this clock second: signed
        # ahead from now on (unless it is already), while its secrets are made and the
        # test's client starts (/v2/auth takes it if its claims turn out the same).
        # Outside the lock: the signer lets its worker run.
        sign_first_token_ahead(self._signer, self._options, username, now)
        account = make_account(serial, username, api_key, password, permissions, profiles)
        with self._lock:
            self._check_unused(username)  # another thread may have added it meanwhile
            self._accounts[username] = account
            self._timeline.hold_secrets(account.api_key, account.password)
        return account

    def _check_unused(self, username: str) -> None:
        if username in self._accounts:
            raise ValueError(f"add_account: an account {username!r} exists already in this test")

    def unknown_account(self, username: str) -> str:
        close = difflib.get_close_matches(username, list(self._accounts), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        if " " in username and username.replace(" ", "+") in self._accounts:
            hint = (
                f"; did you mean {username.replace(' ', '+')!r}? A '+' arrived as a space: "
                "URL-encode the username in the form body"
            )
        if not self._accounts:
            hint = (
                "; this test has no accounts: add one with mgmt_server.add_account() "
                "or use the mgmt_account fixture"
            )
        return self._timeline.redact(f"no account {username!r} exists{hint}")

    def known(self, username: str) -> Account:
        account = self._accounts.get(username)
        if account is None:
            raise ValueError(self.unknown_account(username))
        return account

    def rotate_secret(
        self, username: str, secret: SecretKind, new_value: str | None = None
    ) -> Account:
        """Replace the account's ``"API key"`` or ``"password"`` (generated unless given);
        the old one gets 1401 from now on. Credentials already granted stay valid."""
        with self._lock:
            account = self.known(username)
            if secret not in ("API key", "password"):
                raise ValueError(f"secret must be 'API key' or 'password', got {secret!r}")
            if new_value is not None and (not isinstance(new_value, str) or not new_value):
                raise ValueError(f"the new {secret} must be a non-empty str, got {new_value!r}")
            old = account.secret(secret)
            if new_value is None:
                new_value = generate_api_key() if secret == "API key" else generate_password()
            if new_value == old:
                raise ValueError(f"the new {secret} is the account's current one")
            if secret == "API key":
                rotated = dataclasses.replace(account, api_key=new_value)
            else:
                rotated = dataclasses.replace(account, password=new_value)
            self._accounts[username] = rotated
            self._timeline.hold_secrets(new_value)
            now = self._timeline.now()
            self._rotated.setdefault((username, secret), []).append((old, now))
            self._timeline.record(
                SecretRotated(
                    at=to_datetime(now),
                    username=username,
                    secret=secret,
                    old_fingerprint=fingerprint(old),
                    new_fingerprint=fingerprint(new_value),
                )
            )
            return rotated

    def secret_problem(
        self,
        username: str,
        secret: SecretKind,
        expected: str,
        received: str,
        client: ClientKind = ClientKind.OTHER,
        *,
        json_body: bool = False,
    ) -> str:
        """diagnose_secret, knowing that a rotated-out secret is an old one, not a typo."""
        if received == expected:
            return ""
        for old, when in reversed(self._rotated.get((username, secret), [])):
            if received == old:
                return (
                    f"this is the account's old {secret} ({fingerprint(old)}), replaced at "
                    f"{self._timeline.offset(when)} by rotation: use the current one"
                )
        now = self._timeline.now()
        recent = self._diagnosed.setdefault((username, secret), deque())
        while recent and recent[0] <= now - DIAGNOSIS_WINDOW:
            recent.popleft()
        if len(recent) >= DIAGNOSIS_BUDGET:
            return paused_diagnosis(secret, DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW)
        recent.append(now)
        return diagnose_secret(secret, expected, received, client, json_body=json_body)
