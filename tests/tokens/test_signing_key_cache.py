"""The signing key: an ordinary RSA-4096 key kept in pytest's cache (0600, written whole),
checked when read, and replaced with a warning when it is no usable key; made once, in
one background thread; under xdist each worker gets a working key."""

from __future__ import annotations

import contextlib
import json
import os
import random
import stat
import threading
import warnings
from typing import TYPE_CHECKING

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from pytest_mgmtauth import SigningKeyCacheWarning
from pytest_mgmtauth._fake import key_cache
from pytest_mgmtauth._fake.key_cache import KEY_FILE, SigningKey, cached_key, load_key
from pytest_mgmtauth.plugin import _KEY_CACHE_DIR

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pytest_mgmtauth._fake.key_cache import KeyOutcome

KEY_ENTRY = (".pytest_cache", "d", _KEY_CACHE_DIR, KEY_FILE)


def _pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _prime(bits: int, rng: random.Random) -> int:
    """A probable prime of ``bits`` bits (Miller-Rabin, 20 bases)."""
    while True:
        n = rng.getrandbits(bits) | (1 << (bits - 1)) | 1
        d, r = n - 1, 0
        while d % 2 == 0:
            d, r = d // 2, r + 1
        for a in (rng.randrange(2, n - 1) for _ in range(20)):
            x = pow(a, d, n)
            if x in (1, n - 1):
                continue
            for _ in range(r - 1):
                x = pow(x, 2, n)
                if x == n - 1:
                    break
            else:
                break
        else:
            if (n - 1) % 65537:
                return n


