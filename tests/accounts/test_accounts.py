"""Accounts: generated credentials look like the real ones; secrets stay out of output."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import textwrap
from urllib.parse import quote, unquote_plus, unquote_to_bytes

import pytest

from pytest_mgmtauth import Account
from pytest_mgmtauth._service.accounts import (
    fingerprint,
    generate_api_key,
    generate_password,
    make_account,
)
from pytest_mgmtauth._service.service import AuthService

#: A sample large enough that a character class missing now and then would show.
KEYS = [generate_api_key() for _ in range(200)]


def test_generated_keys_are_about_sixty_characters() -> None:
    assert {len(key) for key in KEYS} == {60}


@pytest.mark.parametrize("char", list("+&=%/"))
def test_every_generated_key_contains_what_must_be_url_encoded(char: str) -> None:
    assert all(char in key for key in KEYS)


def test_generated_keys_mix_letters_digits_and_punctuation_without_spaces() -> None:
    for key in KEYS:
        assert re.search("[a-z]", key)
        assert re.search("[A-Z]", key)
        assert re.search("[0-9]", key)
        assert " " not in key
        assert key[0].isalnum()  # a shell never eats the first character
        assert key.isascii()


def test_generated_keys_are_different_and_change_when_sent_unencoded() -> None:
    assert len(set(KEYS)) == len(KEYS)
    # What makes the fake useful: every key is damaged by a client that skips encoding.
    assert all(unquote_plus(key.split("&", 1)[0]) != key for key in KEYS)
    assert all(quote(key, safe="") != key for key in KEYS)


def test_unencoded_generated_secrets_still_decode_so_the_mistake_is_always_a_1401() -> None:
    # A '%C3'-like pair would make a forgetful client's body undecodable (a 400) instead
    # of a wrong key: the symptom of the mistake must not depend on the draw.
    for secret in KEYS + [generate_password() for _ in range(200)]:
        unquote_to_bytes(secret).decode("utf-8")


def test_generated_passwords_need_encoding_too() -> None:
    passwords = [generate_password() for _ in range(50)]
    for password in passwords:
        assert len(password) == 20
        assert "+" in password
        assert "&" in password
        assert "%" in password


def test_usernames_are_email_addresses_and_unique(service: AuthService) -> None:
    accounts = [service.accounts.add_account() for _ in range(20)]
    names = [a.username for a in accounts]
    assert all(re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]+", name) for name in names)
    assert len(set(names)) == len(names)


def test_account_has_every_permission_unless_told_otherwise() -> None:
    everything = make_account(1, None, None, None, None)
    assert everything.permissions is None
    assert everything.has_permission("tags:write")
    assert everything.has_permission(None)
    some = make_account(2, None, None, None, ["tags:read"])
    assert some.permissions == frozenset({"tags:read"})
    assert some.has_permission("tags:read")
    assert not some.has_permission("tags:write")
    assert some.has_permission(None)  # a route without a permission
    none = make_account(3, None, None, None, [])
    assert none.permissions == frozenset()
    assert not none.has_permission("tags:read")


def test_given_credentials_are_kept_as_they_are() -> None:
    account = make_account(1, "ops@example.com", "k+y&=%/", "pw", None)
    assert account.username == "ops@example.com"
    assert account.api_key == "k+y&=%/"
    assert account.password == "pw"


def test_secrets_never_appear_in_repr_or_str() -> None:
    account = make_account(1, None, None, None, ["tags:read"])
    for text in (repr(account), str(account), repr([account])):
        assert account.api_key not in text
        assert account.password not in text
        assert account.username in text
        assert fingerprint(account.api_key) in text
        assert "['tags:read']" in text


def test_fingerprint_is_short_stable_and_not_the_secret() -> None:
    key = generate_api_key()
    assert fingerprint(key) == fingerprint(key)
    assert re.fullmatch("#[0-9a-f]{6}", fingerprint(key))
    assert fingerprint(key) != fingerprint(key + "x")


def test_account_is_immutable() -> None:
    account = make_account(1, None, None, None, None)
    with pytest.raises(AttributeError):
        account.api_key = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"username": "alice"}, "usernames of the service are e-mail addresses"),
        ({"username": ""}, r"add_account\(username=...\) must be a non-empty str"),
        ({"api_key": ""}, r"add_account\(api_key=...\) must be a non-empty str"),
        ({"password": 123}, r"add_account\(password=...\) must be a non-empty str"),
    ],
)
def test_bad_account_arguments_say_what_to_pass(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"username": None, "api_key": None, "password": None}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        make_account(1, permissions=None, **args)  # type: ignore[arg-type]


def test_permissions_as_a_single_string_is_refused_with_the_fix() -> None:
    with pytest.raises(TypeError, match=r"did you mean permissions=\['tags:read'\]\?"):
        make_account(1, None, None, None, "tags:read")


def test_duplicate_username_in_one_test_is_refused(service: AuthService) -> None:
    service.accounts.add_account("dup@example.com")
    with pytest.raises(ValueError, match=r"an account 'dup@example\.com' exists already"):
        service.accounts.add_account("dup@example.com")


def test_accounts_are_registered_by_username(service: AuthService) -> None:
    account = service.accounts.add_account(permissions=["a"])
    assert isinstance(account, Account)
    assert service.accounts == {account.username: account}


def test_the_list_of_accounts_is_a_copy(service: AuthService) -> None:
    service.accounts.add_account("alice@example.com")
    accounts = service.accounts.account_list()
    service.accounts.add_account("bob@example.com")
    assert [a.username for a in accounts] == ["alice@example.com"]  # taken under the lock, not live
    assert [a.username for a in service.accounts.account_list()] == [
        "alice@example.com",
        "bob@example.com",
    ]


def test_secrets_are_drawn_in_batches_not_per_character(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 14: one system call per character (secrets.choice, SystemRandom.shuffle) was
    # a measurable part of each test's setup; issue 42: so was one per draw.
    from pytest_mgmtauth._service import accounts as _accounts

    calls: list[int] = []
    real = os.urandom

    def counted(n: int) -> bytes:
        calls.append(n)
        return real(n)

    def per_character(*args: object) -> object:
        raise AssertionError("a system call per character")

    monkeypatch.setattr(os, "urandom", counted)
    monkeypatch.setattr(secrets, "choice", per_character)
    monkeypatch.setattr(secrets.SystemRandom, "shuffle", per_character)
    _accounts._random.forget()
    for serial in range(10):  # ten tests' accounts: about 1,000 bytes
        assert len(_accounts.generate_api_key()) == _accounts._KEY_LENGTH
        assert len(_accounts.generate_password()) == 20
        assert _accounts.generate_username(serial)
    assert len(_accounts.generate_utk()) == 21
    assert calls == [_accounts._RandomBytes.BLOCK]


def test_random_bytes_are_never_handed_out_twice() -> None:
    from pytest_mgmtauth._service.accounts import random_bytes, random_hex

    drawn = [random_bytes(16) for _ in range(600)]  # past a block
    assert len(set(drawn)) == 600
    assert all(len(d) == 16 for d in drawn)
    assert len(random_bytes(10_000)) == 10_000  # more than a block at once
    assert re.fullmatch(r"[0-9a-f]{16}", random_hex(8))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_process_does_not_repeat_its_parents_random_bytes() -> None:
    script = textwrap.dedent(
        """
        import os
        from pytest_mgmtauth._service.accounts import random_bytes
        random_bytes(1)  # a block read, most of it not handed out yet
        read, write = os.pipe()
        if os.fork() == 0:
            os.write(write, random_bytes(32))
            os._exit(0)
        os.wait()
        print(os.read(read, 32) != random_bytes(32))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "True"


def test_batched_draws_cover_the_alphabet_and_nothing_else() -> None:
    from pytest_mgmtauth._service.accounts import random_choices

    drawn = random_choices("abc", 3000)
    assert set(drawn) == set("abc")
    assert all(800 < drawn.count(c) < 1200 for c in "abc")


def test_batched_draws_take_alphabets_of_one_to_256_characters() -> None:
    from pytest_mgmtauth._service.accounts import random_choices

    assert random_choices("x", 5) == list("xxxxx")
    full = "".join(chr(c) for c in range(256))
    assert set(random_choices(full, 4000)) <= set(full)
    for size in (0, 257):
        with pytest.raises(ValueError, match="1 to 256 characters"):
            random_choices("y" * size, 1)


def test_required_characters_are_placed_once_each_after_the_first() -> None:
    from pytest_mgmtauth._service.accounts import _draw

    for _ in range(300):
        secret = _draw("ab", 12, "+&=%")
        assert secret[0] in "ab"
        assert sorted(c for c in secret if c not in "ab") == sorted("+&=%")
