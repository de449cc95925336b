"""A small client of the management API, as a team would write it for production.

``MgmtClient`` speaks v2: it exchanges the username and API key for a bearer token at
``/v2/auth``, keeps that token, and gets a new one only ``refresh_margin`` seconds
before it expires (the service throttles clients that authenticate on every call).
If the service refuses the token anyway (401 with returnCode 1401), it authenticates
once more and retries the call once. A 429 is asked again once its ``Retry-After`` has
passed, a 503 again, and a GET whose connection dropped is sent again (three attempts
in all): so it passes every point of a sweep (docs/sweeps.md).

``MgmtSessionClient`` speaks v1: ``/v1/login`` with username and password, then every
call carries the ``JSESSIONID`` cookie and the ``utk`` query parameter, and
``/v1/logout`` ends the session (one the service ended already is no error).

Nothing here knows about pytest or the fake: the tests in ``test_mgmt_client.py`` point
these clients at ``mgmt_server.url``, exactly as production code points them at the
real service.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import requests

AUTH_FAILED = 1401
LOCKED_OUT = 1402
PERMISSION_DENIED = 1469


class MgmtApiError(Exception):
    """The service answered with an error: HTTP ``status``, its ``returnCode``, its text."""

    def __init__(self, status: int, return_code: int | None, message: str) -> None:
        super().__init__(f"HTTP {status}, returnCode {return_code}: {message}")
        self.status = status
        self.return_code = return_code
        self.message = message


class AuthenticationFailed(MgmtApiError):
    """1401: wrong username, API key or password, or a credential the service refused."""


class LockedOut(MgmtApiError):
    """1402: too many failed logins; the service says when to try again."""


class PermissionDenied(MgmtApiError):
    """1469: authenticated, but the account lacks the permission. Re-authenticating
    would not help, so the clients never do it for this error."""


def _error_from(response: requests.Response) -> MgmtApiError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return_code = body.get("returnCode")
    message = str(body.get("message", response.text[:200]))
    kind = {
        AUTH_FAILED: AuthenticationFailed,
        LOCKED_OUT: LockedOut,
        PERMISSION_DENIED: PermissionDenied,
    }.get(return_code, MgmtApiError)
    return kind(response.status_code, return_code, message)


def _is_refused_credential(response: requests.Response) -> bool:
    """401 with 1401: the credential itself was refused, so a new one may help.
    (401 with 1469 is a missing permission: a new credential would not.)"""
    return response.status_code == 401 and _error_from(response).return_code == AUTH_FAILED


#: Statuses worth asking again after a wait: throttled (429, wait ``Retry-After``) and
#: unavailable (503).
RETRYABLE = (429, 503)
#: Methods safe to send again when the connection dropped before the answer.
IDEMPOTENT = ("GET", "HEAD", "OPTIONS", "PUT", "DELETE")


def send(
    http: requests.Session,
    method: str,
    url: str,
    *,
    sleep: Callable[[float], None],
    attempts: int = 3,
    **kwargs: Any,
) -> requests.Response:
    """One request, sent again (up to ``attempts`` times in all) after a 429 (once its
    ``Retry-After`` has passed), a 503, or a dropped connection when ``method`` is safe
    to repeat; the last answer or error otherwise."""
    for attempt in range(1, attempts + 1):
        last = attempt == attempts
        try:
            response = http.request(method, url, timeout=10, **kwargs)
        except requests.ConnectionError:
            if last or method.upper() not in IDEMPOTENT:
                raise
            continue
        if response.status_code not in RETRYABLE or last:
            return response
        sleep(float(response.headers.get("Retry-After", "1")))
    raise AssertionError("unreachable")  # pragma: no cover


def token_expiry(token: str) -> float:
    """The ``exp`` claim of a JWT, read without verifying the signature.

    A client cannot verify the service's signature (it has no key) and does not need
    to: it only wants to know when to ask for a new token.
    """
    payload = token.split(".")[1]
    payload += "=" * (-len(payload) % 4)
    return float(json.loads(base64.urlsafe_b64decode(payload))["exp"])


# --8<-- [start:v2-client]
class MgmtClient:
    """v2 client: one bearer token, reused until ``refresh_margin`` before expiry."""

    def __init__(
        self,
        base_url: str,
        username: str,
        api_key: str,
        *,
        refresh_margin: float = 60.0,
        token_cache: dict[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self._api_key = api_key
        self.refresh_margin = refresh_margin
        self.sleep = sleep  # how Retry-After is waited (a test passes the simulated clock)
        # Shared across client instances (or restored from disk) so that a new process
        # does not log in again while a token it saved is still good.
        self._cache = token_cache if token_cache is not None else {}
        self._lock = threading.Lock()  # one refresh at a time, however many threads
        self._http = requests.Session()

    def _authenticate(self) -> str:
        # A dict makes requests URL-encode the key: real keys contain + & = % /
        response = send(
            self._http,
            "POST",
            f"{self.base_url}/v2/auth",
            sleep=self.sleep,
            data={"username": self.username, "key": self._api_key},
        )
        if response.status_code != 200:
            raise _error_from(response)
        token: str = response.json()["token"]
        self._cache[self.username] = token
        return token

    def _token(self) -> str:
        with self._lock:
            token = self._cache.get(self.username)
            if token is None or time.time() >= token_expiry(token) - self.refresh_margin:
                token = self._authenticate()
            return token

    def _forget(self, token: str) -> None:
        with self._lock:
            if self._cache.get(self.username) == token:
                del self._cache[self.username]

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """Call the API with the bearer token; raise :class:`MgmtApiError` on an error."""
        for attempt in (1, 2):
            token = self._token()
            response = send(
                self._http,
                method,
                f"{self.base_url}{path}",
                sleep=self.sleep,
                headers={"Authorization": f"Bearer {token}"},
                **kwargs,
            )
            if attempt == 1 and _is_refused_credential(response):
                # The service refused the token itself (revoked, from another
                # environment, expired early): get a new one and retry once.
                self._forget(token)
                continue
            if response.status_code >= 400:
                raise _error_from(response)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs).json()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MgmtClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --8<-- [end:v2-client]


# --8<-- [start:v1-client]
#: JSESSIONID must be taken from the Set-Cookie line itself: the service sets it with
#: Path=/urest_service and Secure, so a cookie jar never sends it back to /v1/... paths.
_JSESSIONID = re.compile(r"^JSESSIONID=([^;]*)")


class MgmtSessionClient:
    """v1 client: a session (JSESSIONID cookie + utk) from username and password."""

    def __init__(
        self,
        base_url: str,
        username: str,
        password: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self._password = password
        self.sleep = sleep
        self._http = requests.Session()
        self._session_id: str | None = None
        self._utk: str | None = None

    @property
    def logged_in(self) -> bool:
        return self._session_id is not None

    def login(self) -> None:
        response = send(
            self._http,
            "POST",
            f"{self.base_url}/v1/login",
            sleep=self.sleep,
            data={"username": self.username, "password": self._password},
        )
        if response.status_code != 200:
            raise _error_from(response)
        # requests folds several Set-Cookie lines into one; read them one by one.
        lines = response.raw.headers.getlist("Set-Cookie")
        session_id = next((m.group(1) for m in map(_JSESSIONID.match, lines) if m), None)
        if session_id is None:
            raise MgmtApiError(200, None, "/v1/login answered without a JSESSIONID cookie")
        self._session_id = session_id
        self._utk = response.json()["utk"]

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """Call a v1 operation; logs in first if needed, and once more if the service
        ended the session (idle timeout)."""
        params = dict(kwargs.pop("params", None) or {})
        for attempt in (1, 2):
            if self._session_id is None:
                self.login()
            response = send(
                self._http,
                method,
                f"{self.base_url}{path}",
                sleep=self.sleep,
                params={**params, "utk": self._utk},
                headers={"Cookie": f"JSESSIONID={self._session_id}"},
                **kwargs,
            )
            if attempt == 1 and _is_refused_credential(response):
                self._session_id = self._utk = None  # the session is over: log in again
                continue
            if response.status_code >= 400:
                raise _error_from(response)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs).json()

    def logout(self) -> None:
        if self._session_id is None:
            return
        response = self._http.post(
            f"{self.base_url}/v1/logout",
            headers={
                "Cookie": f"JSESSIONID={self._session_id}",
                "Content-Type": "application/x-www-form-urlencoded",
            },
            timeout=10,
        )
        self._session_id = self._utk = None
        if _is_refused_credential(response):
            return  # the service had ended the session already (idle timeout, revoked)
        if response.status_code != 200:
            raise _error_from(response)

    def close(self) -> None:
        try:
            self.logout()
        finally:
            self._http.close()

    def __enter__(self) -> MgmtSessionClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --8<-- [end:v1-client]
