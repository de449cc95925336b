"""One small adapter per HTTP client, so a flow is written once and run with each.

Each adapter drives the real client the way an application would: one long-lived
session/client object with its own cookie jar, trust configured from ``mgmt_server``
(a CA bundle path or the ready ``SSLContext``), form bodies passed as dicts so the client
URL-encodes them. The async clients run on a private event loop owned by the adapter;
every call is a real coroutine on that loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import ssl
import urllib.error
import urllib.request
from http.cookiejar import CookieJar
from typing import Any, Protocol
from urllib.parse import urlencode

import aiohttp
import httpx
import requests

#: How working clients of the real service find the session id: the cookie's path
#: (/urest_service) keeps it out of every cookie jar's answer for /v1/... URLs.
JSESSIONID_LINE = re.compile(r"^JSESSIONID=([^;]*);")

CLIENT_NAMES = ("requests", "httpx", "httpx-async", "aiohttp", "urllib")


@dataclasses.dataclass(frozen=True)
class Reply:
    status: int
    #: Every header line, in order, duplicates kept (Set-Cookie comes twice).
    headers: list[tuple[str, str]]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def header_values(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def header(self, name: str) -> str | None:
        values = self.header_values(name)
        assert len(values) <= 1, f"{name} appears {len(values)} times: {values}"
        return values[0] if values else None

    def jsessionid(self) -> str:
        """The session id, found as working clients of the real service find it."""
        for line in self.header_values("Set-Cookie"):
            match = JSESSIONID_LINE.match(line)
            if match:
                return match.group(1)
        raise AssertionError(f"no Set-Cookie line starts with JSESSIONID=: {self.headers}")


class Client(Protocol):
    name: str

    def post_form(
        self, url: str, form: dict[str, str], *, headers: dict[str, str] | None = None
    ) -> Reply: ...

    def get(
        self,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply: ...

    def cookie_names(self) -> set[str]:
        """Names of the cookies in the client's own jar."""
        ...

    def close(self) -> None: ...