def small_key_pem(bits: int = 512) -> bytes:
    """A valid RSA key of ``bits`` bits, smaller than cryptography generates (1024)."""
    rng = random.Random(bits)
    while True:
        p, q = _prime(bits // 2, rng), _prime(bits // 2, rng)
        if p != q and (p * q).bit_length() == bits:
            break
    d = pow(65537, -1, (p - 1) * (q - 1))
    numbers = rsa.RSAPrivateNumbers(
        p=p,
        q=q,
        d=d,
        dmp1=rsa.rsa_crt_dmp1(d, p),
        dmq1=rsa.rsa_crt_dmq1(d, q),
        iqmp=rsa.rsa_crt_iqmp(p, q),
        public_numbers=rsa.RSAPublicNumbers(65537, p * q),
    )
    return _pem(numbers.private_key())


def key_that_does_not_sign(pem: bytes) -> bytes:
    """``pem``'s key with its private exponents off by two: 4096 bits, wrong signatures
    (OpenSSL checks a CRT result and falls back to ``d``: all of them are off)."""
    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    n = key.private_numbers()
    broken = rsa.RSAPrivateNumbers(
        p=n.p,
        q=n.q,
        d=n.d ^ 2,
        dmp1=n.dmp1 ^ 2,
        dmq1=n.dmq1 ^ 2,
        iqmp=n.iqmp,
        public_numbers=n.public_numbers,
    )
    return _pem(broken.private_key(unsafe_skip_rsa_key_validation=True))


@pytest.fixture
def new_keys(monkeypatch: pytest.MonkeyPatch, default_key_pem: bytes) -> list[rsa.RSAPrivateKey]:
    """Key generation made instant (the session's key stands for each new one) and
    recorded."""
    made: list[rsa.RSAPrivateKey] = []
    key = load_key(default_key_pem)

    def new_key() -> rsa.RSAPrivateKey:
        made.append(key)
        return key

    monkeypatch.setattr(key_cache, "new_key", new_key)
    return made


def _mkdir(base: Path) -> Callable[[str], Path]:
    """As pytest's ``cache.mkdir``."""

    def mkdir(name: str) -> Path:
        path = base / name
        path.mkdir(exist_ok=True, parents=True)
        return path

    return mkdir


def _same(one: rsa.RSAPrivateKey, other: rsa.RSAPrivateKey) -> bool:
    return one.public_key().public_numbers() == other.public_key().public_numbers()


# -- the cache file ---------------------------------------------------------------------


def test_a_cold_cache_gets_a_new_key_owner_only_that_later_runs_read(
    tmp_path: Path, new_keys: list[rsa.RSAPrivateKey]
) -> None:
    old_umask = os.umask(0)
    try:
        key, problems = cached_key(_mkdir(tmp_path), "mgmtauth")()
    finally:
        os.umask(old_umask)
    assert problems == []
    assert len(new_keys) == 1
    entry = tmp_path / "mgmtauth" / KEY_FILE
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert [p.name for p in entry.parent.iterdir()] == [KEY_FILE]  # no temporary file
    again, problems = cached_key(_mkdir(tmp_path), "mgmtauth")()
    assert (problems, len(new_keys)) == ([], 1)  # read, not made
    assert _same(again, key)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (lambda pem: small_key_pem(512), "is a 512-bit RSA key, not 4096 bits"),
        (lambda pem: small_key_pem(2048), "is a 2048-bit RSA key, not 4096 bits"),
        (lambda pem: pem[: len(pem) // 2], "is not an unencrypted PEM private key"),
        (lambda pem: b"", "is not an unencrypted PEM private key"),
        (lambda pem: _pem(ec.generate_private_key(ec.SECP256R1())), "is not an RSA key"),
        (key_that_does_not_sign, "does not sign: its signature does not verify"),
    ],
    ids=["512-bit", "2048-bit", "torn", "empty", "not-rsa", "does-not-sign"],
)
def test_a_cached_key_that_is_no_usable_key_is_replaced_and_said(
    tmp_path: Path,
    new_keys: list[rsa.RSAPrivateKey],
    default_key_pem: bytes,
    content: Callable[[bytes], bytes],
    why: str,
) -> None:
    entry = tmp_path / "mgmtauth" / KEY_FILE
    entry.parent.mkdir()
    entry.write_bytes(content(default_key_pem))
    key, problems = cached_key(_mkdir(tmp_path), "mgmtauth")()
    assert len(problems) == 1
    assert problems[0].startswith(f"the signing key cached in {entry} {why}")
    assert problems[0].endswith(": pytest-mgmtauth replaced it with a new key")
    assert new_keys == [key]
    assert _same(load_key(entry.read_bytes()), key)


def test_a_directory_where_the_key_file_should_be_is_replaced_if_empty(
    tmp_path: Path, new_keys: list[rsa.RSAPrivateKey]
) -> None:
    entry = tmp_path / "mgmtauth" / KEY_FILE
    entry.mkdir(parents=True)
    key, problems = cached_key(_mkdir(tmp_path), "mgmtauth")()
    assert problems == [
        f"the signing key cached in {entry} is a directory, not a file: "
        "pytest-mgmtauth replaced it with a new key"
    ]
    assert _same(load_key(entry.read_bytes()), key)
    # Not empty: left alone, and the new key used all the same.
    entry.unlink()
    (entry / "something").mkdir(parents=True)
    key, problems = cached_key(_mkdir(tmp_path), "mgmtauth")()
    assert len(problems) == 2
    assert problems[1].startswith(f"pytest-mgmtauth cannot write its new signing key to {entry}")
    assert (entry / "something").is_dir()
    assert len(new_keys) == 2


#: Real seconds a read of the cache may take before the test fails: a hang guard.
READ_GUARD = 30.0


def _unblock(fifo: Path) -> None:
    """End a reader blocked on ``fifo`` (opening it for writing, then closing it)."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_in_place_of_the_key_file_is_replaced_not_read(
    tmp_path: Path, new_keys: list[rsa.RSAPrivateKey]
) -> None:
    # Issue 38, item 12: reading it blocked until something wrote to it: the whole run hung.
    entry = tmp_path / "mgmtauth" / KEY_FILE
    entry.parent.mkdir()
    os.mkfifo(entry)
    got: list[KeyOutcome] = []
    reader = threading.Thread(
        target=lambda: got.append(cached_key(_mkdir(tmp_path), "mgmtauth")()), daemon=True
    )
    reader.start()
    reader.join(READ_GUARD)
    if reader.is_alive():
        _unblock(entry)
        reader.join(READ_GUARD)
        pytest.fail("reading the cached key blocked on the FIFO")
    ((key, problems),) = got
    assert problems == [
        f"the signing key cached in {entry} is a named pipe (FIFO), not a regular file: "
        "pytest-mgmtauth replaced it with a new key"
    ]
    assert new_keys == [key]
    assert stat.S_ISREG(entry.stat().st_mode)
    assert _same(load_key(entry.read_bytes()), key)


def test_a_huge_file_in_place_of_the_key_file_is_replaced_unread(
    tmp_path: Path, new_keys: list[rsa.RSAPrivateKey], default_key_pem: bytes
) -> None:
    entry = tmp_path / "mgmtauth" / KEY_FILE
    entry.parent.mkdir()
    entry.write_bytes(default_key_pem + b"\n" * key_cache.MAX_KEY_FILE)
    key, problems = cached_key(_mkdir(tmp_path), "mgmtauth")()
    assert problems == [
        f"the signing key cached in {entry} is larger than 64 KiB: no PEM key is: "
        "pytest-mgmtauth replaced it with a new key"
    ]
    assert _same(load_key(entry.read_bytes()), key)
    # A key file of exactly the largest size is read.
    entry.write_bytes(default_key_pem.ljust(key_cache.MAX_KEY_FILE, b"\n"))
    again, problems = cached_key(_mkdir(tmp_path), "mgmtauth")()
    assert problems == []
    assert new_keys == [key]  # read, not made again
    assert _same(again, key)


def test_a_file_where_the_cache_directory_should_be_is_replaced(
    tmp_path: Path, new_keys: list[rsa.RSAPrivateKey]
) -> None:
    stands = tmp_path / "mgmtauth"
    stands.write_text("left by a crash")
    key, problems = cached_key(_mkdir(tmp_path), "mgmtauth")()
    assert problems == [
        f"{stands} was a file, not pytest-mgmtauth's directory in pytest's cache: "
        "pytest-mgmtauth replaced it with the directory and a new signing key"
    ]
    assert _same(load_key((stands / KEY_FILE).read_bytes()), key)


def test_without_a_usable_cache_directory_the_key_is_made_all_the_same(
    tmp_path: Path, new_keys: list[rsa.RSAPrivateKey]
) -> None:
    # pytest's own cache directory is a file: not ours to remove.
    (tmp_path / "d").write_text("not a directory")
    key, problems = cached_key(_mkdir(tmp_path / "d"), "mgmtauth")()
    assert new_keys == [key]
    assert len(problems) == 1
    assert problems[0].startswith("pytest-mgmtauth cannot keep its signing key in pytest's cache")
    assert (tmp_path / "d").read_text() == "not a directory"


# -- made once, in one background thread ---------------------------------------------------


class Making:
    """A ``make`` for :class:`SigningKey` that records the threads it runs in."""

    def __init__(self, key: rsa.RSAPrivateKey, problems: list[str] | None = None) -> None:
        self.key = key
        self.problems = problems or []
        self.threads: list[str] = []

    def __call__(self) -> KeyOutcome:
        self.threads.append(threading.current_thread().name)
        return self.key, list(self.problems)


def test_the_key_is_made_once_in_one_background_thread(rsa_key_2048: rsa.RSAPrivateKey) -> None:
    making = Making(rsa_key_2048)
    key = SigningKey(making)
    before = key.started
    key.start()
    key.start()
    assert (before, key.started) == (False, True)
    got: list[rsa.RSAPrivateKey] = []
    callers = [threading.Thread(target=lambda: got.append(key.key())) for _ in range(3)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join(10)
    assert got == [rsa_key_2048] * 3
    assert making.threads == ["mgmtauth-signing-key"]


def test_what_went_wrong_is_warned_once_in_the_thread_that_needs_the_key(
    rsa_key_2048: rsa.RSAPrivateKey,
) -> None:
    key = SigningKey(
        Making(rsa_key_2048, ["the cached key was bad"]), warning=SigningKeyCacheWarning
    )
    key.start()
    with pytest.warns(SigningKeyCacheWarning, match="^the cached key was bad$"):
        assert key.key() is rsa_key_2048
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert key.key() is rsa_key_2048


def test_an_error_while_making_the_key_is_raised_where_it_is_needed() -> None:
    def make() -> KeyOutcome:
        raise OSError("disk on fire")

    key = SigningKey(make)
    key.start()
    for _ in range(2):
        with pytest.raises(OSError, match="disk on fire"):
            key.key()


def test_no_thread_to_be_had_makes_the_key_where_it_is_needed(
    rsa_key_2048: rsa.RSAPrivateKey, refused_threads: set[str]
) -> None:
    refused_threads.add("mgmtauth-signing-key")
    making = Making(rsa_key_2048)
    key = SigningKey(making)
    key.start()
    assert key.key() is rsa_key_2048
    assert making.threads == [threading.current_thread().name]


# -- in a user's runs -----------------------------------------------------------------------

#: A test that gets a token and uses it: a key that cannot sign makes it fail.
USES_A_TOKEN = """
import requests

def test_token(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/api/ping").respond_with_json({"ok": True})
    answer = requests.post(
        mgmt_server.url + "/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    )
    assert answer.status_code == 200, answer.text
    token = answer.json()["token"]
    ping = requests.get(mgmt_server.url + "/api/ping", headers={"Authorization": f"Bearer {token}"})
    assert ping.status_code == 200, ping.text

def test_again(mgmt_server, mgmt_account):
    pass
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:hypothesispytest", *args)


def test_a_512_bit_key_in_the_cache_is_replaced_with_a_warning_and_the_tests_pass(
    pytester: pytest.Pytester,
) -> None:
    # The attack run's finding: such a key made every grant a 500, run after run.
    pytester.makepyfile(test_uses=USES_A_TOKEN)
    entry = pytester.path.joinpath(*KEY_ENTRY)
    entry.parent.mkdir(parents=True)
    entry.write_bytes(small_key_pem(512))
    result = _run(pytester)
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*SigningKeyCacheWarning: the signing key cached in *rsa4096.pem is a "
            "512-bit RSA key, not 4096 bits: pytest-mgmtauth replaced it with a new key"
        ]
    )
    pem = entry.read_bytes()
    assert load_key(pem).key_size == 4096
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    # The key is cached across runs: the next run reads it, and says nothing.
    result = _run(pytester)
    result.assert_outcomes(passed=2)
    assert entry.read_bytes() == pem


def test_a_file_where_the_cache_directory_should_be_is_replaced_and_the_tests_pass(
    pytester: pytest.Pytester,
) -> None:
    # The attack run's other finding: this made every test error.
    pytester.makepyfile(test_uses=USES_A_TOKEN)
    stands = pytester.path.joinpath(*KEY_ENTRY[:-1])
    stands.parent.mkdir(parents=True)
    stands.write_text("not a directory")
    result = _run(pytester)
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(["*SigningKeyCacheWarning: *mgmtauth was a file, not *"])
    assert load_key(pytester.path.joinpath(*KEY_ENTRY).read_bytes()).key_size == 4096


def test_under_filterwarnings_error_a_replaced_key_errors_one_test_unless_ignored(
    pytester: pytest.Pytester,
) -> None:
    # As pytest's own cache warnings do; the documented filter lets the suite pass.
    pytester.makepyfile(test_uses=USES_A_TOKEN)
    entry = pytester.path.joinpath(*KEY_ENTRY)
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"garbage")
    result = _run(pytester, "-W", "error")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*SigningKeyCacheWarning: the signing key cached in *"])
    entry.write_bytes(b"garbage")
    result = _run(pytester, "-W", "error", "-W", "ignore::pytest_mgmtauth.SigningKeyCacheWarning")
    result.assert_outcomes(passed=2)


