"""Reading ``Authorization: Bearer <token>``: the token a call presents, or why it is
missing or malformed, in the words of the flow whose route it reached."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from typing import TYPE_CHECKING

from .base import HTTP_WHITESPACE, Credential

if TYPE_CHECKING:
    from .base import Flow, Received


@dataclasses.dataclass(frozen=True)
class BearerToken(Credential):
    """What a bearer call presents: ``Authorization: Bearer <token>``. With a
    ``problem``, ``token`` may be the JWT found in a malformed header anyway: it
    attributes the refusal to its account."""

    token: str | None = None


# -- reading the bearer token of a call -------------------------------------------

#: Anything but visible ASCII (0x21-0x7E), SP and HTAB.
_NOT_HEADER_TEXT = re.compile(r"[^\x20-\x7e\t]")

#: Characters without a Unicode name that a client lets into a header value by mistake.
_CHAR_NAMES = {
    "\x00": "a NUL byte",
    "\x0b": "a vertical tab",
    "\x0c": "a form feed",
    "\x1c": "a file separator",
    "\x1d": "a group separator",
    "\x1e": "a record separator",
    "\x1f": "a unit separator",
    "\x7f": "a DEL character",
    "\x85": "a next-line character (NEL)",
}


def odd_char(value: str) -> tuple[int, str] | None:
    """The first character of a header value that is neither visible ASCII nor SP or
    HTAB (str.strip() and str.split() treat NBSP, VT, FF, NEL and U+001C..U+001F as
    whitespace; HTTP does not), and its description."""
    # One regular-expression search: a loop over the ~900 characters of a bearer token
    # was a measurable part of every protected call.
    odd = _NOT_HEADER_TEXT.search(value)
    if odd is None:
        return None
    return odd.start(), _describe_char(value, odd.start())


def _describe_char(value: str, index: int) -> str:
    char, how = value[index], ""
    if "\xc2" <= char <= "\xf4":
        # Header values arrive as latin-1: a UTF-8 sequence shows as 2 to 4 characters.
        raw = value[index : index + 4].encode("latin-1", "replace")
        for size in (2, 3, 4):
            try:
                decoded = raw[:size].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(decoded) == 1:
                char, how = decoded, ", sent as UTF-8"
            break
    name = _CHAR_NAMES.get(char)
    if name is None:
        unicode_name = unicodedata.name(char, "").lower()
        if not unicode_name:
            name = "the character"
        else:
            name = f"{'an' if unicode_name[0] in 'aeiou' else 'a'} {unicode_name}"
    return f"{name} (U+{ord(char):04X}{how})"


def read_bearer(received: Received, flow: Flow, token_word: str = "token") -> BearerToken:
    """The bearer token of ``received``, or why it is missing or malformed, in the words
    of ``flow`` (where its tokens come from)."""
    values = received.header("Authorization")
    source = f"the {token_word} from {flow.title}"
    if not values:
        other = flow.others_carried(received)
        hint = f" (this request carries {other})" if other else ""
        return BearerToken(
            missing=True,
            problem=(
                f"no Authorization header: send 'Authorization: Bearer <{token_word}>' "
                f"with {source}{hint}"
            ),
        )
    other_scheme = _other_scheme(values[0], flow)
    if other_scheme is not None:
        # Told as its own scheme before any comma is counted: another scheme's value
        # (``TLM-HMAC username=..., sig=...``) has commas of its own.
        return other_scheme
    # The WSGI server joins repeated headers into one with ", " (a JWT has no comma).
    values = [part for joined in values for part in joined.split(",")]
    if len(values) > 1:
        return BearerToken(
            problem=(
                f"{len(values)} Authorization values (repeated headers, or commas in one); "
                "send exactly one 'Authorization: Bearer <token>'"
            )
        )
    value = values[0].strip(HTTP_WHITESPACE)
    odd = odd_char(value)
    if odd is not None:
        index, char = odd
        # The token found anyway, without the odd characters, attributes the refusal.
        dropped = "".join(c for c in value if c.isascii() and (c.isprintable() or c == "\t"))
        words = [re.sub(r"(?i)^bearer", "", word) for word in dropped.split()]
        found = next((w for w in words if w.count(".") == 2), None)
        where = _where(value, index)
        rule = (
            "a JWT holds only letters, digits, '-', '_' and '.'"
            if where.startswith("inside")
            else "HTTP allows only spaces and tabs there"
        )
        return BearerToken(
            token=found,
            problem=(
                f"the Authorization header contains {char} {where}; {rule}: send "
                f"'Authorization: Bearer <token>' with the token exactly as {flow.title} "
                "returned it"
            ),
        )
    scheme, _, rest = value.partition(" ")
    rest = rest.strip(HTTP_WHITESPACE)
    if not rest:
        if value.count(".") == 2:
            return BearerToken(
                token=value,
                problem=(
                    "the Authorization header holds the token without the 'Bearer' scheme: "
                    "send 'Authorization: Bearer <token>'"
                ),
            )
        if scheme.lower() == "bearer":
            return BearerToken(
                problem="the Authorization header says 'Bearer' but no token follows it"
            )
        return BearerToken(problem="the Authorization header is not 'Bearer <token>'")
    if " " in rest or "\t" in rest:
        return BearerToken(
            problem=(
                "the bearer token contains a space or a tab; send the token exactly as "
                f"{flow.title} returned it"
            )
        )
    return BearerToken(token=rest)


def _where(value: str, index: int) -> str:
    """Where in 'Bearer <token>' the character at ``index`` is."""

    def visible(text: str) -> str:
        return "".join(c for c in text if c.isascii() and c.isprintable() and c != " ")

    before = visible(value[:index])
    if not before:
        return "at its start, before the scheme"
    if not visible(value[index + 1 :]):
        return "at its end, after the token"
    if before.lower() == "bearer":
        return "between 'Bearer' and the token"
    return f"inside the value (character {index + 1})"


def _other_scheme(value: str, flow: Flow) -> BearerToken | None:
    """A header of another scheme than Bearer (``Basic``, ``TLM-HMAC``), told as that
    scheme; ``None`` for a Bearer header or one without a scheme."""
    value = value.strip(HTTP_WHITESPACE)
    scheme, _, rest = value.partition(" ")
    rest = rest.strip(HTTP_WHITESPACE)
    if not rest or scheme.lower() == "bearer" or "," in scheme or odd_char(value):
        return None
    if any(p.strip(HTTP_WHITESPACE).lower().startswith("bearer ") for p in rest.split(",")):
        return None  # repeated headers, one of them Bearer: counted as such below
    # The scheme is named, never a secret; the value after it is.
    shown = scheme if len(scheme) <= 20 and scheme.isascii() else f"{scheme[:8]}..."
    # Another scheme presents no bearer token: RFC 6750 3.1 answers a request with an
    # unsupported method as one without authentication.
    return BearerToken(
        token=rest if rest.count(".") == 2 and "," not in rest else None,
        missing=True,
        problem=(
            f"the Authorization scheme is {shown!r}, not 'Bearer': {flow.name} calls take "
            "'Authorization: Bearer <token>'"
        ),
    )
