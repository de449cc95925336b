"""``mgmtauth-server``: the fake as a process, for clients in any language.

The same fake the ``mgmt_server`` fixture gives (the same endpoints, tokens, sessions,
lockout, throttling and faults) on a host and port of your choice, with a clock of its
own that the control API under ``/_mgmtauth/`` advances. See docs/standalone.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import math
import os
import signal
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from cryptography.exceptions import UnsupportedAlgorithm

from . import __version__, _assertions
from ._domain._accounts import make_account
from ._domain._clock import ManualClock, OffsetClock
from ._domain._options import MAX_DURATION, OPTION_NAMES, Options
from ._domain._tokens import load_private_key
from ._fake import MgmtServer
from ._pool import KeyCache, SessionPool
from ._transport._control import PREFIX, ControlAPI, account_json

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import FrameType

    from ._domain._accounts import Account

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
#: How often the main thread looks for a stop request, in seconds.
_STOP_POLL = 0.1


#: Options of ``@pytest.mark.mgmtauth`` that mean nothing to a standalone server: there
#: is no teardown check for ``strict`` to make fail or ``require_logout`` to widen
#: (``GET /_mgmtauth/check?require_logout=true`` does that), and HTTPS shows in the URL's
#: scheme.
_TEST_ONLY_OPTIONS = ("strict", "https", "require_logout")


def options_json(options: Options) -> dict[str, Any]:
    """The server's options for ``--json``: token_ttl in whole seconds (as the JWT's
    exp claim counts), without the options that only mean something in a test."""
    data = {
        f.name: getattr(options, f.name)
        for f in dataclasses.fields(options)
        if f.init and f.name not in _TEST_ONLY_OPTIONS
    }
    data["token_ttl"] = int(options.token_ttl)
    return data


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


def _spec_from_json(data: object, where: str) -> AccountSpec:
    known = ("username", "api_key", "password", "permissions", "profiles")
    if not isinstance(data, dict):
        raise UsageError(f"{where}: an account is a JSON object with {', '.join(known)}")
    unknown = [k for k in data if k not in known]
    if unknown:
        raise UsageError(
            f"{where}: unknown account field {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(known)}"
        )
    for name in ("username", "api_key", "password"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise UsageError(f"{where}: {name!r} must be a string")
    permissions = data.get("permissions")
    if permissions is not None and (
        not isinstance(permissions, list) or not all(isinstance(p, str) for p in permissions)
    ):
        raise UsageError(f"{where}: 'permissions' must be a list of strings")
    profiles = data.get("profiles")
    if profiles is not None and (
        not isinstance(profiles, list) or not all(isinstance(p, str) for p in profiles)
    ):
        raise UsageError(
            f"{where}: 'profiles' must be a list of 'account/profile' strings "
            "('account/*': every profile of the account)"
        )
    return AccountSpec(
        username=data.get("username"),
        api_key=data.get("api_key"),
        password=data.get("password"),
        permissions=None if permissions is None else tuple(permissions),
        profiles=None if profiles is None else tuple(profiles),
    )


def parse_account(text: str) -> AccountSpec:
    """``--account``: an e-mail address, or a JSON object with the account's fields."""
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--account {text!r}: not valid JSON ({exc})") from None
        return _spec_from_json(data, "--account")
    return AccountSpec(username=text)


