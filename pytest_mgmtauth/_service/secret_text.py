"""What messages may say of secrets: nothing of their value, and why a wrong one is wrong.

Masking: one mechanism keeps secrets out of every message, :class:`SecretMasker`. The
service registers every secret it holds or hands out (API keys and passwords, also
rotated-out ones, JSESSIONIDs, utks) and applies :meth:`SecretMasker.mask` where text
leaves it: events, error answers, the request's repr, exception messages. A secret is
replaced by its fingerprint (as in ``Account.__repr__``), whatever field or place it
arrived in, and also in the spellings it takes on the way (URL-encoded, '+' read as a
space, quoted by ``repr``). Bearer tokens need no registration: anything shaped like a
JWT is masked, issued by this test or not.

Diagnosis: why a secret that arrived differs from the one the account has, in the
client's terms. The usual causes are encoding mistakes the real service punishes with a
bare 1401: a key sent un-encoded in the form body ('+' becomes a space, '&' cuts the
field, '%41' decodes to 'A') or encoded twice. Messages use fingerprints, never the
secrets. A fix says what must be on the wire, then the idiom of the client that sent the
request when the transport could tell it (:class:`ClientKind`, from the User-Agent), or a
language-neutral one otherwise.

And how the refusal of a bad bearer token shows what it holds: a header or claim value
by its type when it might be a secret, the JWT library's message only when it cannot
repeat a value from the token.
"""

from __future__ import annotations

import enum
import threading
from typing import TYPE_CHECKING
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from .accounts import fingerprint
from .records import FORBIDDEN
from .secret_spans import Span, jwt_spans, replaced, secret_spans

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

#: Secrets shorter than this are not masked: a 3-letter password would be masked in
#: every word that contains it. Generated secrets are 20 characters or more.
MIN_MASKED_LENGTH = 6

#: Passes of ``SecretMasker.mask`` at most: a pass after the first masks a secret that a
#: fingerprint and the text after it make; one more is needed only if its fingerprint
#: does that again.
_MASKING_PASSES = 4

#: ``SecretMasker`` scans a text once per prefix of the spellings it knows while it knows
#: at most one per this many characters of the text (a scan in C costs about what this
#: many look-ups, one per place, cost in Python); beyond, it looks up each place.
_CHARACTERS_PER_SCAN = 4


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
        #: Goes up with each secret it comes to know: a text masked at one generation is
        #: masked alike while it stays (a cache of masked texts is good that long).
        self.generation = 0

    def add(self, secret: str) -> None:
        if not isinstance(secret, str) or len(secret) < MIN_MASKED_LENGTH:
            return
        with self._lock:
            if secret in self._known:
                return
            self._known.add(secret)
            self.generation += 1
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

    def mask(self, text: str, *, escaped: bool = True) -> str:
        """``text`` with every known secret, in any spelling a client may give it and
        any that escaping the text on the way out makes (``secret_spans.py``; ``escaped``:
        False for a text no escape is written into), and every JWT replaced by its
        fingerprint."""
        if "eyJ" in text:
            jwts = [(start, end, fingerprint(text[start:end])) for start, end in jwt_spans(text)]
            text = replaced(text, jwts) if jwts else text
        if not self._by_prefix:
            return text
        # A shorter text holds no secret, unless an escape it is written with on the way
        # out completes one ('\x12' then '3456' shows '123456').
        if len(text) < MIN_MASKED_LENGTH and text.isascii() and text.isprintable():
            return text
        # A fingerprint ends in a hex digit, which can complete a secret with the text
        # after it ('#1131ed' then '01116D' shows 'd01116D'): masked again until none
        # shows (a second pass only for a text that had a secret).
        for _ in range(_MASKING_PASSES):
            spans = secret_spans(text, self._find, escaped=escaped)
            if not spans:
                break
            text = replaced(text, spans)
        return text

    def _find(self, text: str) -> list[Span]:
        """Where the spellings of known secrets stand in ``text`` as it is (no decoding):
        the longest spelling that starts at a place, leftmost first, not overlapping."""
        index = self._by_prefix
        found: list[Span] = []
        end = 0
        for i in self._candidates(text):
            if i < end:
                continue
            for spelling, shown in tuple(index.get(text[i : i + MIN_MASKED_LENGTH], ())):
                if text.startswith(spelling, i):
                    end = i + len(spelling)
                    found.append((i, end, shown))
                    break
        return found

    def _candidates(self, text: str) -> Iterable[int]:
        """The places, in order, where a known spelling may start in ``text``: where
        each prefix stands, found by ``str.find``, while the prefixes are few for the
        text's length; else every place."""
        prefixes = list(self._by_prefix)
        if len(prefixes) * _CHARACTERS_PER_SCAN > len(text):
            return range(len(text) - MIN_MASKED_LENGTH + 1)
        places: list[int] = []
        for prefix in prefixes:
            i = text.find(prefix)
            while i >= 0:
                places.append(i)
                i = text.find(prefix, i + 1)
        places.sort()
        return places


