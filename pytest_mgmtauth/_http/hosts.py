"""Which host of the service a request reached, as the transport knows it, and the
refusal of one that reached a host its endpoint or route does not answer on.

A request reached a named host when it came through a tunnel of the proxy
(``CONNECT api.tealiumiq.com:443``), in absolute form (``GET http://host/...``), or with a
``Host`` header naming a host of the service; otherwise it reached an address of the
fake: the region address (the second listener, which stands for the ``v3_host`` when the
fake does not intercept) or the fake's own address, which stands for every other host.
The rules themselves are the domain's (``_service/hosts.py``, the flows' declarations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._service.flows.registry import Where, route_hosts, service_hosts
from .endpoints import fake_host
from .proxy import TUNNEL_HOST, absolute_target_problem

if TYPE_CHECKING:
    from werkzeug import Request

    from .._service.flows.base import Flow, Presented
    from .binding import Binding

#: WSGI environ key: which listener of the fake the request arrived at
#: (:data:`REGION_LISTENER` for the region address; absent for the fake's own).
LISTENER = "mgmtauth.listener"
REGION_LISTENER = "region"


def _host_name(authority: str) -> str:
    """The host name of a ``Host`` value (``api.tealiumiq.com:443`` -> the name)."""
    if authority.startswith("["):
        return authority[1 : authority.find("]")].lower()
    return authority.rsplit(":", 1)[0].lower() if authority.count(":") == 1 else authority.lower()


def where(binding: Binding, request: Request) -> Where:
    """Where ``request`` arrived (see the module's text)."""
    plan = binding.hosts
    tunnel = request.environ.get(TUNNEL_HOST)
    if isinstance(tunnel, str):
        return Where(tunnel, tunnel)
    name = _host_name(request.host)
    if name in service_hosts(binding.service.options):
        return Where(name, name)
    if request.environ.get(LISTENER) == REGION_LISTENER:
        return Where(plan.region_host, region_address(binding, request))
    return Where(None, fake_host(request))


def _with_port(request: Request, port: int) -> str:
    """The fake's address as this request's client reached it, with ``port``."""
    own = fake_host(request)
    host = own[: own.rfind(":")] if own.rfind(":") > own.rfind("]") else own
    return f"{host}:{port}"


def region_address(binding: Binding, request: Request) -> str:
    """The region address (``host:port`` of the second listener) as this request's
    client can reach it: the same host it reached the fake by."""
    return _with_port(request, binding.region_port())


def own_address(binding: Binding, request: Request) -> str:
    """The fake's own address (which stands for every host but the region host) as this
    request's client can reach it."""
    if request.environ.get(LISTENER) == REGION_LISTENER and binding.main_port:
        return _with_port(request, binding.main_port)
    return fake_host(request)


def region_host(binding: Binding, request: Request) -> str:
    """The ``host`` of a v3 auth answer: the region host under interception, else the
    region address."""
    if binding.hosts.intercept:
        return binding.hosts.region_host
    return region_address(binding, request)


def shown(binding: Binding, request: Request, hosts: tuple[str, ...]) -> str:
    """``hosts`` as this request's client can reach them: the names under interception,
    else the addresses of the fake that stand for them."""
    if binding.hosts.intercept:
        return " or ".join(hosts)
    region = binding.hosts.region_host
    addresses = [
        region_address(binding, request) if h == region else own_address(binding, request)
        for h in hosts
    ]
    return " or ".join(dict.fromkeys(addresses))


def check_endpoint_host(binding: Binding, request: Request, flow: type[Flow]) -> None:
    """Refuse (:class:`Refusal`) a request to a flow's own endpoint at a host it does
    not answer on."""
    here = where(binding, request)
    if here.reaches(flow.auth_hosts, binding.hosts.region_host):
        return
    binding.service.refuse_wrong_host(
        flow.name,
        here,
        shown(binding, request, flow.auth_hosts),
        method=request.method,
        path=request.path,
        api=False,
    )


def route_answers_here(binding: Binding, request: Request, auth: str, host: str | None) -> bool:
    """Whether a route of flow ``auth`` (declared with ``host``) answers where
    ``request`` arrived."""
    hosts = route_hosts(auth, binding.service.options, host)
    return where(binding, request).reaches(hosts, binding.hosts.region_host)


def check_route_host(
    binding: Binding, request: Request, flow: type[Flow], host: str | None, presented: Presented
) -> str | None:
    """Refuse (:class:`Refusal`) a call to a route at a host it does not answer on;
    else the host to name in the timeline (``None`` where it is the flow's usual one)."""
    options = binding.service.options
    hosts = route_hosts(flow.name, options, host)
    here = where(binding, request)
    if not here.reaches(hosts, binding.hosts.region_host):
        binding.service.refuse_wrong_host(
            flow.name,
            here,
            shown(binding, request, hosts),
            method=request.method,
            path=request.path,
            api=True,
            presented=presented,
        )
    if here.host is None or here.host == flow.usual_host(options, api=True):
        return None
    return here.host


def foreign_target(binding: Binding, request: Request) -> str | None:
    """Why an absolute-form request naming a host the fake does not stand in for is
    refused (it is never forwarded), or None."""
    target = str(request.environ.get("REQUEST_URI") or "")
    return absolute_target_problem(target, service_hosts(binding.service.options))
