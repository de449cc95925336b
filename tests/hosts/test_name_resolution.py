"""Clients that ignore the proxy variables reach the fake too (issue 38): under
interception this process's lookups of the service's hosts lead to the fake, so aiohttp
with its default ``trust_env=False``, httpx and urllib3 with connection pools of their
own, requests without the environment, ``http.client`` and urllib without a proxy
handler reach it unchanged, with hard-coded ``https://api.tealiumiq.com`` URLs. Without
interception a lookup of a service host is refused with a message that says how to
intercept, and nothing is sent. Everything is put back after the test."""

from __future__ import annotations

import asyncio
import errno
import http.client
import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import aiohttp
import httpx
import pytest
import requests
import urllib3
from hosts_support import Reply, check_timeline, declare_routes, scenario

from pytest_mgmtauth import Account, Event, MgmtServer, TunnelClosed
from pytest_mgmtauth._fake import resolution

#: Per request, no proxy: what a client that never reads the environment would find.
NO_PROXIES: Any = {"https": None, "http": None}


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


AsyncSend = Callable[
    [str, str, "Mapping[str, str] | None", "Mapping[str, str]"], Coroutine[Any, Any, Reply]
]


def _run_scenario_async(
    server: MgmtServer, account: Account, client: Callable[[], object], fetch: AsyncSend
) -> None:
    """The (synchronous) scenario, each request sent by ``fetch`` on an event loop."""

    async def main() -> None:
        async with client():  # type: ignore[attr-defined]
            loop = asyncio.get_running_loop()

            def blocking(
                method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
            ) -> Reply:
                future = asyncio.run_coroutine_threadsafe(fetch(method, url, form, headers), loop)
                return future.result(timeout=10)

            await loop.run_in_executor(None, scenario, server, account, blocking)

    asyncio.run(main())


