"""What of an exchange with the auth service may be compared with the service itself:
its normalised record, and the snapshot file that holds a module's records.

An exchange (a request and its answer) becomes a record of its shape only: method, path
with the names the flows declare (``Flow.path_names``: account, profile, API version) as
placeholders, status, content type, the body's keys and the types of their values, the
values that are codes (``returnCode``, and the flows' ``code_keys``), the hosts of the
service (the flows' ``host_keys``), the headers that carry meaning, and of each
credential (the flows' credential keys) a JWT's header, claim names and lifetime or an
opaque token's length and alphabet. Nothing that changes from
one answer to the next (a token, a date, an id) and no secret value is in it, so that
the fake's record and the service's compare equal when the two behave alike. A
protected call (a declared route) is recorded on the auth layer only: accepted, or
refused and the refusal's shape; its data body never.

Pure: no HTTP, no pytest, no files (the glue reads and writes them).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import string
from typing import Any

from .flows.registry import declared
from .options import is_host_name

#: The snapshot file's format number: a reader refuses a format it does not know.
FORMAT = 1

#: Keys of the service's own error answers (every flow's refusals) whose values are
#: codes; the flows declare the rest (``Flow.code_keys``).
ERROR_CODE_KEYS = frozenset({"returnCode", "status"})
#: How deep a JSON text may nest and still be read as JSON: an answer of the service
#: nests a few levels; one nested deeper is recorded as not JSON, never recursed into.
MAX_DEPTH = 64
#: Cookie attributes whose values are kept (dates and ages change per answer).
_ATTRIBUTES_WITH_VALUES = frozenset({"path", "samesite", "domain"})
#: The refusals of a protected call (every other status: the call was accepted).
REFUSED_STATUSES = frozenset({401, 403})

#: A host as the fake answers its own address (``127.0.0.1:53011``, ``[::1]:53011``).
_ADDRESS = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::[0-9]+)?$")
_JWT = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")


@dataclasses.dataclass(frozen=True)
class Exchange:
    """One request and its answer, as the transport saw it (raw: normalise before
    keeping it anywhere)."""

    method: str
    path: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    #: A call to a declared route (its body is data, never recorded), not a grant.
    protected: bool = False


def normalised_path(path: str) -> str:
    """``path`` with what the flows' ``path_names`` name as ``{name}`` placeholders
    (the account and profile of ``/accounts/{account}/profiles/{profile}``, the API
    version of ``/{version}/``); no query."""
    path = path.split("?", 1)[0]
    spans = sorted(
        (match.span(name), name)
        for pattern in declared().path_names
        for match in pattern.finditer(path)
        for name, value in match.groupdict().items()
        if value
    )
    out, done = [], 0
    for (start, end), name in spans:
        if start >= done:  # overlapping names: the first holds
            out += [path[done:start], f"{{{name}}}"]
            done = end
    return "".join(out) + path[done:]


def parse_json(text: bytes | str, limit: int = MAX_DEPTH) -> Any:
    """``json.loads``, and a ValueError (not a RecursionError) for a text nested deeper
    than ``limit`` levels."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {limit} levels") from None
    stack = [(value, 1)]  # looked at without recursion
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                raise ValueError(f"nested deeper than {limit} levels")
            stack.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return value


def normalise(exchange: Exchange, *, region_host: str | None = None) -> dict[str, Any]:
    """The record of ``exchange``: JSON-ready, with nothing dynamic or secret in it.
    ``region_host``: the host the fake's own address stands for in a host field (the
    fake's answers: its ``v3_host``)."""
    headers = _headers(exchange.headers)
    record: dict[str, Any] = {
        "method": exchange.method.upper(),
        "path": normalised_path(exchange.path),
    }
    if exchange.protected and exchange.status not in REFUSED_STATUSES:
        record["auth"] = "accepted"
        headers = {k: v for k, v in headers.items() if k in _LIFECYCLE}
    else:
        if exchange.protected:
            record["auth"] = "refused"
        record["status"] = exchange.status
        record["content_type"] = _content_type(exchange.headers)
        record["body"] = _body_shape(exchange.body, region_host)
    if headers:
        record["headers"] = headers
    return record


_LIFECYCLE = frozenset({"sunset", "deprecation", "link"})


def _content_type(headers: tuple[tuple[str, str], ...]) -> str | None:
    for name, value in headers:
        if name.lower() == "content-type":
            return ";".join(p.strip().lower() for p in value.split(";"))
    return None


