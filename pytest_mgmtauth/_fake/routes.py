"""``MgmtServer.route``: the declared operations of the API, each call authenticated
before its answer."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .._http.app import CONTROL_PREFIX
from .._http.binding import Binding, RouteHandler
from .._http.parsing import unreachable_path
from .._service.flows.registry import (
    FLOWS,
    builtin_paths,
    check_version,
    endpoint_families,
    route_flow,
    service_hosts,
)
from .._service.rate_limits import parse_rate

if TYPE_CHECKING:
    from .._service.options import Options

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


class Routes:
    """The declared routes of a test (a part of ``MgmtServer``)."""

    options: Options
    _binding: Binding

    def route(
        self,
        method: str,
        path: str | re.Pattern[str],
        *,
        permission: str | None = None,
        auth: str | None = None,
        host: str | None = None,
        scope: str | None = None,
        rate_limit: str | None = None,
    ) -> RouteHandler:
        """Declare one operation of the API besides the authentication endpoints, which
        the fake owns. Every call to it is authenticated first (see Routes below).

        :param method: one of ``GET``, ``POST``, ``PUT``, ``PATCH``, ``DELETE``, ``HEAD``,
            ``OPTIONS`` (any case).
        :param path: a path starting with ``/``, matched exactly, or a compiled
            ``re.Pattern`` matched against the path with ``pattern.match`` (anchored at the
            start only: end it with ``$`` to match whole paths). The query string is not
            part of the match. ``/v2/auth``, ``/v1/login``, ``/v1/logout`` and paths under
            ``/v3/auth/`` are refused (``ValueError``), and so is any path (or pattern)
            under ``/_mgmtauth``, which ``mgmtauth-server``'s control API owns.
        :param permission: a permission name the account must have; ``None``: any
            authenticated account may call it. Names are free-form strings you choose;
            they only have to match ``add_account(permissions=...)``.
        :param auth: ``"v1"``, ``"v2"``, ``"v3"`` or ``"oauth"``: which credential the
            route takes. ``None`` (default) chooses by ``scope`` (a route with one takes
            OAuth access tokens), else by path: a path (or a pattern, leading ``^``
            ignored) that starts with ``/v1/`` takes the v1 session, one that starts with
            ``/v3/`` a v3 token, every other path the v2 bearer token. A v1 API on another
            path (the service's ``/urest/...``) is a v2 route unless it says
            ``auth="v1"``: ``route("GET", "/urest/things", auth="v1")``.
        :param host: one of :attr:`~pytest_mgmtauth.MgmtServer.hosts`: the route answers
            on that host only; ``None`` (default): on the hosts of its flow (v1:
            ``api.tealiumiq.com``, ``my.tealiumiq.com`` and ``sso.tealiumiq.com``, v2:
            ``api.tealiumiq.com``, v3: the region host (and ``platform.tealiumapis.com``
            with ``v3_global_host``), OAuth: ``api.tealiumapis.com``). Another value
            raises ``ValueError``. See the page Hosts and interception.
        :param scope: the OAuth scope a call needs
            (``"acme:main:tiq:2026-07:profiles:read"``): the access token must have a scope
            that covers it (the page OAuth client credentials, "API calls and scopes").
            ``{name}`` parts are filled from the named groups of a regex ``path``. Only
            OAuth routes take it, and they take no ``permission`` (``ValueError``
            otherwise, also for a malformed scope). Without it, an ``auth="oauth"`` route
            on ``/v{YYYY-MM}/{apiFamily}/accounts/{account}/profiles/{profile}/{resource}...``
            needs the scope its path and method say (GET read; POST, PUT, DELETE write), an
            engine path ``.../engines/{engineId}/...`` the engine's; any other OAuth route
            any live access token.
        :param rate_limit: at most this many calls to the route within a second or a
            minute (``"50/s"``, ``"5/min"``); a call past it answers 429 with
            ``Retry-After`` in its flow's error shape (see the page Faults and throttling,
            "Rate limits of API calls"). It wins over the family figures of the option
            ``rate_limits``. ``None`` (default): no limit of its own. A malformed rate
            raises ``ValueError`` naming the accepted form.
        :returns: the route's :class:`~pytest_mgmtauth.RouteHandler`; declare its answer
            with its ``respond_with_*`` methods, which return it.
        """
        __tracebackhide__ = True
        if not isinstance(method, str) or method.upper() not in _METHODS:
            raise ValueError(
                f"route(): method must be one of {', '.join(_METHODS)}, got {method!r}"
            )
        if isinstance(path, str):
            if not path.startswith("/"):
                raise ValueError(f"route(): path must start with '/', got {path!r}")
            unreachable = unreachable_path(path)
            if unreachable is not None:
                raise ValueError(f"route(): no request can reach {path!r}: {unreachable}")
            if path in builtin_paths(self.options) or path.startswith(endpoint_families()):
                raise ValueError(
                    f"route(): {path} is the fake's own endpoint; declare the API's other "
                    "operations"
                )
        elif not isinstance(path, re.Pattern):
            raise TypeError(f"route(): path must be a str or a compiled regex, got {path!r}")
        pattern = path if isinstance(path, str) else path.pattern.lstrip("^")
        if pattern.startswith(CONTROL_PREFIX):
            # mgmtauth-server answers everything under it itself: the route could never
            # be reached there, so it is refused everywhere.
            raise ValueError(
                f"route(): {CONTROL_PREFIX}/ is reserved for mgmtauth-server's control API; "
                f"declare the route under another path, got {pattern!r}"
            )
        if auth is None:
            auth = route_flow(pattern, scope=scope)
        check_version(auth, what="route(): auth", none="by the path")
        hosts = service_hosts(self.options)
        if host is not None and host not in hosts:
            raise ValueError(
                f"route(): host must be one of the service's hosts ({', '.join(hosts)}), "
                f"got {host!r}"
            )
        FLOWS[auth].check_route(permission, scope)
        if scope is not None and "{" in scope:
            names = set(re.findall(r"\{(\w+)\}", scope))
            groups = set(path.groupindex) if isinstance(path, re.Pattern) else set()
            if not names <= groups:
                raise ValueError(
                    f"route(scope={scope!r}): {', '.join(sorted(names - groups))} must be "
                    "named groups of a regex path, e.g. re.compile(r'/(?P<profile>[^/]+)/')"
                )
        rate = None if rate_limit is None else parse_rate(rate_limit, what="route(): rate_limit")
        handler = RouteHandler(
            method.upper(),
            path,
            permission=permission,
            auth=auth,
            host=host,
            scope=scope,
            rate_limit=rate,
        )
        with self._binding.lock:
            self._binding.routes.append(handler)
        return handler
