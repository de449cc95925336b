"""Accounts: add, look up with did-you-mean, rotate secrets, diagnose a wrong secret
within its budget."""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections import deque
from typing import TYPE_CHECKING

from .accounts import (
    Account,
    fingerprint,
    generate_api_key,
    generate_password,
    generate_username,
    make_account,
)
from .clock import to_datetime
from .diagnosis import ClientKind, diagnose_secret, paused_diagnosis
from .events import AccountLockedManually, AccountUnlocked, SecretRotated
from .options import check_seconds
from .records import DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW
from .timeline import Timeline

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .records import SessionRecord, TokenRecord
    from .types import SecretKind


class AccountBook(Timeline):
    # -- accounts ------------------------------------------------------------------

    def account_list(self) -> list[Account]:
        """The accounts of this test, oldest first: a snapshot taken under the lock (the
        dicts ``accounts``/``tokens``/``sessions`` change while the server runs)."""
        with self._lock:
            return list(self.accounts.values())

    def token_list(self) -> list[TokenRecord]:
        """The tokens issued in this test, oldest first (a snapshot)."""
        with self._lock:
            return list(self.tokens.values())

    def session_list(self) -> list[SessionRecord]:
        """The v1 sessions started in this test, oldest first (a snapshot)."""
        with self._lock:
            return list(self.sessions.values())

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
            serial = len(self.accounts) + 1
            anticipated = username is None
            if username is None:
                if serial == 1 and self._first_username is not None:
                    username = self._first_username  # its token may be signed already
                else:
                    username = generate_username(serial)
                # Its first token is signed from here on, while its secrets are drawn.
                self._anticipate_token(username)
            account = make_account(serial, username, api_key, password, permissions, profiles)
            if account.username in self.accounts:
                raise ValueError(
                    f"add_account: an account {account.username!r} exists already in this test"
                )
            self.accounts[account.username] = account
            self._hold_secrets(account.api_key, account.password)
            if not anticipated:
                self._anticipate_token(account.username)
            return account

    def _anticipate_token(self, username: str) -> None:
        """Have the account's first token signed ahead, on another core, at this clock
        second (see _presign.py): /v2/auth takes it if it comes within the second."""
        self._signer.anticipate(
            username, int(self.now()), int(self.options.token_ttl), issuer=self.options.issuer
        )

    def _unknown_account(self, username: str) -> str:
        close = difflib.get_close_matches(username, list(self.accounts), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        if " " in username and username.replace(" ", "+") in self.accounts:
            hint = (
                f"; did you mean {username.replace(' ', '+')!r}? A '+' arrived as a space: "
                "URL-encode the username in the form body"
            )
        if not self.accounts:
            hint = (
                "; this test has no accounts: add one with mgmt_server.add_account() "
                "or use the mgmt_account fixture"
            )
        return self.redact(f"no account {username!r} exists{hint}")

    def lock(self, username: str, *, seconds: float | None = None) -> None:
        """Lock the account now: logins answer 1402 until :meth:`unlock`, or for
        ``seconds`` of simulated time. Bearer grants are not affected (the service's
        lockout is a login rule)."""
        with self._lock:
            self._known_account(username)
            if seconds is not None:
                seconds = check_seconds("seconds", seconds, what="lock()")
            now = self.now()
            end = math.inf if seconds is None else now + seconds
            # Everything that can fail is done before the state changes.
            event = AccountLockedManually(
                at=to_datetime(now),
                username=username,
                until=None if seconds is None else to_datetime(end),
            )
            self._manual_locks[username] = (now, end)
            self._record(event)

    def unlock(self, username: str) -> None:
        """End any lock of the account (on cue or after failed logins) and forget its
        failed logins."""
        with self._lock:
            self._known_account(username)
            self._manual_locks.pop(username, None)
            self._lockouts.pop(username, None)
            self._failed_logins[username] = 0
            self._record(AccountUnlocked(at=to_datetime(self.now()), username=username))

    def _known_account(self, username: str) -> Account:
        account = self.accounts.get(username)
        if account is None:
            raise ValueError(self._unknown_account(username))
        return account

    def rotate_secret(
        self, username: str, secret: SecretKind, new_value: str | None = None
    ) -> Account:
        """Replace the account's ``"API key"`` or ``"password"`` (generated unless given);
        the old one gets 1401 from now on. Credentials already granted stay valid."""
        with self._lock:
            account = self._known_account(username)
            if secret not in ("API key", "password"):
                raise ValueError(f"secret must be 'API key' or 'password', got {secret!r}")
            if new_value is not None and (not isinstance(new_value, str) or not new_value):
                raise ValueError(f"the new {secret} must be a non-empty str, got {new_value!r}")
            old = account.api_key if secret == "API key" else account.password
            if new_value is None:
                new_value = generate_api_key() if secret == "API key" else generate_password()
            if new_value == old:
                raise ValueError(f"the new {secret} is the account's current one")
            if secret == "API key":
                rotated = dataclasses.replace(account, api_key=new_value)
            else:
                rotated = dataclasses.replace(account, password=new_value)
            self.accounts[username] = rotated
            self._hold_secrets(new_value)
            now = self.now()
            self._rotated.setdefault((username, secret), []).append((old, now))
            self._record(
                SecretRotated(
                    at=to_datetime(now),
                    username=username,
                    secret=secret,
                    old_fingerprint=fingerprint(old),
                    new_fingerprint=fingerprint(new_value),
                )
            )
            return rotated

    def _secret_problem(
        self,
        username: str,
        secret: SecretKind,
        expected: str,
        received: str,
        client: ClientKind = ClientKind.OTHER,
    ) -> str:
        """diagnose_secret, knowing that a rotated-out secret is an old one, not a typo."""
        if received == expected:
            return ""
        for old, when in reversed(self._rotated.get((username, secret), [])):
            if received == old:
                return (
                    f"this is the account's old {secret} ({fingerprint(old)}), replaced at "
                    f"{self._offset(when)} by rotation: use the current one"
                )
        now = self.now()
        recent = self._diagnosed.setdefault((username, secret), deque())
        while recent and recent[0] <= now - DIAGNOSIS_WINDOW:
            recent.popleft()
        if len(recent) >= DIAGNOSIS_BUDGET:
            return paused_diagnosis(secret, DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW)
        recent.append(now)
        return diagnose_secret(secret, expected, received, client)