@pytest.fixture
def spied_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names this process looked up through the resolver the plugin found in place
    (list this fixture before mgmt_server): a service host must never be among them."""
    names: list[str] = []
    real = socket.getaddrinfo

    def spy(host: object, *args: object, **kwargs: object) -> object:
        names.append(host.decode() if isinstance(host, bytes) else str(host))
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", spy)
    return names


pytestmark = pytest.mark.mgmtauth(intercept=True)


def test_aiohttp_with_its_default_trust_env_false(
    spied_lookups: list[str], mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    declare_routes(mgmt_server)
    holder: list[aiohttp.ClientSession] = []

    def client() -> aiohttp.ClientSession:
        holder.append(aiohttp.ClientSession())  # trust_env=False: no proxy variables read
        return holder[-1]

    async def fetch(
        method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
    ) -> Reply:
        async with holder[-1].request(method, url, data=form, headers=dict(headers)) as r:
            text = await r.text()
            return Reply(r.status, text, _json(text), r.headers)

    _run_scenario_async(mgmt_server, mgmt_account, client, fetch)
    check_timeline(mgmt_server)
    assert not set(spied_lookups) & set(mgmt_server.hosts)  # never looked up for real


def test_httpx_async_with_a_transport_of_its_own(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    # A transport passed in reads no proxy variables; anyio keeps only the address of a
    # lookup and connects to the URL's port, 443.
    declare_routes(mgmt_server)
    holder: list[httpx.AsyncClient] = []

    def client() -> httpx.AsyncClient:
        holder.append(httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(), timeout=10))
        return holder[-1]

    async def fetch(
        method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
    ) -> Reply:
        r = await holder[-1].request(method, url, data=form, headers=dict(headers))
        return Reply(r.status_code, r.text, _json(r.text), r.headers)

    _run_scenario_async(mgmt_server, mgmt_account, client, fetch)
    check_timeline(mgmt_server)


def test_httpx_with_a_transport_of_its_own(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    declare_routes(mgmt_server)
    with httpx.Client(transport=httpx.HTTPTransport(), timeout=10) as http:

        def send(
            method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
        ) -> Reply:
            r = http.request(method, url, data=form, headers=dict(headers))
            return Reply(r.status_code, r.text, _json(r.text), r.headers)

        scenario(mgmt_server, mgmt_account, send)
    check_timeline(mgmt_server)


def test_urllib3_with_a_pool_of_its_own(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    declare_routes(mgmt_server)
    pool = urllib3.PoolManager(timeout=10)  # reads no proxy variable; CA: SSL_CERT_FILE

    def send(
        method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
    ) -> Reply:
        body = urllib.parse.urlencode(form) if form is not None else None
        head = dict(headers)
        if body is not None:
            head["Content-Type"] = "application/x-www-form-urlencoded"
        r = pool.request(method, url, body=body, headers=head)
        text = r.data.decode()
        return Reply(r.status, text, _json(text), r.headers)

    scenario(mgmt_server, mgmt_account, send)
    pool.clear()
    check_timeline(mgmt_server)


def test_requests_with_no_proxy(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    declare_routes(mgmt_server)
    with requests.Session() as http:

        def send(
            method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
        ) -> Reply:
            r = http.request(
                method, url, data=form, headers=dict(headers), proxies=NO_PROXIES, timeout=10
            )
            return Reply(r.status_code, r.text, _json(r.text), r.headers)

        scenario(mgmt_server, mgmt_account, send)
    check_timeline(mgmt_server)


def test_urllib_without_a_proxy_handler(mgmt_server: MgmtServer, mgmt_account: Account) -> None:
    declare_routes(mgmt_server)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def send(
        method: str, url: str, form: Mapping[str, str] | None, headers: Mapping[str, str]
    ) -> Reply:
        body = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
        try:
            with opener.open(request, timeout=10) as answer:
                text = answer.read().decode()
                return Reply(answer.status, text, _json(text), dict(answer.headers))
        except urllib.error.HTTPError as error:
            text = error.read().decode()
            error.close()
            return Reply(error.code, text, _json(text), dict(error.headers))

    scenario(mgmt_server, mgmt_account, send)
    check_timeline(mgmt_server)


def test_http_client_in_any_case_and_plain_http_on_port_80(mgmt_server: MgmtServer) -> None:
    mgmt_server.route("GET", "/urest/things", auth="v1")
    connection = http.client.HTTPSConnection("API.TealiumIQ.com", timeout=10)
    try:
        connection.request("GET", "/nowhere")
        assert connection.getresponse().status == 404
    finally:
        connection.close()
    plain = http.client.HTTPConnection("my.tealiumiq.com", timeout=10)
    try:
        plain.request("GET", "/urest/things")
        assert plain.getresponse().status == 401  # served: the v1 route wants a session
    finally:
        plain.close()
    text = mgmt_server.timeline()
    assert "GET /nowhere -> 404" in text
    assert "GET /urest/things at my.tealiumiq.com with no known credential -> 401" in text


def test_requests_with_its_own_ca_bundle_is_told_to_trust_the_test_ca(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    # trust_env=False: no proxy, and certifi's bundle instead of REQUESTS_CA_BUNDLE. It
    # reaches the fake, refuses its certificate, and the timeline says what to pass.
    form = {"username": mgmt_account.username, "key": mgmt_account.api_key}
    with requests.Session() as http:
        http.trust_env = False
        with pytest.raises(requests.exceptions.SSLError):
            http.post("https://api.tealiumiq.com/v2/auth", data=form, timeout=10)
        http.verify = mgmt_server.ca_bundle or ""
        assert http.post("https://api.tealiumiq.com/v2/auth", data=form, timeout=10).ok
    [closed] = _tunnels_closed(mgmt_server)
    assert (closed.via, closed.target) == ("TLS", "api.tealiumiq.com:443")
    assert closed.reason.endswith("pass verify=mgmt_server.ca_bundle")
    assert "TLS api.tealiumiq.com:443 -> connection closed: the TLS handshake failed" in (
        mgmt_server.timeline()
    )


def _tunnels_closed(server: MgmtServer, count: int = 1) -> list[TunnelClosed]:
    """The TunnelClosed events, once ``count`` are there (the fake's thread records one
    as the client's handshake fails, maybe a moment after the client saw it fail)."""

    def closed(events: list[Event]) -> list[TunnelClosed]:
        return [e for e in events if isinstance(e, TunnelClosed)]

    return closed(server.wait(until=lambda events: len(closed(events)) >= count))


@pytest.mark.parametrize("sni", [None, "example.com"])
def test_a_handshake_that_names_no_service_host_is_refused_and_says_why(
    mgmt_server: MgmtServer, sni: str | None
) -> None:
    # Only a client that connects to the address itself (or sends no SNI) gets there.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("api.tealiumiq.com", 443), timeout=10) as raw,
        pytest.raises(ssl.SSLError, match="UNRECOGNIZED_NAME"),
    ):
        context.wrap_socket(raw, server_hostname=sni)
    [closed] = _tunnels_closed(mgmt_server)
    named = "no host (no SNI)" if sni is None else "'example.com'"
    assert closed.via == "TLS"
    assert closed.reason.startswith(f"the TLS handshake named {named}: where lookups of the ")
    assert "api.tealiumiq.com, platform.tealiumapis.com" in closed.reason