def _headers(headers: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The headers that carry meaning, reduced to what does not change per answer."""
    out: dict[str, Any] = {}
    cookies: dict[str, list[str]] = {}
    for raw_name, value in headers:
        name = raw_name.lower()
        if name == "www-authenticate":
            out[name] = _www_authenticate(value)
        elif name == "retry-after":
            out[name] = "seconds" if value.strip().isdigit() else "http-date"
        elif name == "set-cookie":
            cookie, attributes = _cookie(value)
            cookies[cookie] = attributes
        elif name == "sunset":
            out[name] = "http-date"
        elif name == "deprecation":
            # RFC 9745's "@<epoch>", the lifecycle page's "true", or an HTTP-date.
            kept = value.strip()
            out[name] = (
                "@epoch" if kept.startswith("@") else kept if kept == "true" else "http-date"
            )
        elif name == "link":
            out[name] = sorted(set(re.findall(r'rel="?([^";,]+)"?', value)))
    if cookies:
        out["set-cookie"] = cookies
    return out


def _www_authenticate(value: str) -> dict[str, str]:
    scheme, _, params = value.strip().partition(" ")
    found = re.search(r'error="?([^",]+)"?', params)
    shape = {"scheme": scheme}
    if found:
        shape["error"] = found[1]
    return shape


def _cookie(value: str) -> tuple[str, list[str]]:
    """A cookie's name and its attributes (values only where they are not dates)."""
    first, *rest = value.split(";")
    attributes = []
    for part in rest:
        key, eq, attr = part.strip().partition("=")
        if not key:
            continue
        lowered = key.lower()
        attributes.append(
            f"{lowered}={attr}" if eq and lowered in _ATTRIBUTES_WITH_VALUES else lowered
        )
    return first.split("=", 1)[0].strip(), sorted(attributes)


def _body_shape(body: bytes, region_host: str | None) -> Any:
    if not body:
        return None
    try:
        parsed = parse_json(body)
    except ValueError:  # a UnicodeDecodeError too
        return "non-json"
    return _shape(parsed, key=None, region_host=region_host)


def _shape(value: Any, *, key: str | None, region_host: str | None) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v, key=k, region_host=region_host) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0], key=key, region_host=region_host)] if value else []
    keys = declared()
    if (key in ERROR_CODE_KEYS or key in keys.code_keys) and not isinstance(value, dict):
        return value
    if isinstance(value, str) and key in keys.secret_keys:
        return token_shape(value)
    if isinstance(value, str) and key in keys.host_keys:
        return host_shape(value, region_host)
    return _type_name(value)


def host_shape(value: str, region_host: str | None) -> str:
    """A host of the service as it is; the fake's own address (a host with a port, an
    IP address) as the host it stands for (``region_host``), so it is never drift;
    anything else as its type."""
    if is_host_name(value):
        return value
    if region_host is not None and _ADDRESS.match(value):
        return region_host
    return "string"


#: The names a record gives the types of an answer's values (JSON's: exact types).
_TYPE_NAME = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string"}
TYPE_NAMES = frozenset(_TYPE_NAME.values())


def _type_name(value: Any) -> str:
    return _TYPE_NAME.get(type(value), type(value).__name__)


def token_shape(token: str) -> dict[str, Any]:
    """A JWT's header, claim names and types and lifetime; else an opaque token's
    length and alphabet. Never the token, its signature or a claim's value."""
    jwt = _jwt_shape(token) if _JWT.match(token) else None
    if jwt is not None:
        return {"jwt": jwt}
    return {"opaque": {"length": len(token), "alphabet": alphabet(token)}}


def _jwt_shape(token: str) -> dict[str, Any] | None:
    head, claims_part, _signature = token.split(".")
    try:
        header = parse_json(_unb64(head))
        claims = parse_json(_unb64(claims_part))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return None
    shape: dict[str, Any] = {
        # alg and typ are the format; kid and the rest change with the key.
        "header": {k: (v if k in ("alg", "typ") else _type_name(v)) for k, v in header.items()},
        "claims": {k: _type_name(v) for k, v in claims.items()},
    }
    exp, iat = claims.get("exp"), claims.get("iat")
    if isinstance(exp, (int, float)) and isinstance(iat, (int, float)):
        shape["lifetime"] = int(exp - iat)
    return shape


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


