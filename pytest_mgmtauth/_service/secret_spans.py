"""Where a secret stands in a text, whatever the spelling a client gave it: the spans that
:class:`~.secret_text.SecretMasker` replaces by fingerprints.

A client can spell a secret in as many ways as its encoder chooses: percent-escapes for
any character, in either hex case, a space as ``+`` or ``%20`` (Python's ``quote`` and
``quote_plus``, JavaScript's ``encodeURIComponent`` and ``URLSearchParams``, Java's
``URLEncoder`` all differ), encoded twice or three times, inside HTTP Basic credentials
(base64 of ``id:secret``, each part form-encoded or not), as a quoted cookie value with
backslash escapes, as JSON ``\\uXXXX`` escapes (Go and Gson escape '&', '=', '<', '>',
any encoder may escape any character), split across folded header lines. Listing
spellings misses most of them. So the text is decoded the ways the fake (and the
libraries a client uses) decode it, keeping for each decoded character where it stood in
the text; a secret found in a decoded text is masked over the raw span it came from.

Every step is linear in the text: each decoding is one pass, at most
:data:`MAX_DECODINGS` of them, and bearer tokens (anything shaped like a JWT) are found
by one pass over runs of base64url characters, never by a regex that starts again
inside a run it has read (``eyJ`` repeated made that quadratic).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Callable, Iterator

#: A secret found in a text: start, end (exclusive) and what stands in for it.
Span = tuple[int, int, str]
#: Finds the spans of known secrets in a text, as it is (no decoding).
Find = Callable[[str], list[Span]]
#: A decoded text and, per character, its start in the raw text (one more entry: the
#: raw text's length).
Decoded = tuple[str, list[int]]

#: How many times a text is percent-decoded at most: the fake diagnoses a secret encoded
#: up to three times.
DECODING_DEPTH = 3
#: Decoded texts looked at per text at most: the text and up to three with escapes read
#: (cookie, JSON, folds), each decoded with both readings of '+' at each depth.
MAX_DECODINGS = 3 + 4 * (2 + 4 + 8)

_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_ESCAPES_OR_PLUS = re.compile(r"(?:%[0-9A-Fa-f]{2})+|\+")
#: A backslash escape of a quoted cookie value, as Werkzeug reads it.
_UNSLASH = re.compile(r"\\([0-3][0-7]{2}|.)", re.DOTALL)
#: A JSON string escape: a surrogate pair, one \uXXXX, or a one-letter escape.
_JSON_ESCAPE = re.compile(
    r"\\u([Dd][89ABab][0-9A-Fa-f]{2})\\u([Dd][C-Fc-f][0-9A-Fa-f]{2})"
    r"|\\u([0-9A-Fa-f]{4})|\\([\"\\/bfnrt])"
)
_JSON_LETTERS = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: A folded header line (obs-fold: a line break, then spaces or tabs) and the spaces
#: before it: a header value read with its folds taken out.
_FOLD = re.compile(r"[ \t]*\r?\n[ \t]+")
#: HTTP Basic credentials (any case, standard or URL-safe alphabet, padding optional).
_BASIC = re.compile(r"\b[Bb][Aa][Ss][Ii][Cc][ \t]+([A-Za-z0-9+/_-]+={0,2})")
#: A run of base64url characters and dots, where a JWT can stand.
_RUN = re.compile(r"[A-Za-z0-9_.-]+")


def jwt_spans(text: str) -> Iterator[tuple[int, int]]:
    """The spans of what looks like a JWT: from an ``eyJ`` ('{"' encoded) through the end
    of the second dot-separated segment after the one it is in, leftmost first, as the
    regex ``eyJ[A-Za-z0-9_-]*\\.[A-Za-z0-9_-]*\\.[A-Za-z0-9_-]*`` would find them, in
    one pass."""
    for run in _RUN.finditer(text):
        part = run.group()
        if "eyJ" not in part or part.count(".") < 2:
            continue
        segments = part.split(".")
        starts = [run.start()]
        for segment in segments[:-1]:
            starts.append(starts[-1] + len(segment) + 1)
        i = 0
        while i + 2 < len(segments):
            at = segments[i].find("eyJ")
            if at < 0:
                i += 1
                continue
            yield starts[i] + at, starts[i + 2] + len(segments[i + 2])
            i += 3


def _rewritten(
    text: str, pattern: re.Pattern[str], read: Callable[[re.Match[str]], Decoded]
) -> Decoded | None:
    """``text`` with each match of ``pattern`` replaced by what ``read`` makes of it (its
    characters, and where each stood in ``text``), and where each character stood; None
    if nothing matches."""
    chars: list[str] = []
    starts: list[int] = []
    done = 0
    for found in pattern.finditer(text):
        chars.append(text[done : found.start()])
        starts.extend(range(done, found.start()))
        written, places = read(found)
        chars.append(written)
        starts.extend(places)
        done = found.end()
    if not done:  # every match is at least one character long: none found
        return None
    chars.append(text[done:])
    starts.extend(range(done, len(text) + 1))
    return "".join(chars), starts


def _percent_read(found: re.Match[str]) -> Decoded:
    """A '+' as a space; a run of %XX escapes as UTF-8 (a byte that is not, as a lone
    surrogate), each character placed at its first escape."""
    if found.group() == "+":
        return " ", [found.start()]
    chars = bytes.fromhex(found.group().replace("%", "")).decode("utf-8", "surrogateescape")
    places = []
    at = found.start()
    for char in chars:
        places.append(at)
        at += 3 if "\udc80" <= char <= "\udcff" else 3 * len(char.encode("utf-8"))
    return chars, places


def _unslash_read(found: re.Match[str]) -> Decoded:
    escaped = found.group(1)
    return chr(int(escaped, 8)) if len(escaped) == 3 else escaped, [found.start()]


def _json_read(found: re.Match[str]) -> Decoded:
    high, low, single, letter = found.groups()
    if high is not None:
        char = chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    elif single is not None:
        char = chr(int(single, 16))
    else:
        char = _JSON_LETTERS.get(letter, letter)
    return char, [found.start()]


#: The readings of escapes and folds, each with the character a text that has some
#: holds: backslash escapes of quoted cookie values (``\\055`` is '-', ``\\"`` is '"') and
#: of JSON strings (``\\u0026`` is '&', a surrogate pair one character), and folded lines
#: joined (a secret a client split across them read whole).
_ESCAPE_READINGS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], Decoded]], ...] = (
    ("\\", _UNSLASH, _unslash_read),
    ("\\", _JSON_ESCAPE, _json_read),
    ("\n", _FOLD, lambda found: ("", [])),
)


def decodings(text: str) -> Iterator[Decoded]:
    """The texts ``text`` reads as once decoded (backslash escapes of cookies and JSON,
    folded lines joined; percent-escapes of those and of ``text``, one to
    :data:`DECODING_DEPTH` times, '+' as a space or not), each with the
    start in ``text`` of each of its characters. Each distinct text once."""
    seen = {text}
    # Per depth, the texts to decode further, with their map to ``text`` (None: itself);
    # a text with escapes read (JSON's, a form inside a JSON string) is decoded further.
    level: list[tuple[str, list[int] | None]] = [(text, None)]
    for needle, pattern, read in _ESCAPE_READINGS:
        escaped = _rewritten(text, pattern, read) if needle in text else None
        if escaped is not None and escaped[0] not in seen:
            seen.add(escaped[0])
            level.append(escaped)
            yield escaped
    for _ in range(DECODING_DEPTH):
        deeper: list[tuple[str, list[int] | None]] = []
        for current, starts in level:
            if "%" not in current and "+" not in current:
                continue
            # '+' read as a space (as in a form or a query) first, then as it is.
            for escapes in (_ESCAPES_OR_PLUS, _ESCAPES):
                found = _rewritten(current, escapes, _percent_read)
                if found is None or found[0] in seen:
                    continue
                seen.add(found[0])
                mapped = found[1] if starts is None else [starts[i] for i in found[1]]
                deeper.append((found[0], mapped))
                yield found[0], mapped
        level = deeper


def _spans_in(text: str, find: Find) -> list[Span]:
    """The spans of known secrets in ``text`` and in every decoding of it."""
    spans = find(text)
    for decoded, starts in decodings(text):
        spans.extend((starts[start], starts[end], shown) for start, end, shown in find(decoded))
    return spans


def _basic_spans(text: str, find: Find) -> list[Span]:
    """The Basic credentials of ``text`` that carry a known secret, each whole."""
    spans = []
    for found in _BASIC.finditer(text):
        blob = found.group(1)
        padded = blob.replace("-", "+").replace("_", "/").rstrip("=")
        padded += "=" * (-len(padded) % 4)
        try:
            decoded = base64.b64decode(padded).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            continue
        inside = _spans_in(decoded, find)
        if inside:
            spans.append((found.start(1), found.end(1), inside[0][2]))
    return spans


#: A character a text cannot show as it is where it leaves the fake: a header value, a
#: JSON string (``ensure_ascii``), a ``repr``, an XML file write it as an escape.
_NOT_SHOWN = re.compile(r"[^\x20-\x7e]")
#: The escapes of a character that keeps a letter of its own (JSON's also ``\b``, ``\f``).
_LETTER_ESCAPES = {"\n": "n", "\r": "r", "\t": "t", "\b": "b", "\f": "f"}


def _python_escape(char: str, digits: str) -> str:
    """``char`` as ``repr``, ``ascii`` and ``unicode_escape`` write it."""
    code = ord(char)
    if char in "\n\r\t":
        return "\\" + _LETTER_ESCAPES[char]
    width, letter = (2, "x") if code < 0x100 else (4, "u") if code < 0x10000 else (8, "U")
    return f"\\{letter}{format(code, f'0{width}{digits}')}"


def _json_escape(char: str, digits: str) -> str:
    """``char`` as ``json.dumps`` writes it (a character beyond the BMP as a surrogate
    pair)."""
    if char in _LETTER_ESCAPES:
        return "\\" + _LETTER_ESCAPES[char]
    units = char.encode("utf-16-be", "surrogatepass")
    return "".join(
        f"\\u{format(int.from_bytes(units[i : i + 2], 'big'), f'04{digits}')}"
        for i in range(0, len(units), 2)
    )


def rendered(text: str, escape: Callable[[str], str]) -> Decoded | None:
    """``text`` as it is written where each character outside visible ASCII is escaped
    by ``escape``, and where each character of that stood in ``text`` (an escape: its
    character's place, for each of its characters); None if nothing is escaped."""

    def read(found: re.Match[str]) -> Decoded:
        written = escape(found.group())
        return written, [found.start()] * len(written)

    return _rewritten(text, _NOT_SHOWN, read)


#: The ways a character outside visible ASCII is written on the way out: Python's
#: escapes (the diagnosis header, ``repr``) and JSON's, each with lower-case hex digits
#: (as Python writes them) and upper-case ones (pytest's JUnit XML writes ``#x0E``).
_RENDERINGS: tuple[Callable[[str], str], ...] = tuple(
    functools.partial(escape, digits=digits)
    for escape in (_python_escape, _json_escape)
    for digits in ("x", "X")
)


def _rendered_spans(text: str, find: Find) -> list[Span]:
    """The spans of known secrets that ``text`` shows once its characters outside
    visible ASCII are escaped: an escape ends in hex digits or a letter, which can
    complete a secret that follows it ('\x12' then '345...' shows '12345...'). A span
    covers each character whose escape it reaches, so the escape goes with the secret."""
    spans: list[Span] = []
    for escape in _RENDERINGS:
        found = rendered(text, escape)
        if found is None:
            return spans  # no character is escaped: no rendering differs from the text
        shown, starts = found
        spans.extend(
            (starts[start], starts[end - 1] + 1, stand_in) for start, end, stand_in in find(shown)
        )
    return spans


def secret_spans(text: str, find: Find, *, escaped: bool = True) -> list[Span]:
    """Where the secrets ``find`` knows stand in ``text``, in any spelling, also once it
    is written with escapes (``escaped``: False for a text no escape is written into);
    overlapping spans merged (the first one's stand-in kept), in order."""
    spans = _basic_spans(text, find)
    spans.extend(_spans_in(text, find))
    if escaped:
        spans.extend(_rendered_spans(text, find))
    spans.sort(key=lambda span: span[0])  # stable: a Basic span first where it starts
    merged: list[Span] = []
    for start, end, shown in spans:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2])
        else:
            merged.append((start, end, shown))
    return merged


def replaced(text: str, spans: list[Span]) -> str:
    """``text`` with each of ``spans`` (in order, not overlapping) replaced."""
    out = []
    done = 0
    for start, end, shown in spans:
        out.append(text[done:start])
        out.append(shown)
        done = end
    out.append(text[done:])
    return "".join(out)