def test_a_lookup_leads_to_the_fake_and_other_ports_are_refused(
    spied_lookups: list[str], mgmt_server: MgmtServer
) -> None:
    infos = socket.getaddrinfo("api.tealiumiq.com", 443, type=socket.SOCK_STREAM)
    assert {info[4] for info in infos} == {(resolution.ADDRESS, 443)}
    assert socket.gethostbyname("platform.tealiumapis.com") == resolution.ADDRESS
    assert socket.gethostbyname_ex(mgmt_server.options.v3_host)[2] == [resolution.ADDRESS]
    # What was in place saw the numeric address only (answered without DNS).
    assert set(spied_lookups) == {resolution.ADDRESS}
    with pytest.raises(ConnectionRefusedError, match=r"port 443 \(.*\), not 8443"):
        socket.create_connection(("api.tealiumiq.com", 8443), timeout=10)
    # Other names are looked up as before, through whatever resolver was in place.
    socket.getaddrinfo("localhost", 80)
    assert spied_lookups[-1] == "localhost"


@pytest.mark.mgmtauth(intercept=False)
def test_without_interception_a_lookup_of_a_service_host_is_refused(
    spied_lookups: list[str], mgmt_server: MgmtServer
) -> None:
    with pytest.raises(socket.gaierror) as refused:
        socket.getaddrinfo("api.tealiumiq.com", 443)
    message = str(refused.value)
    assert "refused to look up api.tealiumiq.com: it is a host of the service" in message
    assert "@pytest.mark.mgmtauth(intercept=True)" in message
    assert "mgmt_server.url" in message
    with pytest.raises(requests.ConnectionError, match="intercept=True"):
        requests.get("https://Platform.TealiumAPIs.com./v3/auth", timeout=10)
    with pytest.raises(socket.gaierror):
        socket.gethostbyname(mgmt_server.options.v3_host)

    async def aiohttp_get() -> None:
        async with aiohttp.ClientSession() as http:
            await http.get("https://my.tealiumiq.com/urest/things")

    with pytest.raises(aiohttp.ClientConnectorError, match="intercept=True"):
        asyncio.run(aiohttp_get())
    assert not set(name.lower().rstrip(".") for name in spied_lookups) & set(mgmt_server.hosts)


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


