"""Accounts of the fake service and the generation of their credentials."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import string
import threading
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import unquote_to_bytes

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .limits import SecretKind

# Real API keys are about 60 characters of letters, digits and punctuation. The
# punctuation below is what breaks clients that forget to URL-encode the form body:
# '+' becomes a space, '&' splits the field, '=' and '%' confuse the parser, '/' and
# the rest survive. Every generated key contains all of _MUST_ENCODE.
_MUST_ENCODE = "+&=%/"
_KEY_ALPHABET = string.ascii_letters + string.digits + "+&=%/!*-_.~"
_KEY_LENGTH = 60
_PASSWORD_ALPHABET = string.ascii_letters + string.digits + "+&=%!#"


def fingerprint(secret: str) -> str:
    """A short, stable stand-in for a secret in messages: never the secret itself."""
    return "#" + hashlib.sha256(secret.encode()).hexdigest()[:6]


class _RandomBytes:
    """Bytes from the operating system's CSPRNG (``os.urandom``, as ``secrets`` reads
    them), read ahead a block at a time: a test's secrets and ids take a few hundred
    bytes in five or six draws, each a system call before. Bytes handed out are
    dropped; a forked process starts afresh, so that it never repeats its parent's."""

    #: Bytes read at a time.
    BLOCK = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._block = b""
        self._at = 0

    def take(self, count: int) -> bytes:
        with self._lock:
            if count > len(self._block) - self._at:
                self._block, self._at = os.urandom(max(self.BLOCK, count)), 0
            taken = self._block[self._at : self._at + count]
            self._at += count
            return taken

    def forget(self) -> None:
        self._block, self._at = b"", 0
        self._lock = threading.Lock()  # a fork may have copied it held


_random = _RandomBytes()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_random.forget)


def random_bytes(count: int) -> bytes:
    """``count`` random bytes, as unguessable as ``secrets.token_bytes(count)``."""
    return _random.take(count)


def random_hex(count: int) -> str:
    """``2 * count`` hex digits from ``count`` random bytes (as ``secrets.token_hex``)."""
    return _random.take(count).hex()


def _generate_with(alphabet: str, length: int, required: str) -> str:
    # A '%' followed by a hex pair like 'C3' makes the un-encoded body undecodable (a
    # 400) instead of a wrong key (1401 with the diagnosis): keep the mistake's symptom
    # the same for every generated secret, so a test of it is not flaky.
    while True:
        secret = _draw(alphabet, length, required)
        try:
            unquote_to_bytes(secret).decode("utf-8")
        except UnicodeDecodeError:
            continue
        return secret