# Diagnosis of a wrong secret.


class ClientKind(enum.Enum):
    """The HTTP client a request came from, as far as its User-Agent tells."""

    REQUESTS = "python-requests"
    HTTPX = "python-httpx"
    AIOHTTP = "aiohttp"
    URLLIB = "python-urllib"
    NODE = "node"
    CURL = "curl"
    GO = "go"
    JAVA = "java"
    OTHER = "other"


#: How each client sends a URL-encoded form whose values it encodes itself.
_FORM_IDIOM = {
    ClientKind.REQUESTS: "pass the fields as a dict: requests.post(url, data={...})",
    ClientKind.HTTPX: "pass the fields as a dict: httpx.post(url, data={...})",
    ClientKind.AIOHTTP: "pass the fields as a dict: session.post(url, data={...})",
    ClientKind.URLLIB: "build the body with urllib.parse.urlencode({...}).encode()",
    ClientKind.NODE: "send body: new URLSearchParams({...}) (fetch then sets the Content-Type too)",
    ClientKind.CURL: "use --data-urlencode 'name=value' for each field instead of -d/--data",
    ClientKind.GO: "build the body with url.Values{...}.Encode(), or use http.PostForm",
    ClientKind.JAVA: "encode each value with URLEncoder.encode(value, StandardCharsets.UTF_8) "
    "when building the body",
    ClientKind.OTHER: "build the body with your HTTP library's form encoder (Python "
    "urllib.parse.urlencode or data={...}, JavaScript URLSearchParams, Go url.Values, Java "
    "URLEncoder, curl --data-urlencode)",
}

#: Where each client would encode a value a second time.
_ENCODE_ONCE = {
    ClientKind.REQUESTS: "requests encodes a dict passed as data=: do not quote the value "
    "yourself first",
    ClientKind.HTTPX: "httpx encodes a dict passed as data=: do not quote the value yourself first",
    ClientKind.AIOHTTP: "aiohttp encodes a dict passed as data=: do not quote the value "
    "yourself first",
    ClientKind.URLLIB: "urllib.parse.urlencode encodes the values: do not quote them "
    "yourself first",
    ClientKind.NODE: "URLSearchParams encodes the values: do not encodeURIComponent them first",
    ClientKind.CURL: "--data-urlencode encodes the value: pass it as it is, not pre-encoded",
    ClientKind.GO: "url.Values.Encode encodes the values: do not url.QueryEscape them first",
    ClientKind.JAVA: "URLEncoder.encode each value once, not on an already encoded string",
    ClientKind.OTHER: "a client that passes the fields to a form encoder (a dict in Python, "
    "URLSearchParams, url.Values, curl --data-urlencode) must not encode the value itself "
    "first",
}


def form_idiom(client: ClientKind) -> str:
    """How ``client`` sends a URL-encoded form with its values encoded."""
    return _FORM_IDIOM[client]


def _unencoded_damage(field: str, expected: str) -> list[str]:
    """What writing ``expected`` into a form body without encoding does to it."""
    head, cut, tail = expected.partition("&")
    damage = []
    if "+" in head:
        damage.append(f"each '+' arrived as a space ({head.count('+')} of them)")
    if unquote(head.replace("+", " ")) != head.replace("+", " "):
        damage.append("'%' sequences were decoded (a '%' must travel as %25)")
    if cut:
        stray = "stray form fields" if "&" in tail else "a stray form field"
        seps = " and ".join(f"'{c}'" for c in "=&" if c in tail)
        split = f" split again at its {seps}" if seps else ""
        damage.append(
            f"the field was cut at the first '&' (after {len(head)} characters) and the "
            f"other {len(tail)} arrived as {stray}{split}"
        )
    return damage or ["it was decoded once too often"]


