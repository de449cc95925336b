"""The fake's RSA signing key: 4096 bits, made in about a tenth of a second.

OpenSSL makes a 4096-bit key in 0.04 to 1 s (median about 0.34 s on our 2-core
machines), nearly all of it the search for two 2048-bit primes, and a cold run waits for
it. This fake makes its key from two 2048-bit keys instead (about 30 ms each): their
moduli n1 and n2 become the key's two CRT factors, so that n = n1 * n2 has four primes.

An RSA signature is s = m^d mod n whatever n's factors are. The CRT that OpenSSL signs
with needs only coprime factors, each with d reduced modulo its own Carmichael function
(lambda(n1) = lcm(p1 - 1, q1 - 1)), and the inverse of one factor modulo the other. So
the public key and every signature are those of an ordinary 4096-bit key (RS512, 512
signature bytes): no verifier can tell, and signing costs the same (two 2048-bit
exponentiations). What differs is not seen on the wire: a check that p and q are prime
(``cryptography``'s default loading, ``openssl rsa -check``) refuses the key, so the
fake loads it without that check (as it loaded its cached key anyway: it made it).
Multi-prime RSA (RFC 8017) would say the same more plainly, but ``cryptography``
refuses to load such keys at all.

Before the key is handed out it signs once and the signature is verified with its public
key; a crypto library that would not sign correctly with it gets an ordinary key.
"""

from __future__ import annotations

from math import gcd, lcm
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

PUBLIC_EXPONENT = 65537
#: How many half-size keys one attempt makes at most before it gives up for an ordinary
#: key. It needs two whose moduli's product has all ``bits`` bits: about 2.8 on average.
MAX_HALF_KEYS = 16


def make_signing_key(bits: int) -> rsa.RSAPrivateKey:
    """A ``bits``-bit RSA key (``bits`` even, at least 2048) made from two half-size keys;
    an ordinary key if that fails for any reason (it only costs time)."""
    from cryptography.exceptions import InternalError, InvalidSignature, UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        key = _key_of_two_moduli(bits)
        _check_signs(key)
    except (ValueError, TypeError, UnsupportedAlgorithm, InvalidSignature, InternalError):
        # Whatever the library makes of the unusual key, an ordinary one costs only time.
        return rsa.generate_private_key(public_exponent=PUBLIC_EXPONENT, key_size=bits)
    return key


def _key_of_two_moduli(bits: int) -> rsa.RSAPrivateKey:
    from cryptography.hazmat.primitives.asymmetric import rsa

    if bits % 2 or bits < 2048:
        raise ValueError(f"{bits} bits: two half-size keys need an even size of 2048 or more")
    halves: list[rsa.RSAPrivateNumbers] = []
    while len(halves) < MAX_HALF_KEYS:
        half = rsa.generate_private_key(public_exponent=PUBLIC_EXPONENT, key_size=bits // 2)
        halves.append(half.private_numbers())
        # Each modulus lies in [2^(h-1), 2^h), so a product of two has 2h - 1 or 2h bits;
        # the two largest found so far give the best chance of the full size.
        halves.sort(key=lambda numbers: numbers.public_numbers.n, reverse=True)
        if len(halves) >= 2 and _modulus(halves[0], halves[1]).bit_length() == bits:
            numbers = combine(halves[0], halves[1])
            return numbers.private_key(unsafe_skip_rsa_key_validation=True)
    raise ValueError(f"no two of {MAX_HALF_KEYS} half-size keys made a {bits}-bit modulus")


def _modulus(first: rsa.RSAPrivateNumbers, second: rsa.RSAPrivateNumbers) -> int:
    return first.public_numbers.n * second.public_numbers.n


def combine(first: rsa.RSAPrivateNumbers, second: rsa.RSAPrivateNumbers) -> rsa.RSAPrivateNumbers:
    """The RSA key whose CRT factors are the moduli of two keys of one public exponent.

    Raises ``ValueError`` if the moduli share a factor (then no such key exists).
    """
    from cryptography.hazmat.primitives.asymmetric import rsa

    e = first.public_numbers.e
    if second.public_numbers.e != e:
        raise ValueError("the two keys have different public exponents")
    p, q = first.public_numbers.n, second.public_numbers.n
    if gcd(p, q) != 1:
        raise ValueError("the two moduli share a factor")
    lambda_p = lcm(first.p - 1, first.q - 1)
    lambda_q = lcm(second.p - 1, second.q - 1)
    # e is coprime to each prime's p - 1 (each half-size key's own d proves it), so to
    # the lcm of them all: d exists.
    d = pow(e, -1, lcm(lambda_p, lambda_q))
    return rsa.RSAPrivateNumbers(
        p=p,
        q=q,
        d=d,
        dmp1=d % lambda_p,
        dmq1=d % lambda_q,
        iqmp=pow(q, -1, p),
        public_numbers=rsa.RSAPublicNumbers(e, p * q),
    )


def _check_signs(key: rsa.RSAPrivateKey) -> None:
    """Raise ``InvalidSignature`` unless the key's signature verifies with its public key."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    message = b"pytest-mgmtauth signing key self-check"
    signature = key.sign(message, padding.PKCS1v15(), hashes.SHA512())
    key.public_key().verify(signature, message, padding.PKCS1v15(), hashes.SHA512())
