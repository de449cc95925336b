"""Strictness about header values and the request's framing, so that a client's mistake
gets named instead of half-parsed: what may surround a header value, which character in
it is out of place and how to call it, and why the Host and Content-Length headers make
a request invalid (``framing_problem``, checked by the server before the app sees it).
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


#: What may surround a header value (RFC 9110 5.5: optional whitespace is SP and HTAB).
#: str.strip() also strips NBSP, VT, FF, NEL (U+0085) and U+001C..U+001F.
HTTP_WHITESPACE = " \t"
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
    # cost about 38 us of every protected call.
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


def framing_problem(version: str, headers: Sequence[tuple[str, str]]) -> str | None:
    """Why the request's Host or Content-Length headers make it invalid (RFC 9112), or
    None. The server answers such a request 400 and closes the connection.

    Two ``Content-Length`` headers are refused even when their values are equal: RFC
    9110 8.6 lets a recipient collapse identical ones, but a client that sends two has a
    bug that a proxy in front of the real service may refuse; the fake points it out.
    """
    hosts = [value for name, value in headers if name.lower() == "host"]
    if not hosts and version not in ("HTTP/0.9", "HTTP/1.0"):
        return (
            f"this {version} request has no Host header; HTTP/1.1 requires one (RFC 9112 "
            "3.2): send 'Host: <host>:<port>' (HTTP libraries do; a hand-written request "
            "may not)"
        )
    if len(hosts) > 1:
        return f"this request has {len(hosts)} Host headers; send exactly one (RFC 9112 3.2)"
    lengths = [value for name, value in headers if name.lower() == "content-length"]
    if len(lengths) > 1:
        same = "equal" if len({v.strip(HTTP_WHITESPACE) for v in lengths}) == 1 else "different"
        return (
            f"this request has {len(lengths)} Content-Length headers ({same} values); send "
            "exactly one: the body's length is ambiguous (RFC 9112 6.3), the fake refuses "
            "duplicates even when they are equal"
        )
    if lengths and not _ASCII_DIGITS.fullmatch(lengths[0].strip(HTTP_WHITESPACE)):
        return (
            "the Content-Length header is not a number of bytes (digits only, RFC 9110 8.6): "
            f"{_not_digits(lengths[0])}"
        )
    return None


#: str.isdigit() also takes '²' and other Unicode digits, which int() then refuses.
_ASCII_DIGITS = re.compile(r"[0-9]+")


def _not_digits(value: str) -> str:
    """What is wrong with a Content-Length value, without repeating it (any header may
    carry a secret)."""
    value = value.strip(HTTP_WHITESPACE)
    if not value:
        return "it is empty"
    if "," in value:
        return "it holds several values separated by commas"
    if value[0] in "+-":
        return f"it has a sign ({value[0]!r})"
    return f"{len(value)} character(s), not all digits"