def read_accounts_file(path: str) -> list[AccountSpec]:
    """``--accounts-file``: a JSON list of account objects (or ``{"accounts": [...]}``)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise UsageError(f"--accounts-file {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--accounts-file {path}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and set(data) == {"accounts"}:
        data = data["accounts"]
    if not isinstance(data, list):
        raise UsageError(f"--accounts-file {path}: expected a JSON list of account objects")
    return [
        _spec_from_json(item, f"--accounts-file {path}, account {i + 1}")
        for i, item in enumerate(data)
    ]


def parse_route(text: str) -> tuple[str, str]:
    """``--route``: ``"METHOD /path"``, or just ``/path`` for GET."""
    parts = text.split()
    if len(parts) == 1:
        parts = ["GET", parts[0]]
    if len(parts) != 2 or not parts[1].startswith("/"):
        raise UsageError(f"--route {text!r}: expected 'METHOD /path', e.g. 'GET /v2/things'")
    return parts[0].upper(), parts[1]


def _file_key_cache(path: str) -> KeyCache:
    """Keep the signing key in ``path`` so that a restart skips the key generation."""

    def read() -> bytes | None:
        try:
            with open(path, "rb") as handle:
                pem = handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise UsageError(f"--key-file {path}: {exc.strerror or exc}") from None
        try:
            load_private_key(pem)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            # Never overwrite a file we did not make: it may be something else entirely.
            raise UsageError(
                f"--key-file {path} is not a private key made by mgmtauth-server; pass a "
                "path that does not exist yet, and the key is made there"
            ) from None
        return pem

    def write(pem: bytes) -> None:
        try:
            # Owner-only: it is a private key, even if only a test one.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(pem)
        except OSError as exc:
            raise UsageError(f"--key-file {path}: {exc.strerror or exc}") from None

    return read, write


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
    ) -> None:
        self.options = options
        self.clock: ManualClock | OffsetClock = (
            # A whole second, so that tokens issued before the first advance live
            # exactly token_ttl (iat is whole seconds).
            ManualClock(math.floor(time.time())) if frozen_clock else OffsetClock()
        )
        self._host, self._port = host, port
        self._allowed_hosts = tuple(allowed_hosts)
        self._pool = SessionPool(
            _file_key_cache(key_file) if key_file else None, host=host, port=port
        )
        self._account_specs = list(accounts)
        self._routes = list(routes)
        self._startup_accounts: list[Account] | None = None
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
        self._fake = self._new_fake()
        self._pool.server(https=self.options.https).app.control = ControlAPI(
            fake=lambda: self.fake,
            clock=self.clock,
            reset=self.reset,
            check=self.check,
            timeline=self.timeline,
            host=self._host,
            allowed_hosts=self._allowed_hosts,
        )

    def _new_fake(self) -> MgmtServer:
        fake = MgmtServer(self.options, self._pool, clock=self.clock)
        if self._startup_accounts is None:
            self._startup_accounts = [
                fake.add_account(
                    s.username,
                    api_key=s.api_key,
                    password=s.password,
                    permissions=s.permissions,
                    profiles=s.profiles,
                )
                for s in self._account_specs
            ]
        else:  # a reset: the same credentials as at startup
            for a in self._startup_accounts:
                fake.add_account(
                    a.username,
                    api_key=a.api_key,
                    password=a.password,
                    permissions=a.permissions,
                    profiles=a.profiles,
                )
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
            self._fake = self._new_fake()  # binds itself to the server
            if old is not None:
                # Secrets handed out before the reset are still secrets.
                self._fake._service.keep_masking(old._service)
                old._close()

    def timeline(self, username: str | None = None) -> str:
        """Every line of the timeline since the last reset (``GET /_mgmtauth/timeline``):
        the text of the Python failure messages, not cut around one event."""
        fake = self.fake
        fake._known_username(username)
        return _assertions.format_timeline(fake._scene(), username=username, whole=True)

    def check(
        self, *, require_logout: bool = False, churn: bool = True, expired_use: bool = True
    ) -> dict[str, Any]:
        """The verdicts since the last reset (``GET /_mgmtauth/check``), as JSON."""
        # A long timeline in a message is cut; say where a client in any language
        # finds the whole of it.
        scene = dataclasses.replace(self.fake._scene(), whole_timeline=f"GET {PREFIX}/timeline")
        kinds = [
            kind
            for kind, counted in (
                ("churn", churn),
                ("expired_use", expired_use),
                ("open_session", require_logout),
            )
            if counted
        ]
        found = _assertions.findings(scene, kinds=kinds)
        return {
            "ok": not found,
            "findings": [dataclasses.asdict(f) for f in found],
            "counts": _assertions.finding_counts(scene),
            "counted": {
                "churn": churn,
                "expired_use": expired_use,
                "open_session": require_logout,
            },
        }

    @property
    def url(self) -> str:
        return self.fake.url

    @property
    def ca_bundle(self) -> str | None:
        return self.fake.ca_bundle

    @property
    def startup_accounts(self) -> list[Account]:
        return list(self._startup_accounts or ())

    def stop(self) -> None:
        if self._fake is not None:
            self._fake._close()
        self._pool.close()

    def describe(self) -> dict[str, Any]:
        """What a client needs to know, as printed at startup (``--json``)."""
        return {
            "url": self.url,
            "control": f"{self.url}{PREFIX}/",
            "ca_bundle": self.ca_bundle,
            "clock": "frozen" if isinstance(self.clock, ManualClock) else "real",
            "options": options_json(self.options),
            "accounts": [account_json(a) for a in self.startup_accounts],
            "routes": [f"{m} {p}" for m, p in self._routes],
        }


def _print_banner(server: StandaloneServer, out: TextIO) -> None:
    info = server.describe()
    lines = [
        f"mgmtauth-server {__version__}: the fake management auth service is up",
        f"  base URL     {info['url']}",
        f"  control API  {info['control']}",
    ]
    if info["ca_bundle"]:
        lines.append(f"  CA bundle    {info['ca_bundle']}  (trust it: curl --cacert <path>)")
    clock = (
        "frozen: moves only by POST /_mgmtauth/clock/advance"
        if info["clock"] == "frozen"
        else "real time, plus POST /_mgmtauth/clock/advance"
    )
    lines.append(f"  clock        {clock}")
    shown = [
        part
        for part in server.options.describe().split()
        if part.split("=", 1)[0] not in _TEST_ONLY_OPTIONS
    ]
    lines.append(f"  options      {' '.join(shown)}")
    for account in info["accounts"]:
        lines.append(f"  account      {account['username']}")
        lines.append(f"    api key    {account['api_key']}")
        lines.append(f"    password   {account['password']}")
        if account["profiles"] is not None:
            lines.append(f"    v3 pairs   {', '.join(account['profiles']) or 'none'}")
    for route in info["routes"]:
        lines.append(f"  route        {route}")
    lines.append("Stop with Ctrl-C or SIGTERM.")
    out.write("\n".join(lines) + "\n")
    out.flush()


def _shown(text: str) -> str:
    """A command-line value in a message: whole if short, else its start and length."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} characters)"


