"""Hypothesis-generated hostile requests to every endpoint and to protected routes.

Each example sends one raw request (random methods, targets, headers, cookies, bodies,
encodings, sizes, lying Content-Lengths) to one shared mgmt_server; ``World.send``
checks every answer (no 5xx, no exception inside, one event at most and matching the
status, no secret whole) and the ``world`` fixture checks the whole run at its end.
"""

from __future__ import annotations

import gzip
import json
import string
from typing import Any
from urllib.parse import quote, urlencode

from hostile_support import World, build_request
from hypothesis import given, settings, strategies as st

PROFILE = settings.get_profile("mgmtauth-hostile")
RAW_PREFIXES = (b"", b"POST /v2/auth HTTP/1.1\r\n", b"GET /api/items HTTP/1.1\r\nHost: x\r\n")
FORM = "application/x-www-form-urlencoded"
TOKEN_CHARS = string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~"

# -- pieces ----------------------------------------------------------------------------

methods = st.one_of(
    st.sampled_from(["POST"] * 6 + ["GET"] * 3 + ["PUT", "PATCH", "DELETE", "HEAD"]),
    st.sampled_from(["OPTIONS", "TRACE", "CONNECT", "post", "Get", "P0ST", "PROPFIND"]),
    st.text(alphabet=TOKEN_CHARS, min_size=1, max_size=10),
)

BUILTIN = ["/v2/auth", "/v1/login", "/v1/logout"]
PROTECTED = ["/api/items", "/api/things/7", "/v1/items", "/api/echo"]
ODD = [
    "/",
    "/v2/auth/",
    "//v2/auth",
    "/V2/AUTH",
    "/v2/%61uth",
    "/v2/auth%00",
    "/api/things/x",
    "/api/items/../items",
    "/nope",
    "*",
    "http://127.0.0.1/v2/auth",
    "/%ff%fe",
    "/\u00e9t\u00e9",
]
path_chars = st.sampled_from([*list("abc/._~%-+;=&?#"), "%2F", "%00", "%zz", "é", "😀"])


