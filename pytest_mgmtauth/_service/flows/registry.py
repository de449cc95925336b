"""The one list of auth flows. Everything that differs between flows (the HTTP routes of
their endpoints, ``route(auth=...)``, the versions faults and counts accept, the words
of checks and timelines) is read from here; a new flow is a module in this folder and
one entry below.

And the hosts of the service as the domain sees them: the names the flows declare
(``Flow.auth_hosts``, ``Flow.api_hosts``, ``Flow.api_on_region_host``) gathered here, the
region host of v3's API calls (the option ``v3_host``), which host a request reached (a
named host of the service, or the fake's own address, which stands for every host but
the region host) and whether a flow's endpoint or route answers there. Nothing here
knows about sockets: the transport says where a request arrived with a :class:`Where`."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import re
import weakref
from typing import TYPE_CHECKING, Any

from ..api_versions import LIFECYCLE_SETS
from ..events import FLOW_WORDS, FlowWords
from ..options import DEFAULT_V3_HOST
from .base import ClientFlow, Flow

# OAuthClient: the public type of the clients add_client makes, for the layers above.
from .oauth import OAuthClient as OAuthClient, OAuthFlow
from .scim import ScimFlow
from .v1 import V1Flow
from .v2 import V2Flow
from .v3 import V3Flow

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from ..options import Options
    from ..service import AuthService
    from .base import Endpoint, Sets

#: Every flow by its name (what ``route(auth=...)``, ``auth_count(version=...)`` and the
#: faults' ``version=`` take), in the order messages list them: the one list of flows.
FLOWS: dict[str, type[Flow]] = {}
#: The flow of a declared route whose path falls under no flow's ``route_prefix``.
DEFAULT_FLOW = V2Flow.name


#: The class attributes a flow must set (the others have defaults on :class:`Flow`).
REQUIRED = ("name", "title", "path_title", "secret", "credential", "auth_hosts")

#: The services (one per running fake) built from :data:`FLOWS`: while one is open, the
#: list of flows may not change, as its routes and answers were made from it.
_open: weakref.WeakSet[AuthService] = weakref.WeakSet()


def register(flow: type[Flow]) -> None:
    """Add ``flow`` to the list of flows (after the others), or change nothing and raise
    ValueError: its name is taken, it lacks a required class attribute, or a fake is
    running (register it before ``mgmt_server`` exists)."""
    if not (isinstance(flow, type) and issubclass(flow, Flow)):
        raise TypeError(f"register() takes a Flow subclass, got {flow!r}")
    missing = [name for name in REQUIRED if not hasattr(flow, name)]
    if missing:
        listed = ", ".join(repr(name) for name in missing)
        raise ValueError(
            f"flow class {flow.__qualname__} lacks the class attribute(s) {listed}: every "
            f"flow sets {', '.join(REQUIRED)}"
        )
    methods = sorted(getattr(flow, "__abstractmethods__", ()))
    if methods:
        listed = ", ".join(f"{name}()" for name in methods)
        raise ValueError(
            f"flow class {flow.__qualname__} lacks the method(s) {listed}: every flow "
            "defines read() and authorize() (a BearerFlow has both)"
        )
    if flow.name in FLOWS:
        raise ValueError(f"a flow named {flow.name!r} is registered already")
    _refuse_while_open(f"register the flow {flow.name!r}")
    # Events are recorded by the flows and so cannot import them: they read the words
    # of a flow from this table. Made before anything changes.
    words = FlowWords(
        flow.title, flow.path_title, flow.credential or "credential", f"{flow.attempt}s"
    )
    FLOWS[flow.name] = flow
    FLOW_WORDS[flow.name] = words
    _forget_cached()


def unregister(name: str) -> None:
    """Remove the flow ``name`` (a flow a test suite registered for a while); ValueError
    if none has that name or a fake is running."""
    if name not in FLOWS:
        raise ValueError(f"no flow named {name!r} is registered")
    _refuse_while_open(f"unregister the flow {name!r}")
    del FLOWS[name]
    FLOW_WORDS.pop(name, None)
    _forget_cached()


def opened(service: AuthService) -> None:
    """A service was built from :data:`FLOWS` (its fake runs until :func:`closed`)."""
    _open.add(service)


def closed(service: AuthService) -> None:
    _open.discard(service)


def _refuse_while_open(what: str) -> None:
    if len(_open):
        gc.collect()  # a fake dropped without close() holds nothing
    if len(_open):
        raise ValueError(
            f"cannot {what} while a fake is running ({len(_open)} open): its routes and "
            "answers were made from the flows registered when it started. Register flows "
            "before mgmt_server exists: at import of the test module, in conftest.py, or "
            "in a module- or session-scoped fixture (with registered(flow): ...)"
        )


@contextlib.contextmanager
def registered(flow: type[Flow]) -> Iterator[type[Flow]]:
    """``flow`` is registered inside the ``with`` block, and not after it."""
    register(flow)
    try:
        yield flow
    finally:
        unregister(flow.name)


def _forget_cached() -> None:
    _endpoint_table.cache_clear()
    route_hosts.cache_clear()
    fixed_hosts.cache_clear()
    _service_hosts.cache_clear()
    check_endpoints.cache_clear()
    declared.cache_clear()


def client_flow() -> type[ClientFlow[Any]]:
    """The flow whose credentials go to clients of its own (``add_client``)."""
    found = next((f for f in FLOWS.values() if issubclass(f, ClientFlow)), None)
    if found is None:
        raise ValueError("no registered flow has clients of its own (add_client)")
    return found


def check_version(value: object, *, what: str, none: str) -> str | None:
    """``value`` if it names a flow or is ``None`` (which means what ``none`` says); else
    a ValueError listing the flows."""
    if value is None or (isinstance(value, str) and value in FLOWS):
        return value
    names = ", ".join(f"{name!r} ({flow.title})" for name, flow in FLOWS.items())
    raise ValueError(f"{what} must be {names} or None ({none}), got {value!r}")


def check_grants(version: object, *, what: str) -> str | None:
    """:func:`check_version` for a count of grants: ValueError for a flow that grants
    nothing (its calls present the secret itself), saying what to count instead."""
    name = check_version(version, what="version", none="every flow")
    if name is not None and FLOWS[name].credential is None:
        raise ValueError(
            f"{what}(version={name!r}): the {name} flow grants no credentials (every call "
            f"presents the {FLOWS[name].secret} itself), so there are no grants to count: "
            "count its calls with mgmt_server.requests, or a route's call_count"
        )
    return name


def route_flow(pattern: str, *, scope: str | None = None) -> str:
    """The flow a route declared without ``auth=`` belongs to: by its ``scope`` (the
    flow whose tokens carry scopes), else by its path."""
    if scope is not None:
        return next((name for name, flow in FLOWS.items() if flow.takes_scope), DEFAULT_FLOW)
    for name, flow in FLOWS.items():
        if flow.route_prefix is not None and pattern.startswith(flow.route_prefix):
            return name
    return DEFAULT_FLOW


def path_flow(path: str) -> type[Flow]:
    """The flow a request on ``path`` belongs to where no endpoint or declared route
    says: the first whose ``api_paths`` match it, else by ``route_prefix``."""
    for flow in FLOWS.values():
        if any(re.match(pattern, path) for pattern in flow.api_paths):
            return flow
    return FLOWS[route_flow(path)]


@dataclasses.dataclass(frozen=True)
class Declared:
    """What the flows declare of their answers and paths, gathered (:func:`declared`)."""

    #: Keys whose values are credentials: masked in a live run, shaped in a snapshot.
    secret_keys: frozenset[str]
    #: Keys whose values are codes, recorded as they are.
    code_keys: frozenset[str]
    #: Keys whose values are hosts of the service.
    host_keys: frozenset[str]
    #: The flows' ``path_names``, compiled.
    path_names: tuple[re.Pattern[str], ...]


def credential_keys(flow: type[Flow]) -> frozenset[str]:
    granted = (flow.answer_field,) if flow.credential is not None else ()
    return frozenset((*granted, *flow.secret_keys))


@functools.cache  # asked for every exchange; cleared when FLOWS changes
def declared() -> Declared:
    flows = FLOWS.values()
    patterns = dict.fromkeys(p for flow in flows for p in flow.path_names)
    return Declared(
        frozenset(k for flow in flows for k in credential_keys(flow)),
        frozenset(k for flow in flows for k in flow.code_keys),
        frozenset(k for flow in flows for k in flow.host_keys),
        tuple(re.compile(p) for p in patterns),
    )


def answering_flow(path: str, keys: Iterable[str]) -> type[Flow] | None:
    """The flow whose answer a snapshot's exchange at ``path`` (its names as
    placeholders) is: the flow of that endpoint, else the one whose credential is among
    the answer's ``keys`` (an endpoint an option moved); ``None`` if neither."""
    found = endpoint_for(path)
    if found is not None:
        return found[0]
    present = set(keys)
    return next((f for f in FLOWS.values() if credential_keys(f) & present), None)


