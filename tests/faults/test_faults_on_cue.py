"""Expire, revoke, lock, unlock and rotate on cue, each met by a real client's recovery:
re-authenticate on a 401, wait out a lockout, reload rotated credentials."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
import requests

from pytest_mgmtauth import (
    Account,
    AccountLockedManually,
    AccountUnlocked,
    CredentialExpired,
    CredentialRevoked,
    MgmtClock,
    MgmtServer,
    SecretRotated,
)

#: How working clients of the real service find the session id in the Set-Cookie lines.
JSESSIONID_LINE = re.compile(r"^JSESSIONID=([^;]*);")


@dataclass
class TokenClient:
    """A v2 client as it should be: one cached token, a new one only on a 401."""

    http: requests.Session
    url: str
    username: str
    api_key: str
    token: str | None = None

    def _authenticate(self) -> None:
        answer = self.http.post(
            f"{self.url}/v2/auth", data={"username": self.username, "key": self.api_key}
        )
        answer.raise_for_status()
        self.token = answer.json()["token"]

    def get(self, path: str) -> requests.Response:
        if self.token is None:
            self._authenticate()
        answer = self.http.get(self.url + path, headers={"Authorization": f"Bearer {self.token}"})
        if answer.status_code == 401 and answer.json()["returnCode"] == 1401:
            self._authenticate()
            answer = self.http.get(
                self.url + path, headers={"Authorization": f"Bearer {self.token}"}
            )
        return answer


@dataclass
class SessionClient:
    """A v1 client: logs in once, sends JSESSIONID and utk, logs in again on a 401."""

    http: requests.Session
    url: str
    username: str
    password: str
    session: tuple[str, str] | None = None

    def _login(self) -> None:
        answer = self.http.post(
            f"{self.url}/v1/login", data={"username": self.username, "password": self.password}
        )
        answer.raise_for_status()
        lines = answer.raw.headers.getlist("Set-Cookie")
        session_id = next(m.group(1) for m in map(JSESSIONID_LINE.match, lines) if m)
        self.session = (session_id, answer.json()["utk"])

    def get(self, path: str) -> requests.Response:
        for attempt in range(2):
            if self.session is None:
                self._login()
            assert self.session is not None
            session_id, utk = self.session
            answer = self.http.get(
                self.url + path,
                params={"utk": utk},
                headers={"Cookie": f"JSESSIONID={session_id}"},
            )
            if answer.status_code != 401 or attempt:
                return answer
            self.session = None
        raise AssertionError("unreachable")


@pytest.fixture
def token_client(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> TokenClient:
    mgmt_server.route("GET", "/v2/things").respond_with_json({"things": []})
    return TokenClient(http, mgmt_server.url, mgmt_account.username, mgmt_account.api_key)


@pytest.fixture
def session_client(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> SessionClient:
    mgmt_server.route("GET", "/v1/things").respond_with_json({"things": []})
    return SessionClient(http, mgmt_server.url, mgmt_account.username, mgmt_account.password)


def test_an_expired_token_gets_401_and_the_client_reauthenticates(
    mgmt_server: MgmtServer, token_client: TokenClient
) -> None:
    assert token_client.get("/v2/things").status_code == 200
    assert token_client.token is not None
    assert mgmt_server.expire(token_client.token) == "T1"
    assert token_client.get("/v2/things").status_code == 200
    assert mgmt_server.auth_count() == 2
    refused = [c for c in mgmt_server.events if getattr(c, "status", None) == 401]
    assert len(refused) == 1
    assert "ended early on cue" in getattr(refused[0], "reason", "")
    assert [e.credential for e in mgmt_server.events if isinstance(e, CredentialExpired)] == ["T1"]
    # Re-authenticating on the 401 is reuse, and the client could not have seen it coming.
    mgmt_server.assert_token_reused()
    mgmt_server.assert_no_expired_token_used()


def test_a_revoked_token_by_label_gets_401_and_the_client_recovers(
    mgmt_server: MgmtServer, token_client: TokenClient
) -> None:
    token_client.get("/v2/things")
    mgmt_server.revoke("T1")
    assert token_client.get("/v2/things").status_code == 200
    assert [e.credential for e in mgmt_server.events if isinstance(e, CredentialRevoked)] == ["T1"]
    mgmt_server.assert_token_reused()


def test_a_revoked_session_gets_401_and_the_client_logs_in_again(
    mgmt_server: MgmtServer, session_client: SessionClient
) -> None:
    assert session_client.get("/v1/things").status_code == 200
    assert session_client.session is not None
    mgmt_server.revoke(session_client.session[0])  # by JSESSIONID
    assert session_client.get("/v1/things").status_code == 200
    assert mgmt_server.auth_count(version="v1") == 2
    mgmt_server.assert_token_reused()


def test_an_expired_session_by_label(
    mgmt_server: MgmtServer, session_client: SessionClient
) -> None:
    session_client.get("/v1/things")
    mgmt_server.expire("S1")
    assert session_client.get("/v1/things").status_code == 200
    assert [e.version for e in mgmt_server.events if isinstance(e, CredentialExpired)] == ["v1"]


def test_expiring_something_unknown_names_what_exists(
    mgmt_server: MgmtServer, token_client: TokenClient
) -> None:
    token_client.get("/v2/things")
    with pytest.raises(ValueError, match="known: T1"):
        mgmt_server.expire("S9")


def test_a_locked_account_gets_1402_until_unlocked(
    mgmt_server: MgmtServer, mgmt_account: Account, http: requests.Session
) -> None:
    form = {"username": mgmt_account.username, "password": mgmt_account.password}
    mgmt_server.lock(mgmt_account)
    locked = http.post(f"{mgmt_server.url}/v1/login", data=form)
    assert (locked.status_code, locked.json()["returnCode"]) == (401, 1402)
    assert "locked on cue" in locked.json()["message"]
    mgmt_server.unlock(mgmt_account.username)
    assert http.post(f"{mgmt_server.url}/v1/login", data=form).status_code == 200
    kinds = [type(e) for e in mgmt_server.events]
    assert kinds.index(AccountLockedManually) < kinds.index(AccountUnlocked)


def test_a_timed_lock_is_waited_out_on_the_simulated_clock(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    form = {"username": mgmt_account.username, "password": mgmt_account.password}
    mgmt_server.lock(mgmt_account, seconds=600)
    assert http.post(f"{mgmt_server.url}/v1/login", data=form).json()["returnCode"] == 1402
    mgmt_clock.advance(minutes=10)  # "try again in 10 minutes"
    assert http.post(f"{mgmt_server.url}/v1/login", data=form).status_code == 200


def test_a_rotated_key_gets_1401_naming_the_rotation_and_the_new_key_works(
    mgmt_server: MgmtServer, mgmt_account: Account, token_client: TokenClient
) -> None:
    token_client.get("/v2/things")
    rotated = mgmt_server.rotate_key(mgmt_account)
    # The token issued before the rotation stays valid.
    assert token_client.get("/v2/things").status_code == 200
    stale = token_client.http.post(
        f"{mgmt_server.url}/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    assert (stale.status_code, stale.json()["returnCode"]) == (401, 1401)
    assert "old API key" in stale.json()["message"]
    assert mgmt_account.api_key not in stale.text
    # The client reloads its configuration and carries on.
    token_client.api_key = rotated.api_key
    mgmt_server.revoke("T1")
    assert token_client.get("/v2/things").status_code == 200
    assert mgmt_server.accounts == [rotated]
    (event,) = [e for e in mgmt_server.events if isinstance(e, SecretRotated)]
    assert event.secret == "API key"


def test_a_rotated_password_gets_1401_and_the_new_one_logs_in(
    mgmt_server: MgmtServer, mgmt_account: Account, session_client: SessionClient
) -> None:
    rotated = mgmt_server.rotate_password(mgmt_account, "Brand+new&pass%1")
    with pytest.raises(requests.HTTPError):
        session_client.get("/v1/things")
    session_client.password = rotated.password
    assert session_client.get("/v1/things").status_code == 200