def _whole_arg(text: str) -> int:
    # int() refuses over 4300 digits: such a number is out of every range anyway, and
    # the message should not echo all of it (argparse's "invalid int value" would).
    try:
        return int(text)
    except ValueError:
        if text.strip().lstrip("+-").isdigit():
            raise argparse.ArgumentTypeError(f"{_shown(text)} is far too large") from None
        raise argparse.ArgumentTypeError(f"expected a whole number, got {_shown(text)}") from None


def _seconds_arg(text: str) -> float | int:
    # Checked for range by Options (the one place that checks durations): here only
    # whether it is a number. Whole numbers stay ints, so 10**400 is "too large", not inf.
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {_shown(text)}") from None


def _throttle_arg(text: str) -> int | None:
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        return _whole_arg(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a number of premature grants per 60 s, or 'none', got {_shown(text)}"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mgmtauth-server",
        description=(
            "Serve the fake management auth service (v2 /v2/auth bearer tokens, v1 "
            "/v1/login sessions) for clients in any language, with a control API under "
            f"{PREFIX}/ to read the timeline, advance the clock and script faults."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    where = parser.add_argument_group("where")
    where.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (%(default)s)")
    where.add_argument(
        "--port", type=_whole_arg, default=DEFAULT_PORT, help="port (%(default)s; 0: any free port)"
    )
    where.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the control API answers besides localhost, loopback addresses "
        "and --host (e.g. a docker-compose service name); repeatable",
    )
    where.add_argument(
        "--https", action="store_true", help="serve HTTPS with a fresh test CA (path printed)"
    )
    setup = parser.add_argument_group("accounts and routes")
    setup.add_argument(
        "--account",
        action="append",
        default=[],
        metavar="EMAIL_OR_JSON",
        help="add an account: an e-mail address (API key and password generated), or a JSON "
        'object like \'{"username": "a@example.com", "api_key": "...", "password": "..."}\'; '
        "repeatable. Without --account or --accounts-file, one generated account",
    )
    setup.add_argument(
        "--accounts-file", metavar="PATH", help="a JSON list of account objects (as --account)"
    )
    setup.add_argument(
        "--route",
        action="append",
        default=[],
        metavar="'METHOD /path'",
        help='declare a protected API route answering {"ok": true}; paths under /v1/ take '
        "the v1 session, others the v2 bearer token; repeatable (more via the control API)",
    )
    behaviour = parser.add_argument_group("behaviour (the options of @pytest.mark.mgmtauth)")
    defaults = Options()
    for flag, default, what in (
        ("--token-ttl", defaults.token_ttl, "bearer token validity (default 1800)"),
        (
            "--refresh-margin",
            None,
            "re-auth this close to expiry is reuse (default: a tenth of --token-ttl, at most 60)",
        ),
        (
            "--lockout-duration",
            defaults.lockout_duration,
            "how long error 1402 lasts (default 600)",
        ),
        (
            "--session-timeout",
            defaults.session_timeout,
            "idle time that ends a v1 session (default 1800)",
        ),
    ):
        behaviour.add_argument(
            flag,
            type=_seconds_arg,
            default=default,
            metavar="SECONDS",
            help=f"{what}; finite, at most {MAX_DURATION:g} (10 years)",
        )
    behaviour.add_argument(
        "--lockout-threshold",
        type=_whole_arg,
        default=defaults.lockout_threshold,
        metavar="N",
        help="failed v1 logins in a row that lock an account (default %(default)s)",
    )
    behaviour.add_argument(
        "--throttle",
        type=_throttle_arg,
        default=defaults.throttle,
        metavar="N|none",
        help="premature grants per account per 60 s before /v2/auth answers 429; 'none' "
        "turns throttling off (default %(default)s)",
    )
    behaviour.add_argument(
        "--frozen-clock",
        action="store_true",
        help="time stands still until POST /_mgmtauth/clock/advance (default: real time "
        "plus whatever was advanced)",
    )
    behaviour.add_argument(
        "--issuer",
        default=Options.issuer,
        help="the tokens' iss claim (default %(default)s, the real service's)",
    )
    behaviour.add_argument(
        "--v3-scope",
        choices=("profile", "account"),
        default="profile",
        help="a v3 token is good for its account and profile (default) or any profile of "
        "its account",
    )
    behaviour.add_argument(
        "--no-keep-alive",
        dest="keep_alive",
        action="store_false",
        help="answer Connection: close and close every connection after its answer "
        "(default: HTTP/1.1 keep-alive, as the real service)",
    )
    misc = parser.add_argument_group("misc")
    misc.add_argument(
        "--key-file",
        metavar="PATH",
        help="keep the RS512 signing key in PATH (made if missing): restarts skip the "
        "~0.5 s key generation",
    )
    misc.add_argument(
        "--json",
        action="store_true",
        help="print the startup information as one JSON line (for scripts)",
    )
    return parser


def server_from_args(args: argparse.Namespace) -> StandaloneServer:
    """The server the parsed command line describes (not started); UsageError if off."""
    try:
        options = Options(
            token_ttl=args.token_ttl,
            refresh_margin=args.refresh_margin,
            lockout_threshold=args.lockout_threshold,
            lockout_duration=args.lockout_duration,
            session_timeout=args.session_timeout,
            throttle=args.throttle,
            https=args.https,
            issuer=args.issuer,
            v3_scope=args.v3_scope,
            keep_alive=args.keep_alive,
        )
    except (TypeError, ValueError) as exc:
        message = str(exc)
        for name in OPTION_NAMES:  # name the flag the user typed
            message = message.replace(f"mgmtauth option {name!r}", "--" + name.replace("_", "-"))
        raise UsageError(message.replace("mgmtauth option ", "option ")) from None
    specs = [parse_account(text) for text in args.account]
    if args.accounts_file:
        specs += read_accounts_file(args.accounts_file)
    if not specs:
        specs = [AccountSpec()]
    names: set[str] = set()
    for serial, spec in enumerate(specs, 1):
        try:  # checked before the key is made: a typo costs no key generation
            account = make_account(
                serial, spec.username, spec.api_key, spec.password, spec.permissions, spec.profiles
            )
        except (TypeError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        if spec.username is not None and account.username in names:
            raise UsageError(f"the account {account.username!r} is given twice")
        names.add(account.username)
    routes = [parse_route(text) for text in args.route]
    # isinstance: argparse turns "--port=--" into an empty list, not an error.
    if not isinstance(args.port, int) or not 0 <= args.port <= 65535:
        raise UsageError(f"--port {_shown(str(args.port))}: expected 0-65535")
    if args.key_file and not os.path.isdir(os.path.dirname(os.path.abspath(args.key_file))):
        raise UsageError(f"--key-file {args.key_file}: its directory does not exist")
    return StandaloneServer(
        options,
        host=args.host,
        port=args.port,
        accounts=specs,
        routes=routes,
        key_file=args.key_file,
        frozen_clock=args.frozen_clock,
        allowed_hosts=args.allow_host,
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        server = server_from_args(args)
        server.start()
    except UsageError as exc:
        parser.error(str(exc))
    except ValueError as exc:  # an account the fake refuses (not an e-mail, duplicate...)
        parser.error(str(exc))
    except OSError as exc:
        print(
            f"mgmtauth-server: cannot listen on {args.host}:{args.port}: "
            f"{exc.strerror or exc} (pass --port 0 for any free port)",
            file=sys.stderr,
        )
        return 1

    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        if not _is_loopback(args.host):
            print(
                f"mgmtauth-server: warning: listening on {args.host}, not loopback: anyone "
                "who can reach it can use these test credentials",
                file=sys.stderr,
            )
        if args.json:
            print(json.dumps(server.describe()), flush=True)
        else:
            _print_banner(server, sys.stdout)
        while not stop.wait(_STOP_POLL):
            pass
    finally:
        server.stop()
    print("mgmtauth-server: stopped", file=sys.stderr, flush=True)
    return 0