#: The classes :func:`alphabet` names, and how many characters each holds.
ALPHABET_CLASSES = {"A-Z": 26, "a-z": 26, "a-f": 6, "0-9": 10}
_ALPHABET_PART = re.compile("|".join(ALPHABET_CLASSES) + "|.", re.DOTALL)


def alphabet_classes(text: str) -> dict[str, int]:
    """An :func:`alphabet` text read back: each class (or other character) it names, with
    how many characters it holds."""
    return {part: ALPHABET_CLASSES.get(part, 1) for part in _ALPHABET_PART.findall(text)}


def alphabet(text: str) -> str:
    """The character classes of ``text``: ``A-Z``, ``a-z``, ``0-9`` and any other
    characters themselves, in that order (``"a-f0-9"`` for a lowercase hex token)."""
    chars = set(text)
    classes = []
    if chars & set(string.ascii_uppercase):
        classes.append("A-Z")
    if chars & set(string.ascii_lowercase):
        # Hex only when nothing else says otherwise (no capitals, no other characters).
        hexish = chars <= set(string.hexdigits.lower())
        classes.append("a-f" if hexish else "a-z")
    if chars & set(string.digits):
        classes.append("0-9")
    others = sorted(c for c in chars if c not in string.ascii_letters + string.digits)
    return "".join(classes) + "".join(others)


# -- the snapshot file ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TestRecord:
    """One test's recorded exchanges, with when and by which plugin they were."""

    __test__ = False  # not a pytest test class

    recorded: str
    plugin_version: str
    exchanges: tuple[dict[str, Any], ...]

    def as_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "exchanges": list(self.exchanges)}


#: What a broken snapshot's message tells to do.
_FIX = (
    "fix it or remove it, or record it anew from the service with pytest --mgmtauth-live "
    "(page Checked against the service: snapshots)"
)


@dataclasses.dataclass
class Snapshot:
    """A test module's snapshot file (``mgmtauth_snapshots/<module>.json``): the records
    of its recorded tests, by test id."""

    tests: dict[str, TestRecord] = dataclasses.field(default_factory=dict)

    def dumps(self) -> str:
        """Diff-friendly JSON: keys sorted, one per line, a newline at the end."""
        data = {
            "format": FORMAT,
            "tests": {tid: self.tests[tid].as_json() for tid in sorted(self.tests)},
        }
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def loads(cls, text: str | bytes, *, where: str = "the snapshot") -> Snapshot:
        """Read a snapshot file; a clear ValueError naming ``where`` if it is not one."""
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{where} is not UTF-8 ({exc}); " + _FIX) from None
        try:
            data = parse_json(text, _SNAPSHOT_DEPTH)
        except ValueError as exc:
            if str(exc).startswith("nested deeper"):
                raise ValueError(
                    f"{where} is nested too deeply to be a snapshot ({exc}); " + _FIX
                ) from None
            raise ValueError(f"{where} is not JSON ({exc}); " + _FIX) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(
                f"{where} is not a pytest-mgmtauth snapshot of format {FORMAT}; " + _FIX
            )
        entries = data.get("tests") or {}
        if not isinstance(entries, dict):
            raise ValueError(
                f'{where} is a snapshot whose "tests" is not an object of test ids; ' + _FIX
            )
        return cls({tid: _record(tid, entry, where) for tid, entry in entries.items()})


#: How deep a snapshot may nest: its records hold bodies of at most :data:`MAX_DEPTH`.
_SNAPSHOT_DEPTH = MAX_DEPTH + 8


_ENTRY_KEYS = ("recorded", "plugin_version", "exchanges")


def _record(tid: str, entry: Any, where: str) -> TestRecord:
    """The record of ``tid`` in the snapshot at ``where``; a ValueError naming it."""
    if not isinstance(entry, dict) or any(key not in entry for key in _ENTRY_KEYS):
        raise ValueError(
            f"{where}: the entry of {tid!r} lacks recorded, plugin_version or exchanges; " + _FIX
        )
    exchanges = entry["exchanges"]
    if not isinstance(exchanges, list) or not all(isinstance(e, dict) for e in exchanges):
        raise ValueError(
            f"{where}: the exchanges of {tid!r} are not a list of objects (one per "
            f"request); " + _FIX
        )
    return TestRecord(
        recorded=str(entry["recorded"]),
        plugin_version=str(entry["plugin_version"]),
        exchanges=tuple(exchanges),
    )
