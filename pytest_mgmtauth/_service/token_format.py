"""The format of this fake's tokens and the checks of a presented one: the header and
claims it writes (RS512 with ``typ`` first, as the real service's v2 and v3 tokens; RS256
with ``alg`` first, as the developer portal's access tokens; the real service's issuer),
and why a bearer value is not a token it could have issued (:class:`TokenProblem`, whose
reason never repeats a value from the token: it may carry a secret).

PyJWT is imported on first use, not with the plugin.
"""

from __future__ import annotations

import base64
import json
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .secret_text import claim_shown, library_says

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

#: The algorithm of the v2 and v3 tokens (the real service's example token).
ALGORITHM = "RS512"
#: The header the fake writes for each algorithm it signs with, in the order of the
#: published tokens: v2 and v3 tokens begin ``eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzUxMiJ9``
#: (``typ`` first), the developer portal's access tokens
#: ``eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9`` (``alg`` first, "a JWT signed with RS256").
HEADERS: dict[str, dict[str, str]] = {
    "RS512": {"typ": "JWT", "alg": "RS512"},
    "RS256": {"alg": "RS256", "typ": "JWT"},
}
#: The real service's issuer (its published example token); ``Options.issuer`` changes it.
ISSUER = "https://api.tealiumiq.com"
_BASE64URL = string.ascii_letters + string.digits + "-_"
REQUIRED_CLAIMS = ("sub", "iss", "iat", "nbf", "exp", "jti")


class TokenProblem(Exception):
    """The token is not one this fake could have issued; ``str()`` says why."""


@dataclass(frozen=True)
class Claims:
    sub: str
    iat: int
    nbf: int
    exp: int
    jti: str


#: Where a token comes from, in a refusal's fix, unless the flow says (its own words).
DEFAULT_SOURCE = "the 'token' field of /v2/auth's answer"


def verify_token(
    token: str,
    public_key: rsa.RSAPublicKey,
    expected: str,
    algorithm: str = ALGORITHM,
    *,
    source: str = DEFAULT_SOURCE,
) -> Claims:
    """The claims of ``token`` if ``public_key`` verifies it with ``algorithm`` (the one
    the flow's tokens are signed with) and it names the issuer ``expected``; raises
    :class:`TokenProblem`. ``source``: where the flow's tokens come from, as the fixes
    name it (a v3 refusal never names /v2/auth).

    Every way a token can fail is a :class:`TokenProblem` whose text says what is
    wrong with the token, never another exception: PyJWT raises ``InvalidTokenError``
    subclasses (and a header or payload of the wrong JSON types can raise anything) for
    input a hostile client chooses. The reason never repeats a value from the token: it
    may carry a secret.

    Time claims are checked by the caller against the fake's clock, so that the
    reason can say "expired 40 s ago" instead of PyJWT's generic message.
    """
    import jwt

    if token.count(".") != 2:
        raise TokenProblem(
            f"the bearer value is not a JWT (a JWT has 3 dot-separated parts, this has "
            f"{token.count('.') + 1}); send {source} as it is"
        )
    header = unverified_header(token, source=source)
    check_header(header, algorithm)
    try:
        payload = jwt.decode(
            token,
            public_key,
            algorithms=[algorithm],
            options={
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "verify_aud": False,
                "verify_iss": False,
                "verify_sub": False,
                "verify_jti": False,
                "require": list(REQUIRED_CLAIMS),
            },
        )
    except jwt.InvalidSignatureError:
        raise TokenProblem(
            "the token's signature does not verify with this fake's key: it was "
            "tampered with or issued by another server"
        ) from None
    except jwt.MissingRequiredClaimError as exc:
        claim = exc.claim if exc.claim in REQUIRED_CLAIMS else "a required"
        raise TokenProblem(
            f"the token lacks the {claim!r} claim (or it is null): this fake never issued it"
        ) from None
    except Exception as exc:  # hostile input: every failure is a refusal
        raise TokenProblem(
            f"the token does not decode ({library_says(exc)}); it is damaged or forged: "
            f"send {source} unchanged"
        ) from None
    if not isinstance(payload, dict):  # PyJWT checks this; a refusal if it ever does not
        raise TokenProblem("the token's payload is not a JSON object: this fake never issued it")
    if payload.get("iss") != expected:
        got = payload.get("iss")
        # The real service's issuer is named (a token of another fake's configuration);
        # any other value by its shape only: a reason never repeats a long value.
        shown = repr(got) if got == ISSUER else claim_shown(got)
        raise TokenProblem(f"the token's issuer is {shown}, not {expected!r}")
    return Claims(
        sub=string_claim(payload, "sub"),
        iat=time_claim(payload, "iat"),
        nbf=time_claim(payload, "nbf"),
        exp=time_claim(payload, "exp"),
        jti=string_claim(payload, "jti"),
    )


