"""v2 bearer tokens: real RS512 JWTs, and verification that refuses every fake."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time

import jwt
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from pytest_mgmtauth._service.token_format import ISSUER, TokenProblem, unverified_subject
from pytest_mgmtauth._service.tokens import KEY_BITS, TokenSigner

T0 = 1_800_000_000


def _b64(data: dict[str, object]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _parts(token: str) -> tuple[dict[str, object], dict[str, object], str]:
    header, payload, signature = token.split(".")

    def decode(part: str) -> dict[str, object]:
        value: dict[str, object] = json.loads(
            base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        )
        return value

    return decode(header), decode(payload), signature


def test_header_is_typ_jwt_alg_rs512(signer: TokenSigner) -> None:
    token, _ = signer.issue("a@example.com", T0, 1800)
    header, _, _ = _parts(token)
    assert header == {"typ": "JWT", "alg": "RS512"}


def test_claims_are_sub_iss_iat_nbf_exp(signer: TokenSigner) -> None:
    token, claims = signer.issue("a@example.com", T0, 1800)
    _, payload, _ = _parts(token)
    assert payload["sub"] == "a@example.com"
    assert payload["iss"] == ISSUER
    assert payload["iat"] == T0
    assert payload["nbf"] == T0
    assert payload["exp"] == T0 + 1800
    assert isinstance(payload["jti"], str)
    assert claims.sub == "a@example.com"
    assert (claims.iat, claims.nbf, claims.exp) == (T0, T0, T0 + 1800)


def test_exp_follows_the_ttl(signer: TokenSigner) -> None:
    _, claims = signer.issue("a@example.com", T0, 90)
    assert claims.exp == T0 + 90


def test_tokens_of_one_instant_differ(signer: TokenSigner) -> None:
    first, c1 = signer.issue("a@example.com", T0, 1800)
    second, c2 = signer.issue("a@example.com", T0, 1800)
    assert first != second
    assert c1.jti != c2.jti


def test_token_verifies_with_pyjwt_and_the_public_key(signer: TokenSigner) -> None:
    # A client library that checks everything (time claims against the real clock too).
    token, _ = signer.issue("a@example.com", int(time.time()), 1800)
    payload = jwt.decode(token, signer._public_key, algorithms=["RS512"], issuer=ISSUER)
    assert payload["sub"] == "a@example.com"


@pytest.mark.parametrize("subject", ["someone@example.com", "s\u00f6meone+x@example.com"])
def test_tokens_carry_pyjwts_claims_under_the_services_header(
    rsa_key_2048: rsa.RSAPrivateKey, subject: str
) -> None:
    # The fake writes the JWS itself (to make the signing input apart from the signature):
    # its claims are byte for byte PyJWT's, its header is the real service's (typ first;
    # PyJWT sorts the keys), and PyJWT verifies the result.
    token, claims = TokenSigner(rsa_key_2048).issue(subject, T0, 1800)
    payload = {
        "sub": claims.sub,
        "iss": ISSUER,
        "iat": claims.iat,
        "nbf": claims.nbf,
        "exp": claims.exp,
        "jti": claims.jti,
    }
    expected = jwt.encode(
        payload, rsa_key_2048, algorithm="RS512", headers={"typ": "JWT", "alg": "RS512"}
    )
    header, claims_segment, _ = token.split(".")
    assert header == "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzUxMiJ9"
    assert claims_segment == expected.split(".")[1]
    key = rsa_key_2048.public_key()
    decoded = jwt.decode(
        token,
        key,
        algorithms=["RS512"],
        issuer=ISSUER,
        options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
    )
    assert decoded == payload


def test_verify_returns_the_claims(signer: TokenSigner) -> None:
    token, claims = signer.issue("a@example.com", T0, 1800)
    assert signer.verify(token) == claims


def test_real_default_key_makes_tokens_over_800_characters(default_key_pem: bytes) -> None:
    key = serialization.load_pem_private_key(default_key_pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    assert key.key_size == KEY_BITS == 4096
    token, _ = TokenSigner(key).issue("someone@example.com", T0, 1800)
    assert len(token) > 800


# -- verification refuses every token this fake did not issue ------------------------


def test_token_from_another_key_is_refused(signer: TokenSigner, other_signer: TokenSigner) -> None:
    token, _ = other_signer.issue("a@example.com", T0, 1800)
    with pytest.raises(TokenProblem, match="signature does not verify with this fake's key"):
        signer.verify(token)


def test_tampered_payload_is_refused(signer: TokenSigner) -> None:
    token, _ = signer.issue("a@example.com", T0, 1800)
    header, _, signature = token.split(".")
    claims = _parts(token)[1]
    forged = _b64({**claims, "sub": "admin@example.com"})
    with pytest.raises(TokenProblem, match="tampered with or issued by another server"):
        signer.verify(f"{header}.{forged}.{signature}")


def test_tampered_signature_is_refused(signer: TokenSigner) -> None:
    token, _ = signer.issue("a@example.com", T0, 1800)
    flipped = token[:-4] + ("AAAA" if token[-4:] != "AAAA" else "BBBB")
    with pytest.raises(TokenProblem):
        signer.verify(flipped)


def test_extended_expiry_is_refused(signer: TokenSigner) -> None:
    token, _ = signer.issue("a@example.com", T0, 1800)
    header, _, signature = token.split(".")
    claims = _parts(token)[1]
    longer = _b64({**claims, "exp": T0 + 10**6})
    with pytest.raises(TokenProblem, match="signature does not verify"):
        signer.verify(f"{header}.{longer}.{signature}")


@pytest.mark.parametrize("keep", [0.9, 0.5, 0.1])
def test_truncated_token_is_refused(signer: TokenSigner, keep: float) -> None:
    token, _ = signer.issue("a@example.com", T0, 1800)
    with pytest.raises(TokenProblem):
        signer.verify(token[: int(len(token) * keep)])


def test_token_without_signature_part_is_refused_as_not_a_jwt(signer: TokenSigner) -> None:
    token, _ = signer.issue("a@example.com", T0, 1800)
    header, payload, _ = token.split(".")
    with pytest.raises(TokenProblem, match="this has 2"):
        signer.verify(f"{header}.{payload}")


def test_unsigned_alg_none_token_is_refused(signer: TokenSigner) -> None:
    token, _ = signer.issue("a@example.com", T0, 1800)
    claims = _parts(token)[1]
    unsigned = f"{_b64({'typ': 'JWT', 'alg': 'none'})}.{_b64(claims)}."
    with pytest.raises(TokenProblem, match="algorithm is 'none', not 'RS512'"):
        signer.verify(unsigned)


def test_hs256_signed_with_the_public_key_is_refused(signer: TokenSigner) -> None:
    # The classic algorithm confusion: HMAC keyed with the RSA public key's PEM.
    token, _ = signer.issue("a@example.com", T0, 1800)
    claims = _parts(token)[1]
    public_pem = signer._public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = f"{_b64({'typ': 'JWT', 'alg': 'HS256'})}.{_b64(claims)}"
    mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    forged = signing_input + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    with pytest.raises(TokenProblem, match="algorithm is 'HS256', not 'RS512'"):
        signer.verify(forged)


def test_rs256_token_of_the_same_key_is_refused(signer: TokenSigner) -> None:
    token, _ = signer.issue("a@example.com", T0, 1800)
    claims = _parts(token)[1]
    rs256 = jwt.encode(claims, signer._private_key, algorithm="RS256")
    with pytest.raises(TokenProblem, match="'RS256', not 'RS512'"):
        signer.verify(rs256)


def test_token_missing_a_required_claim_is_refused(signer: TokenSigner) -> None:
    token = jwt.encode(
        {"sub": "a@example.com", "iss": ISSUER, "iat": T0, "exp": T0 + 60},
        signer._private_key,
        algorithm="RS512",
    )
    with pytest.raises(TokenProblem, match="lacks the 'nbf' claim"):
        signer.verify(token)


def test_token_of_another_issuer_is_refused(signer: TokenSigner) -> None:
    other = TokenSigner(signer._private_key, issuer="someone-else")
    token, _ = other.issue("a@example.com", T0, 1800)
    with pytest.raises(TokenProblem, match="issuer is 'someone-else'"):
        signer.verify(token)


@pytest.mark.parametrize("garbage", ["", "abc", "a.b.c", "Bearer x.y.z", "...."])
def test_garbage_is_refused_with_a_reason(signer: TokenSigner, garbage: str) -> None:
    with pytest.raises(TokenProblem) as excinfo:
        signer.verify(garbage)
    assert str(excinfo.value)


def test_unverified_subject_names_the_account_of_a_forged_token(
    other_signer: TokenSigner,
) -> None:
    token, _ = other_signer.issue("who@example.com", T0, 1800)
    assert unverified_subject(token) == "who@example.com"
    assert unverified_subject("not a token") is None


# -- issue 9: every way PyJWT (or an odd header/payload) can refuse is a TokenProblem --


def _forge(signer: TokenSigner, header: object, payload: object) -> str:
    """A token with this exact header and payload JSON, signed by ``signer``'s key, so
    that the checks after the signature are reached too."""
    head = _b64_any(header)
    body = _b64_any(payload)
    signature = signer._private_key.sign(
        f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA512()
    )
    return f"{head}.{body}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def _b64_any(data: object) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _good_payload(**changes: object) -> dict[str, object]:
    payload: dict[str, object] = {
        "sub": "a@example.com",
        "iss": ISSUER,
        "iat": T0,
        "nbf": T0,
        "exp": T0 + 1800,
        "jti": "0123456789abcdef",
    }
    payload.update(changes)
    return payload


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        # The three of the issue: PyJWT raised InvalidTokenError, the fake answered 500.
        ({"alg": "RS512", "kid": 1}, "'kid' that is 1, not a string"),
        ({"crit": ["exp"]}, "algorithm is null"),
        ({"alg": "RS512", "crit": ["exp"]}, "'crit'"),
        ({"alg": "RS512", "crit": []}, "'crit'"),
        ({"alg": "RS512", "kid": None}, "'kid' that is null"),
        ({"alg": "RS512", "kid": ["a"]}, "'kid' that is a list of 1"),
        ({"alg": "RS512", "crit": "b64", "b64": False}, "'crit'"),
        ({"alg": "RS512", "b64": False}, "'b64'"),
        ({"alg": ["RS512"]}, "algorithm is a list of 1"),
        ({"alg": None}, "algorithm is null"),
        ({"alg": 512}, "algorithm is 512"),
        ([], "header is a list of 0"),
        ("RS512", "header is 'RS512'"),
        (None, "header is null"),
    ],
)
def test_odd_header_is_refused_with_what_is_wrong(
    signer: TokenSigner, header: object, reason: str
) -> None:
    token = _forge(signer, header, _good_payload())
    with pytest.raises(TokenProblem, match=re.escape(reason)):
        signer.verify(token)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"exp": "1800001800"}, "'exp' claim is '1800001800', not whole seconds"),
        ({"iat": [T0]}, "'iat' claim is a list of 1"),
        ({"nbf": 1.5}, "'nbf' claim is 1.5"),
        ({"exp": True}, "'exp' claim is true"),
        ({"exp": 10**30}, "'exp' claim is a huge number, outside"),
        ({"exp": -1}, "'exp' claim is -1, outside"),
        ({"sub": None}, "lacks the 'sub' claim"),
        ({"sub": 42}, "'sub' claim is 42, not a string"),
        ({"jti": {"a": 1}}, "'jti' claim is an object of 1 member(s)"),
        ({"iss": ["pytest-mgmtauth"]}, "issuer is a list of 1"),
    ],
)
def test_claim_of_the_wrong_type_is_refused(
    signer: TokenSigner, changes: dict[str, object], reason: str
) -> None:
    token = _forge(signer, {"typ": "JWT", "alg": "RS512"}, _good_payload(**changes))
    with pytest.raises(TokenProblem, match=re.escape(reason)):
        signer.verify(token)


@pytest.mark.parametrize(
    "payload", [[1, 2], "a string", 12, None], ids=["list", "string", "number", "null"]
)
def test_payload_that_is_not_an_object_is_refused(signer: TokenSigner, payload: object) -> None:
    token = _forge(signer, {"typ": "JWT", "alg": "RS512"}, payload)
    with pytest.raises(TokenProblem, match="does not decode"):
        signer.verify(token)
    assert unverified_subject(token) is None


def test_non_finite_claims_are_refused(signer: TokenSigner) -> None:
    # json.dumps writes Infinity/NaN and Python's JSON reads them back as floats:
    # int(inf) raised OverflowError, a 500.
    for value in (float("inf"), float("-inf"), float("nan")):
        token = _forge(signer, {"typ": "JWT", "alg": "RS512"}, _good_payload(iat=value))
        with pytest.raises(TokenProblem, match="'iat' claim is"):
            signer.verify(token)


def test_reason_never_repeats_a_long_value_from_the_token(signer: TokenSigner) -> None:
    secret = "S3cr3t-" + "x" * 40
    for header in (
        {"alg": secret},
        {"alg": "RS512", "kid": [secret]},
        {"alg": "RS512", "crit": [secret]},
    ):
        token = _forge(signer, header, _good_payload())
        with pytest.raises(TokenProblem) as excinfo:
            signer.verify(token)
        assert secret not in str(excinfo.value)
    token = _forge(signer, {"alg": "RS512"}, _good_payload(iss=secret, sub=secret))
    with pytest.raises(TokenProblem, match="47-character string") as excinfo:
        signer.verify(token)
    assert secret not in str(excinfo.value)
