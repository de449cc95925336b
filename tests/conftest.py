"""Shared fixtures of the three test layers.

Keys are the expensive part of the fake, so each is made once per test session:
a 2048-bit key for the domain tests (fast, tokens of ~500 characters) and the plugin's
own 4096-bit default key, read from (or written to) the same pytest cache entry the
plugin uses, so the wire tests, the pytester runs and a rerun all share one key.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

# The plugin imports these only when a run needs them. Imported here, before any
# in-process pytester run: pytester restores sys.modules after each run, so a module
# first imported inside one would be imported anew by the next, with new classes and
# stash keys that the modules kept across runs do not know.
import pytest_mgmtauth._glue.report
import pytest_mgmtauth._glue.sweep
import pytest_mgmtauth._verdicts.sweep_verdict  # noqa: F401
from pytest_mgmtauth import Account, MgmtServer
from pytest_mgmtauth._fake.key_cache import KEY_FILE, key_pem
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock
from pytest_mgmtauth._service.tokens import TokenSigner
from pytest_mgmtauth.plugin import _KEY_CACHE_DIR, _key_of

FORM_TYPE = "application/x-www-form-urlencoded"
#: How working clients of the real service find the session id in the Set-Cookie lines.
JSESSIONID_LINE = re.compile(r"^JSESSIONID=([^;]*);")


# -- keys and signers (once per session) ---------------------------------------------


@pytest.fixture(scope="session")
def rsa_key_2048() -> rsa.RSAPrivateKey:
    """A small key for domain tests: same algorithm, a tenth of the generation time."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def signer(rsa_key_2048: rsa.RSAPrivateKey) -> TokenSigner:
    return TokenSigner(rsa_key_2048)


@pytest.fixture(scope="session")
def other_signer() -> TokenSigner:
    """A signer with a different key (same issuer): its tokens must not verify."""
    return TokenSigner(rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture(scope="session")
def default_key_pem(pytestconfig: pytest.Config) -> bytes:
    """The plugin's default (4096-bit) signing key: the session's own, the one its
    ``mgmt_server`` signs with (read from pytest's cache, or made and kept there);
    pytester runs are seeded with it (see ``seed_key``).
    """
    return key_pem(_key_of(pytestconfig).key())


@pytest.fixture
def seed_key(default_key_pem: bytes) -> Callable[[pytest.Pytester], None]:
    """Write the session's key into a pytester directory's cache, so an inner run does
    not spend half a second generating its own 4096-bit key."""

    def seed(pytester: pytest.Pytester) -> None:
        entry = pytester.path.joinpath(".pytest_cache", "d", _KEY_CACHE_DIR, KEY_FILE)
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_bytes(default_key_pem)

    return seed


@pytest.fixture(scope="session", autouse=True)
def _modules_inner_runs_import() -> None:
    """Import what inner runs would import, before any ``pytester`` exists.

    Autouse: every test that uses plain ``pytester`` needs it too, not only
    ``mgmt_pytester`` (without it ``pytest tests/concurrency`` alone failed).

    pytester restores ``sys.modules`` after each test, dropping every module imported
    while it existed; hypothesis's plugin imports hypothesis at the end of every inner
    run: two seconds each time without bytecode caching. Imported here (a session
    fixture, so before the function-scoped ``pytester`` takes its snapshot), it stays.
    The plugin imports PyJWT, cryptography, freezegun and trustme on first use: an inner
    run that first imports them leaves half of cryptography re-imported afterwards, and
    a later trustme certificate then fails (ExtensionNotFound: SubjectKeyIdentifier).
    httpx imports httpcore at its first request and keeps httpcore's exception classes
    from then on: an inner run that first sends one leaves httpx mapping classes that the
    next import of httpcore no longer raises, and a later ``httpx.ReadTimeout`` arrived
    as a bare ``httpcore.ReadTimeout``.
    """
    import anyio._backends._asyncio  # noqa: F401
    import cryptography.x509  # noqa: F401
    import freezegun  # noqa: F401
    import httpcore._backends.anyio  # noqa: F401
    import hypothesis  # noqa: F401
    import jwt  # noqa: F401
    import trustme  # noqa: F401


#: Plugins a user may have installed beside ours that change what an inner run prints or
#: the order it runs in (pytest-randomly reorders, pytest-pretty replaces the summary line
#: that ``assert_outcomes`` reads, pytest-asyncio warns about its unset loop scope,
#: pytest-rerunfailures adds its own lines and thread). The inner runs check the plugin's
#: own output, so they run without them; blocking a plugin that is not installed is a no-op.
INNER_RUN_BLOCKED = ("randomly", "pretty", "asyncio", "rerunfailures")


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's ``pytester``, its inner runs (in process and subprocesses, xdist's workers
    too) without the plugins of ``INNER_RUN_BLOCKED``. pytester clears PYTEST_ADDOPTS
    when it starts, so this is the only value the inner runs see."""
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(f"-p no:{name}" for name in INNER_RUN_BLOCKED))
    return pytester


@pytest.fixture
def mgmt_pytester(
    _modules_inner_runs_import: None,
    pytester: pytest.Pytester,
    seed_key: Callable[[pytest.Pytester], None],
) -> pytest.Pytester:
    """``pytester`` for in-process runs of a user's suite, made cheap: the inner run's
    cache holds the session's signing key, and its heavy imports are done once."""
    seed_key(pytester)
    return pytester


