"""What an auth flow is: its endpoints as data, what a request brings it and what it
answers (no HTTP types: the transport translates). Each flow is a class in its own
module, listed in ``registry.py``; the bearer-token logic v2, v3 and OAuth share is in
``bearer.py``."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import TYPE_CHECKING, ClassVar

from ..secret_text import ClientKind

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..credentials import Call
    from ..limits import SecretKind
    from ..options import Options
    from ..records import Authorization, Refusal
    from ..service import AuthService
    from .registry import Where

#: The path of the cookies the real service sets (the interface document).
COOKIE_PATH = "/urest_service"
#: The cookie the real service clears on every successful authentication.
REMEMBER_ME = (
    f"rememberMe=deleteMe; Path={COOKIE_PATH}; Max-Age=0; Expires=Sat, 01-Jan-2000 00:00:00 GMT"
)


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One endpoint of a flow, as data: the transport serves it from this."""

    #: The flow's method that answers it: ``answer_<operation>``.
    operation: str
    #: An exact path, or a template whose ``{name}`` segments become parameters.
    path: str
    #: The form fields it reads (each required).
    form: tuple[str, ...] = ()
    method: str = "POST"
    #: The statuses the real endpoint is documented to answer; any other 4xx the fake
    #: would send is answered as 400 there. ``None``: no such list.
    statuses: tuple[int, ...] | None = None
    #: Scripted and scheduled faults of auth calls apply to it.
    fault_point: bool = True

    @property
    def exact(self) -> bool:
        return "{" not in self.path

    @property
    def family(self) -> str | None:
        """The prefix a templated path's requests share (``/v3/auth/``)."""
        return None if self.exact else self.path[: self.path.index("{")].rsplit("/", 2)[0] + "/"

    @property
    def wrong_method_status(self) -> int:
        """405, or 404 where the documented statuses have no 405."""
        return 405 if self.statuses is None or 405 in self.statuses else 404

    def match(self, path: str) -> dict[str, str] | None:
        if self.exact:
            return {} if path == self.path else None
        found = _template(self.path).match(path)
        return None if found is None else found.groupdict()


@functools.lru_cache(maxsize=64)
def _template(path: str) -> re.Pattern[str]:  # cached: matched on every request
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path))
    return re.compile(f"^{pattern}/?$")


@dataclasses.dataclass(frozen=True)
class Incoming:
    """What a request to a flow's endpoint brings, read by the transport."""

    path: str
    form: Mapping[str, str]
    params: Mapping[str, str]
    cookies: Mapping[str, str]
    #: The tick at which it arrived (:meth:`AuthService.request_arrived`).
    arrived: int | None = None
    client: ClientKind = ClientKind.OTHER
    #: Where the calls of what it grants go (v3's ``host``): the region host under
    #: interception, else the fake's region address (``host:port``).
    host: str = ""
    #: For an endpoint that declares no ``form`` (it reads the request itself): the raw
    #: body (within the size limit), its ``Content-Type``, the ``Authorization`` header
    #: values and the query string's pairs.
    body: bytes = b""
    content_type: str | None = None
    authorization: tuple[str, ...] = ()
    query: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Answer:
    """A flow endpoint's success: the JSON body and the cookies it sets."""

    body: dict[str, object]
    #: ``Set-Cookie`` values, in order.
    cookies: tuple[str, ...] = ()
    #: The success headers; ``None``: the service's (``Cache-Control``, ``X-NodeId``...).
    headers: tuple[tuple[str, str], ...] | None = None


@dataclasses.dataclass(frozen=True)
class Presented:
    """The credentials a protected call presented, and why they are malformed, if so."""

    token: str | None = None
    session_id: str | None = None
    utk: str | None = None
    problem: str | None = None
    #: The call presented no credential at all (no ``Authorization`` header).
    missing: bool = False


