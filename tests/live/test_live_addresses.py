"""A live test's addresses are its own, over real HTTP with real clients: once it ends, a
request its client sends there (on a kept-alive connection or a new one) is refused in
the service's error shape, reaches no upstream and no other test, and the next test
listens elsewhere."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import NoReturn

import httpx
import pytest
import requests

from pytest_mgmtauth import Options
from pytest_mgmtauth._fake.live import LiveRun
from pytest_mgmtauth._fake.server import MgmtServer
from pytest_mgmtauth._fake.session import SessionResources
from pytest_mgmtauth._http.forward import Upstream

#: Nothing listens there: a request forwarded would be a 502, never a 503.
NOWHERE = "https://127.0.0.1:9"


def _fake_only(reason: str) -> NoReturn:
    raise AssertionError(reason)


@pytest.fixture
def pool(_mgmtauth_pool: SessionResources) -> Iterator[SessionResources]:
    """Servers of their own: retiring them leaves the session's alone."""
    pool = SessionResources(signing_key=_mgmtauth_pool.signing_key)
    yield pool
    pool.close()


def _live() -> LiveRun:
    return LiveRun(upstream=Upstream(url=NOWHERE), secrets=(), fake_only=_fake_only)


def _post_requests(client: requests.Session, url: str) -> tuple[int, str]:
    answer = client.post(url + "/v2/auth", data={"username": "u", "key": "k"})
    return answer.status_code, answer.json()["message"]


def _post_httpx(client: httpx.Client, url: str) -> tuple[int, str]:
    answer = client.post(url + "/v2/auth", data={"username": "u", "key": "k"})
    return answer.status_code, answer.json()["message"]


def _post_urllib(url: str) -> tuple[int, str]:
    request = urllib.request.Request(url + "/v2/auth", data=b"username=u&key=k", method="POST")
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())["message"]
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())["message"]


@pytest.mark.parametrize("library", ["requests", "httpx", "urllib"])
def test_a_request_after_its_live_test_ended_is_refused_there_and_reaches_no_one(
    pool: SessionResources, library: str
) -> None:
    run = _live()
    sessions: list[requests.Session | httpx.Client] = []

    def post(url: str) -> tuple[int, str]:
        if library == "urllib":
            return _post_urllib(url)
        if not sessions:  # one client for both tests: its kept-alive connection too
            sessions.append(requests.Session() if library == "requests" else httpx.Client())
        client = sessions[0]
        if isinstance(client, requests.Session):
            return _post_requests(client, url)
        return _post_httpx(client, url)

    first = MgmtServer(Options(), pool, test_id="test_mod.py::test_first", live=run)
    first_url = first.url
    try:
        status, message = post(first_url)
        assert status == 502  # forwarded, to where nothing listens
        assert "could not reach the service" in message
    finally:
        first.close()
    second = MgmtServer(Options(), pool, test_id="test_mod.py::test_second", live=run)
    try:
        assert second.url != first_url
        for _ in range(2):  # on the connection kept alive, then on a new one
            status, message = post(first_url)
            assert status == 503
            assert message.startswith(
                "not forwarded: this request came after its test (test_mod.py::test_first) "
                "had ended or been skipped."
            )
        assert list(second.requests) == []
        assert second.not_forwarded() is None
        status, _ = post(second.url)
        assert status == 502  # the second test's own request is forwarded
        assert [r.path for r in second.requests] == ["/v2/auth"]
    finally:
        second.close()
        for client in sessions:
            client.close()


def test_past_the_limit_the_oldest_retired_addresses_stop(
    pool: SessionResources, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_mgmtauth._fake import session

    monkeypatch.setattr(session, "RETIRED_SERVERS", 1)
    run = _live()
    urls: list[str] = []
    for n in range(2):
        fake = MgmtServer(Options(), pool, test_id=f"t{n}", live=run)
        urls.append(fake.url)
        fake.close()
    with pytest.raises(requests.ConnectionError):
        requests.post(urls[0] + "/v2/auth", timeout=30)
    assert requests.post(urls[1] + "/v2/auth", timeout=30).status_code == 503
