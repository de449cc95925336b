"""``mgmtauth-server``: the command line of the standalone server (flags made from the
option declarations in ``_service/options.py``), its banner and ``main()``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, TextIO

from .. import __version__
from .._http.app import CONTROL_PREFIX as PREFIX
from .._service.accounts import make_account
from .._service.flows.registry import client_flow
from .._service.options import OPTION_SPECS, Options, name_source, shown_text
from .messages import TEST_ONLY_OPTIONS, is_loopback
from .server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    STOP_POLL,
    AccountSpec,
    StandaloneServer,
    UsageError,
    parse_account,
    parse_client,
    parse_route,
    read_accounts_file,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._service.options import OptionSpec


def print_banner(server: StandaloneServer, out: TextIO) -> None:
    info = server.describe()
    lines = [
        f"mgmtauth-server {__version__}: the fake management auth service is up",
        f"  base URL     {info['url']}",
        f"  control API  {info['control']}",
        f"  v3 API calls {info['region_url']}  (the host of v3 auth answers)",
    ]
    if info["proxy"]:
        lines.append(f"  proxy        {info['proxy']}  (for {', '.join(info['hosts'])})")
        lines += [f"    export {name}={value}" for name, value in info["env"].items()]
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
        if part.split("=", 1)[0] not in TEST_ONLY_OPTIONS
    ]
    lines.append(f"  options      {' '.join(shown)}")
    for account in info["accounts"]:
        lines.append(f"  account      {account['username']}")
        lines.append(f"    api key    {account['api_key']}")
        lines.append(f"    password   {account['password']}")
        if account["profiles"] is not None:
            lines.append(f"    v3 pairs   {', '.join(account['profiles']) or 'none'}")
    for client in info["clients"]:
        lines.append(f"  oauth client {client['client_id']}")
        lines.append(f"    secret     {client['client_secret']}")
        lines.append(f"    scopes     {' '.join(client['scopes']) or 'none'}")
    for route in info["routes"]:
        lines.append(f"  route        {route}")
    lines.append("Stop with Ctrl-C or SIGTERM.")
    out.write("\n".join(lines) + "\n")
    out.flush()


def _whole_arg(text: str) -> int:
    # int() refuses over 4300 digits: such a number is out of every range anyway, and
    # the message should not echo all of it (argparse's "invalid int value" would).
    try:
        return int(text)
    except ValueError:
        if text.strip().lstrip("+-").isdigit():
            raise argparse.ArgumentTypeError(f"{shown_text(text)} is far too large") from None
        raise argparse.ArgumentTypeError(
            f"expected a whole number, got {shown_text(text)}"
        ) from None


def _option_arg(spec: OptionSpec) -> Callable[[str], object]:
    """The argparse ``type`` of an option: its declared parser (ranges: Options)."""

    def parse(text: str) -> object:
        try:
            return spec.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{exc}, got {shown_text(text)}") from None

    parse.__name__ = spec.name  # argparse names the type in some messages
    return parse


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
        "--client",
        action="append",
        default=[],
        metavar="JSON",
        help="add an OAuth client: a JSON object like "
        '\'{"scopes": ["acme:main:tiq:2026-07:profiles:read"]}\' (client_id and '
        "client_secret generated unless given; scopes default to "
        "acme:main:tiq:2026-07:profiles:manage); repeatable",
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
    for spec in OPTION_SPECS:
        if spec.test_only or spec.name == "https":
            continue  # --https is under "where"; strict and require_logout: tests only
        if spec.kind == "bool":
            # Switches the option away from its default (--no-keep-alive).
            behaviour.add_argument(
                spec.flag,
                dest=spec.name,
                action="store_false" if spec.default else "store_true",
                default=spec.default,
                help=spec.flag_help,
            )
            continue
        allowed = f"; {spec.allowed}" if spec.allowed and spec.kind != "choice" else ""
        behaviour.add_argument(
            spec.flag,
            type=_option_arg(spec),
            default=spec.default,
            metavar=spec.metavar or spec.kind.upper(),
            help=f"{spec.help}{allowed}",
        )
    behaviour.add_argument(
        "--frozen-clock",
        action="store_true",
        help="time stands still until POST /_mgmtauth/clock/advance (default: real time "
        "plus whatever was advanced)",
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
        # --https is among them, though made under "where".
        options = Options(
            **{spec.name: getattr(args, spec.name) for spec in OPTION_SPECS if not spec.test_only}
        )
    except (TypeError, ValueError) as exc:
        message = name_source(str(exc), lambda name: "--" + name.replace("_", "-"))
        raise UsageError(message.replace("mgmtauth option ", "option ")) from None
    specs = [parse_account(text) for text in args.account]
    if args.accounts_file:
        specs += read_accounts_file(args.accounts_file)
    if not specs:
        specs = [AccountSpec()]
    names: set[str] = set()
    try:  # checked before the key is made: a typo costs no key generation
        for serial, spec in enumerate(specs, 1):
            account = make_account(
                serial, spec.username, spec.api_key, spec.password, spec.permissions, spec.profiles
            )
            if spec.username is not None and account.username in names:
                raise UsageError(f"the account {account.username!r} is given twice")
            names.add(account.username)
        clients = [parse_client(text) for text in args.client]
        for client in clients:
            if client.scopes is not None:
                client_flow().check_client_scopes(client.scopes, what="--client")
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    routes = [parse_route(text) for text in args.route]
    # isinstance: argparse turns "--port=--" into an empty list, not an error.
    if not isinstance(args.port, int) or not 0 <= args.port <= 65535:
        raise UsageError(f"--port {shown_text(str(args.port))}: expected 0-65535")
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
        clients=clients,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        server = server_from_args(args)
        server.start()
    except (UsageError, ValueError) as exc:  # ValueError: an account the fake refuses
        parser.error(str(exc))
    except OSError as exc:
        print(
            f"mgmtauth-server: cannot listen on {args.host}:{args.port}: "
            f"{exc.strerror or exc} (pass --port 0 for any free port)",
            file=sys.stderr,
        )
        return 1

    stop = threading.Event()
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, lambda signum, frame: stop.set())
    try:
        if not is_loopback(args.host):
            print(
                f"mgmtauth-server: warning: listening on {args.host}, not loopback: anyone "
                "who can reach it can use these test credentials",
                file=sys.stderr,
            )
        if args.json:
            print(json.dumps(server.describe()), flush=True)
        else:
            print_banner(server, sys.stdout)
        while not stop.wait(STOP_POLL):
            pass
    finally:
        server.stop()
    print("mgmtauth-server: stopped", file=sys.stderr, flush=True)
    return 0
