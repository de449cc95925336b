"""What an auth flow is: its endpoints as data, what a request brings it and what it
answers (no HTTP types: the transport translates). Each flow is a class in its own
module, listed in ``registry.py``; the bearer-token logic v2, v3 and OAuth share is in
``bearer.py``."""

from __future__ import annotations

import abc
import dataclasses
import datetime
import functools
import re
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NoReturn, Protocol, TypeVar

from ..events import AuthRejected
from ..records import AUTH_FAILED
from ..secret_text import ClientKind
from ..timeline import to_datetime

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ..accounts import Account
    from ..credentials import Call
    from ..events import Event
    from ..limits import SecretKind
    from ..options import Options
    from ..records import Authorization, Refusal
    from ..service import AuthService

#: The path of the cookies the real service sets (the interface document).
COOKIE_PATH = "/urest_service"
#: The segments of paths that name an account and a profile (v3's, the portal's), for
#: :attr:`Flow.path_names`.
ACCOUNT_PROFILE_NAMES = ("/accounts/(?P<account>[^/]+)", "/profiles/(?P<profile>[^/]+)")

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def remember_me(now: float) -> str:
    """The ``rememberMe`` deletion of an answer made at ``now``: its ``Expires`` is the
    answer's date minus 24 hours, as in the published v1 and v2 answers (``Date: Mon, 31
    Oct 2016 20:39:29 GMT``, ``Expires=Sun, 30-Oct-2016 20:39:29 GMT``). Spelled out
    here: ``strftime`` names days and months in the process's locale."""
    when = datetime.datetime.fromtimestamp(max(0.0, now - 86400.0), datetime.timezone.utc)
    expires = (
        f"{_DAYS[when.weekday()]}, {when.day:02d}-{_MONTHS[when.month - 1]}-{when.year} "
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} GMT"
    )
    return f"rememberMe=deleteMe; Path={COOKIE_PATH}; Max-Age=0; Expires={expires}"


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
    #: Answer no body at all, not even ``{}`` (SCIM's revoke).
    empty: bool = False


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
            return hosts.count(region_host) < len(hosts)  # any other host (no generator)
        return self.host in hosts


#: What may surround a header value (RFC 9110 5.5: optional whitespace is SP and HTAB).
#: str.strip() also strips NBSP, VT, FF, NEL (U+0085) and U+001C..U+001F.
HTTP_WHITESPACE = " \t"


def normalized_path(path: str) -> str:
    """``path`` as a server that normalizes it reads it: repeated slashes as one, and
    RFC 3986's remove_dot_segments (``/p/main/../other`` is ``/p/other``). What a check
    of the names in a path (a v3 profile, a scope's placeholder) must read."""
    kept: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        if segment == "..":
            if len(kept) > 1:
                kept.pop()
        elif segment == "." or (segment == "" and 0 < index < len(segments) - 1):
            continue
        else:
            kept.append(segment)
    return "/".join(kept) or "/"


@dataclasses.dataclass(frozen=True)
class Received:
    """A protected call as it arrived, read once by the transport: what a flow reads its
    credential from (no HTTP types)."""

    method: str
    path: str
    #: Where it arrived (worked out once, when it arrived).
    where: Where
    #: The header lines, in order (a repeated header is joined with ", ").
    headers: tuple[tuple[str, str], ...] = ()
    cookies: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: The query string's pairs, in order.
    query: tuple[tuple[str, str], ...] = ()
    scheme: str = "http"
    #: The body's media type, without parameters.
    mimetype: str = ""
    body: bytes = b""
    #: ``path`` normalised once by the transport (:func:`normalized_path`): what a scope
    #: is derived from. ``""``: not given.
    normalized: str = ""

    def header(self, name: str) -> list[str]:
        """The values of the header ``name`` (any case)."""
        wanted = name.lower()
        return [value for key, value in self.headers if key.lower() == wanted]

    def param(self, name: str) -> list[str]:
        """The values of the query parameter ``name``."""
        return [value for key, value in self.query if key == name]


@dataclasses.dataclass(frozen=True)
class Credential:
    """What a protected call presented of its flow's credential, read by the flow
    (each flow subclasses it with its own fields): why it is malformed, if so."""

    problem: str | None = None
    #: The call presented none of it at all.
    missing: bool = False


