"""``mgmtauth-server``: the fake as a process, for clients in any language.

The same fake the ``mgmt_server`` fixture gives (the same endpoints, tokens, sessions,
lockout, throttling and faults) on a host and port of your choice, with a clock of its
own that the control API under ``/_mgmtauth/`` advances. See docs/standalone.md.
"""

from __future__ import annotations

import dataclasses
import math
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._fake.key_cache import (
    KeyOutcome,
    KeyProblem,
    SigningKey,
    key_pem,
    load_key,
    new_key,
    read_key_file,
    write_private_file,
)
from .._fake.server import MgmtServer
from .._fake.session import SessionResources
from .._http.app import CONTROL_PREFIX
from .._service.timeline import ManualClock, OffsetClock
from .._verdicts import findings
from .control import CHECK_SWITCHES, ControlAPI
from .messages import (
    ACCOUNT_FIELDS,
    CLIENT_FIELDS,
    Body,
    ControlError,
    account_fields,
    account_json,
    client_fields,
    client_json,
    loads_standard,
    options_json,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .. import OAuthClient
    from .._service.accounts import Account
    from .._service.options import Options

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
#: How often the main thread looks for a stop request, in seconds.
STOP_POLL = 0.1


class UsageError(Exception):
    """Bad command line or accounts file: reported in one line, exit status 2."""


@dataclasses.dataclass(frozen=True)
class AccountSpec:
    username: str | None = None
    api_key: str | None = None
    password: str | None = None
    permissions: tuple[str, ...] | None = None
    #: v3 ``"account/profile"`` pairs the account may get tokens for; None: any.
    profiles: tuple[str, ...] | None = None


def _json(text: str | bytes, where: str) -> object:
    try:
        return loads_standard(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, NotStandardJSON...
        raise UsageError(f"{where}: not valid JSON ({exc})") from None


def _fields(
    data: object, where: str, what: str, known: tuple[str, ...], read: Callable[[Body], Any]
) -> Any:
    """``data`` read by ``read`` as ``what``, a JSON object of the fields ``known``;
    UsageError saying what is off."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}: {what} is a JSON object with {', '.join(known)}")
    try:
        return read(Body(where, data, known))
    except ControlError as exc:
        raise UsageError(exc.message) from None


def _spec_from_json(data: object, where: str) -> AccountSpec:
    return AccountSpec(**_fields(data, where, "an account", ACCOUNT_FIELDS, account_fields))


def parse_account(text: str) -> AccountSpec:
    """``--account``: an e-mail address, or a JSON object with the account's fields."""
    if text.lstrip().startswith("{"):
        return _spec_from_json(_json(text, f"--account {text!r}"), "--account")
    return AccountSpec(username=text)


def read_accounts_file(path: str) -> list[AccountSpec]:
    """``--accounts-file``: a JSON list of account objects (or ``{"accounts": [...]}``)."""
    try:
        with open(path, "rb") as handle:
            data = _json(handle.read(), f"--accounts-file {path}")
    except OSError as exc:
        raise UsageError(f"--accounts-file {path}: {exc.strerror or exc}") from None
    if isinstance(data, dict) and set(data) == {"accounts"}:
        data = data["accounts"]
    if not isinstance(data, list):
        raise UsageError(f"--accounts-file {path}: expected a JSON list of account objects")
    return [
        _spec_from_json(item, f"--accounts-file {path}, account {i + 1}")
        for i, item in enumerate(data)
    ]


@dataclasses.dataclass(frozen=True)
class ClientSpec:
    """``--client``: an OAuth client; what is left out is generated (``scopes``: the
    default scope)."""

    scopes: tuple[str, ...] | None = None
    client_id: str | None = None
    client_secret: str | None = None


def parse_client(text: str) -> ClientSpec:
    """``--client``: a JSON object like ``{"scopes": ["acme:main:tiq:2026-07:profiles:read"]}``
    (``client_id`` and ``client_secret`` optional)."""
    data = _json(text, f"--client {text!r}")
    return ClientSpec(**_fields(data, "--client", "an OAuth client", CLIENT_FIELDS, client_fields))


def parse_route(text: str) -> tuple[str, str]:
    """``--route``: ``"METHOD /path"``, or just ``/path`` for GET."""
    parts = text.split()
    if len(parts) == 1:
        parts = ["GET", parts[0]]
    if len(parts) != 2 or not parts[1].startswith("/"):
        raise UsageError(f"--route {text!r}: expected 'METHOD /path', e.g. 'GET /v2/things'")
    return parts[0].upper(), parts[1]


def _file_key(path: str) -> Callable[[], KeyOutcome]:
    """The signing key kept in ``path``, so that a restart skips the key generation:
    made and written there (owner-only) if the file does not exist."""

    def make() -> KeyOutcome:
        try:  # reading the file, or making it
            try:
                pem = read_key_file(Path(path))
            except FileNotFoundError:
                key = new_key()
                write_private_file(Path(path), key_pem(key))
                return key, []
        except OSError as exc:
            raise UsageError(f"--key-file {path}: {exc.strerror or exc}") from None
        except KeyProblem as problem:  # a FIFO, a device, a huge file: never read whole
            raise UsageError(
                f"--key-file {path} {problem}: pass the path of a key file, or a path that "
                "does not exist yet, and the key is made there"
            ) from None
        try:
            # Any size: a key of the user's own is used as it is.
            return load_key(pem, bits=None), []
        except KeyProblem as problem:
            # Never overwrite a file we did not make: it may be something else entirely.
            raise UsageError(
                f"--key-file {path} is not a private key made by mgmtauth-server (it "
                f"{problem}); pass a path that does not exist yet, and the key is made there"
            ) from None

    return make


class StandaloneServer:
    """One fake at a time on one socket; ``reset()`` swaps in a fresh one."""

    def __init__(
        self,
        options: Options,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        accounts: Sequence[AccountSpec] = (AccountSpec(),),
        routes: Sequence[tuple[str, str]] = (),
        key_file: str | None = None,
        frozen_clock: bool = False,
        allowed_hosts: Sequence[str] = (),
        clients: Sequence[ClientSpec] = (),
    ) -> None:
        self.options = options
        self.clock: ManualClock | OffsetClock = (
            # A whole second, so that tokens issued before the first advance live
            # exactly token_ttl (iat is whole seconds).
            ManualClock(math.floor(time.time())) if frozen_clock else OffsetClock()
        )
        self._host, self._port = host, port
        self._allowed_hosts = tuple(allowed_hosts)
        self._pool = SessionResources(
            SigningKey(_file_key(key_file)) if key_file else None, host=host, port=port
        )
        #: The startup accounts and clients: as given, then as made (see _new_fake).
        self._accounts: Sequence[AccountSpec | Account] = list(accounts)
        self._clients: Sequence[ClientSpec | OAuthClient] = list(clients)
        self._routes = list(routes)
        self._fake: MgmtServer | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Listen and set up the startup accounts and routes; OSError if the port is taken."""
        self._pool.signer  # noqa: B018  (generate or load the key before listening)
        if self._port:
            # Werkzeug answers a taken port with sys.exit(1) and its own text; find out
            # first, so that main() can say what to do instead.
            family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
            socket.create_server((self._host, self._port), family=family).close()
        # Listening from here on, but accepting no connection until everything is in
        # place (FakeApp.open): a client polling the control API or the auth endpoints
        # right after start waits for a real answer instead of a 503, an unknown-route
        # 404 or a 401 for a startup account not added yet.
        http = self._pool.server(https=self.options.https)
        http.app.defer_opening()
        http.app.mount(
            CONTROL_PREFIX,
            ControlAPI(
                fake=lambda: self.fake,
                clock=self.clock,
                reset=self.reset,
                check=self.check,
                host=self._host,
                allowed_hosts=self._allowed_hosts,
            ),
        )
        self._fake = self._new_fake()
        self._fake.take_over(None)  # under --intercept, the proxy accepts from here on
        http.app.open()

    def _new_fake(self) -> MgmtServer:
        """A fake with the startup accounts, clients and routes, not answering yet: the
        server's requests (and the proxy's, under --intercept) go on to the previous
        one, or wait, until :meth:`MgmtServer.take_over`."""
        fake = MgmtServer(self.options, self._pool, clock=self.clock, bind=False)
        # At startup the accounts come from --account and the clients from --client; a
        # reset re-adds the very credentials generated then, so clients keep working.
        self._accounts = [
            fake.add_account(**{name: getattr(a, name) for name in ACCOUNT_FIELDS})
            for a in self._accounts
        ]
        self._clients = [
            fake.add_client(**{name: getattr(c, name) for name in CLIENT_FIELDS})
            for c in self._clients
        ]
        for method, path in self._routes:
            fake.route(method, path).respond_with_json({"ok": True, "route": f"{method} {path}"})
        return fake

    @property
    def fake(self) -> MgmtServer:
        fake = self._fake
        if fake is None:
            raise RuntimeError("the standalone server is not started")
        return fake

    def reset(self) -> None:
        """Fresh state: the startup accounts (with their startup credentials) and routes;
        no tokens, sessions, events or faults. The clock keeps its time."""
        with self._lock:
            old = self._fake
            # Made whole before it answers: requests meanwhile get the old state, never
            # a state without the startup accounts (issue 38, item 11).
            fake = self._new_fake()
            self._fake = fake
            fake.take_over(old)  # old's secrets are still secrets

    def check(self, counted: dict[str, bool] | None = None) -> dict[str, Any]:
        """The verdicts since the last reset (``GET /_mgmtauth/check``), as JSON;
        ``counted``: whether each kind of finding counts (default: as without switches)."""
        if counted is None:
            counted = dict(CHECK_SWITCHES.values())
        # A long timeline in a message is cut; say where a client in any language
        # finds the whole of it.
        evidence = dataclasses.replace(
            self.fake.evidence(), whole_timeline=f"GET {CONTROL_PREFIX}/timeline"
        )
        found = findings.findings(evidence, kinds=[kind for kind, on in counted.items() if on])
        return {
            "ok": not found,
            "findings": [dataclasses.asdict(f) for f in found],
            "counts": findings.finding_counts(evidence),
            "counted": {kind: counted[kind] for kind in findings.KINDS if kind in counted},
        }

    @property
    def url(self) -> str:
        return self.fake.url

    def stop(self) -> None:
        if self._fake is not None:
            self._fake.close()
        self._pool.close()

    def describe(self) -> dict[str, Any]:
        """What a client needs to know, as printed at startup (``--json``)."""
        return {
            "url": self.url,
            "control": f"{self.url}{CONTROL_PREFIX}/",
            "ca_bundle": self.fake.ca_bundle,
            "clock": "frozen" if isinstance(self.clock, ManualClock) else "real",
            "options": options_json(self.options),
            "accounts": [account_json(a) for a in self._accounts if not isinstance(a, AccountSpec)],
            "clients": [
                client_json(c, secret=True) for c in self._clients if not isinstance(c, ClientSpec)
            ],
            "routes": [f"{m} {p}" for m, p in self._routes],
            "hosts": list(self.fake.hosts),
            # Where v3 API calls go without interception: the host of v3 auth answers.
            "region_url": self.fake.region_url,
            "proxy": self.fake.proxy_url,
            # The proxy and CA variables of --intercept, for the clients' environment.
            "env": self.fake.env if self.fake.proxy_url else {},
        }
