"""The signing key made from two half-size keys: an ordinary RSA key to every verifier."""

from __future__ import annotations

from math import gcd

import jwt
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from pytest_mgmtauth._service import signing_key as _signingkey
from pytest_mgmtauth._service.signing_key import combine, make_signing_key
from pytest_mgmtauth._service.tokens import (
    TokenSigner,
    generate_private_key_pem,
    load_private_key,
)

T0 = 1_800_000_000


def _half(bits: int = 1024) -> rsa.RSAPrivateNumbers:
    return rsa.generate_private_key(public_exponent=65537, key_size=bits).private_numbers()


def _is_ordinary(key: rsa.RSAPrivateKey) -> bool:
    """Whether cryptography's full check (p and q prime, among others) accepts the key."""
    try:
        key.private_numbers().private_key()
    except ValueError:
        return False
    return True


def test_key_has_the_size_asked_and_factors_that_are_moduli() -> None:
    key = make_signing_key(2048)
    numbers = key.private_numbers()
    assert key.key_size == 2048
    assert numbers.p * numbers.q == numbers.public_numbers.n
    assert numbers.p.bit_length() == numbers.q.bit_length() == 1024
    assert gcd(numbers.p, numbers.q) == 1
    # Not an ordinary key: its factors are not prime, and cryptography's check says so.
    assert not _is_ordinary(key)


def test_its_tokens_verify_with_pyjwt_and_the_public_key_alone() -> None:
    key = make_signing_key(2048)
    token, claims = TokenSigner(key).issue("someone@example.com", T0, 1800)
    public_only = rsa.RSAPublicNumbers(65537, key.public_key().public_numbers().n).public_key()
    decoded = jwt.decode(
        token,
        public_only,
        algorithms=["RS512"],
        options={"verify_exp": False, "verify_nbf": False, "verify_iat": False},
    )
    assert decoded["sub"] == "someone@example.com"
    assert decoded["jti"] == claims.jti


def test_signatures_equal_those_of_the_private_exponent_alone() -> None:
    """The CRT with composite factors gives m^d mod n, bit for bit."""
    key = make_signing_key(2048)
    numbers = key.private_numbers()
    message = b"same bytes either way"
    signature = key.sign(message, padding.PKCS1v15(), hashes.SHA512())
    n, d = numbers.public_numbers.n, numbers.d
    encoded = pow(int.from_bytes(signature, "big"), 65537, n)
    assert pow(encoded, d, n) == int.from_bytes(signature, "big")


def test_pem_round_trips_through_the_fakes_loader() -> None:
    pem = generate_private_key_pem(2048)
    key = load_private_key(pem)
    assert key.key_size == 2048
    assert not _is_ordinary(key)
    token, _ = TokenSigner(key).issue("a@example.com", T0, 1800)
    assert TokenSigner(load_private_key(pem)).verify(token).sub == "a@example.com"


def test_combine_refuses_moduli_that_share_a_factor() -> None:
    half = _half()
    with pytest.raises(ValueError, match="share a factor"):
        combine(half, half)


def test_combine_refuses_keys_of_different_exponents() -> None:
    other = rsa.generate_private_key(public_exponent=3, key_size=1024).private_numbers()
    with pytest.raises(ValueError, match="different public exponents"):
        combine(_half(), other)


@pytest.mark.parametrize("bits", [2047, 1024])
def test_an_odd_or_small_size_gets_an_ordinary_key(bits: int) -> None:
    # Half of 1024 bits is under cryptography's minimum key size; halves of 2047 differ.
    key = make_signing_key(bits)
    assert key.key_size == bits
    assert _is_ordinary(key)


def test_a_key_that_does_not_sign_correctly_is_replaced_by_an_ordinary_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[rsa.RSAPrivateKey] = []

    def wrong_exponent(bits: int) -> rsa.RSAPrivateKey:
        right = combine(_half(bits // 2), _half(bits // 2))
        wrong = rsa.RSAPrivateNumbers(
            p=right.p,
            q=right.q,
            d=right.d + 2,
            dmp1=right.dmp1 + 2,
            dmq1=right.dmq1 + 2,
            iqmp=right.iqmp,
            public_numbers=right.public_numbers,
        ).private_key(unsafe_skip_rsa_key_validation=True)
        made.append(wrong)
        return wrong

    monkeypatch.setattr(_signingkey, "_key_of_two_moduli", wrong_exponent)
    key = make_signing_key(2048)
    assert made, "the composite key was never made"
    with pytest.raises(InvalidSignature):
        _signingkey._check_signs(made[0])
    assert key is not made[0]
    assert key.key_size == 2048
    assert _is_ordinary(key)


def test_gives_up_for_an_ordinary_key_when_no_pair_has_the_full_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_signingkey, "MAX_HALF_KEYS", 1)
    key = make_signing_key(2048)
    assert key.key_size == 2048
    assert _is_ordinary(key)
