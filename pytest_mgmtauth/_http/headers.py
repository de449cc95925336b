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


#: A field name (RFC 9110 5.1: a token).
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _named(name: str) -> str:
    """A header's name for a message: a plain token as it is, anything else unnamed."""
    return f"the {name} header" if _TOKEN.fullmatch(name) and len(name) <= 64 else "a header"


def _unparsed_problem(line: str) -> str:
    """Why a header line that http.server could not read as ``name: value`` is invalid
    (without repeating its value: any header may carry a secret)."""
    name, colon, _ = line.partition(":")
    if colon and name.strip(HTTP_WHITESPACE) and name != name.rstrip(HTTP_WHITESPACE):
        bare = name.strip(HTTP_WHITESPACE)
        shown = repr(bare) if _TOKEN.fullmatch(bare) and len(bare) <= 64 else "a header"
        return (
            f"the header line of {shown} has whitespace between the name and the colon; "
            "RFC 9112 5.1 has servers refuse it (a proxy may read it differently): write "
            "'Name: value'"
        )
    if line[:1] in (" ", "\t"):
        return (
            "the first header line starts with whitespace (a continuation of nothing); "
            "each header line is 'Name: value' (RFC 9112 5)"
        )
    return (
        "a header line is not 'Name: value' (RFC 9112 5): the name must be a token "
        "(letters, digits and !#$%&'*+-.^_`|~) followed directly by ':', and a line must "
        "end in CRLF (a bare CR is not allowed, RFC 9112 2.2); the lines after it were "
        "not understood, so where the request ends is unknown"
    )


#: Transfer codings registered for HTTP (RFC 9110 18.3 / RFC 9112 7): the fake decodes
#: chunked only.
_KNOWN_CODINGS = ("compress", "deflate", "gzip", "x-compress", "x-gzip", "trailers")


def _transfer_coding_problem(
    version: str, codings: list[str], has_length: bool
) -> tuple[int, str] | None:
    """Why the Transfer-Encoding of a request makes it invalid (RFC 9112 6.1, 6.3, 7)."""
    if version in ("HTTP/0.9", "HTTP/1.0"):
        return 400, (
            f"this {version} request has a Transfer-Encoding header, which HTTP/1.0 does "
            "not have (RFC 9112 6.1: its framing is faulty): send HTTP/1.1, or a "
            "Content-Length"
        )
    names = [c.split(";", 1)[0].strip(HTTP_WHITESPACE).lower() for c in codings]
    names = [n for n in names if n]
    if not names:
        return 400, "the Transfer-Encoding header is empty; send 'Transfer-Encoding: chunked'"
    if has_length:
        return 400, (
            "this request has both Transfer-Encoding and Content-Length; send one of them "
            "(RFC 9112 6.1: the two disagree on where the body ends)"
        )
    if names[-1] != "chunked":
        return 400, (
            f"the Transfer-Encoding header lists {', '.join(map(repr, names))}: chunked must "
            "be the last coding, else the body's length cannot be known (RFC 9112 6.3)"
        )
    if names.count("chunked") > 1:
        return 400, (
            f"the Transfer-Encoding header lists chunked {names.count('chunked')} times; "
            "a body is chunked once (RFC 9112 7)"
        )
    others = [n for n in names if n != "chunked"]
    if others:
        known = [n for n in others if n in _KNOWN_CODINGS]
        what = (
            f"the transfer coding {known[0]!r}"
            if known
            else ("an unknown transfer coding" if len(others) == 1 else "unknown transfer codings")
        )
        return 501, (
            f"this fake does not implement {what} (RFC 9112 6.1: 501); send the body with "
            "'Transfer-Encoding: chunked' alone, or with a Content-Length (a compressed body "
            "goes with Content-Encoding, not Transfer-Encoding)"
        )
    if ";" in codings[-1]:
        return 400, "the chunked transfer coding takes no parameters (RFC 9112 7)"
    return None


def framing_problem(
    version: str, headers: Sequence[tuple[str, str]], *, unparsed: str | None = None
) -> tuple[int, str] | None:
    """The status and why the request's header section makes its framing invalid (RFC
    9112), or None: a header line that is not ``name: value`` (``unparsed``: the first
    such line), a NUL in a value, a missing or repeated Host, a repeated or malformed
    Content-Length, a Transfer-Encoding that is not chunked alone (501 for a coding the
    fake does not implement). The server answers such a request and closes the
    connection.

    Two ``Content-Length`` headers are refused even when their values are equal: RFC
    9110 8.6 lets a recipient collapse identical ones, but a client that sends two has a
    bug that a proxy in front of the real service may refuse; the fake points it out.
    """
    if unparsed is not None:
        return 400, _unparsed_problem(unparsed)
    hosts = [value for name, value in headers if name.lower() == "host"]
    if not hosts and version not in ("HTTP/0.9", "HTTP/1.0"):
        return 400, (
            f"this {version} request has no Host header; HTTP/1.1 requires one (RFC 9112 "
            "3.2): send 'Host: <host>:<port>' (HTTP libraries do; a hand-written request "
            "may not)"
        )
    if len(hosts) > 1:
        return 400, f"this request has {len(hosts)} Host headers; send exactly one (RFC 9112 3.2)"
    lengths = [value for name, value in headers if name.lower() == "content-length"]
    if len(lengths) > 1:
        same = "equal" if len({v.strip(HTTP_WHITESPACE) for v in lengths}) == 1 else "different"
        return 400, (
            f"this request has {len(lengths)} Content-Length headers ({same} values); send "
            "exactly one: the body's length is ambiguous (RFC 9112 6.3), the fake refuses "
            "duplicates even when they are equal"
        )
    if lengths and not _ASCII_DIGITS.fullmatch(lengths[0].strip(HTTP_WHITESPACE)):
        return 400, (
            "the Content-Length header is not a number of bytes (digits only, RFC 9110 8.6): "
            f"{_not_digits(lengths[0])}"
        )
    for name, value in headers:
        if "\x00" in value or "\r" in value:
            what = "a NUL byte" if "\x00" in value else "a bare CR"
            return 400, (
                f"{_named(name)} contains {what}; RFC 9110 5.5 has recipients refuse field "
                "values with NUL, CR or LF: remove it"
            )
    codings = [
        part
        for name, value in headers
        if name.lower() == "transfer-encoding"
        for part in value.split(",")
    ]
    if any(name.lower() == "transfer-encoding" for name, _ in headers):
        return _transfer_coding_problem(version, codings, bool(lengths))
    return None


def chunked(headers: Sequence[tuple[str, str]]) -> bool:
    """Whether the request's body is chunked (its framing already checked)."""
    return any(name.lower() == "transfer-encoding" for name, _ in headers)


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
