"""``mgmtauth-server``: the fake as a process, for clients in any language.

``server`` holds :class:`StandaloneServer` (one ``MgmtServer`` at a time on one socket),
``control`` its control API under ``/_mgmtauth/``, ``cli`` the command line. Internal:
the public face is the ``mgmtauth-server`` command (docs/standalone.md).
"""

from __future__ import annotations

from .cli import build_parser, main, print_banner, server_from_args
from .control import ControlAPI, host_allowed
from .server import AccountSpec, StandaloneServer, UsageError, options_json

__all__ = [
    "AccountSpec",
    "ControlAPI",
    "StandaloneServer",
    "UsageError",
    "build_parser",
    "host_allowed",
    "main",
    "options_json",
    "print_banner",
    "server_from_args",
]