class MalformedCall(Exception):
    """A protected call too malformed to authorize (a query parameter sent twice): the
    transport answers ``status`` (a 4xx) with ``reason``, as for any bad request."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Sets:
    """An option that sets a field of a flow's answers, as a drift names the field
    (``body.expires_in``, ``headers.sunset``; ``path``: the path of the endpoint that
    answers with the flow's credential). A drift names the option only when one of its
    values makes the fake answer as the service did."""

    option: str
    field: str
    #: The field's value under each of the option's values (``None``: no such field);
    #: empty: the field holds the option's value itself (seconds, a host, a path), any
    #: value the option takes.
    values: tuple[tuple[object, object], ...] = ()


class Refuse(Protocol):
    """How a flow's authentication is refused where a shared rule (lockout) says no: a
    failed login, a refused call. ``then`` is recorded after the refusal's event."""

    def __call__(
        self,
        username: str | None,
        code: int,
        reason: str,
        *,
        message: str | None = None,
        then: Event | None = None,
    ) -> NoReturn: ...


class Flow(abc.ABC):
    """One auth flow. The class attributes declare it; an instance serves one test's
    ``AuthService`` (whose lock and state it uses).

    Required: the class attributes ``name``, ``title``, ``path_title``, ``secret``,
    ``credential`` and ``auth_hosts``, and the methods :meth:`read` and :meth:`authorize`
    (``BearerFlow`` has both). ``register()``
    names what a class lacks. Every other member has a default."""

    #: What routes, faults and counts call it (``auth="v2"``).
    name: ClassVar[str]
    #: How messages name its authentication endpoint.
    title: ClassVar[str]
    #: How a refusal of its authentication names the endpoint's path.
    path_title: ClassVar[str]
    #: The secret an account authenticates with.
    secret: ClassVar[SecretKind]
    #: What it grants: ``"token"`` or ``"session"``; ``None`` for a flow whose calls
    #: present the secret itself (nothing is granted, nothing is counted as a grant).
    credential: ClassVar[str | None]
    #: How lockout messages name one of its authentications ("login": "failed logins",
    #: "login attempts").
    attempt: ClassVar[str] = "authentication"
    #: Failed authentications in a row lock the account (the service's 1402), and so
    #: do locks on cue (``mgmt_server.lock``).
    locks_out: ClassVar[bool] = True
    #: Routes under this path prefix belong to it unless declared otherwise.
    route_prefix: ClassVar[str | None] = None
    #: What ``auth_count`` messages say it counts.
    grants_phrase: ClassVar[str] = "credential grants"
    endpoints: ClassVar[tuple[Endpoint, ...]] = ()
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
    # What it declares of its answers and paths: the forwarder of live runs, the
    # snapshots and the drift messages read these (through the registry), never a list
    # of their own. A flow that declares none gets its answer_field masked and shaped.
    #: Keys of its answers whose values are credentials, besides :attr:`answer_field`.
    secret_keys: ClassVar[tuple[str, ...]] = ()
    #: Keys of its answers whose values are codes, recorded and compared as they are.
    code_keys: ClassVar[tuple[str, ...]] = ()
    #: Keys of its answers whose values are hosts of the service (v3's ``host``).
    host_keys: ClassVar[tuple[str, ...]] = ()
    #: Regular expressions of its paths whose named groups a snapshot records as
    #: ``{name}`` (what differs between one user of the service and another).
    path_names: ClassVar[tuple[str, ...]] = ()
    #: Regular expressions (matched at a path's start) of the paths of its API calls
    #: beyond :attr:`route_prefix`: a live run sends such a call, undeclared, to its hosts.
    api_paths: ClassVar[tuple[str, ...]] = ()
    #: Which option sets which field of its answers (:class:`Sets`).
    sets: ClassVar[tuple[Sets, ...]] = ()

    def __init__(self, service: AuthService) -> None:
        self.service = service

    @classmethod
    def endpoints_for(cls, options: Options) -> tuple[Endpoint, ...]:
        """Its endpoints under ``options`` (a path may be an option); by default
        ``endpoints``."""
        return cls.endpoints

    @classmethod
    def check_route(cls, permission: str | None, scope: str | None) -> None:
        """ValueError if a route of this flow cannot take ``permission`` or ``scope``."""
        if scope is not None:
            raise ValueError(
                f"route(scope=...): {cls.name} credentials carry no scopes; scopes belong "
                "to routes of a flow whose tokens do"
            )

    @classmethod
    def style(cls, refusal: Refusal) -> Refusal:
        """The refusal in this flow's error shape (the transport's and the scripted
        faults' refusals come in the service's); by default as it is."""
        return refusal

    @classmethod
    def api_error(cls, refusal: Refusal, options: Options) -> Refusal:
        """A refused API call of this flow (a declared route's: its credential refused,
        a wrong host, a rate limit, a failed handler) in the envelope of this flow's API
        errors; by default as it is: the service's ``{"returnCode", "message"}`` (v1 and
        v2), or the body a flow's refusal already carries (OAuth's)."""
        return refusal

    def principals(self) -> list[str]:
        """Who, besides the accounts, is granted this flow's credentials (the
        ``username`` of its events): OAuth's client ids. None by default."""
        return []

    @classmethod
    def fix_churn(cls, options: Options) -> str:
        """How a client of this flow avoids churn (a check's fix)."""
        what = cls.credential or "credential"
        return (
            f"keep the {what} from {cls.title} and send it with every call; get a new one "
            f"only near its end (within {cls.churn_margin(options):g} s of it) or after a "
            "call was answered 401"
        )

    @classmethod
    def fix_expired(cls, options: Options) -> str:
        """How a client of this flow avoids using an expired credential."""
        what = cls.credential or "credential"
        return (
            f"renew proactively: get a new {what} from {cls.title} within "
            f"{cls.churn_margin(options):g} s of the end of the one held, instead of sending "
            "it until a call is answered 401"
        )

    @classmethod
    def api_host_names(cls, options: Options) -> tuple[str, ...]:
        """The hosts its API calls answer on (a route's unless it names its own)."""
        return (options.v3_host,) if cls.api_on_region_host else cls.api_hosts

    @classmethod
    def wrong_host_reason(cls, where: Where, expected: str, *, api: bool) -> str:
        """Why a request that reached ``where`` is refused: it belongs on ``expected``
        (the hosts it answers on, as the client can reach them)."""
        what = f"{cls.name} API calls" if api else f"{cls.title}"
        return (
            f"this call went to {where.shown}, which does not serve {what}; send it to {expected}"
        )

    @classmethod
    def fix_refused(cls) -> str:
        """What a protected call of this flow must send (a refused call's fix)."""
        return f"the {cls.secret} of the account, as {cls.title} carry it"

    @classmethod
    def fault_endpoints(cls) -> tuple[Endpoint, ...]:
        """Its endpoints that scripted and scheduled faults apply to (maybe none)."""
        return tuple(e for e in cls.endpoints if e.fault_point)

    def answer(self, operation: str, incoming: Incoming) -> Answer:
        """Serve one of :attr:`endpoints` (its ``operation``)."""
        method = getattr(self, f"answer_{operation}")
        answer: Answer = method(incoming)
        return answer

    @abc.abstractmethod
    def read(self, received: Received) -> Credential:
        """Required. The credential a protected call of this flow presents, with why it
        is missing or malformed (:class:`MalformedCall` for a call too malformed to
        authorize)."""

    def carried(self, received: Received) -> str | None:
        """What of this flow's credential ``received`` carries, for a route of another
        flow to say ("a JSESSIONID cookie: ..."); ``None`` if nothing."""
        return None

    def others_carried(self, received: Received) -> str | None:
        """What ``received`` carries of the other flows' credentials, if anything."""
        found = [
            text
            for flow in self.service.flows.values()
            if flow is not self and (text := flow.carried(received)) is not None
        ]
        return "; ".join(dict.fromkeys(found)) or None

    def owner(self, credential: Credential) -> tuple[str | None, str | None]:
        """The account and label of what a call presented, when this test granted it
        (a refusal before authentication names them); else ``None`` s."""
        return None, None

    @abc.abstractmethod
    def authorize(
        self, credential: Credential, call: Call, permission: str | None
    ) -> Authorization:
        """Required. Authenticate a protected call (what :meth:`read` found): its
        ``Authorization``, or a refusal (``refuse_in_call(call)(...)``, or
        ``service.credentials.refuse_call``)."""

    # -- the rules every flow shares -------------------------------------------------

    @classmethod
    def churn_margin(cls, options: Options) -> float:
        """How near its end a credential of this flow may be replaced without it being
        churn: ``refresh_margin`` unless the flow's credentials have their own."""
        return options.margin

    def check_account(
        self,
        username: str | None,
        secret: str | None,
        *,
        now: float,
        client: ClientKind,
        refuse: Refuse,
        json_body: bool = False,
        throttle: bool = False,
    ) -> Account:
        """The account whose ``secret`` was presented, under the lockout rule (if
        ``locks_out``): an unknown account, a locked one (1402) or a wrong secret
        (counted towards a lockout) is refused with ``refuse``. ``json_body``: the secret
        came in a JSON body (its diagnosis then gives JSON advice, not form advice);
        ``throttle``: a throttled grant (429) is refused before the secret is checked."""
        service = self.service
        account = service.accounts.get(username) if username is not None else None
        if account is None or username is None:
            refuse(None, AUTH_FAILED, service.accounts.unknown_account(username or ""))
        if throttle:
            service.credentials.check_throttle(self, username, now)
        if self.locks_out:
            service.lockout.check(self, username, now, refuse)
        expected = account.secret(self.secret)
        problem = service.accounts.secret_problem(
            username, self.secret, expected, secret or "", client, json_body=json_body
        )
        if problem:
            if self.locks_out:
                service.lockout.failed(self, username, now, problem, refuse)
            refuse(username, AUTH_FAILED, problem)
        if self.locks_out:
            service.lockout.succeeded(username)
        return account

    def rejected(self, now: float, username: str | None, code: int, reason: str) -> Event:
        """The event of a refused authentication at this flow's endpoint
        (:class:`AuthRejected`; v1's is a ``LoginRejected``)."""
        return AuthRejected(
            at=to_datetime(now),
            username=username,
            return_code=code,
            reason=reason,
            version=self.name,
        )

    def refuse_auth(
        self, now: float, *, account: str | None = None, profile: str | None = None
    ) -> Refuse:
        """How a refused authentication at this flow's endpoint is recorded: its
        ``rejected`` event (naming ``account`` and ``profile``, what a v3 grant asked
        for, when given), then the refusal."""
        timeline = self.service.timeline

        def refuse(username: str | None, code: int, reason: str, **more: Any) -> NoReturn:
            event = self.rejected(now, username, code, reason)
            if isinstance(event, AuthRejected) and (account or profile):
                event = dataclasses.replace(event, account=account, profile=profile)
            timeline.refuse(event, code, reason, **more)

        return refuse

    def refuse_in_call(self, call: Call) -> Refuse:
        """How a refused protected call is recorded (an ``ApiCall`` with the wrong
        credential: a finding): for a flow whose calls present the secret itself."""
        credentials = self.service.credentials

        def refuse(username: str | None, code: int, reason: str, **more: Any) -> NoReturn:
            credentials.refuse_call(call, username, None, reason, code=code, wrong=True, **more)

        return refuse

    @classmethod
    def wrong_path(cls, path: str) -> str:
        """Why ``path`` under a templated endpoint's family is none of its endpoints."""
        shapes = " or ".join(f"{e.method} {e.path}" for e in cls.endpoints if not e.exact)
        return f"{path} is not a {cls.title} endpoint: use {shapes}"


#: A client of a :class:`ClientFlow` (OAuth's ``OAuthClient``).
C = TypeVar("C")


class ClientFlow(Flow, Generic[C]):
    """A flow whose credentials are granted to clients of its own (OAuth's client
    credentials), not to the accounts: what ``mgmt_server.add_client`` and
    ``mgmtauth-server --client`` reach, whichever flow that is (the registry finds it)."""

    #: Its clients by id.
    clients: dict[str, C]

    @abc.abstractmethod
    def add_client(
        self,
        scopes: Iterable[str] | None = None,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
    ) -> C: ...

    @abc.abstractmethod
    def rotate_client_secret(self, client_id: str, new_secret: str | None = None) -> C: ...

    @classmethod
    @abc.abstractmethod
    def live_client(cls, client_id: str, client_secret: str, account: str, profile: str) -> C:
        """A client of the service itself (a live run's), with the scopes the fake's
        default client has, for ``account`` and ``profile``."""

    @abc.abstractmethod
    def revoke_client(self, client_id: str) -> None: ...

    @classmethod
    @abc.abstractmethod
    def check_client_scopes(cls, scopes: object, *, what: str) -> tuple[str, ...]:
        """The scopes a client may be given; TypeError or ValueError saying why not."""
