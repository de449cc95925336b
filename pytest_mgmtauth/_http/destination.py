"""What a request is for, decided once: a flow's endpoint, a declared route, or neither;
its flow; where it arrived; its target. ``FakeApp`` works it out as soon as the test the
request belongs to is known (its options and routes decide), and every later step reads
it: the host checks, the route's call, the forwarding of a live run, the request log,
the drift record and the error shape."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pytest_httpserver import METHOD_ALL

from .._service.flows.base import normalized_path
from .._service.flows.registry import (
    FLOWS,
    endpoint_family,
    endpoint_for,
    path_flow,
    route_hosts,
)
from .hosts import where

if TYPE_CHECKING:
    from werkzeug import Request

    from .._service.flows.base import Endpoint, Flow, Where
    from .arrival import Arrival
    from .binding import Binding, RouteHandler


@dataclasses.dataclass(frozen=True, eq=False)
class Destination:
    """One request, as the app decided it."""

    #: Where it arrived (``hosts.where``).
    where: Where
    # Not in its repr, which tracebacks show: a target may hold a secret (a utk, a
    # jsessionid), as FakeRequest's repr says.
    #: The decoded path (what routes match).
    path: str = dataclasses.field(repr=False)
    #: The request target as the request line had it (origin or absolute form); None
    #: when the app is driven without the server.
    raw: str | None = dataclasses.field(repr=False)
    #: The target in origin form: path and query as they came (percent-escapes kept),
    #: no fragment. What is forwarded and logged.
    target: str = dataclasses.field(repr=False)
    #: The flow of its endpoint or its route; else the one whose paths it falls under
    #: (``registry.path_flow``): whose hosts a live run forwards it to, whose envelope
    #: its errors have.
    flow: type[Flow]
    #: The flow endpoint it is, or whose path family it falls under (then ``params`` is
    #: None: a malformed path of that family).
    endpoint: Endpoint | None = None
    #: The parameters of the endpoint's template; None unless it is that endpoint.
    params: dict[str, str] | None = None
    #: The declared route it calls: the first matching one that answers where it
    #: arrived, else the first matching one (then refused for its host).
    route: RouteHandler | None = None
    #: The hosts :attr:`route` answers on.
    hosts: tuple[str, ...] = ()
    #: Whether it arrived at a host its endpoint (its flow's ``auth_hosts``) or its
    #: route answers on: the one host check.
    answers: bool = False
    #: A route's call: :attr:`path` normalised (``normalized_path``), what a scope and a
    #: flow's names (a v3 profile) are read from.
    normalized: str = dataclasses.field(default="", repr=False)

    @property
    def exact(self) -> bool:
        """Whether it is a flow's endpoint (not only under its path family)."""
        return self.params is not None

    @property
    def raw_path(self) -> bytes | None:
        """The path's bytes as they came (Werkzeug reads the line as Latin-1 and passes
        it through UTF-8); None without the server, or when they do not decode."""
        if self.raw is None:
            return None
        try:
            return self.target.partition("?")[0].encode("latin-1").decode("utf-8").encode("latin-1")
        except UnicodeError:
            return None


def destination(binding: Binding, request: Request, arrival: Arrival) -> Destination:
    """What ``request`` of ``binding``'s test is for (see the module's text)."""
    environ = request.environ.get("RAW_URI")
    raw = environ if isinstance(environ, str) else None
    if raw is None:
        target = request.full_path.rstrip("?") if request.query_string else request.path
    elif raw.startswith("/"):
        target = raw.partition("#")[0]
    else:  # absolute form, through the proxy
        target = "/" + raw.partition("://")[2].partition("/")[2].partition("#")[0]
    here = where(binding, request, arrival)
    path, options = request.path, binding.service.options
    region = binding.hosts.region_host
    found = endpoint_for(path, options)
    if found is not None:
        flow, endpoint, params = found
        answers = here.reaches(flow.auth_hosts, region)
        return Destination(here, path, raw, target, flow, endpoint, params, answers=answers)
    family = endpoint_family(path)
    if family is not None:
        return Destination(here, path, raw, target, family[0], family[1])
    chosen: tuple[RouteHandler, tuple[str, ...]] | None = None
    answers = False
    for route in binding.routes:
        # Its method and path, all a route's matcher is given (the matcher's own match()
        # also compares the query, headers and body with nothing, on every request).
        matcher = route.matcher
        if matcher.method not in (METHOD_ALL, request.method) or not matcher.match_uri(request):
            continue
        hosts = route_hosts(route.auth, options, route.host)
        answers = here.reaches(hosts, region)
        if answers:
            chosen = (route, hosts)
            break
        chosen = chosen or (route, hosts)
    if chosen is None:
        return Destination(here, path, raw, target, path_flow(path))
    route, hosts = chosen
    return Destination(
        here,
        path,
        raw,
        target,
        FLOWS[route.auth],
        route=route,
        hosts=hosts,
        answers=answers,
        normalized=normalized_path(path),
    )