class RequestsClient:
    name = "requests"

    def __init__(self, ca_bundle: str | None) -> None:
        self.session = requests.Session()
        # The environment sets REQUESTS_CA_BUNDLE, which would override Session.verify.
        self.session.trust_env = False
        if ca_bundle is not None:
            self.session.verify = ca_bundle

    @staticmethod
    def _reply(response: requests.Response) -> Reply:
        return Reply(response.status_code, list(response.raw.headers.items()), response.content)

    def post_form(
        self, url: str, form: dict[str, str], *, headers: dict[str, str] | None = None
    ) -> Reply:
        return self._reply(self.session.post(url, data=form, headers=headers, timeout=10))

    def get(
        self,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        return self._reply(self.session.get(url, params=params, headers=headers, timeout=10))

    def cookie_names(self) -> set[str]:
        return {c.name for c in self.session.cookies}

    def close(self) -> None:
        self.session.close()


class HttpxClient:
    name = "httpx"

    def __init__(self, context: ssl.SSLContext | None) -> None:
        self.client = httpx.Client(verify=context or True, timeout=10)

    @staticmethod
    def _reply(response: httpx.Response) -> Reply:
        return Reply(response.status_code, response.headers.multi_items(), response.content)

    def post_form(
        self, url: str, form: dict[str, str], *, headers: dict[str, str] | None = None
    ) -> Reply:
        return self._reply(self.client.post(url, data=form, headers=headers))

    def get(
        self,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        return self._reply(self.client.get(url, params=params, headers=headers))

    def cookie_names(self) -> set[str]:
        return {c.name for c in self.client.cookies.jar}

    def close(self) -> None:
        self.client.close()


class _AsyncAdapter:
    """Owns an event loop; each call runs one coroutine of the client on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coroutine, timeout=10))

    def close_loop(self) -> None:
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


async def wait_for_transports_to_close(loop: asyncio.AbstractEventLoop) -> None:
    """Let the loop finish the TLS shutdowns it has started (at most 2 s of real time)."""
    transports = getattr(loop, "_transports", None)  # selector loops keep them here
    if transports is None:
        await asyncio.sleep(0.1)
        return
    deadline = loop.time() + 2.0
    while loop.time() < deadline:
        if all(t is None or t.is_closing() for t in list(transports.values())):
            return
        await asyncio.sleep(0.002)


class HttpxAsyncClient(_AsyncAdapter):
    name = "httpx-async"

    def __init__(self, context: ssl.SSLContext | None) -> None:
        super().__init__()
        self.client = httpx.AsyncClient(verify=context or True, timeout=10)

    def post_form(
        self, url: str, form: dict[str, str], *, headers: dict[str, str] | None = None
    ) -> Reply:
        response = self.run(self.client.post(url, data=form, headers=headers))
        return HttpxClient._reply(response)

    def get(
        self,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        response = self.run(self.client.get(url, params=params, headers=headers))
        return HttpxClient._reply(response)

    def cookie_names(self) -> set[str]:
        return {c.name for c in self.client.cookies.jar}

    def close(self) -> None:
        self.run(self.client.aclose())
        self.close_loop()


class AiohttpClient(_AsyncAdapter):
    name = "aiohttp"

    def __init__(self, context: ssl.SSLContext | None, *, unsafe_jar: bool = True) -> None:
        super().__init__()
        self.context = context

        async def make() -> aiohttp.ClientSession:
            # The default CookieJar() stores nothing from an IP host like 127.0.0.1.
            return aiohttp.ClientSession(
                cookie_jar=aiohttp.CookieJar(unsafe=unsafe_jar),
                timeout=aiohttp.ClientTimeout(total=10),
            )

        self.session: aiohttp.ClientSession = self.run(make())

    async def _request(self, method: str, url: str, **kwargs: Any) -> Reply:
        ssl_arg: ssl.SSLContext | bool = self.context if self.context is not None else True
        async with self.session.request(method, url, ssl=ssl_arg, **kwargs) as response:
            body = await response.read()
            return Reply(response.status, list(response.headers.items()), body)

    def post_form(
        self, url: str, form: dict[str, str], *, headers: dict[str, str] | None = None
    ) -> Reply:
        result: Reply = self.run(self._request("POST", url, data=form, headers=headers))
        return result

    def get(
        self,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        result: Reply = self.run(self._request("GET", url, params=params, headers=headers))
        return result

    def cookie_names(self) -> set[str]:
        return {morsel.key for morsel in self.session.cookie_jar}

    def close(self) -> None:
        self.run(self.session.close())
        # aiohttp drops a TLS connection without waiting for its shutdown to finish
        # (aiohttp#1925); closing the loop then would leak the socket (ResourceWarning).
        self.run(wait_for_transports_to_close(self.loop))
        self.close_loop()


class UrllibClient:
    name = "urllib"

    def __init__(self, context: ssl.SSLContext | None) -> None:
        self.jar = CookieJar()
        handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPCookieProcessor(self.jar)]
        if context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self.opener = urllib.request.build_opener(*handlers)

    def _open(self, request: urllib.request.Request) -> Reply:
        try:
            with self.opener.open(request, timeout=10) as response:
                return Reply(response.status, list(response.headers.items()), response.read())
        except urllib.error.HTTPError as error:  # urllib raises on every 4xx/5xx
            with error:
                return Reply(error.code, list(error.headers.items()), error.read())

    def post_form(
        self, url: str, form: dict[str, str], *, headers: dict[str, str] | None = None
    ) -> Reply:
        # urlopen adds Content-Type: application/x-www-form-urlencoded for a data body.
        data = urlencode(form).encode("ascii")
        return self._open(urllib.request.Request(url, data=data, headers=headers or {}))

    def get(
        self,
        url: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        if params:
            url = f"{url}?{urlencode(params)}"
        return self._open(urllib.request.Request(url, headers=headers or {}))

    def cookie_names(self) -> set[str]:
        return {c.name for c in self.jar}

    def close(self) -> None:
        self.opener.close()


def make_client(name: str, *, ca_bundle: str | None, context: ssl.SSLContext | None) -> Client:
    """The adapter for ``name``, trusting the fake's test CA when it serves HTTPS."""
    if name == "requests":
        return RequestsClient(ca_bundle)
    if name == "httpx":
        return HttpxClient(context)
    if name == "httpx-async":
        return HttpxAsyncClient(context)
    if name == "aiohttp":
        return AiohttpClient(context)
    if name == "urllib":
        return UrllibClient(context)
    raise ValueError(f"unknown client {name!r}; known: {', '.join(CLIENT_NAMES)}")