def random_choices(alphabet: str, count: int) -> list[str]:
    """``count`` characters drawn uniformly from ``alphabet`` (at most 256 characters)
    with ``secrets``' entropy, from one :func:`random_bytes` call instead of one system
    call per character (every test generates accounts). One byte per draw; values past the
    largest multiple of the alphabet's size are drawn again (no bias)."""
    size = len(alphabet)
    if not 0 < size <= 256:
        raise ValueError(f"an alphabet of 1 to 256 characters, not {size}")
    limit = 256 - 256 % size
    out: list[str] = []
    while len(out) < count:
        need = count - len(out)
        out += [alphabet[b % size] for b in random_bytes(need + need // 4 + 4) if b < limit]
    del out[count:]
    return out


def _draw(alphabet: str, length: int, required: str) -> str:
    chars = random_choices(alphabet, length)
    # Each required character once, at places drawn among all but the first (two bytes
    # a place: the bias of ``% len(places)`` is under 0.1%); the first character is
    # alphanumeric, so that the key never starts with a character a shell eats.
    extra = random_bytes(2 * len(required) + 2)
    places = list(range(1, length))
    for i, char in enumerate(required):
        chars[places.pop((extra[2 * i] << 8 | extra[2 * i + 1]) % len(places))] = char
    if not chars[0].isalnum():
        letters = [c for c in alphabet if c.isalnum()]
        chars[0] = letters[(extra[-2] << 8 | extra[-1]) % len(letters)]
    return "".join(chars)


def generate_api_key() -> str:
    return _generate_with(_KEY_ALPHABET, _KEY_LENGTH, _MUST_ENCODE + "aZ9")


def generate_password() -> str:
    return _generate_with(_PASSWORD_ALPHABET, 20, "+&%aZ9")


def generate_username(serial: int) -> str:
    return f"user{serial}.{random_hex(3)}@example.com"


_UTK_ALPHABET = string.ascii_uppercase + string.digits
_UTK_LENGTH = 21


def generate_session_id() -> str:
    """A JSESSIONID in the published shape: a decimal integer, possibly negative (a
    signed 64-bit value of :func:`random_bytes`: as unguessable as 64 random bits)."""
    return str(int.from_bytes(random_bytes(8), "big", signed=True))


def generate_utk() -> str:
    """A utk in the published shape: 21 upper-case letters and digits (~108 random bits)."""
    return "".join(random_choices(_UTK_ALPHABET, _UTK_LENGTH))


#: A v3 scope an account may get tokens for: (account, profile); profile "*" is any.
Scope = tuple[str, str]


class Profile(NamedTuple):
    """The v3 account and profile a test uses (the ``mgmt_profile`` fixture): ``acme``
    and ``main`` against the fake; ``MGMTAUTH_LIVE_ACCOUNT`` and ``MGMTAUTH_LIVE_PROFILE``
    in a live run."""

    account: str
    """The account name of v3 paths and OAuth scopes."""
    profile: str
    """The profile name."""


#: The account and profile a test against the fake uses (our choice, as in v3's docs).
TEST_PROFILE = Profile("acme", "main")

ANY_PROFILE = "*"


def parse_profiles(profiles: object) -> frozenset[Scope] | None:
    """``add_account(profiles=...)``: ``None`` (any pair), or an iterable of
    ``"account/profile"`` strings or ``(account, profile)`` tuples; ``"account/*"`` is
    every profile of the account."""
    if profiles is None:
        return None
    if isinstance(profiles, str) or (
        isinstance(profiles, tuple)
        and len(profiles) == 2
        and all(isinstance(p, str) and "/" not in p for p in profiles)
    ):
        raise TypeError(
            f"add_account(profiles={profiles!r}) takes a list of 'account/profile' strings "
            f"or (account, profile) tuples; did you mean profiles=[{profiles!r}]?"
        )
    try:
        items = list(profiles)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(
            f"add_account(profiles=...) takes a list of 'account/profile' strings, got {profiles!r}"
        ) from None
    scopes: set[Scope] = set()
    for item in items:
        pair: tuple[object, ...]
        if isinstance(item, str):
            pair = tuple(item.split("/")) if item.count("/") == 1 else (item,)
        elif isinstance(item, (tuple, list)):
            pair = tuple(item)
        else:
            pair = (item,)
        if len(pair) != 2 or not all(isinstance(p, str) and p and "/" not in p for p in pair):
            raise ValueError(
                f"add_account(profiles=...): {item!r} is not 'account/profile' or "
                "(account, profile) with two non-empty names ('account/*': any profile)"
            )
        scopes.add((str(pair[0]), str(pair[1])))
    return frozenset(scopes)


def format_scopes(scopes: frozenset[Scope] | None) -> str:
    if scopes is None:
        return "any"
    return ", ".join(f"{a}/{p}" for a, p in sorted(scopes)) or "none"


@dataclasses.dataclass(frozen=True)
class Account:
    """A user of the fake service (``mgmt_server.add_account``, the ``mgmt_account``
    fixture), a frozen dataclass. Its ``repr`` shows fingerprints (``#`` and six hex
    digits of a SHA-256) instead of the key and password, so it is safe in logs and
    failure messages.
    """

    username: str
    """The e-mail address the client sends as ``username``. Generated:
    ``user<N>.<6 hex digits>@example.com``, ``N`` counting accounts in the test."""
    api_key: str = dataclasses.field(repr=False)
    """The API key for ``/v2/auth``. Generated: 60 characters of letters, digits and
    ``+ & = % / ! * - _ . ~``, always including each of ``+ & = % /`` (so a client that
    does not URL-encode it fails), starting with a letter or digit, and never with a
    ``%XX`` that is not UTF-8 (so that mistake always gets the same 1401, never a 400)."""
    password: str = dataclasses.field(repr=False)
    """The password for ``/v1/login``. Generated: 20 characters of letters, digits and
    ``+ & = % ! #``, always including ``+ & %``, with the same ``%XX`` rule."""
    permissions: frozenset[str] | None = None
    """``None`` (the default): every permission; else the frozen set of the permission
    names the account has (empty: none)."""
    profiles: frozenset[Scope] | None = None
    """``None`` (the default): any v3 ``(account, profile)`` pair; else the frozen set of
    pairs it may get v3 tokens for (profile ``"*"``: any profile of that account)."""

    def may_use_profile(self, account: str, profile: str) -> bool:
        return self.profiles is None or bool(
            {(account, profile), (account, ANY_PROFILE)} & self.profiles
        )

    def secret(self, kind: SecretKind) -> str:
        """Its secret of ``kind``: the password, else the API key."""
        return self.password if kind == "password" else self.api_key

    def has_permission(self, permission: str | None) -> bool:
        """Whether the account may call a route that needs ``permission``."""
        return permission is None or self.permissions is None or permission in self.permissions

    def __repr__(self) -> str:
        # Secrets never appear whole in output users paste into bug reports.
        perms = "all" if self.permissions is None else sorted(self.permissions)
        profiles = "" if self.profiles is None else f", profiles={format_scopes(self.profiles)}"
        return (
            f"Account(username={self.username!r}, api_key={fingerprint(self.api_key)}, "
            f"password={fingerprint(self.password)}, permissions={perms}{profiles})"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis (and IPython) print dataclasses field by field, bypassing __repr__:
        # a failing property test would show the key and password whole.
        printer.text(repr(self))


def check_username(username: object) -> None:
    """ValueError unless ``username`` is a username the service could have: a non-empty
    str that is an e-mail address."""
    if not isinstance(username, str) or not username:
        raise ValueError(f"add_account(username=...) must be a non-empty str, got {username!r}")
    if "@" not in username:
        raise ValueError(
            f"add_account(username={username!r}): usernames of the service are e-mail "
            "addresses; pass one like 'someone@example.com'"
        )


def make_account(
    serial: int,
    username: str | None,
    api_key: str | None,
    password: str | None,
    permissions: Iterable[str] | None,
    profiles: object = None,
) -> Account:
    if username is not None:
        check_username(username)
    for name, value in (("api_key", api_key), ("password", password)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"add_account({name}=...) must be a non-empty str, got {value!r}")
    if isinstance(permissions, str):
        raise TypeError(
            f"add_account(permissions={permissions!r}) takes a list of permission names, "
            f"not a str; did you mean permissions=[{permissions!r}]?"
        )
    return Account(
        username=username if username is not None else generate_username(serial),
        api_key=api_key if api_key is not None else generate_api_key(),
        password=password if password is not None else generate_password(),
        permissions=None if permissions is None else frozenset(permissions),
        profiles=parse_profiles(profiles),
    )
