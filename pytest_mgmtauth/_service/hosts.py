"""The hosts of the service, as the domain sees them: which host a request reached
(a named host of the service, or the fake's own address, which stands for every host but
the region host), and whether a flow's endpoint or route answers there.

The names themselves are declared by the flows (``Flow.auth_hosts``, ``Flow.api_hosts``,
``Flow.api_on_region_host``) and gathered by the registry; the region host of v3's API
calls is the option ``v3_host``. Nothing here knows about sockets: the transport says
where a request arrived with a :class:`Where`.
"""

from __future__ import annotations

import dataclasses

from .options import DEFAULT_V3_HOST, is_host_name

__all__ = [
    "DEFAULT_V3_HOST",
    "FAKE_ADDRESS",
    "WRONG_HOST_STATUS",
    "HostPlan",
    "Where",
    "is_host_name",
]

#: The status of a request sent to a host that does not serve it: the service's hosts
#: are separate gateways, and a gateway answers 404 for an operation it does not have.
WRONG_HOST_STATUS = 404


@dataclasses.dataclass(frozen=True)
class Where:
    """Where a request arrived.

    ``host`` is the named host of the service it reached (through the proxy, or by a
    ``Host`` header naming one), or ``None`` for the fake's own address, which stands
    for every host of the service except the region host. ``shown`` is how texts name
    it (``api.tealiumiq.com``, ``127.0.0.1:53011``)."""

    host: str | None
    shown: str

    def reaches(self, hosts: tuple[str, ...], region_host: str) -> bool:
        """Whether a request here reaches one of ``hosts``."""
        if self.host is None:
            return any(h != region_host for h in hosts)
        return self.host in hosts

    def is_region(self, region_host: str) -> bool:
        return self.host == region_host


#: Where a request arrived when the transport does not say (the fake's own address).
FAKE_ADDRESS = Where(None, "the fake's address")


@dataclasses.dataclass(frozen=True)
class HostPlan:
    """How one test's fake stands in for the hosts: the region host (``v3_host``), and
    whether it intercepts (then clients name the hosts themselves; without, a second
    address of the fake stands for the region host)."""

    region_host: str = DEFAULT_V3_HOST
    intercept: bool = False