#: The largest time claim accepted: 9999-12-31T23:59:59Z, the last second a datetime
#: holds (a larger exp would overflow wherever the claim is shown as a time).
MAX_TIME_CLAIM = 253_402_300_799


def unverified_header(token: str, *, source: str = DEFAULT_SOURCE) -> dict[str, Any]:
    """The token's header, read here (not by PyJWT, which refuses a bad 'kid' or 'crit'
    with an exception that does not say which), so that check_header can name it."""
    segment = token.split(".", 1)[0]
    try:
        if not segment or segment.strip(_BASE64URL):
            raise ValueError("not base64url")
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, RecursionError):  # binascii.Error and JSON errors are ValueErrors
        raise TokenProblem(
            "the bearer value is not a well-formed JWT (it is truncated or altered); "
            f"send {source} unchanged"
        ) from None
    if not isinstance(header, dict):
        raise TokenProblem(
            f"the token's header is {claim_shown(header)}, not a JSON object: this fake "
            "never issued it"
        )
    return header


def check_header(header: dict[str, Any], algorithm: str = ALGORITHM) -> None:
    """Refuse a header this fake never writes for tokens of ``algorithm``, saying which
    member is wrong."""
    alg = header.get("alg")
    if alg != algorithm:
        raise TokenProblem(
            f"the token's algorithm is {claim_shown(alg)}, not {algorithm!r}: this fake "
            "never issued it"
        )
    if "crit" in header:
        raise TokenProblem(
            f"the token's header has 'crit' ({claim_shown(header['crit'])}): this fake issues no "
            "critical header extensions and refuses tokens that need one (RFC 7515 4.1.11)"
        )
    if "kid" in header and not isinstance(header["kid"], str):
        raise TokenProblem(
            f"the token's header has a 'kid' that is {claim_shown(header['kid'])}, not a string: "
            "this fake never issued it"
        )
    if "b64" in header:
        raise TokenProblem(
            "the token's header has 'b64' (an unencoded payload, RFC 7797): this fake never "
            "issued it"
        )


def string_claim(payload: dict[str, Any], name: str) -> str:
    value = payload[name]
    if not isinstance(value, str):
        raise TokenProblem(
            f"the token's {name!r} claim is {claim_shown(value)}, not a string: this fake never "
            "issued it"
        )
    return value


def time_claim(payload: dict[str, Any], name: str) -> int:
    value = payload[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TokenProblem(
            f"the token's {name!r} claim is {claim_shown(value)}, not whole seconds since 1970: "
            "this fake never issued it"
        )
    if not 0 <= value <= MAX_TIME_CLAIM:
        raise TokenProblem(
            f"the token's {name!r} claim is {claim_shown(value)}, outside 0..{MAX_TIME_CLAIM} "
            "(the years 1970 to 9999): this fake never issued it"
        )
    return value


def unverified_subject(token: str) -> str | None:
    """The ``sub`` claim without verification, to attribute a refused token to an account."""
    import jwt

    try:
        payload = jwt.decode(token, options={"verify_signature": False})
    except Exception:  # hostile input: an unreadable token has no subject
        return None
    sub = payload.get("sub") if isinstance(payload, dict) else None
    return sub if isinstance(sub, str) else None
