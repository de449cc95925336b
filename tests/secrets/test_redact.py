"""No secret echoed: the masker, and the service applying it to every text that quotes a
client (issue 9). The service is driven directly; tests/hostile drives it over HTTP."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import string
import subprocess
import sys
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import pytest
from hypothesis import example, given, settings, strategies as st

from pytest_mgmtauth._service import secret_spans, secret_text

with warnings.catch_warnings():  # the regex parser, by its old names on every Python
    warnings.simplefilter("ignore", DeprecationWarning)
    import sre_constants as re_constants
    import sre_parse as re_parser
from pytest_mgmtauth._service.accounts import fingerprint, generate_api_key, generate_password
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.records import DIAGNOSIS_BUDGET, DIAGNOSIS_WINDOW, Refusal
from pytest_mgmtauth._service.secret_spans import jwt_spans
from pytest_mgmtauth._service.secret_text import MIN_MASKED_LENGTH, SecretMasker
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock

MakeService = Callable[..., AuthService]
#: Real seconds a subprocess may take before the test fails (a hang guard).
GUARD = 60


def _masker(*secrets: str) -> SecretMasker:
    masker = SecretMasker()
    for secret in secrets:
        masker.add(secret)
    return masker


# -- the masker ------------------------------------------------------------------------


_PIECES = st.sampled_from(["ab+&", "=%/c", "ab", "+", " ", "%2B", "c/ab", "x"])


@settings(max_examples=300, deadline=None)
@given(
    secrets=st.lists(st.text(alphabet="ab+&=%/ c", min_size=6, max_size=12), max_size=6),
    pieces=st.lists(_PIECES | st.text(alphabet="ab+&=%/ c", max_size=12), max_size=30),
)
@example(secrets=["aaaaaab"], pieces=["a"])  # a prefix's places overlap: 0 misses, 1 holds
def test_a_text_is_masked_alike_whether_scanned_by_prefix_or_place_by_place(
    secrets: list[str], pieces: list[str]
) -> None:
    # The masker scans once per known prefix while prefixes are few for the text's
    # length, else looks up every place: the spans found must not depend on the way.
    text = "".join(pieces + secrets + pieces[::-1])
    masker = _masker(*secrets)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(secret_text, "_CHARACTERS_PER_SCAN", 0)  # always by prefix
        by_prefix = masker._find(text), masker.mask(text)
        patch.setattr(secret_text, "_CHARACTERS_PER_SCAN", 10**9)  # always by place
        assert (masker._find(text), masker.mask(text)) == by_prefix


@pytest.mark.parametrize(
    "spelling",
    [
        lambda s: s,
        lambda s: quote(s, safe=""),
        lambda s: quote(s),
        lambda s: quote_plus(s),
        lambda s: s.replace("+", " "),
        lambda s: repr(s)[1:-1],
    ],
    ids=["as is", "quoted", "quoted keeping /", "quote_plus", "+ as space", "repr-escaped"],
)
def test_a_secret_is_masked_in_every_spelling_it_travels_in(
    spelling: Callable[[str], str],
) -> None:
    key = generate_api_key()
    text = f"no account '{spelling(key)}' exists"
    masked = _masker(key).mask(text)
    assert masked == f"no account '{fingerprint(key)}' exists"


def test_a_quote_in_a_user_chosen_secret_is_masked_inside_a_repr() -> None:
    secret = "it's a \\ secret"
    masked = _masker(secret).mask(f"no account {secret!r} exists")
    assert "secret" not in masked.replace(" exists", "")
    assert fingerprint(secret) in masked


def test_any_jwt_is_masked_without_being_registered() -> None:
    jwt = "eyJhbGciOiJSUzUxMiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl-_x"
    assert SecretMasker().mask(f"GET /api/{jwt}/x") == f"GET /api/{fingerprint(jwt)}/x"


def test_the_longest_spelling_wins_where_two_start_at_the_same_place() -> None:
    short, long = "abcdefgh", "abcdefgh-and-more"
    masked = _masker(short, long).mask(f"[{long}] [{short}]")
    assert masked == f"[{fingerprint(long)}] [{fingerprint(short)}]"


def test_secrets_too_short_to_mask_are_left_alone() -> None:
    short = "x" * (MIN_MASKED_LENGTH - 1)
    masker = _masker(short)
    assert masker.mask(f"a {short} b") == f"a {short} b"
    assert short not in masker


def test_text_without_secrets_is_returned_as_it_is() -> None:
    masker = _masker(generate_password())
    text = "the form field 'key' is empty"
    assert masker.mask(text) is text


@given(
    before=st.text(max_size=30),
    after=st.text(max_size=30),
    secret=st.text(min_size=MIN_MASKED_LENGTH, max_size=80),
)
def test_no_whole_secret_survives_masking_whatever_surrounds_it(
    before: str, after: str, secret: str
) -> None:
    masked = _masker(secret).mask(before + secret + after)
    assert secret not in masked


#: How a text is written where it leaves the fake, each character outside visible ASCII
#: escaped: the diagnosis header, a JSON body, a repr (an event's), ascii(), pytest's
#: JUnit XML (control characters as ``#x0E``).
ESCAPINGS: dict[str, Callable[[str], str]] = {
    "header": lambda t: re.sub(
        r"[^\x20-\x7e]", lambda m: m[0].encode("unicode_escape").decode("ascii"), t
    ),
    "JSON": lambda t: json.dumps(t)[1:-1],
    "repr": lambda t: repr(t)[1:-1],
    "ascii": lambda t: ascii(t)[1:-1],
    "JUnit XML": lambda t: re.sub(
        r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]",
        lambda m: f"#x{ord(m[0]):02X}" if ord(m[0]) <= 0xFF else f"#x{ord(m[0]):04X}",
        t,
    ),
}


@settings(max_examples=300, deadline=None)
@given(
    before=st.text(max_size=12),
    char=st.characters(exclude_categories=["Cs"]).filter(lambda c: not " " <= c <= "~"),
    cut=st.integers(min_value=1, max_value=12),
    rest=st.text(alphabet=string.ascii_letters + string.digits + "+&=%/!*-_.~#", min_size=6),
    after=st.text(max_size=12),
    escaping=st.sampled_from(sorted(ESCAPINGS)),
)
# Found by tests/hostile: '%0e...' decoded to '\x0e', whose escape completed the key.
@example(before="GET /nope/", char="\x0e", cut=2, rest="Ab+&c9=xyz", after="", escaping="header")
@example(before="", char="\x12", cut=2, rest="345678", after="", escaping="JSON")
@example(before="", char="\x12", cut=2, rest="3456", after="", escaping="repr")  # 5 characters
@example(before="", char="\U0001f60d", cut=9, rest="01116D", after="01116D", escaping="ascii")
def test_an_escape_on_the_way_out_completes_no_secret(
    before: str, char: str, cut: int, rest: str, after: str, escaping: str
) -> None:
    escape = ESCAPINGS[escaping]
    # The secret starts inside the escape of the character before it ('0e' of '\x0e').
    secret = escape(char)[min(cut, len(escape(char))) :] + rest
    masked = _masker(secret).mask(before + char + rest + after)
    assert secret not in escape(masked)


def test_a_fingerprint_and_the_text_after_it_spell_no_secret() -> None:
    secret = "d01116D"  # its fingerprint ends in its first character
    assert fingerprint(secret).endswith(secret[0])
    masked = _masker(secret).mask(f"no account '{secret}{secret[1:]}'")
    assert secret not in masked
    assert masked.startswith(f"no account '{fingerprint(secret)[:-1]}")


# -- any spelling a client's encoder gives a secret (issue 38, item 1) --------------------

#: Secrets as the fake generates them (API keys, passwords, client secrets: the
#: characters that must be encoded included), and any text a user may choose.
GENERATED = st.text(alphabet=string.ascii_letters + string.digits + "+&=%/!*-_.~#", min_size=20)
CHOSEN = st.text(alphabet=st.characters(codec="utf-8"), min_size=12, max_size=40)


def _form_serializer(secret: str, keep: str) -> str:
    """The application/x-www-form-urlencoded serializer of URLSearchParams (WHATWG) and
    Java's URLEncoder: letters, digits and ``keep`` as they are, a space as '+', every
    other UTF-8 byte as %XX (upper case)."""
    out = []
    for byte in secret.encode("utf-8"):
        char = chr(byte)
        if char.isascii() and (char.isalnum() or char in keep):
            out.append(char)
        else:
            out.append("+" if char == " " else f"%{byte:02X}")
    return "".join(out)


ENCODERS: dict[str, Callable[[str], str]] = {
    "Python quote": lambda s: quote(s, safe=""),
    "Python quote keeping /": quote,
    "Python quote_plus": quote_plus,
    "JS encodeURIComponent": lambda s: quote(s, safe="-_.!~*'()"),
    "JS URLSearchParams": lambda s: _form_serializer(s, "*-._"),
    "Java URLEncoder": lambda s: _form_serializer(s, ".-*_"),
    "encoded twice": lambda s: quote(quote(s, safe=""), safe=""),
    "encoded three times": lambda s: quote(quote(quote_plus(s), safe=""), safe=""),
    "un-encoded": lambda s: s,
    # Inside a JSON string: Go and Gson escape '&', '=', '<', '>' (every generated key
    # has '&' or '='), and any encoder may escape any character (issue 43, defect 6).
    "Go/Gson JSON": lambda s: _json_string(s, "&=<>'"),
    "JSON escaping every character": lambda s: "".join(
        f"\\u{unit:04x}" for unit in _utf16_units(s)
    ),
}


#: The encoders that write no percent-escapes: a '%A0' in their output is the secret's own.
WITHOUT_PERCENT = frozenset({"un-encoded", "Go/Gson JSON", "JSON escaping every character"})


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _json_string(secret: str, escaped: str) -> str:
    """``secret`` as a JSON string's content, with the characters of ``escaped`` (and
    whatever JSON must escape) as \\uXXXX."""
    out = json.dumps(secret)[1:-1]
    for char in escaped:
        out = out.replace(char, f"\\u{ord(char):04x}")
    return out


def _lower_hex(text: str, which: list[bool]) -> str:
    """``text`` with the hex digits of some percent-escapes in lower case."""
    flags = iter(which * (len(text) // max(1, len(which)) + 1))
    return re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower() if next(flags) else m[0], text)


def _readings(text: str) -> list[str]:
    """What one decoding (or a few) of ``text`` gives back, as a reader would try."""
    once, once_plus = unquote(text), unquote_plus(text)
    return [text, once, once_plus, unquote(once), unquote(once_plus), unquote(unquote(once))]


def _basic(user: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


@settings(max_examples=300)
@given(
    secret=st.one_of(GENERATED, CHOSEN),
    encoder=st.sampled_from(sorted(ENCODERS)),
    lower=st.lists(st.booleans(), min_size=1, max_size=5),
    place=st.sampled_from(["body", "json", "query", "path", "header", "basic", "cookie"]),
)
def test_a_secret_is_masked_in_any_encoding_a_client_sends_it_in(
    secret: str, encoder: str, lower: list[bool], place: str
) -> None:
    encoded = ENCODERS[encoder](secret)
    if encoder not in WITHOUT_PERCENT:  # lower-case hex spells an encoder's escapes;
        encoded = _lower_hex(encoded, lower)  # a '%A0' of the secret itself is not one
    text = {
        "body": f"username=alice%40example.com&key={encoded}&grant_type=client_credentials",
        "json": f'{{"username": "alice@example.com", "key": "{encoded}"}}',
        "query": f"page=2&utk={encoded}",
        "path": f"/v1/items/{encoded}/x",
        "header": f"X-Api-Key: {encoded}",
        "basic": _basic("alice@example.com", encoded),
        "cookie": f'JSESSIONID="{encoded}"; other=1',
    }[place]
    masked = _masker(secret).mask(text)
    for reading in _readings(masked):
        assert secret not in reading, (encoder, place, masked)
    if len(encoded) >= MIN_MASKED_LENGTH and place != "basic":
        assert encoded not in masked
    assert fingerprint(secret) in masked


def test_javascript_and_java_spell_a_key_otherwise_than_python() -> None:
    # Why listing Python's spellings was not enough: those of the other languages differ
    # for most generated keys, and each decodes back to the key.
    key = "k3y~+&=%/!*'()x-long-enough"
    python = {ENCODERS[name](key) for name in ENCODERS if name.startswith("Python")}
    js, java = ENCODERS["JS encodeURIComponent"](key), ENCODERS["Java URLEncoder"](key)
    assert js == "k3y~%2B%26%3D%25%2F!*'()x-long-enough"
    assert java == "k3y%7E%2B%26%3D%25%2F%21*%27%28%29x-long-enough"
    assert js not in python
    assert java not in python
    assert unquote(js) == unquote_plus(java) == key


@pytest.mark.parametrize(
    "header",
    [
        lambda user, key: _basic(user, key),
        lambda user, key: _basic(quote_plus(user), quote_plus(key)),
        lambda user, key: _basic(user, quote(key, safe="-_.!~*'()")),
        lambda user, key: _basic(user, key).replace("Basic", "basic").rstrip("="),
    ],
    ids=["as is", "form-encoded", "JS-encoded", "lower-case scheme, no padding"],
)
def test_basic_credentials_carrying_a_secret_are_masked_whole(
    header: Callable[[str, str], str],
) -> None:
    key = generate_api_key()
    value = header("alice@example.com", key)
    masked = _masker(key).mask(f"Authorization: {value}")
    assert masked.lower() == f"authorization: basic {fingerprint(key)}"


def test_basic_credentials_without_a_secret_are_kept() -> None:
    value = _basic("alice@example.com", "not-a-known-secret")
    assert _masker(generate_api_key()).mask(value) == value


# -- masking is linear (issue 38, item 8) --------------------------------------------------

OLD_JWT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*")


@given(st.text(alphabet="eyJa.-_/ %", max_size=60))
def test_jwts_are_found_where_the_old_regex_found_them(text: str) -> None:
    assert list(jwt_spans(text)) == [m.span() for m in OLD_JWT.finditer(text)]


def _python_steps(call: Callable[[], object]) -> int:
    """The bytecode instructions ``call`` runs in the masking modules (deterministic)."""
    counted = {secret_spans.__file__, secret_text.__file__}
    steps = 0

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal steps
        if frame.f_code.co_filename not in counted:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            steps += 1
        return trace

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return steps


@pytest.mark.parametrize(
    "unit",
    ["eyJ", "eyJ.", "eyJ.a.", "%41eyJ", "a+%2", "Basic eyJ ", "\\061eyJ"],
    ids=["eyJ", "eyJ dot", "two dots", "escapes", "plus", "basic", "backslash"],
)
def test_masking_work_grows_linearly_with_the_text(unit: str) -> None:
    masker = _masker(generate_api_key(), generate_password())
    # Python 3.12 turns on opcode events for a code object only after the trace has seen
    # it run once: the first count would be 0.
    _python_steps(lambda: masker.mask(unit * 50))
    small = _python_steps(lambda: masker.mask(unit * 500))
    large = _python_steps(lambda: masker.mask(unit * 2000))
    assert small > 0
    assert large <= 5 * small  # 4 times the text: about 4 times the work (quadratic: 16)


def test_the_jwt_scan_reads_each_character_once() -> None:
    # The one regex the scan runs is a single repeat of one character class: finditer
    # reads each character once and never starts again inside a run.
    parsed: list[Any] = re_parser.parse(secret_spans._RUN.pattern).data
    assert len(parsed) == 1
    kind, (low, high, item) = parsed[0]
    assert (kind, low, high) == (re_constants.MAX_REPEAT, 1, re_constants.MAXREPEAT)
    assert [op for op, _ in item] == [re_constants.IN]


def test_a_long_text_full_of_eyj_is_masked_without_hanging() -> None:
    # 63 KB of 'eyJ' took 5 s with the old regex (quadratic, holding the GIL), so 1.2 MB
    # would take half an hour. In a subprocess: a thread could not even time out while
    # the regex holds the GIL. GUARD is a hang guard, not a timing check.
    code = (
        "from pytest_mgmtauth._service.secret_text import SecretMasker\n"
        "m = SecretMasker(); m.add('a-registered-secret')\n"
        "print(len(m.mask('/' + 'eyJ' * 400_000)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=GUARD, check=True
    )
    assert done.stdout.strip() == str(1 + 3 * 400_000)


# -- the service -------------------------------------------------------------------------


def _refusal_of(call: Callable[[], object]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()
    return caught.value


def _all_text(service: AuthService) -> str:
    parts = []
    for event in service.timeline.events:
        parts.append(event.describe())
        parts.extend(str(getattr(event, f.name)) for f in dataclasses.fields(event))
    return "\n".join(parts)


def test_swapped_v2_fields_echo_no_key(service: AuthService) -> None:
    account = service.accounts.add_account()
    refusal = _refusal_of(lambda: service.flow(V2Flow).grant(account.api_key, account.username))
    assert account.api_key not in refusal.message
    assert fingerprint(account.api_key) in refusal.message
    assert account.api_key not in _all_text(service)


def test_password_sent_as_username_is_not_echoed(service: AuthService) -> None:
    account = service.accounts.add_account()
    refusal = _refusal_of(lambda: service.flow(V1Flow).login(account.password, account.password))
    assert account.password not in refusal.message
    assert account.password not in _all_text(service)


def test_secrets_of_sessions_and_rotated_keys_are_masked_in_events(
    service: AuthService, signer: object
) -> None:
    account = service.accounts.add_account()
    session = service.flow(V1Flow).login(account.username, account.password)
    old_key = account.api_key
    service.accounts.rotate_secret(account.username, "API key")
    for secret in (session.session_id, session.utk, old_key):
        service.timeline.record_unknown_route("GET", f"/v1/x;jsessionid={secret}", 404)
        service.timeline.record_bad_request("POST", "/v2/auth", 400, f"field {secret!r} is odd")
    text = _all_text(service)
    for secret in (session.session_id, session.utk, old_key):
        assert secret not in text
        assert fingerprint(secret) in text


def test_a_python_api_call_naming_a_key_as_the_account_does_not_echo_it(
    service: AuthService,
) -> None:
    account = service.accounts.add_account()
    with pytest.raises(ValueError, match="no account") as caught:
        service.lockout.lock(account.api_key)
    assert account.api_key not in str(caught.value)


# -- diagnoses are no oracle ------------------------------------------------------------


def test_a_short_prefix_of_the_key_is_not_diagnosed_as_truncated(service: AuthService) -> None:
    account = service.accounts.add_account()
    for length in (1, 10, len(account.api_key) // 2 - 1):
        with pytest.raises(Refusal) as caught:
            service.flow(V2Flow).grant(account.username, account.api_key[:length])
        assert "truncated" not in caught.value.reason
    half = len(account.api_key) // 2
    refusal = _refusal_of(
        lambda: service.flow(V2Flow).grant(account.username, account.api_key[:half])
    )
    assert f"truncated ({half} of {len(account.api_key)} characters)" in refusal.reason


@pytest.mark.parametrize("secret", ["API key", "password"])
def test_diagnoses_pause_after_the_budget_and_resume_a_window_later(
    make_service: MakeService, clock: ManualClock, secret: str
) -> None:
    service = make_service(lockout_threshold=1000)
    account = service.accounts.add_account()
    real = account.api_key if secret == "API key" else account.password

    def attempt(value: str) -> str:
        if secret == "API key":
            return _refusal_of(lambda: service.flow(V2Flow).grant(account.username, value)).reason
        return _refusal_of(lambda: service.flow(V1Flow).login(account.username, value)).reason

    cut = real[: len(real) - 1]
    for _ in range(DIAGNOSIS_BUDGET):
        assert "truncated" in attempt(cut)
    paused = attempt(cut)
    assert "truncated" not in paused
    assert f"diagnoses of this account's {secret} are paused" in paused
    assert f"of {len(real)} characters" not in paused  # not even the length
    clock.advance(DIAGNOSIS_WINDOW)
    assert "truncated" in attempt(cut)


def test_the_diagnosis_budget_is_per_account(service: AuthService) -> None:
    first, second = service.accounts.add_account(), service.accounts.add_account()
    for _ in range(DIAGNOSIS_BUDGET + 1):
        _refusal_of(lambda: service.flow(V2Flow).grant(first.username, "wrong-key-123"))
    refusal = _refusal_of(lambda: service.flow(V2Flow).grant(second.username, second.api_key[:-1]))
    assert "truncated" in refusal.reason


def test_hypothesis_reports_of_credential_records_show_no_secret(service: AuthService) -> None:
    # Hypothesis (and IPython) print dataclasses field by field, repr=False fields too.
    from hypothesis.vendor.pretty import pretty

    account = service.accounts.add_account()
    token, token_record = service.flow(V2Flow).grant(account.username, account.api_key)
    session = service.flow(V1Flow).login(account.username, account.password)
    shown = pretty(token_record) + pretty(session)
    for secret in (token, session.session_id, session.utk):
        assert secret not in shown
    assert "T1" in shown
    assert "S1" in shown
