"""Live runs (``pytest --mgmtauth-live``): the fake forwards each request of a test to the
service and hands the service's answer back, recording the exchange for the drift check
(docs/live.md says what a user sees of it).

A request goes to the host of the service it stands for: the host it named (through the
proxy of ``intercept``, or a ``Host`` header naming one); the region host a v3 answer of
this test named, when it arrived at the region address; else the usual host of its
endpoint, or of its flow (as its Destination decided). Only the service's published hosts
are reached, over TLS verified against the system's trust store (:attr:`Upstream.context`).

For a client that reached the fake by its address, the answer's host fields (the flows'
``host_keys``) become the fake's region address and a cookie's ``Domain`` is dropped, so
that the client comes back here. The exchange is recorded as the service answered it; its
credentials (the flows' credential keys, cookie values) are held for masking.
``MGMTAUTH_LIVE_UPSTREAM`` and ``MGMTAUTH_LIVE_CAFILE`` are for the project's own tests
(:class:`Upstream`, docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import os
import re
import ssl
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn
from urllib.parse import urlsplit

from werkzeug import Response

from .._service.exchange_shape import parse_json
from .._service.flows.registry import declared, service_hosts
from .errors import error_response
from .hosts import host_name, region_address
from .parsing import read_body

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from werkzeug import Request

    from .binding import Binding
    from .destination import Destination

#: The domains of the service's published hosts: a region host a v3 answer names is
#: reached only under one of them.
PUBLISHED_DOMAINS = ("tealiumiq.com", "tealiumapis.com")
#: Headers of one connection (RFC 9110 7.6.1), never forwarded either way.
_HOP_BY_HOP = frozenset(
    (
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    )
)
#: The refusals of a credential (the interface document's Errors; RFC 6749 5.2).
_REFUSED_CODES = frozenset((1401, 1402))
_REFUSED_ERRORS = frozenset(("invalid_client",))
#: A refusal's code quoted in a body that is not JSON (an HTML page, a log line).
_REFUSED_CODE_TEXT = re.compile(r"returnCode\W{0,4}(140[12])\b")


@dataclass(frozen=True)
class Upstream:
    """Where forwarded requests go: the service's hosts (``url`` None), or one https URL
    that stands in for all of them (the project's own tests); ``cafile``: a CA bundle
    trusted instead of the system's trust store."""

    url: str | None = None
    cafile: str | None = None
    timeout: float = 30.0

    def check(self) -> None:
        """ValueError unless ``url`` is an https URL with a host (and no path) and
        ``cafile`` a file of CA certificates. Makes the TLS context of every forwarded
        request: called at the run's start, before any test's interception."""
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.scheme != "https" or not parts.hostname or parts.path not in ("", "/"):
                raise ValueError(
                    f"MGMTAUTH_LIVE_UPSTREAM must be an https URL of a host, like "
                    f"https://127.0.0.1:8443, not {self.url!r}"
                )
        if self.cafile is not None and not os.path.isfile(self.cafile):
            raise ValueError(
                f"MGMTAUTH_LIVE_CAFILE names {self.cafile}, which does not exist or is not a "
                "file; set it to a PEM file of the CA certificates the upstream's certificate "
                "is signed by, or unset it"
            )
        try:
            self.context  # noqa: B018 -- made now, from the environment as the run found it
        except OSError as exc:  # ssl.SSLError too
            raise ValueError(
                f"MGMTAUTH_LIVE_CAFILE names {self.cafile}, which holds no CA certificate in "
                f"PEM form ({exc}); set it to a PEM file of the CA certificates the "
                "upstream's certificate is signed by, or unset it"
            ) from None

    @functools.cached_property
    def context(self) -> ssl.SSLContext:
        """The system's trust store (or the given bundle): never the fake's test CA. Made
        once, at the run's start (:meth:`check`): the system store is found through
        ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` where they are set, and interception sets
        ``SSL_CERT_FILE`` to a bundle with the test CA during each of its tests."""
        return ssl.create_default_context(cafile=self.cafile)

    def send(
        self, host: str, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """One request to ``host`` (or the upstream URL, ``Host`` kept); the status,
        headers and body of its answer."""
        if self.url is None:
            address, port = host, 443
        else:
            parts = urlsplit(self.url)
            address, port = parts.hostname or "", parts.port or 443
        connection = http.client.HTTPSConnection(
            address, port, timeout=self.timeout, context=self.context
        )
        try:
            connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.endheaders(body or None)
            answer = connection.getresponse()
            return answer.status, answer.getheaders(), answer.read()
        finally:
            connection.close()


@dataclass
class LiveRun:
    """One live run's link to the service (shared by its tests): where requests go, the
    live credentials (held for masking), and the first refusal of those credentials,
    after which nothing more is forwarded."""

    upstream: Upstream
    #: Every credential of the run (API key, password, client secret): never written.
    secrets: tuple[str, ...]
    #: Skips the test, naming what only a fake can do (the glue's ``pytest.skip``).
    fake_only: Callable[[str], NoReturn]
    #: Where this thread's connections to the service are made from: outside the
    #: fake's own name resolution (which sends the service's hosts to the fake, or
    #: refuses them).
    outside: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    #: Why the run stopped forwarding: the service refused its credentials.
    refused: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class LiveTest:
    """One test's side of a live run: the region host the service named for it, and the
    first request the fake answered itself (not forwarded): then nothing is recorded,
    since the recording would lack that exchange."""

    run: LiveRun
    region_host: str | None = None
    answered_here: str | None = None
    #: The test has ended (or was skipped): nothing more of it is forwarded.
    ended: bool = False

    def answered(
        self, request: Request, response: Response | None, redact: Callable[[str], str]
    ) -> None:
        """Note a request of the test and its answer (None: none, the connection reset).
        The note is printed and goes to JUnit: its path is masked (``redact``), as a client
        may have put a secret in it."""
        if self.ended:  # refused (ended_message): the test's recording is made already
            return
        if self.answered_here is None and not isinstance(response, ServiceAnswer):
            status = "no answer" if response is None else str(response.status_code)
            self.answered_here = redact(f"{request.method} {request.path} -> {status}")


def refused_credentials(path: str, status: int, body: bytes) -> str | None:
    """How the service refused the run's credentials in this answer of an auth endpoint
    (``1401 (401) at POST /v2/auth``), or None. Any 401 is one, and a ``returnCode`` 1401
    or 1402 or an ``invalid_client`` whatever the answer's ``Content-Type`` says (a
    gateway's HTML page, JSON labelled ``text/plain``): one more wrong login may be the
    one that locks the account."""
    try:
        document = parse_json(body)
    except ValueError:
        document = None
    if isinstance(document, dict):
        code = document.get("returnCode")
        if isinstance(code, int) and code in _REFUSED_CODES:
            return f"{code} ({status}) at {path}"
        error = document.get("error")
        if isinstance(error, str) and error in _REFUSED_ERRORS:
            return f"{error} ({status}) at {path}"
    elif document is None:
        quoted = _REFUSED_CODE_TEXT.search(body.decode("utf-8", "replace"))
        if quoted is not None:
            return f"{quoted[1]} ({status}) at {path}"
    if status == 401:
        return f"401 at {path}"
    return None


def forward(binding: Binding, request: Request, to: Destination) -> Response:
    """Forward ``request`` (for ``to``) to the service; the answer for the client (see
    the module's text). The exchange is kept, as the service answered it, for the drift
    record."""
    live = binding.live
    assert live is not None
    run = live.run
    if live.ended:
        return error_response(503, 503, ended_message(binding.owner))
    if run.refused is not None:
        return error_response(
            503,
            503,
            f"not forwarded: the service refused the live credentials earlier in this run "
            f"({run.refused}), so the run stopped forwarding (the service locks an account "
            "after repeated failed logins); check the MGMTAUTH_LIVE_* variables",
        )
    here = to.where
    named = here.host is not None and here.shown == here.host  # not the fake's address
    host = _target_host(binding, to, named=named)
    if not _published(host, binding):
        known = [h for h in service_hosts(binding.service.options) if _in_published_domains(h)]
        return error_response(
            403,
            403,
            f"not forwarded to {host}: a live run reaches only the service's published "
            f"hosts ({', '.join(known)}, or a region host "
            f"under {' or '.join(PUBLISHED_DOMAINS)} that a v3 answer named)",
        )
    body = read_body(request)
    headers = [
        (name, value)
        for name, value in request.headers.items()
        if name.lower() not in _HOP_BY_HOP
        and name.lower() not in ("host", "content-length", "accept-encoding")
    ]
    # identity: the body is recorded as it came, never decoded from gzip first.
    headers += [("Host", host), ("Accept-Encoding", "identity")]
    if body or request.method in ("POST", "PUT", "PATCH"):
        headers.append(("Content-Length", str(len(body))))
    try:
        with run.outside():
            status, answer_headers, data = run.upstream.send(
                host, request.method, to.target, headers, body
            )
    except (OSError, http.client.HTTPException) as exc:
        where = run.upstream.url or f"https://{host}"
        return error_response(
            502,
            502,
            f"the live run could not reach the service at {where} "
            f"({type(exc).__name__}: {exc}); check the network, and that the system trusts "
            "the service's certificate",
        )
    original = ServiceAnswer(
        data,
        status=status,
        headers=[(k, v) for k, v in answer_headers if k.lower() not in _HOP_BY_HOP],
    )
    document = _json_object(original)
    _hold_secrets(binding, original, document)
    # An auth call (not a logout): its refusal is a refusal of the run's credentials.
    if to.exact and to.endpoint is not None and to.endpoint.fault_point:
        refused = refused_credentials(f"{request.method} {request.path}", status, data)
        if refused is not None:
            with run.lock:
                run.refused = run.refused or refused
    binding.keep_exchange(request, original, protected=to.route is not None)
    return _for_client(binding, request, original, document, named=named)


class ServiceAnswer(Response):
    """An answer of the service (any other answer of a live test was the fake's own: a
    request not forwarded)."""

    # No Content-Type of our own: the service's answer has the headers it had.
    default_mimetype = None


def ended_message(test: str) -> str:
    """The refusal of a request that came after its live test ended."""
    return (
        f"not forwarded: this request came after its test ({test}) had ended or been "
        "skipped. In a live run each test has addresses of its own, so that a client still "
        "calling after its test (a thread it started) reaches neither the service nor "
        "another test's recording: stop the test's clients before it ends"
    )


def _target_host(binding: Binding, to: Destination, *, named: bool) -> str:
    options, here, flow = binding.service.options, to.where, to.flow
    if named:
        assert here.host is not None
        return here.host
    if here.host is not None:  # the region address
        live = binding.live
        return live.region_host if live is not None and live.region_host else here.host
    if to.exact:
        return flow.auth_hosts[0]
    if to.route is not None and to.route.host is not None:
        return to.route.host
    # The fake's own address stands for every host but the region host (hosts.py).
    others = [h for h in flow.api_host_names(options) if h != options.v3_host]
    return others[0] if others else flow.auth_hosts[0]


def _published(host: str, binding: Binding) -> bool:
    # Under the service's domains whatever the options say: v3_host names any host.
    if not _in_published_domains(host):
        return False
    if host in service_hosts(binding.service.options):
        return True
    live = binding.live
    return live is not None and host == live.region_host


def _in_published_domains(host: str) -> bool:
    return any(host == domain or host.endswith("." + domain) for domain in PUBLISHED_DOMAINS)


def _json_object(response: Response) -> dict[str, object] | None:
    if response.mimetype != "application/json":
        return None
    try:
        document = parse_json(response.get_data())
    except ValueError:  # not JSON, or nested too deeply to be read as JSON
        return None
    return document if isinstance(document, dict) else None


def _hold_secrets(binding: Binding, answer: Response, document: dict[str, object] | None) -> None:
    """Mask the credentials the service handed out (tokens, ``utk``, cookie values)
    wherever this test's texts quote them."""
    keys = declared().secret_keys
    values = [
        value for key, value in (document or {}).items() if key in keys and isinstance(value, str)
    ]
    for header in answer.headers.getlist("Set-Cookie"):
        value = header.partition(";")[0].partition("=")[2].strip().strip('"')
        if value and value != "deleteMe":
            values.append(value)
    if values:
        binding.service.timeline.hold_secrets(*values)


def _for_client(
    binding: Binding,
    request: Request,
    original: Response,
    document: dict[str, object] | None,
    *,
    named: bool,
) -> Response:
    live = binding.live
    assert live is not None
    hosts = [
        key
        for key, value in (document or {}).items()
        if key in declared().host_keys and isinstance(value, str)
    ]
    region = document[hosts[0]] if document is not None and hosts else None
    if isinstance(region, str) and region:
        live.region_host = host_name(region)
    if named:
        return original
    answer = ServiceAnswer(
        original.get_data(), status=original.status, headers=original.headers.copy()
    )
    if hosts and document is not None:
        address = region_address(binding, request)
        document = {**document, **dict.fromkeys(hosts, address)}
        answer.set_data(json.dumps(document).encode())
    cookies = answer.headers.getlist("Set-Cookie")
    if any("domain=" in c.lower() for c in cookies):
        del answer.headers["Set-Cookie"]
        for cookie in cookies:
            kept = [p for p in cookie.split(";") if not p.strip().lower().startswith("domain=")]
            answer.headers.add("Set-Cookie", ";".join(kept))
    return answer
