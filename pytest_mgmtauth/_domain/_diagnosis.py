"""Why a secret that arrived differs from the one the account has, in the client's terms.

The usual causes are encoding mistakes the real service punishes with a bare 1401: a
key sent un-encoded in the form body ('+' becomes a space, '&' cuts the field, '%41'
decodes to 'A') or encoded twice. Messages use fingerprints, never the secrets.
"""

from __future__ import annotations

from urllib.parse import quote, unquote, unquote_plus

from ._accounts import fingerprint


def _as_unencoded_form_value(secret: str) -> str:
    """What a form parser makes of ``secret`` written into a body without encoding."""
    return unquote_plus(secret.split("&", 1)[0])


def diagnose_secret(field: str, expected: str, received: str) -> str:
    """One sentence saying how ``received`` relates to ``expected``; '' when equal."""
    if received == expected:
        return ""
    if received == _as_unencoded_form_value(expected):
        damage = []
        head = expected.split("&", 1)[0]
        if "+" in head:
            damage.append("each '+' arrived as a space")
        if "&" in expected:
            damage.append(f"the field was cut at the first '&' (after {len(head)} characters)")
        if unquote(head.replace("+", " ")) != head.replace("+", " "):
            damage.append("'%' sequences were decoded")
        if not damage:
            damage.append("it was decoded once too often")
        return (
            f"the {field} arrived un-encoded: {'; '.join(damage)}. URL-encode the {field} "
            f"in the form body (urllib.parse.urlencode, or data={{...}} as a dict in "
            f"requests/httpx) instead of writing it into the body as it is"
        )
    if received != unquote(received) and unquote(received) == expected:
        return (
            f"the {field} arrived URL-encoded twice (it still contains '%XX' escapes, "
            f"e.g. {quote('+', safe='')!s} for '+'): encode it once; a client that passes a "
            f"dict to its HTTP library must not quote the value itself"
        )
    if received and expected.startswith(received):
        return f"the {field} arrived truncated ({len(received)} of {len(expected)} characters)"
    return (
        f"the {field} does not match the account's (received {len(received)} characters, "
        f"{fingerprint(received)}; expected {len(expected)}, {fingerprint(expected)})"
    )
