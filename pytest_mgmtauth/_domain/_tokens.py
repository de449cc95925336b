"""v2 bearer tokens: RS512 JWTs signed with one RSA key per test session.

Key objects are loaded once and reused: handing PyJWT a PEM re-validates the RSA key on
every call (tens of milliseconds), a key object does not.

PyJWT and cryptography are imported on first use, not with the plugin: a suite that
installs the plugin but never uses it should not pay ~70 ms per run for them.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

ALGORITHM = "RS512"
#: 4096-bit keys make tokens about as long as the real service's (over 800 characters);
#: some old clients refuse shorter ones.
KEY_BITS = 4096
#: The real service's issuer (its published example token); ``Options.issuer`` changes it.
ISSUER = "https://api.tealiumiq.com"
_REQUIRED_CLAIMS = ("sub", "iss", "iat", "nbf", "exp", "jti")


class TokenProblem(Exception):
    """The token is not one this fake could have issued; ``str()`` says why."""


def generate_private_key_pem(bits: int = KEY_BITS) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_private_key(pem: bytes) -> rsa.RSAPrivateKey:
    # The PEM comes from generate_private_key_pem (ours), so the expensive RSA
    # consistency check adds nothing but time.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = serialization.load_pem_private_key(
        pem, password=None, unsafe_skip_rsa_key_validation=True
    )
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("the cached signing key is not an RSA key")
    return key


@dataclass(frozen=True)
class Claims:
    sub: str
    iat: int
    nbf: int
    exp: int
    jti: str


class TokenSigner:
    """Issues and verifies this fake's tokens. Thread-safe (immutable after init)."""

    def __init__(self, private_key: rsa.RSAPrivateKey, issuer: str = ISSUER) -> None:
        self._private_key = private_key
        self._public_key = private_key.public_key()
        self.issuer = issuer

    def issue(
        self, subject: str, issued_at: int, ttl: int, *, issuer: str | None = None
    ) -> tuple[str, Claims]:
        claims = Claims(
            sub=subject,
            iat=issued_at,
            nbf=issued_at,
            exp=issued_at + ttl,
            jti=secrets.token_hex(8),
        )
        payload: dict[str, Any] = {
            "sub": claims.sub,
            "iss": self.issuer if issuer is None else issuer,
            "iat": claims.iat,
            "nbf": claims.nbf,
            "exp": claims.exp,
            "jti": claims.jti,
        }
        import jwt

        token = jwt.encode(
            payload,
            self._private_key,
            algorithm=ALGORITHM,
            headers={"typ": "JWT", "alg": ALGORITHM},
        )
        return token, claims

    def verify(self, token: str, *, issuer: str | None = None) -> Claims:
        """The claims of a token this fake signed; raises :class:`TokenProblem`.

        Time claims are checked by the caller against the fake's clock, so that the
        reason can say "expired 40 s ago" instead of PyJWT's generic message.
        """
        import jwt

        if token.count(".") != 2:
            raise TokenProblem(
                f"the bearer value is not a JWT (a JWT has 3 dot-separated parts, this has "
                f"{token.count('.') + 1}); send the 'token' field of /v2/auth's answer as it is"
            )
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise TokenProblem(
                "the bearer value is not a well-formed JWT (it is truncated or altered); "
                "send the 'token' field of /v2/auth's answer unchanged"
            ) from None
        alg = header.get("alg")
        if alg != ALGORITHM:
            raise TokenProblem(
                f"the token's algorithm is {alg!r}, not {ALGORITHM!r}: this fake never issued it"
            )
        try:
            payload = jwt.decode(
                token,
                self._public_key,
                algorithms=[ALGORITHM],
                options={
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                    "verify_aud": False,
                    "verify_iss": False,
                    "require": list(_REQUIRED_CLAIMS),
                },
            )
        except jwt.InvalidSignatureError:
            raise TokenProblem(
                "the token's signature does not verify with this fake's key: it was "
                "tampered with or issued by another server"
            ) from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenProblem(
                f"the token lacks the {exc.claim!r} claim: this fake never issued it"
            ) from None
        except jwt.PyJWTError as exc:
            raise TokenProblem(f"the token does not decode ({exc}); it is damaged") from None
        expected = self.issuer if issuer is None else issuer
        if payload.get("iss") != expected:
            raise TokenProblem(f"the token's issuer is {payload.get('iss')!r}, not {expected!r}")
        try:
            return Claims(
                sub=str(payload["sub"]),
                iat=int(payload["iat"]),
                nbf=int(payload["nbf"]),
                exp=int(payload["exp"]),
                jti=str(payload["jti"]),
            )
        except (TypeError, ValueError):
            raise TokenProblem(
                f"the token's claims have the wrong types: {json.dumps(payload)[:200]}"
            ) from None


def unverified_subject(token: str) -> str | None:
    """The ``sub`` claim without verification, to attribute a refused token to an account."""
    import jwt

    try:
        sub = jwt.decode(token, options={"verify_signature": False}).get("sub")
    except jwt.PyJWTError:
        return None
    return sub if isinstance(sub, str) else None
