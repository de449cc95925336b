"""One mechanism that keeps secrets out of every message: :class:`SecretMasker`.

The service registers every secret it holds or hands out (API keys and passwords, also
rotated-out ones, JSESSIONIDs, utks) and applies :meth:`SecretMasker.mask` where text
leaves it: events, error answers, the request's repr, exception messages. A secret is
replaced by its fingerprint (as in ``Account.__repr__``), whatever field or place it
arrived in, and also in the spellings it takes on the way (URL-encoded, '+' read as a
space, quoted by ``repr``). Bearer tokens need no registration: anything shaped like a
JWT is masked, issued by this test or not.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import quote, quote_plus, unquote_plus

from .accounts import fingerprint

#: Secrets shorter than this are not masked: a 3-letter password would be masked in
#: every word that contains it. Generated secrets are 20 characters or more.
MIN_MASKED_LENGTH = 6

#: Three base64url segments, the first a JSON object ('eyJ' is '{"' encoded).
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*")


def _spellings(secret: str) -> set[str]:
    """The ways ``secret`` can appear in text the fake writes about a request."""
    found = {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret, safe=""),
        secret.replace("+", " "),
        unquote_plus(secret),
        repr(secret)[1:-1],
        ascii(secret)[1:-1],
    }
    return {s for s in found if len(s) >= MIN_MASKED_LENGTH}


class SecretMasker:
    """Knows secrets; :meth:`mask` replaces each in a text by its fingerprint."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Spellings by their first MIN_MASKED_LENGTH characters, longest first: a text
        # is scanned once, whatever the number of secrets.
        self._by_prefix: dict[str, list[tuple[str, str]]] = {}
        self._known: set[str] = set()

    def add(self, secret: str) -> None:
        if not isinstance(secret, str) or len(secret) < MIN_MASKED_LENGTH:
            return
        with self._lock:
            if secret in self._known:
                return
            self._known.add(secret)
            shown = fingerprint(secret)
            for spelling in _spellings(secret):
                bucket = self._by_prefix.setdefault(spelling[:MIN_MASKED_LENGTH], [])
                bucket.append((spelling, shown))
                bucket.sort(key=lambda entry: -len(entry[0]))

    def add_all(self, other: SecretMasker) -> None:
        """Know every secret ``other`` knows, too."""
        for secret in list(other._known):
            self.add(secret)

    def __contains__(self, secret: object) -> bool:
        return secret in self._known

    def mask(self, text: str) -> str:
        """``text`` with every known secret (and every JWT) replaced by its fingerprint."""
        if "eyJ" in text:
            text = _JWT.sub(lambda m: fingerprint(m.group()), text)
        index = self._by_prefix
        if not index or len(text) < MIN_MASKED_LENGTH:
            return text
        out: list[str] = []
        start = i = 0
        last = len(text) - MIN_MASKED_LENGTH
        while i <= last:
            bucket = index.get(text[i : i + MIN_MASKED_LENGTH])
            if bucket is not None:
                for spelling, shown in tuple(bucket):
                    if text.startswith(spelling, i):
                        out.append(text[start:i])
                        out.append(shown)
                        i = start = i + len(spelling)
                        break
                else:
                    i += 1
                continue
            i += 1
        if not out:
            return text
        out.append(text[start:])
        return "".join(out)
