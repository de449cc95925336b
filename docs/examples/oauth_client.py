"""A client of the Tealium developer portal's APIs, written from the portal's published
pages (repository Tealium/docs-site, ``administration/early-access/developer-portal/``):

- dev-portal-authentication: ``POST https://api.tealiumapis.com/oauth/token`` with
  ``-u '{client_id}:{client_secret}'``, ``grant_type=client_credentials`` and ``scope``
  (space-separated, each "exactly as it was granted"); "Cache the token and reuse it
  until it expires. Requesting a new token on every API call triggers throttling."; a
  401 means "Request a new access token", a 403 that the token lacks the scope;
- dev-portal-api-versioning: calls at ``/v{YYYY-MM}/{api}/...``, "Pin your version
  explicitly", "Monitor deprecation headers";
- dev-portal-api-lifecycle: in End of Support answers carry ``Sunset``, ``Deprecation``
  and ``Link`` to the successor; at End of Life requests return 410. The client moves
  its later calls of a version to the successor the first such answer names.

It knows nothing about pytest: its tests point it at the fake (``mgmt_server.url``, or
the real URL through interception).
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

import requests

#: "There are no regional hostnames to manage."
GATEWAY = "https://api.tealiumapis.com"


@dataclasses.dataclass(frozen=True)
class AccessToken:
    token: str
    scopes: frozenset[str]
    #: When it stops being valid: the moment it was asked for plus ``expires_in``.
    expires_at: float


@dataclasses.dataclass(frozen=True)
class Deprecation:
    """What an answer in End of Support said: when the version ends, and its successor."""

    sunset: str
    successor: str | None


class VersionGone(Exception):
    """The API version reached End of Life (410): the client must move to its successor."""


# --8<-- [start:client]
class PortalClient:
    def __init__(
        self,
        client_id: str,
        client_secret: str,
        *,
        base_url: str = GATEWAY,
        refresh_margin: float = 300.0,
        verify: str | bool = True,
        trust_env: bool = True,
    ) -> None:
        self.base_url = base_url
        # curl -u '{client_id}:{client_secret}': HTTP Basic. The portal's secrets are
        # letters and digits, so RFC 6749 2.3.1's form-encoding would change nothing.
        self._auth = (client_id, client_secret)
        self.refresh_margin = refresh_margin
        self._http = requests.Session()
        # Proxy and CA variables of the environment, as requests reads them by default:
        # interception sets them, so the client reaches the fake unchanged.
        self._http.trust_env = trust_env
        self._http.verify = verify
        self._tokens: dict[frozenset[str], AccessToken] = {}  # one per set of scopes
        self._lock = threading.Lock()
        #: "Monitor deprecation headers": the versions whose answers said they end.
        self.deprecations: dict[str, Deprecation] = {}

    def token_for(self, scopes: Iterable[str]) -> AccessToken:
        """The cached token of these scopes (each as it was granted); a new one only
        within ``refresh_margin`` of its expiry."""
        wanted = frozenset(scopes)
        with self._lock:  # single flight: threads wait for one renewal
            cached = self._tokens.get(wanted)
            if cached is None or time.time() >= cached.expires_at - self.refresh_margin:
                cached = self._grant(wanted)
                self._tokens[wanted] = cached
            return cached

    def _grant(self, scopes: frozenset[str]) -> AccessToken:
        asked = time.time()  # expires_in counts from the answer; asking is earlier
        answer = self._http.post(
            self.base_url + "/oauth/token",
            data={"grant_type": "client_credentials", "scope": " ".join(sorted(scopes))},
            auth=self._auth,
            timeout=10,
        )
        answer.raise_for_status()
        body = answer.json()
        return AccessToken(
            body["access_token"], frozenset(body["scope"].split()), asked + body["expires_in"]
        )

    def call(
        self, method: str, path: str, scopes: Iterable[str], **kwargs: Any
    ) -> requests.Response:
        """``method`` ``/v{YYYY-MM}/{api}/...`` with a token of ``scopes``. A 401 gets
        one retry with a new token; a 403 does not (another token of the same scopes
        cannot help); a 410 raises :class:`VersionGone`. A version an earlier answer
        said is in End of Support is called at its successor instead."""
        wanted = frozenset(scopes)
        path = self.current_path(path)
        for attempt in range(2):
            token = self.token_for(wanted)
            answer = self._http.request(
                method,
                self.base_url + path,
                headers={"Authorization": f"Bearer {token.token}", "Accept": "application/json"},
                timeout=10,
                **kwargs,
            )
            self._notice(path, answer)
            if answer.status_code == 410:
                known = self.deprecations.get(path.split("/")[1])
                successor = known.successor if known else None
                raise VersionGone(f"{path} is gone (410); its successor: {successor}")
            if answer.status_code != 401 or attempt:
                return answer
            with self._lock:
                self._tokens.pop(wanted, None)
        raise AssertionError("unreachable")

    def current_path(self, path: str) -> str:
        """``path`` at its version's successor once an answer named one (and at that
        one's successor, if it has one too), else as it is."""
        for _ in range(len(self.deprecations)):
            version, _, rest = path.lstrip("/").partition("/")
            known = self.deprecations.get(version)
            if known is None or known.successor is None:
                break
            successor = known.successor.lstrip("/").split("/")[0]  # "v2026-10" or "2026-10"
            path = f"/v{successor.removeprefix('v')}/{rest}"
        return path

    def _notice(self, path: str, answer: requests.Response) -> None:
        """Keep what an answer in End of Support says: its Sunset and successor."""
        if answer.headers.get("Deprecation") != "true":
            return
        link = re.search(r'<([^>]*)>;\s*rel="successor-version"', answer.headers.get("Link", ""))
        version = path.split("/")[1]  # "v2026-06"
        self.deprecations[version] = Deprecation(
            answer.headers.get("Sunset", ""), link[1] if link else None
        )


# --8<-- [end:client]