def option_sets(flow: type[Flow] | None) -> tuple[Sets, ...]:
    """The options that set fields of ``flow``'s answers, and of every versioned call's
    (the lifecycle headers)."""
    return (*(flow.sets if flow is not None else ()), *LIFECYCLE_SETS)


@dataclasses.dataclass(frozen=True)
class _EndpointTable:
    """Every flow's endpoints under one set of options, laid out once for the look-up of
    every request: exact paths by path, templated ones in order, their families."""

    exact: dict[str, tuple[type[Flow], Endpoint]]
    templated: tuple[tuple[type[Flow], Endpoint], ...]
    families: tuple[str, ...]
    by_family: tuple[tuple[str, type[Flow], Endpoint], ...]


@functools.lru_cache(maxsize=16)  # one per set of options; cleared when FLOWS changes
def _endpoint_table(options: Options | None) -> _EndpointTable:
    exact: dict[str, tuple[type[Flow], Endpoint]] = {}
    templated: list[tuple[type[Flow], Endpoint]] = []
    for flow in FLOWS.values():
        for endpoint in flow.endpoints if options is None else flow.endpoints_for(options):
            if endpoint.exact:
                exact.setdefault(endpoint.path, (flow, endpoint))
            else:
                templated.append((flow, endpoint))
    by_family = tuple(
        (endpoint.family, flow, endpoint)
        for flow in FLOWS.values()
        for endpoint in flow.endpoints
        if endpoint.family is not None
    )
    return _EndpointTable(
        exact, tuple(templated), tuple(family for family, _, _ in by_family), by_family
    )