def diagnose_secret(
    field: str,
    expected: str,
    received: str,
    client: ClientKind = ClientKind.OTHER,
    *,
    json_body: bool = False,
) -> str:
    """One sentence saying how ``received`` relates to ``expected``; '' when equal.

    ``client`` picks the idiom of the fix; the wire format is named for every client.
    ``json_body``: it came in a JSON body, where form encoding plays no part.
    """
    if received == expected:
        return ""
    if json_body:
        if unquote(received) == expected:
            return (
                f"the {field} arrived URL-encoded inside a JSON body ('%XX' escapes): a JSON "
                f"string carries the {field} as it is; send it unencoded (requests and httpx: "
                "json={...}; JavaScript: JSON.stringify)"
            )
    elif received == unquote_plus(expected.split("&", 1)[0]):  # written in unencoded
        return (
            f"the {field} arrived un-encoded: {'; '.join(_unencoded_damage(field, expected))}. "
            f"URL-encode the {field} in the form body instead of writing it in as it is: on "
            f"the wire it must be percent-encoded ('+' as %2B, '&' as %26, '=' as %3D, '%' "
            f"as %25); {_FORM_IDIOM[client]}"
        )
    elif received == expected.replace("+", " "):
        # '%' and '&' were encoded (or absent) but '+' was not: a hand-rolled encoder.
        return (
            f"each '+' of the {field} arrived as a space: in a form body '+' means space, "
            f"so it must travel as %2B; percent-encode the whole {field}; "
            f"{_FORM_IDIOM[client]}"
        )
    if not json_body:  # a JSON body is decoded by its parser, never by hand
        decoded = received
        for times in (2, 3):
            once_more = unquote(decoded)
            if once_more == decoded:
                break
            decoded = once_more
            if decoded == expected:
                return (
                    f"the {field} arrived URL-encoded {'twice' if times == 2 else 'three times'} "
                    f"(it still contains '%XX' escapes, e.g. {quote('+', safe='')} for '+'): "
                    f"encode it once; {_ENCODE_ONCE[client]}"
                )
    if len(received) * 2 >= len(expected) and expected.startswith(received):
        # Only from half the secret on: below that, saying "truncated" would tell a
        # guesser that a short prefix is right, one character at a time (an oracle).
        return f"the {field} arrived truncated ({len(received)} of {len(expected)} characters)"
    if received.strip() == expected:
        return f"the {field} arrived with surrounding whitespace; send it without"
    return (
        f"the {field} does not match the account's (received {len(received)} characters, "
        f"{fingerprint(received)}; expected {len(expected)}, {fingerprint(expected)})"
    )


def diagnose_reauth_after(return_code: int | None, status: int = 401) -> str | None:
    """Why authenticating again after a call answered ``return_code`` (with HTTP
    ``status``: v3 answers a missing permission 403) cannot help, or ``None`` when it can
    (a 1401 says the credential is no good: renewing is right)."""
    if return_code != FORBIDDEN:
        return None
    what = "a 403" if status == 403 else "1469"
    return (
        f"{what} is a missing permission; logging in again cannot help: the service "
        "accepted the credential and refused the operation, and a new credential of the "
        "same account has the same permissions"
    )


def fix_after_forbidden(statuses: Collection[int] = (401,)) -> str:
    """The fix for a client that re-authenticates after a 1469 (answered with the HTTP
    ``statuses``: 401 on v1 and v2, 403 on v3)."""
    said = [
        text
        for status, text in ((401, "401 with returnCode 1469"), (403, "403"))
        if status in statuses
    ]
    return (
        f"treat {' and '.join(said) or '401 with returnCode 1469'} as final for that "
        "operation (report it, or give the account the permission: "
        "add_account(permissions=[...])) instead of authenticating again; keep the "
        "credential for the account's other calls"
    )


def paused_diagnosis(field: str, budget: int, window: float) -> str:
    """The plain refusal once an account's diagnoses are used up (see DIAGNOSIS_BUDGET):
    says nothing about how the secret that arrived relates to the account's."""
    return (
        f"the {field} does not match the account's; diagnoses of this account's {field} "
        f"are paused after {budget} failures within {window:g} s of simulated time, so "
        "that they cannot be used to guess it: the first failures' messages say what is "
        "wrong"
    )


# What a refused token's reason may show of it.

#: PyJWT's messages that never repeat a value from the token (shown in the reason).
_SAFE_JWT_MESSAGES = (
    "Invalid payload string",
    "Invalid header string",
    "Invalid header padding",
    "Invalid payload padding",
    "Invalid crypto padding",
    "Not enough segments",
    "Algorithm not specified",
    "The specified alg value is not allowed",
    "Algorithm not supported",
)


def library_says(exc: BaseException) -> str:
    """PyJWT's reason if it cannot carry a value from the token, else the error's type."""
    text = str(exc)
    if text.startswith(_SAFE_JWT_MESSAGES) and len(text) <= 160:
        return text
    return f"{type(exc).__name__} from the JWT library"


def claim_shown(value: object) -> str:
    """A header or claim value as a reason may show it: short plain strings and numbers
    as they are, anything else by its JSON type (a long string may be a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if len(value) <= 16 and value.isascii() and value.isprintable():
            return repr(value)
        return f"a {len(value)}-character string"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**20 else "a huge number"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return f"an object of {len(value)} member(s)"
    return type(value).__name__
