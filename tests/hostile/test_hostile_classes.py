"""Issue 9: the classes behind the single examples, generated.

* Forged JWTs: headers and payloads whose members (alg, typ, kid, crit, jku, x5u, b64,
  sub, iss, iat, nbf, exp, jti, ...) hold any JSON value, or that are not objects at
  all; signatures that are missing, garbage, another token's, or a real RS512 signature
  by the fake's own key (so that the claim checks after the signature are reached too).
  Every one is a 401 / 1401 that never reaches the route's handler.
* Header parsing: the bearer token surrounded by any mix of SP, HTAB and characters
  str.strip() takes for whitespace but HTTP does not; repeated Host, Content-Length,
  Cookie and Authorization lines. The expected answer is computed from the RFC rule and
  compared with the fake's.

Each example goes through ``World.send``: no 5xx, no exception inside the fake, one
event at most and matching the status, no secret echoed.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from hostile_support import World, build_request
from hypothesis import given, settings, strategies as st

from pytest_mgmtauth import ApiCall, BadRequest

PROFILE = settings.get_profile("mgmtauth-hostile")

HEADER_MEMBERS = ("alg", "typ", "kid", "crit", "jku", "x5u", "x5c", "jwk", "cty", "b64", "zip")
CLAIMS = ("sub", "iss", "iat", "nbf", "exp", "jti", "aud")
PLAUSIBLE_HEADER: dict[str, list[Any]] = {
    "alg": ["RS512"] * 6 + ["RS256", "HS512", "none", "None", "", "ES512", "PS512"],
    "typ": ["JWT", "jwt", "at+jwt"],
    "kid": ["k1", "", "../../etc/passwd"],
    "crit": [["b64"], ["exp"], [], ["b64", "b64"]],
    "jku": ["http://127.0.0.1:1/jwks.json"],
    "x5u": ["http://127.0.0.1:1/cert.pem"],
    "b64": [False, True],
}

#: What str.strip()/str.split() take for whitespace and HTTP does not, and SP/HTAB.
HTTP_WS = (" ", "\t")
ODD_WS = ("\xa0", "\x0b", "\x0c", "\x85", "\x1c", "\x1d", "\x1e", "\x1f", "\x00", "\x7f")
UTF8_WS = ("\u2003", "\u3000", "\ufeff", "\u200b", "\xa0", "\x85")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _json_values(world: World) -> st.SearchStrategy[Any]:
    secrets = st.sampled_from(
        [world.full.api_key, world.full.password, world.token, world.utk, world.session_id]
    )
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**64), 2**64)
        | st.sampled_from([10**30, -(10**30), 2**53 + 1, 253_402_300_800, 0, -1])
        | st.floats()  # NaN and infinities included: Python's JSON writes and reads them
        | st.text(max_size=12)
        | secrets
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=6,
    )


def _jwt_strategies(world: World) -> dict[str, st.SearchStrategy[Any]]:
    values = _json_values(world)
    real_claims = json.loads(base64.urlsafe_b64decode(world.token.split(".")[1] + "=="))

    def member(options: list[Any] | None) -> st.SearchStrategy[Any]:
        # Absent (often), a plausible value, or any JSON value.
        plausible = st.sampled_from(options) if options else values
        return st.just(_ABSENT) | st.just(_ABSENT) | plausible | values

    headers = st.fixed_dictionaries(
        {name: member(PLAUSIBLE_HEADER.get(name)) for name in HEADER_MEMBERS}
    ).map(lambda d: {k: v for k, v in d.items() if v is not _ABSENT})
    payloads = st.fixed_dictionaries(
        {
            name: st.sampled_from([_ABSENT, real_claims.get(name, _ABSENT)])
            | st.just(real_claims.get(name, _ABSENT))
            | values
            for name in CLAIMS
        }
    ).map(lambda d: {k: v for k, v in d.items() if v is not _ABSENT})
    return {
        "header": headers | headers | values,
        "payload": payloads | payloads | values,
        "signature": st.sampled_from(["own", "own", "original", "empty", "garbage", "junk"]),
        "garbage": st.binary(max_size=600),
        "segment_damage": st.sampled_from(["none"] * 8 + ["pad", "bang", "raw bytes"]),
        "raw_segment": st.binary(max_size=40),
    }


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()


def _strategies(world: World) -> dict[str, st.SearchStrategy[Any]]:
    if "jwt.header" not in world.strategies:
        for name, strategy in _jwt_strategies(world).items():
            world.strategies[f"jwt.{name}"] = strategy
    strategies: dict[str, st.SearchStrategy[Any]] = world.strategies
    return strategies


def _segment(data: Any, damage: str, raw: bytes) -> str:
    if damage == "raw bytes":
        return b64(raw)
    text = b64(json.dumps(data).encode())
    if damage == "pad":
        return text + "="
    if damage == "bang":
        return text[:-1] + "!"
    return text


@settings(PROFILE)
@given(data=st.data())
def test_any_forged_jwt_is_a_401(world: World, data: st.DataObject) -> None:
    strategy = _strategies(world)
    header = data.draw(strategy["jwt.header"], label="header")
    payload = data.draw(strategy["jwt.payload"], label="payload")
    head = _segment(
        header,
        data.draw(strategy["jwt.segment_damage"], label="header damage"),
        data.draw(strategy["jwt.raw_segment"]),
    )
    body = _segment(
        payload,
        data.draw(strategy["jwt.segment_damage"], label="payload damage"),
        data.draw(strategy["jwt.raw_segment"]),
    )
    how = data.draw(strategy["jwt.signature"], label="signature")
    if how == "own":
        key = world.fake._service.signer._private_key
        signature = b64(key.sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA512()))
    elif how == "original":
        signature = world.token.rsplit(".", 1)[1]
    elif how == "garbage":
        signature = b64(data.draw(strategy["jwt.garbage"]))
    elif how == "junk":
        signature = "!!!!"
    else:
        signature = ""
    token = f"{head}.{body}.{signature}"
    route = world.routes["items"]
    before = route.call_count
    answer = world.send(
        build_request("GET", "/api/items", [("Host", "x"), ("Authorization", f"Bearer {token}")])
    )
    assert answer.status == 401, (answer.status, answer.body[:300])
    message = answer.json()
    assert message["returnCode"] == 1401
    assert message["message"].startswith("Authentication failed: ")
    assert route.call_count == before, "a forged token reached the handler"
    event = world.fake.events[-1]
    assert isinstance(event, ApiCall)
    assert event.credential is None


# -- header parsing: whitespace and repeated lines -----------------------------------------


def _parsing_strategies(world: World) -> dict[str, st.SearchStrategy[Any]]:
    ws = st.sampled_from(
        HTTP_WS * 4 + ODD_WS + tuple(c.encode().decode("latin-1") for c in UTF8_WS)
    )
    return {
        "around": st.lists(ws, max_size=3).map("".join),
        "between": st.lists(ws, min_size=0, max_size=3).map("".join),
        "hosts": st.sampled_from([1] * 6 + [0, 2]),
        "lengths": st.sampled_from([0] * 4 + [1] * 2 + [2, 2, 3]),
        "equal_lengths": st.booleans(),
        "cookie_lines": st.integers(1, 3),
        "session_line": st.integers(0, 2),
        "authorizations": st.sampled_from([1] * 6 + [2]),
        "path": st.sampled_from(["/api/items", "/v1/items"]),
    }


@settings(PROFILE)
@given(data=st.data())
def test_whitespace_and_repeated_headers(world: World, data: st.DataObject) -> None:
    if "parse.around" not in world.strategies:
        for name, strategy in _parsing_strategies(world).items():
            world.strategies[f"parse.{name}"] = strategy
    s = world.strategies
    before_ws = data.draw(s["parse.around"], label="before")
    between = data.draw(s["parse.between"], label="between")
    after = data.draw(s["parse.around"], label="after")
    hosts = data.draw(s["parse.hosts"], label="Host lines")
    lengths = data.draw(s["parse.lengths"], label="Content-Length lines")
    equal = data.draw(s["parse.equal_lengths"], label="equal lengths")
    cookie_lines = data.draw(s["parse.cookie_lines"], label="Cookie lines")
    session_line = min(
        data.draw(s["parse.session_line"], label="JSESSIONID line"), cookie_lines - 1
    )
    authorizations = data.draw(s["parse.authorizations"], label="Authorization lines")
    path = data.draw(s["parse.path"], label="path")

    v1 = path.startswith("/v1/")
    headers: list[tuple[str | bytes, str | bytes]] = [("Host", "127.0.0.1")] * hosts
    for i in range(cookie_lines):
        value = f"JSESSIONID={world.session_id}" if i == session_line else f"c{i}=v{i}"
        headers.append(("Cookie", value))
    authorization = f"{before_ws}Bearer{between}{world.token}{after}"
    headers += [("Authorization", authorization.encode("latin-1"))] * authorizations
    body = b"x" * 7 if lengths else b""
    for i in range(lengths):
        headers.append(("Content-Length", "7" if equal or i == 0 else str(7 + i)))
    target = f"{path}?utk={quote(world.utk)}" if v1 else path
    answer = world.send(build_request("GET", target, headers, body, content_length=None))

    # The RFC rules, as the fake must apply them.
    nul = authorizations > 0 and "\x00" in before_ws + between + after
    if hosts != 1 or lengths > 1 or nul:
        expected = 400  # RFC 9110 5.5: a NUL in a field value is refused
    elif v1:
        expected = 200  # the JSESSIONID line is found whichever line it is
    else:
        clean = all(c in HTTP_WS for c in before_ws + after)
        # RFC 9110 11.4: 1*SP between the scheme and the token (then SP/HTAB stripped).
        clean = clean and between[:1] == " " and all(c in HTTP_WS for c in between)
        expected = 200 if clean and authorizations == 1 else 401
    assert answer.status == expected, (expected, answer.status, answer.body[:300])
    event = world.fake.events[-1]
    if expected == 400:
        assert isinstance(event, BadRequest)
        named = "Host" if hosts != 1 else "Content-Length" if lengths > 1 else "a NUL byte"
        assert named in event.reason
    else:
        assert isinstance(event, ApiCall)
        assert event.status == expected
    if expected == 401:
        reason = answer.json()["message"]
        odd = [c for c in before_ws + between + after if c not in HTTP_WS]
        if odd and authorizations == 1:
            assert "the Authorization header contains" in reason, reason