def endpoint_for(
    path: str, options: Options | None = None
) -> tuple[type[Flow], Endpoint, dict[str, str]] | None:
    """The flow endpoint ``path`` is (under ``options``: a path may be an option), with
    the parameters its template names; ``None`` for a path no flow serves."""
    table = _endpoint_table(options)
    found = table.exact.get(path)
    if found is not None:
        return found[0], found[1], {}
    if not table.families or not path.startswith(table.families):
        return None  # a protected call: no template to try
    for flow, endpoint in table.templated:
        params = endpoint.match(path)
        if params is not None:
            return flow, endpoint, params
    return None


def form_hint(flow: type[Flow], endpoint: Endpoint, missing: list[str], names: list[str]) -> str:
    """Why a form sent to ``endpoint`` may lack ``missing``: it carries a field of another
    flow's endpoint instead (a password at ``/v2/auth``); ``""`` if not."""
    for other in FLOWS.values():
        if other is flow:
            continue
        for theirs in other.endpoints:
            stray = [n for n in names if n in theirs.form and n not in endpoint.form]
            if stray:
                takes = " and ".join(repr(field) for field in endpoint.form)
                return (
                    f" ({endpoint.path} takes {takes}; {other.secret}s go to "
                    f"{theirs.path} as {stray[0]!r})"
                )
    return ""


def endpoint_family(path: str) -> tuple[type[Flow], Endpoint] | None:
    """The flow endpoint whose path family ``path`` falls under (``/v3/auth/...``
    malformed), for a diagnosis; ``None`` if none."""
    table = _endpoint_table(None)
    if not table.families or not path.startswith(table.families):
        return None  # one test of every family at once: no walk per protected call
    for family, flow, endpoint in table.by_family:
        if path.startswith(family):
            return flow, endpoint
    return None


def builtin_paths(options: Options | None = None) -> tuple[str, ...]:
    """The exact paths of the flows' endpoints (routes may not be declared on them)."""
    return tuple(_endpoint_table(options).exact)


@functools.lru_cache(maxsize=16)  # every test's service checks its options' paths
def check_endpoints(options: Options) -> None:
    """ValueError if an endpoint path set by an option is another flow's endpoint."""
    seen: dict[str, str] = {}
    for name, flow in FLOWS.items():
        for endpoint in flow.endpoints_for(options):
            other = seen.get(endpoint.path) or next(
                (
                    n
                    for n, f in FLOWS.items()
                    for e in f.endpoints
                    if n != name and not e.exact and e.match(endpoint.path) is not None
                ),
                None,
            )
            if other is not None and other != name:
                raise ValueError(
                    f"mgmtauth options: {endpoint.path} would be both a {name} and a "
                    f"{other} endpoint; choose another path"
                )
            seen[endpoint.path] = name


def endpoint_families() -> tuple[str, ...]:
    """The path prefixes templated endpoints live under (reserved like builtin paths)."""
    return _endpoint_table(None).families


@functools.cache  # FLOWS never changes; asked on every request
def fixed_hosts() -> tuple[str, ...]:
    """The hosts the flows name themselves, in the order of :data:`FLOWS` (auth hosts
    first): every host of the service but the region host."""
    names = [h for flow in FLOWS.values() for h in flow.auth_hosts]
    names += [h for flow in FLOWS.values() for h in flow.api_hosts]
    return tuple(dict.fromkeys(names))


def service_hosts(options: Options) -> tuple[str, ...]:
    """Every host the fake stands in for: the flows' hosts and the region host."""
    return _service_hosts(options.v3_host)


@functools.lru_cache(maxsize=16)  # cached by the region host: hashing it is cheap
def _service_hosts(region_host: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*fixed_hosts(), region_host)))


@functools.lru_cache(maxsize=256)  # asked for every protected call; cleared with FLOWS
def route_hosts(flow_name: str, options: Options, host: str | None = None) -> tuple[str, ...]:
    """The hosts a declared route of ``flow_name`` answers on: ``host`` alone when the
    route names one, else its flow's API hosts."""
    if host is not None:
        return (host,)
    return FLOWS[flow_name].api_host_names(options)


#: The status of a request sent to a host that does not serve it: the service's hosts
#: are separate gateways, and a gateway answers 404 for an operation it does not have.
WRONG_HOST_STATUS = 404


@dataclasses.dataclass(frozen=True)
class HostPlan:
    """How one test's fake stands in for the hosts: the region host (``v3_host``), and
    whether it intercepts (then clients name the hosts themselves; without, a second
    address of the fake stands for the region host)."""

    region_host: str = DEFAULT_V3_HOST
    intercept: bool = False


for _flow in (V2Flow, V3Flow, V1Flow, OAuthFlow, ScimFlow):
    register(_flow)