def build_strategies(world: World) -> dict[str, st.SearchStrategy[Any]]:
    """The request strategies for one world, built once per run. Every strategy is
    made here, never inside a draw: hypothesis validates each new strategy object, and
    building them per example was most of the run time."""
    any_text = st.text(max_size=40) | st.binary(max_size=80).map(lambda b: b.decode("latin-1"))
    secret_values = (
        st.sampled_from(
            [
                world.full.api_key,
                world.limited.api_key,
                world.full.password,
                world.limited.password,
                world.token,
                world.utk,
                world.session_id,
            ]
        )
        | any_text
    )
    damages = st.sampled_from(["none"] * 4 + ["truncate", "append", "quote", "case", "strip"])
    fractions = st.floats(0, 1)
    suffixes = st.sampled_from(["x", " ", "%", "\x00", "\u00e9", "=", "&"])
    base_paths = st.sampled_from(BUILTIN * 3 + PROTECTED * 3 + ODD)
    path_suffixes = st.none() | st.lists(path_chars, max_size=8).map("".join)
    queries = st.sampled_from(
        [
            "",
            "",
            f"?utk={quote(world.utk)}",
            f"?utk={quote(world.utk)}&utk=x",
            "?utk=",
            "?utk=%zz",
            "?a=1&&b==2",
            f"?token={world.token[:40]}",
            "?" + "q" * 3000,
        ]
    )
    usernames = (
        st.sampled_from(
            [
                world.full.username,
                world.limited.username,
                world.full.username.upper(),
                world.full.username + " ",
                "nobody@example.com",
                "",
            ]
        )
        | any_text
    )
    field_names = (
        st.lists(
            st.sampled_from(["username", "key", "password", "Key", "user", "", "utk"]),
            max_size=4,
        )
        | st.just(["username", "key"])
        | st.just(["username", "password"])
    )
    form_encodings = st.sampled_from(
        ["urlencode"] * 4 + ["raw", "double", "utf16", "latin1", "gzip"]
    )
    body_kinds = st.sampled_from(["form"] * 5 + ["empty", "binary", "json", "big", "escapes"])
    binary_bodies = st.binary(max_size=300)
    big_sizes = st.sampled_from([65_535, 65_536, 65_537, 70_000, 200_000])
    escape_bodies = st.sampled_from([b"username=%&key=%%", b"key=%e9%ff", b"=&=&", b"&&&", b"%"])
    # Rare choices last: hypothesis favours the first element (and 0 of integers).
    mostly_false = st.sampled_from([False] * 9 + [True])
    rarely_true = st.sampled_from([False] * 49 + [True])
    content_types = (
        st.sampled_from(
            [FORM] * 5
            + [
                FORM + "; charset=utf-8",
                FORM.upper(),
                "application/json",
                "multipart/form-data; boundary=x",
                "text/plain",
                "",
                ";;;",
                "application/x-www-form-urlencoded\x00",
            ]
        )
        | st.none()
    )
    noise_headers = st.none() | st.binary(max_size=60)
    odd_headers = st.sampled_from(
        [
            None,
            None,
            None,
            ("Content-Encoding", "gzip"),
            ("Transfer-Encoding", "chunked"),
            ("Expect", "100-continue"),
            ("Connection", "keep-alive"),
            (b"X-Bytes", b"\xff\xfe\x00"),
            (b"Bad Name", b"x"),
            ("X-Huge", "h" * 70_000),
        ]
    )
    lengths = st.sampled_from(
        ["auto"] * 8 + [None, "0", "-1", "abc", "99999999999999999999"]
    ) | st.integers(0, 400)
    versions = st.sampled_from(["HTTP/1.1"] * 8 + ["HTTP/1.0", "HTTP/2.0", "HTTP/1.1x"])

    @st.composite
    def _secrets_or_noise(draw: st.DrawFn) -> str:
        """A value for a credential slot: right, wrong, swapped, damaged or noise."""
        value = draw(secret_values)
        damage = draw(damages)
        if damage == "truncate" and value:
            value = value[: int(draw(fractions) * (len(value) - 1))]
        elif damage == "append":
            value += draw(suffixes)
        elif damage == "quote":
            value = quote(value, safe="")
        elif damage == "case":
            value = value.swapcase()
        elif damage == "strip":
            value = value.replace("+", "").replace("&", "")
        return value

    secrets_or_noise = _secrets_or_noise()
    auth_values = (
        st.sampled_from(
            [
                f"Bearer {world.token}",
                f"Bearer {world.limited_token}",
                f"bearer {world.token}",
                world.token,
                f"Basic {world.token}",
                f"{world.token} Bearer",
                f"Bearer  {world.token} ",
                f"Bearer {world.token} {world.token}",
                f"Bearer {world.token[:-5]}",
                f"Bearer {world.utk}",
                "Bearer",
                "Bearer ",
                "",
            ]
        )
        | secrets_or_noise.map(lambda v: f"Bearer {v}")
        | st.none()
    )
    cookie_values = (
        st.sampled_from(
            [
                f"JSESSIONID={world.session_id}",
                f"JSESSIONID={world.session_id}; JSESSIONID=other",
                f"jsessionid={world.session_id}",
                f"JSESSIONID={world.session_id.lower()}",
                f'JSESSIONID="{world.session_id}"',
                "JSESSIONID=",
                "JSESSIONID",
                "=;=;;",
                f"rememberMe=deleteMe; JSESSIONID={world.utk}",
            ]
        )
        | secrets_or_noise.map(lambda v: f"JSESSIONID={v}")
        | st.none()
    )

    @st.composite
    def _targets(draw: st.DrawFn) -> str:
        return draw(base_paths) + (draw(path_suffixes) or "") + draw(queries)

    @st.composite
    def _form_bodies(draw: st.DrawFn) -> bytes:
        """URL-encoded forms, right or subtly wrong, in many encodings."""
        fields = [
            (name, draw(usernames) if name == "username" else draw(secrets_or_noise))
            for name in draw(field_names)
        ]
        how = draw(form_encodings)
        if how == "urlencode":
            return urlencode(fields).encode()
        if how == "raw":  # the classic: values written into the body unencoded
            return "&".join(f"{k}={v}" for k, v in fields).encode("utf-8", "surrogatepass")
        if how == "double":
            return urlencode([(k, quote(v, safe="")) for k, v in fields]).encode()
        if how == "utf16":
            return urlencode(fields).encode("utf-16")
        if how == "latin1":
            return "&".join(f"{k}={v}" for k, v in fields).encode("latin-1", "replace")
        return gzip.compress(urlencode(fields).encode())

    targets = _targets()
    form_bodies = _form_bodies()

    @st.composite
    def _bodies(draw: st.DrawFn) -> bytes:
        kind = draw(body_kinds)
        if kind == "form":
            return draw(form_bodies)
        if kind == "empty":
            return b""
        if kind == "binary":
            return draw(binary_bodies)
        if kind == "json":
            return json.dumps({"username": world.full.username, "key": world.full.api_key}).encode()
        if kind == "big":
            return b"username=a&key=" + b"k" * draw(big_sizes)
        return draw(escape_bodies)

    @st.composite
    def _header_lists(draw: st.DrawFn) -> list[tuple[str | bytes, str | bytes]]:
        headers: list[tuple[str | bytes, str | bytes]] = []
        if not draw(mostly_false):
            headers.append(("Host", "127.0.0.1"))
        content_type = draw(content_types)
        if content_type is not None:
            headers.append(("Content-Type", content_type))
        auth = draw(auth_values)
        if auth is not None:
            headers.append(("Authorization", auth))
            if draw(mostly_false):
                headers.append(("Authorization", auth))
        cookie = draw(cookie_values)
        if cookie is not None:
            headers.append(("Cookie", cookie))
        noise = draw(noise_headers)
        if noise is not None:
            # A random header name and a random (latin-1) value.
            clean = noise.replace(b"\r", b"").replace(b"\n", b"")
            headers.append(("X-" + (noise[:8].hex() or "X"), clean))
        odd = draw(odd_headers)
        if odd is not None:
            headers.append(odd)
        if draw(rarely_true):
            headers += [(f"X-Many-{i}", "1") for i in range(120)]
        return headers

    bodies = _bodies()
    header_lists = _header_lists()

    @st.composite
    def _hostile_requests(draw: st.DrawFn) -> bytes:
        method = draw(methods)
        target = draw(targets)
        headers = draw(header_lists)
        body = draw(bodies)
        if any(v == "chunked" for _, v in headers):
            body = _chunked(body) if draw(st.booleans()) else body + b"\r\nzz\r\n"
        length = draw(lengths)
        if isinstance(length, int):
            length = str(min(length, len(body) + 50))
        eol = b"\n" if draw(mostly_false) else b"\r\n"
        return build_request(
            method, target, headers, body, version=draw(versions), content_length=length, eol=eol
        )

    return {
        "header_lists": header_lists,
        "hostile_requests": _hostile_requests(),
        "builtin_method": st.sampled_from(["POST"] * 8 + ["GET", "PUT"]) | methods,
        "builtin_body": form_bodies | bodies,
        "protected_method": st.sampled_from(["GET"] * 6 + ["POST", "PUT"]) | methods,
        "protected_target": st.sampled_from(PROTECTED) | targets,
        "protected_body": st.just(b"") | bodies,
        "raw_bytes": st.binary(max_size=400),
    }