class Flow:
    """One auth flow. The class attributes declare it; an instance serves one test's
    :class:`AuthService` (whose lock and state it uses)."""

    #: What routes, faults and counts call it (``auth="v2"``).
    name: ClassVar[str]
    #: How messages name its authentication endpoint.
    title: ClassVar[str]
    #: How a refusal of its authentication names the endpoint's path.
    path_title: ClassVar[str]
    #: The secret an account authenticates with.
    secret: ClassVar[SecretKind]
    #: What it grants: ``"token"`` or ``"session"``.
    credential: ClassVar[str]
    #: How a protected call presents the credential (the transport's reader).
    presents: ClassVar[str]
    #: Routes under this path prefix belong to it unless declared otherwise.
    route_prefix: ClassVar[str | None] = None
    #: What ``auth_count`` messages say it counts.
    grants_phrase: ClassVar[str]
    endpoints: ClassVar[tuple[Endpoint, ...]]
    #: The hosts of the service its endpoints (authentication) answer on.
    auth_hosts: ClassVar[tuple[str, ...]]
    #: The hosts of the service its API calls (declared routes) answer on.
    api_hosts: ClassVar[tuple[str, ...]] = ()
    #: Its API calls go to the region host (the option ``v3_host``) instead.
    api_on_region_host: ClassVar[bool] = False
    #: The field of a grant's answer that holds the credential (a malformed answer
    #: cuts it off).
    answer_field: ClassVar[str] = "token"
    #: Its tokens carry scopes: ``route(..., scope=...)`` belongs to it.
    takes_scope: ClassVar[bool] = False
    #: How texts name whom it grants credentials (the ``username`` of its events).
    principal: ClassVar[str] = "account"

    def __init__(self, service: AuthService) -> None:
        self.service = service

    @classmethod
    def endpoints_for(cls, options: Options) -> tuple[Endpoint, ...]:
        """Its endpoints under ``options`` (a path may be an option); by default
        :attr:`endpoints`."""
        return cls.endpoints

    @classmethod
    def check_route(cls, permission: str | None, scope: str | None) -> None:
        """ValueError if a route of this flow cannot take ``permission`` or ``scope``."""
        if scope is not None:
            from .registry import FLOWS  # the registry imports every flow module

            scoped = " or ".join(f"auth={n!r}" for n, f in FLOWS.items() if f.takes_scope)
            raise ValueError(
                f"route(scope=...): {cls.name} tokens carry no scopes; scopes belong to "
                f"routes of a flow whose tokens do ({scoped or 'none'})"
            )

    @classmethod
    def style(cls, refusal: Refusal) -> Refusal:
        """The refusal in this flow's error shape (the transport's and the scripted
        faults' refusals come in the service's); by default as it is."""
        return refusal

    def principals(self) -> list[str]:
        """Who, besides the accounts, is granted this flow's credentials (the
        ``username`` of its events): OAuth's client ids. None by default."""
        return []

    @classmethod
    def fix_churn(cls, options: Options) -> str:
        """How a client of this flow avoids churn (a check's fix)."""
        raise NotImplementedError

    @classmethod
    def fix_expired(cls, options: Options) -> str:
        """How a client of this flow avoids using an expired credential."""
        raise NotImplementedError

    @classmethod
    def api_host_names(cls, options: Options) -> tuple[str, ...]:
        """The hosts its API calls answer on (a route's unless it names its own)."""
        return (options.v3_host,) if cls.api_on_region_host else cls.api_hosts

    @classmethod
    def usual_host(cls, options: Options, *, api: bool) -> str:
        """The host its calls (``api``) or its authentication usually go to: a timeline
        names the host of a call only where it is another."""
        return cls.api_host_names(options)[0] if api else cls.auth_hosts[0]

    @classmethod
    def wrong_host_reason(cls, where: Where, expected: str, *, api: bool) -> str:
        """Why a request that reached ``where`` is refused: it belongs on ``expected``
        (the hosts it answers on, as the client can reach them)."""
        what = f"{cls.name} API calls" if api else f"{cls.title}"
        return (
            f"this call went to {where.shown}, which does not serve {what}; send it to {expected}"
        )

    @classmethod
    def auth_endpoint(cls) -> str:
        """The path of its authentication endpoint (the first it lists)."""
        return cls.endpoints[0].path

    def answer(self, operation: str, incoming: Incoming) -> Answer:
        """Serve one of :attr:`endpoints` (its ``operation``)."""
        method = getattr(self, f"answer_{operation}")
        answer: Answer = method(incoming)
        return answer

    def authorize(self, presented: Presented, call: Call, permission: str | None) -> Authorization:
        """Authenticate a protected call; :class:`Refusal` if not."""
        raise NotImplementedError

    @classmethod
    def wrong_path(cls, path: str) -> str:
        """Why ``path`` under a templated endpoint's family is none of its endpoints."""
        shapes = " or ".join(f"{e.method} {e.path}" for e in cls.endpoints if not e.exact)
        return f"{path} is not a {cls.title} endpoint: use {shapes}"