def test_everything_is_put_back_after_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_inner="""
        import socket

        import pytest

        ORIGINAL = (
            socket.getaddrinfo,
            socket.gethostbyname,
            socket.gethostbyname_ex,
            socket.gethostbyaddr,
            vars(socket.socket).get("connect"),
            vars(socket.socket).get("connect_ex"),
        )


        def now():
            return (
                socket.getaddrinfo,
                socket.gethostbyname,
                socket.gethostbyname_ex,
                socket.gethostbyaddr,
                vars(socket.socket).get("connect"),
                vars(socket.socket).get("connect_ex"),
            )


        @pytest.mark.mgmtauth(intercept=True)
        def test_intercepts(mgmt_server):
            assert now() != ORIGINAL
            assert socket.gethostbyname("api.tealiumiq.com") == "127.0.43.1"


        def test_put_back():
            assert now() == ORIGINAL
            assert vars(socket.socket).get("connect") is None


        def test_refuses(mgmt_server):
            with pytest.raises(socket.gaierror):
                socket.gethostbyname("api.tealiumiq.com")


        @pytest.mark.mgmtauth(intercept=True)
        def test_a_monkeypatch_over_it(monkeypatch, mgmt_server):
            monkeypatch.setattr(socket, "getaddrinfo", socket.getaddrinfo)


        def test_put_back_again():
            # The monkeypatch's undo put the plugin's function back after the plugin
            # restored the original: it passes every call through now.
            socket.getaddrinfo("localhost", 80)
            assert now()[1:] == ORIGINAL[1:]


        @pytest.mark.mgmtauth(intercept=True)
        def test_intercepts_again(mgmt_server):
            assert socket.getaddrinfo("api.tealiumiq.com", 443)[0][4] == ("127.0.43.1", 443)


        def test_and_puts_back_once_more():
            assert now() == ORIGINAL
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=7)


def test_a_client_made_before_the_test_is_told_to_be_made_in_a_fixture(
    pytester: pytest.Pytester,
) -> None:
    # Issue 43, 4: a module-level httpx.Client (trust_env=True) read the CA variables at
    # import, before interception set them; the reason blamed trust_env=False alone.
    pytester.makepyfile(
        test_inner="""
        import time

        import httpx
        import pytest

        from pytest_mgmtauth import TunnelClosed

        CLIENT = httpx.Client()  # at import: before interception


        @pytest.mark.mgmtauth(intercept=True)
        def test_module_level_client(mgmt_server, mgmt_account):
            form = {"username": mgmt_account.username, "key": mgmt_account.api_key}
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                CLIENT.post("https://api.tealiumiq.com/v2/auth", data=form, timeout=10)
            deadline = time.monotonic() + 5
            while not any(isinstance(e, TunnelClosed) for e in mgmt_server.events):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            print(mgmt_server.timeline())
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*TLS api.tealiumiq.com:443 -> connection closed: the TLS handshake failed "
            "(*): the client does not trust the fake's test CA. "
            "Most likely it was made before the test (a module-level or session-wide "
            "client, such as httpx.Client(), reads the CA and proxy variables when it is "
            "made, before interception set them): make it in a fixture or in the test. "
            "Else it verifies against a CA bundle of its own (trust_env=False, or verify= "
            "a bundle: requests and httpx then use certifi's): pass "
            "verify=mgmt_server.ca_bundle*"
        ]
    )


# -- what C looks up itself, names the IDNA codec maps, reverse lookups (issue 43) ------

#: Spellings of api.tealiumiq.com that Python's IDNA codec maps onto it: full-width
#: letters, ideographic full stops, a soft hyphen, a zero-width space.
MAPPED_NAMES = [
    "\uff41\uff50\uff49.tealiumiq.com",
    "api\u3002tealiumiq\u3002com",
    "api.teal\u00adiumiq.com",
    "api.tealium\u200biq.com",
]


GET_NOWHERE = b"GET /nowhere HTTP/1.1\r\nHost: api.tealiumiq.com\r\nConnection: close\r\n\r\n"


def _status_over(sock: socket.socket) -> int:
    """The status of ``GET /nowhere`` sent on the connected ``sock``."""
    sock.sendall(GET_NOWHERE)
    with sock.makefile("rb") as answer:
        return int(answer.readline().split()[1])


def _not_found(server: MgmtServer, count: int) -> int:
    """How many calls the fake answered 404 (the timeline folds repeats into one line),
    once ``count`` are there (the fake's thread records a call after answering it)."""

    def not_found(events: list[Event]) -> int:
        return sum(1 for e in events if getattr(e, "status", None) == 404)

    return not_found(server.wait(until=lambda events: not_found(events) >= count))


def test_a_connect_to_a_service_host_by_name_goes_to_the_fake(mgmt_server: MgmtServer) -> None:
    # CPython resolves a name given to connect() inside C, without getaddrinfo.
    context = mgmt_server.client_ssl_context()
    assert context is not None
    with context.wrap_socket(socket.socket(), server_hostname="api.tealiumiq.com") as tls:
        tls.settimeout(10)
        tls.connect(("api.tealiumiq.com", 443))  # ssl's own pattern
        assert _status_over(tls) == 404
    with socket.socket() as plain:
        plain.settimeout(10)
        assert plain.connect_ex(("my.tealiumiq.com", 80)) == 0
        assert _status_over(plain) == 404
    assert _not_found(mgmt_server, 2) == 2