def test_without_pytests_cache_the_key_lives_in_memory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_uses=USES_A_TOKEN)
    result = _run(pytester, "-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=2)
    assert not pytester.path.joinpath(".pytest_cache").exists()


def test_under_xdist_each_worker_gets_a_working_key_and_its_own_server(
    pytester: pytest.Pytester,
) -> None:
    # A cold cache: each worker may make its own key; the last one written stays.
    pytester.makepyfile(
        test_workers="""
        import json, os
        import pytest, requests

        @pytest.mark.parametrize("n", range(6))
        def test_one(mgmt_server, mgmt_account, n, worker_id):
            assert mgmt_server.events == []  # fresh state in every test
            mgmt_server.route("GET", "/api/ping").respond_with_json({"ok": True})
            reply = requests.post(
                mgmt_server.url + "/v2/auth",
                data={"username": mgmt_account.username, "key": mgmt_account.api_key},
            )
            assert reply.status_code == 200
            bearer = {"Authorization": "Bearer " + reply.json()["token"]}
            assert requests.get(mgmt_server.url + "/api/ping", headers=bearer).status_code == 200
            with open(f"seen-{worker_id}-{n}.json", "w") as f:
                json.dump({"worker": worker_id, "url": mgmt_server.url}, f)
        """
    )
    result = _run(pytester, "-n", "2")
    result.assert_outcomes(passed=6)
    by_worker: dict[str, set[str]] = {}
    for seen in pytester.path.glob("seen-*.json"):
        entry = json.loads(seen.read_text())
        by_worker.setdefault(entry["worker"], set()).add(entry["url"])
    assert set(by_worker) == {"gw0", "gw1"}
    assert all(len(urls) == 1 for urls in by_worker.values())  # one server per worker
    assert by_worker["gw0"] != by_worker["gw1"]  # and not the same one
    assert load_key(pytester.path.joinpath(*KEY_ENTRY).read_bytes()).key_size == 4096


#: The key made (so cryptography imported, before the fix: in the key's thread) only once
#: a test that uses pytester runs: pytester drops, after it, every module first imported
#: meanwhile, in any thread.
KEY_MADE_DURING_A_PYTESTER_TEST = """
import threading

# Imported before the pytester test, as the key's thread had begun importing when the
# run reported it: the packages stay, their submodules made meanwhile are dropped from
# sys.modules but stay their attributes, and the two halves no longer match.
import cryptography.hazmat.primitives.asymmetric

from pytest_mgmtauth._fake import key_cache
from pytest_mgmtauth.plugin import _KEY

pytester_test_runs = threading.Event()
_fresh_key = key_cache.fresh_key


def made_once_the_pytester_test_runs():
    pytester_test_runs.wait(60)
    return _fresh_key()


# Before the plugin starts the key (at the end of collection); -p no:cacheprovider: the
# key is a fresh one, kept in memory.
key_cache.fresh_key = made_once_the_pytester_test_runs


def test_first_uses_pytester(pytester, pytestconfig):
    pytester_test_runs.set()
    pytestconfig.stash[_KEY].key()  # made now, while pytester's snapshot holds
"""


def test_a_key_made_while_a_pytester_test_runs_keeps_every_later_grant_working(
    pytester: pytest.Pytester,
) -> None:
    # Issue 38, item 15: every later grant of the run answered 500 (TypeError: Expected
    # instance of hashes.HashAlgorithm): the key's thread imported cryptography while
    # the pytester test ran, and pytester dropped those modules after it.
    pytester.makepyfile(test_a_first=KEY_MADE_DURING_A_PYTESTER_TEST, test_b_uses=USES_A_TOKEN)
    result = _run(pytester, "-p", "no:cacheprovider", "-p", "pytester")
    result.stdout.no_fnmatch_line("*Expected instance of hashes.HashAlgorithm*")
    result.assert_outcomes(passed=3)
