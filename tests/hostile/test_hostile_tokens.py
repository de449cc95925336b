"""A catalogue of forged, damaged and misplaced bearer tokens: every one is refused with
a 401 JSON answer (returnCode 1401), never reaches the route's handler, is recorded as a
refused call, and is never printed whole."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import jwt
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from hostile_support import build_request

from pytest_mgmtauth import ApiCall
from pytest_mgmtauth._service.tokens import TokenSigner

if TYPE_CHECKING:
    from collections.abc import Callable

    from hostile_support import World

    from pytest_mgmtauth import MgmtClock


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def claims_of(token: str) -> dict[str, object]:
    claims: dict[str, object] = json.loads(unb64(token.split(".")[1]))
    return claims


def int_claim(token: str, name: str) -> int:
    """A numeric claim of a token the fake issued (they are ints)."""
    value = claims_of(token)[name]
    assert isinstance(value, int), (name, value)
    return value


def with_payload(token: str, **changes: object) -> str:
    """The token with changed claims and its original signature (tampering)."""
    header, _, signature = token.split(".")
    payload = {**claims_of(token), **changes}
    return f"{header}.{b64(json.dumps(payload).encode())}.{signature}"


def with_header(token: str, header: object) -> str:
    """The token with another header and its original payload and signature."""
    return b64(json.dumps(header).encode()) + "." + token.split(".", 1)[1]


def own_signed(world: World, header: object, payload: object) -> str:
    """Exactly this header and payload JSON, RS512-signed with the world's own key: the
    signature verifies, so the checks after it are reached."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    signature = _own(world)._private_key.sign(
        signing_input.encode(), padding.PKCS1v15(), hashes.SHA512()
    )
    return f"{signing_input}.{b64(signature)}"


def hmac_signed(payload: dict[str, object], key: bytes, alg: str = "HS256") -> str:
    """HS256/HS512 by hand: PyJWT refuses a PEM as an HMAC key, an attacker does not."""
    header = b64(json.dumps({"typ": "JWT", "alg": alg}).encode())
    body = b64(json.dumps(payload).encode())
    digest = hashlib.sha256 if alg == "HS256" else hashlib.sha512
    signature = hmac.new(key, f"{header}.{body}".encode(), digest).digest()
    return f"{header}.{body}.{b64(signature)}"


@pytest.fixture(scope="module")
def other_signer() -> TokenSigner:
    """Another fake: same issuer name, its own key (2048 bits: quicker, as foreign)."""
    return TokenSigner(rsa.generate_private_key(public_exponent=65537, key_size=2048))


def _own(world: World) -> TokenSigner:
    signer: TokenSigner = world.fake._service.signer
    return signer


def _public_pem(world: World) -> bytes:
    return _own(world)._public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _signed_by_own_key(world: World, **changes: object) -> str:
    payload = {**claims_of(world.token), **changes}
    payload = {k: v for k, v in payload.items() if v is not None}
    return jwt.encode(payload, _own(world)._private_key, algorithm="RS512")