def test_connect_ex_to_another_port_of_a_service_host_returns_an_errno(
    mgmt_server: MgmtServer,
) -> None:
    for host in ("api.tealiumiq.com", resolution.ADDRESS):
        with socket.socket() as sock:
            assert sock.connect_ex((host, 8443)) == errno.ECONNREFUSED
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError, match="not 8443"):
        sock.connect(("api.tealiumiq.com", 8443))


def test_a_reverse_lookup_of_a_service_host_is_answered(mgmt_server: MgmtServer) -> None:
    assert socket.gethostbyaddr("API.tealiumiq.com.") == (
        "api.tealiumiq.com",
        [],
        [resolution.ADDRESS],
    )
    assert socket.getfqdn("platform.tealiumapis.com") == "platform.tealiumapis.com"


@pytest.mark.parametrize("name", MAPPED_NAMES, ids=["fullwidth", "ideographic-dot", "shy", "zwsp"])
def test_a_name_the_idna_codec_maps_onto_a_service_host_is_intercepted(
    mgmt_server: MgmtServer, name: str
) -> None:
    connection = http.client.HTTPSConnection(name, timeout=10)
    try:
        connection.request("GET", "/nowhere")
        assert connection.getresponse().status == 404
    finally:
        connection.close()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    # A Host header of its own: the name as it is would not encode in one.
    head = {"Host": "api.tealiumiq.com"}
    request = urllib.request.Request(f"https://{name}/nowhere", headers=head)
    with pytest.raises(urllib.error.HTTPError) as answer:
        opener.open(request, timeout=10)
    assert answer.value.code == 404
    answer.value.close()

    async def over_asyncio() -> bytes:
        reader, writer = await asyncio.open_connection(name, 443, ssl=True)
        writer.write(GET_NOWHERE)
        answer = await reader.read()  # to its end: the fake closes (Connection: close)
        writer.close()
        await writer.wait_closed()
        return answer.split(b"\r\n", 1)[0]

    assert asyncio.run(over_asyncio()).split()[1] == b"404"
    with socket.socket() as plain:
        plain.settimeout(10)
        plain.connect((name, 80))
        assert _status_over(plain) == 404
    assert socket.gethostbyname(name) == resolution.ADDRESS
    assert _not_found(mgmt_server, 4) == 4


@pytest.fixture
def spied_reverse_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names given to the gethostbyaddr in place before mgmt_server."""
    names: list[str] = []
    real = socket.gethostbyaddr

    def spy(host: str) -> tuple[str, list[str], list[str]]:
        names.append(host)
        return real(host)

    monkeypatch.setattr(socket, "gethostbyaddr", spy)
    return names


@pytest.mark.mgmtauth(intercept=False)
@pytest.mark.parametrize(
    "name",
    ["api.tealiumiq.com", *MAPPED_NAMES],
    ids=["ascii", "fullwidth", "ideographic-dot", "shy", "zwsp"],
)
def test_without_interception_every_way_to_a_service_host_is_refused(
    spied_lookups: list[str],
    spied_reverse_lookups: list[str],
    mgmt_server: MgmtServer,
    name: str,
) -> None:
    context = ssl.create_default_context()
    with (
        context.wrap_socket(socket.socket(), server_hostname=name) as tls,
        pytest.raises(resolution.HostNotIntercepted, match="intercept=True"),
    ):
        tls.connect((name, 443))
    for port in (443, 8443):
        with socket.socket() as sock, pytest.raises(resolution.HostNotIntercepted):
            sock.connect_ex((name, port))
    with pytest.raises(resolution.HostNotIntercepted):
        socket.getaddrinfo(name, 443)
    with pytest.raises(resolution.HostNotIntercepted):
        socket.gethostbyaddr(name)
    assert socket.getfqdn(name) == name  # getfqdn swallows the refusal: no lookup
    with pytest.raises(OSError, match="intercept=True"):
        http.client.HTTPSConnection(name, timeout=10).request("GET", "/")

    async def over_asyncio() -> None:
        await asyncio.open_connection(name, 443)

    with pytest.raises(resolution.HostNotIntercepted):
        asyncio.run(over_asyncio())
    assert not spied_lookups
    assert not spied_reverse_lookups