# -- a process at its thread limit ---------------------------------------------------


@pytest.fixture
def refused_threads(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Names of threads whose start raises, as at the process's thread limit; the test
    adds and removes names as it goes."""
    refused: set[str] = set()
    start = threading.Thread.start

    def start_unless_refused(thread: threading.Thread) -> None:
        if thread.name in refused:
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_unless_refused)
    return refused


# -- domain --------------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def make_service(signer: TokenSigner, clock: ManualClock) -> Callable[..., AuthService]:
    """``make_service(**options)``: a fresh AuthService on the manual clock."""

    def make(**options: Any) -> AuthService:
        return AuthService(Options(**options), signer, clock)

    return make


@pytest.fixture
def service(make_service: Callable[..., AuthService]) -> AuthService:
    return make_service()


# -- wire ----------------------------------------------------------------------------


@pytest.fixture
def http() -> Iterator[requests.Session]:
    """A requests session that ignores the environment's CA bundle variables."""
    with requests.Session() as session:
        session.trust_env = False
        yield session


@pytest.fixture
def get_token(mgmt_server: MgmtServer, http: requests.Session) -> Callable[[Account], str]:
    """A bearer token for an account, obtained the way a correct client does."""

    def get(account: Account) -> str:
        response = http.post(
            f"{mgmt_server.url}/v2/auth",
            data={"username": account.username, "key": account.api_key},
        )
        assert response.status_code == 200, response.text
        token: str = response.json()["token"]
        return token

    return get


@pytest.fixture
def v1_login(
    mgmt_server: MgmtServer, http: requests.Session
) -> Callable[[Account], tuple[str, str]]:
    """``(JSESSIONID, utk)`` of a new v1 session, taken from the answer as working
    clients of the real service do (regex over the Set-Cookie lines)."""

    def login(account: Account) -> tuple[str, str]:
        response = http.post(
            f"{mgmt_server.url}/v1/login",
            data={"username": account.username, "password": account.password},
        )
        assert response.status_code == 200, response.text
        for line in response.raw.headers.getlist("Set-Cookie"):
            match = JSESSIONID_LINE.match(line)
            if match:
                return match.group(1), response.json()["utk"]
        raise AssertionError(f"no JSESSIONID line in {response.headers!r}")

    return login


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in tests/hostile/conftest.py: pytest loads this conftest at startup, so
    # the option works from the repository root too (`pytest --mgmtauth-hostile-examples=N`).
    parser.addoption(
        "--mgmtauth-hostile-examples",
        type=int,
        default=None,
        help="generated requests per hostile fuzz test (default 1000, "
        "or $MGMTAUTH_HOSTILE_EXAMPLES)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # As pyproject's filterwarnings ignores churn and expired-credential warnings: many
    # of our own tests send wrong credentials on purpose (hostile clients, wire
    # refusals). The teardown check's own tests run pytester with their own settings.
    config.addinivalue_line("filterwarnings", "ignore::pytest_mgmtauth.RefusedCallWarning")
