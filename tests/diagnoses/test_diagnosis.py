"""Why a secret that arrived differs from the account's, in the client's terms."""

from __future__ import annotations

from urllib.parse import parse_qsl, quote

from pytest_mgmtauth._service.accounts import fingerprint
from pytest_mgmtauth._service.secret_text import ClientKind, diagnose_secret

KEY = "Ab3+cd%41ef&gh=ij/kl"


def _as_form_parser_sees(raw_body: str, field: str) -> str:
    """The value a server's form parser gives for ``field`` of an unencoded body."""
    return dict(parse_qsl(raw_body, keep_blank_values=True))[field]


def test_equal_secrets_need_no_diagnosis() -> None:
    assert diagnose_secret("API key", KEY, KEY) == ""


def test_unencoded_key_is_named_with_every_kind_of_damage() -> None:
    received = _as_form_parser_sees(f"username=a@b.c&key={KEY}", "key")
    message = diagnose_secret("API key", KEY, received)
    assert message.startswith("the API key arrived un-encoded")
    assert "each '+' arrived as a space" in message
    assert "the field was cut at the first '&' (after 11 characters)" in message
    assert "'%' sequences were decoded" in message
    assert "URL-encode the API key in the form body" in message


def test_unencoded_key_with_only_a_plus() -> None:
    key = "abc+def"
    message = diagnose_secret("API key", key, "abc def")
    assert "each '+' arrived as a space" in message
    assert "cut" not in message


def test_double_encoding_is_named() -> None:
    twice = quote(KEY, safe="")  # the server decodes once and is left with escapes
    message = diagnose_secret("API key", KEY, twice)
    assert message.startswith("the API key arrived URL-encoded twice")
    assert "%2B for '+'" in message


def test_truncated_secret_says_how_much_arrived() -> None:
    message = diagnose_secret("password", "abcdefgh", "abcd")
    assert message == "the password arrived truncated (4 of 8 characters)"


def test_plainly_wrong_secret_shows_lengths_and_fingerprints_never_the_secret() -> None:
    message = diagnose_secret("password", "correct-horse", "battery-staple-x")
    assert "does not match the account's" in message
    assert "received 16 characters" in message
    assert "expected 13" in message
    assert fingerprint("battery-staple-x") in message
    assert fingerprint("correct-horse") in message
    assert "correct-horse" not in message
    assert "battery-staple-x" not in message


def test_diagnoses_never_contain_the_expected_secret() -> None:
    received = [
        _as_form_parser_sees(f"key={KEY}", "key"),
        quote(KEY, safe=""),
        KEY[:5],
        "something else",
    ]
    for value in received:
        assert KEY not in diagnose_secret("API key", KEY, value)


def test_the_fix_names_the_wire_format_for_every_client() -> None:
    received = _as_form_parser_sees(f"username=a@b.c&key={KEY}", "key")
    messages = {kind: diagnose_secret("API key", KEY, received, kind) for kind in ClientKind}
    for message in messages.values():
        assert "'+' as %2B, '&' as %26, '=' as %3D, '%' as %25" in message
    # Each client gets its own idiom.
    assert len(set(messages.values())) == len(ClientKind)


def test_without_a_known_client_the_fix_is_language_neutral() -> None:
    received = _as_form_parser_sees(f"username=a@b.c&key={KEY}", "key")
    message = diagnose_secret("API key", KEY, received)
    assert message == diagnose_secret("API key", KEY, received, ClientKind.OTHER)
    for idiom in ("urlencode", "URLSearchParams", "url.Values", "URLEncoder", "--data-urlencode"):
        assert idiom in message


def test_a_node_client_gets_no_python_idiom() -> None:
    plus_only = diagnose_secret("API key", "abc+def", "abc def", ClientKind.NODE)
    twice = diagnose_secret("API key", KEY, quote(KEY, safe=""), ClientKind.NODE)
    unencoded = diagnose_secret(
        "API key", KEY, _as_form_parser_sees(f"key={KEY}", "key"), ClientKind.NODE
    )
    for message in (plus_only, twice, unencoded):
        assert "urllib" not in message
        assert "requests" not in message
        assert "URLSearchParams" in message