#: name -> how to make the Authorization header value from the world's real token.
FORGERIES: dict[str, Callable[[World, TokenSigner], str]] = {
    "alg none": lambda w, o: (
        "Bearer "
        + jwt.encode(
            claims_of(w.token),
            None,  # type: ignore[arg-type]  # alg "none" takes no key: PyJWT's stubs want one
            algorithm="none",
        )
    ),
    "alg none, original signature kept": lambda w, o: (
        "Bearer " + b64(b'{"typ":"JWT","alg":"none"}') + "." + w.token.split(".", 1)[1]
    ),
    "HS256 signed with the public key PEM (key confusion)": lambda w, o: (
        "Bearer " + hmac_signed(claims_of(w.token), _public_pem(w))
    ),
    "HS512 signed with the public key PEM (key confusion)": lambda w, o: (
        "Bearer " + hmac_signed(claims_of(w.token), _public_pem(w), "HS512")
    ),
    "RS256 with the right key (alg downgrade)": lambda w, o: (
        "Bearer " + jwt.encode(claims_of(w.token), _own(w)._private_key, algorithm="RS256")
    ),
    "signed with a wrong RSA key": lambda w, o: (
        "Bearer " + jwt.encode(claims_of(w.token), o._private_key, algorithm="RS512")
    ),
    "another fake's token (a second TokenSigner)": lambda w, o: (
        "Bearer " + o.issue(w.full.username, int_claim(w.token, "iat"), 1800)[0]
    ),
    "tampered sub (other account)": lambda w, o: (
        "Bearer " + with_payload(w.limited_token, sub=w.full.username)
    ),
    "tampered exp (extended)": lambda w, o: (
        "Bearer " + with_payload(w.token, exp=int_claim(w.token, "exp") + 86400)
    ),
    "tampered signature (one char)": lambda w, o: (
        "Bearer " + w.token[:-2] + ("A" if w.token[-2] != "A" else "B") + w.token[-1]
    ),
    "nbf in the future (own key)": lambda w, o: (
        "Bearer " + _signed_by_own_key(w, nbf=int_claim(w.token, "nbf") + 3600)
    ),
    "missing exp (own key)": lambda w, o: "Bearer " + _signed_by_own_key(w, exp=None),
    "wrong iss (own key)": lambda w, o: "Bearer " + _signed_by_own_key(w, iss="someone-else"),
    "exp as a string (own key)": lambda w, o: "Bearer " + _signed_by_own_key(w, exp="soon"),
    "own key, not issued in this test": lambda w, o: (
        "Bearer " + _own(w).issue(w.full.username, int_claim(w.token, "iat"), 1800)[0]
    ),
    # Issue 9: PyJWT raised InvalidTokenError subclasses the fake did not catch (500).
    "kid a number": lambda w, o: "Bearer " + with_header(w.token, {"alg": "RS512", "kid": 1}),
    "kid null": lambda w, o: "Bearer " + with_header(w.token, {"alg": "RS512", "kid": None}),
    "crit [exp], no alg": lambda w, o: "Bearer " + with_header(w.token, {"crit": ["exp"]}),
    "crit []": lambda w, o: "Bearer " + with_header(w.token, {"alg": "RS512", "crit": []}),
    "crit [b64], b64 false": lambda w, o: (
        "Bearer " + with_header(w.token, {"alg": "RS512", "b64": False, "crit": ["b64"]})
    ),
    "jku and x5u to elsewhere": lambda w, o: (
        "Bearer "
        + with_header(w.token, {"alg": "RS512", "jku": "http://evil/jwks", "x5u": "http://evil/x5"})
    ),
    "header a list": lambda w, o: "Bearer " + with_header(w.token, ["RS512"]),
    "kid a number (own key)": lambda w, o: (
        "Bearer " + own_signed(w, {"alg": "RS512", "kid": 1}, claims_of(w.token))
    ),
    "iat Infinity (own key)": lambda w, o: (
        "Bearer " + own_signed(w, {"alg": "RS512"}, {**claims_of(w.token), "iat": float("inf")})
    ),
    "exp NaN (own key)": lambda w, o: (
        "Bearer " + own_signed(w, {"alg": "RS512"}, {**claims_of(w.token), "exp": float("nan")})
    ),
    "iat a list (own key)": lambda w, o: (
        "Bearer " + own_signed(w, {"alg": "RS512"}, {**claims_of(w.token), "iat": [1]})
    ),
    "sub null (own key)": lambda w, o: (
        "Bearer " + own_signed(w, {"alg": "RS512"}, {**claims_of(w.token), "sub": None})
    ),
    "sub a number (own key)": lambda w, o: (
        "Bearer " + own_signed(w, {"alg": "RS512"}, {**claims_of(w.token), "sub": 7})
    ),
    "exp 10**30 (own key)": lambda w, o: (
        "Bearer " + own_signed(w, {"alg": "RS512"}, {**claims_of(w.token), "exp": 10**30})
    ),
    "payload a list (own key)": lambda w, o: "Bearer " + own_signed(w, {"alg": "RS512"}, [1]),
    "truncated by 10": lambda w, o: "Bearer " + w.token[:-10],
    "truncated to half": lambda w, o: "Bearer " + w.token[: len(w.token) // 2],
    "header and payload only": lambda w, o: "Bearer " + w.token.rsplit(".", 1)[0],
    "header only": lambda w, o: "Bearer " + w.token.split(".", 1)[0],
    "two tokens glued": lambda w, o: "Bearer " + w.token + w.limited_token,
    "non-JWT word": lambda w, o: "Bearer hello",
    "non-JWT three dots": lambda w, o: "Bearer a.b.c",
    "non-JWT empty parts": lambda w, o: "Bearer ..",
    "non-JWT base64 garbage": lambda w, o: "Bearer " + b64(b"\xff" * 64),
    "the utk as a bearer token": lambda w, o: "Bearer " + w.utk,
    "the API key as a bearer token": lambda w, o: "Bearer " + w.full.api_key,
    "wrong scheme: Basic": lambda w, o: "Basic " + w.token,
    "wrong scheme: Token": lambda w, o: "Token " + w.token,
    "wrong scheme: none": lambda w, o: w.token,
    "wrong scheme: JWT after the token": lambda w, o: w.token + " Bearer",
    "scheme only": lambda w, o: "Bearer",
}


def call(world: World, authorization: str) -> tuple[int, dict[str, object], str]:
    """GET /api/items with this Authorization, through World.send and its checks."""
    answer = world.send(
        build_request("GET", "/api/items", [("Host", "x"), ("Authorization", authorization)])
    )
    assert answer.status is not None
    return answer.status, answer.json(), answer.body.decode()


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_forged_token_is_refused(world: World, other_signer: TokenSigner, forgery: str) -> None:
    authorization = FORGERIES[forgery](world, other_signer)
    before = world.routes["items"].call_count
    status, body, raw = call(world, authorization)
    assert status == 401, (forgery, body)
    assert body["returnCode"] == 1401
    assert isinstance(body["message"], str)
    assert body["message"].startswith("Authentication failed: ")
    assert world.routes["items"].call_count == before, "a forged token reached the handler"
    event = world.fake.events[-1]
    assert isinstance(event, ApiCall)
    assert (event.status, event.return_code) == (401, 1401)
    if not forgery.startswith("wrong scheme"):
        # A real token under a wrong scheme may be named; a forged one never is.
        assert event.credential is None
    forged = authorization.split(" ")
    for part in (*forged, *world.secrets):
        if len(part) >= 16:  # a credential-sized string: never echoed whole
            assert part not in raw, f"{forgery}: the answer repeats {part[:12]}..."
    # The same world still works for the real token.
    assert call(world, f"Bearer {world.token}")[0] == 200


def test_real_token_expired_by_one_second_is_refused(world: World, mgmt_clock: MgmtClock) -> None:
    # world's tokens were issued before the clock froze: take a fresh one under it.
    form = urlencode({"username": world.full.username, "key": world.full.api_key}).encode()
    answer = world.send(
        build_request(
            "POST",
            "/v2/auth",
            [("Host", "x"), ("Content-Type", "application/x-www-form-urlencoded")],
            form,
        )
    )
    token = answer.json()["token"]
    ttl = int_claim(token, "exp") - int_claim(token, "iat")
    mgmt_clock.advance(seconds=ttl - 1)
    assert call(world, f"Bearer {token}")[0] == 200
    mgmt_clock.advance(seconds=2)  # exp + 1 s
    status, body, raw = call(world, f"Bearer {token}")
    assert (status, body["returnCode"]) == (401, 1401)
    assert "expired 1 s ago" in str(body["message"])
    assert token not in raw
    event = world.fake.events[-1]
    assert isinstance(event, ApiCall)
    assert event.credential_expired