def strategies_for(world: World) -> dict[str, st.SearchStrategy[Any]]:
    if not world.strategies:
        world.strategies.update(build_strategies(world))
    strategies: dict[str, st.SearchStrategy[Any]] = world.strategies
    return strategies


def _chunked(body: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n" if body else b"0\r\n\r\n"


# -- the runs ---------------------------------------------------------------------------
#
# Drawing a request costs hypothesis milliseconds, sending it about one: each drawn
# shape is sent to every endpoint (or every route) of its kind, so a CI run makes over
# 10,000 requests in about a minute.


@settings(PROFILE)
@given(data=st.data())
def test_any_request_to_the_builtin_endpoints(world: World, data: st.DataObject) -> None:
    strategy = strategies_for(world)
    method = data.draw(strategy["builtin_method"], label="method")
    headers = data.draw(strategy["header_lists"], label="headers")
    body = data.draw(strategy["builtin_body"], label="body")
    for target in BUILTIN:
        world.send(build_request(method, target, headers, body))


@settings(PROFILE)
@given(data=st.data())
def test_any_request_to_protected_routes(world: World, data: st.DataObject) -> None:
    strategy = strategies_for(world)
    method = data.draw(strategy["protected_method"], label="method")
    target = data.draw(strategy["protected_target"], label="target")
    headers = data.draw(strategy["header_lists"], label="headers")
    body = data.draw(strategy["protected_body"], label="body")
    calls = [
        (method, target),
        ("GET", "/api/items"),
        ("GET", "/api/things/7"),
        ("GET", f"/v1/items?utk={quote(world.utk)}"),
        ("PUT", "/api/echo"),
    ]
    for call_method, path in calls:
        world.send(build_request(call_method, path, headers, body))


@settings(PROFILE)
@given(data=st.data())
def test_any_request_at_all(world: World, data: st.DataObject) -> None:
    world.send(data.draw(strategies_for(world)["hostile_requests"], label="request"))


@settings(PROFILE)
@given(data=st.data())
def test_raw_bytes(world: World, data: st.DataObject) -> None:
    """Not even HTTP: random bytes, or a request line followed by random bytes."""
    strategy = strategies_for(world)
    garbage = data.draw(strategy["raw_bytes"], label="bytes")
    for prefix in RAW_PREFIXES:
        world.send(prefix + garbage, timeout=10)
