"""Rate limits of API calls over a real socket, with real clients (requests, httpx,
aiohttp, urllib): 429 in each family's envelope with Retry-After, the windows on
mgmt_clock, a retry at once told so, Collect's bulk calls, a route's own rate."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Callable

import aiohttp
import httpx
import pytest
import requests

from pytest_mgmtauth import Account, ApiCall, MgmtClock, MgmtServer, RateLimited

PRIVACY = "/v3/privacy/visitor/accounts/acme/profiles/main"
DLE = "/v2/dle/accounts/acme/profiles/main/datalayers/home"
STATUS = "/v3/tiq/accounts/acme/profiles/main/publish/p-1/status"


def _v3_token(server: MgmtServer, http: requests.Session, account: Account) -> str:
    answer = http.post(
        f"{server.url}/v3/auth/accounts/acme/profiles/main",
        data={"username": account.username, "key": account.api_key},
    )
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["token"]
    return token


@pytest.mark.mgmtauth(rate_limits=True)
def test_visitor_privacy_answers_the_published_429_past_50_a_second_with_requests(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    route = mgmt_server.route("GET", PRIVACY).respond_with_json({"live": False})
    bearer = {"Authorization": f"Bearer {_v3_token(mgmt_server, http, mgmt_account)}"}
    url = f"{mgmt_server.region_url}{PRIVACY}"
    statuses = [http.get(url, headers=bearer).status_code for _ in range(50)]
    assert statuses == [200] * 50
    refused = http.get(url, headers=bearer)
    assert refused.status_code == 429
    assert refused.json() == {"message": "Too many requests"}  # the endpoint page's body
    assert refused.headers["Retry-After"] == "1"
    # The diagnosis, which the published body has no room for, in the fake's own header
    # and the request log.
    diagnosis = (
        "50 requests to the Visitor Privacy API (v3) for account 'acme' within the last "
        "1 s, the limit is 50/s: wait Retry-After (1 s) before calling again"
    )
    assert refused.headers["X-Mgmtauth-Diagnosis"] == diagnosis
    assert mgmt_server.requests[-1].diagnosis == diagnosis
    assert refused.headers["Content-Type"] == "application/json"
    assert route.call_count == 50  # the handler never saw the refused call
    mgmt_clock.advance(seconds=1)
    assert http.get(url, headers=bearer).status_code == 200
    [event] = [e for e in mgmt_server.events if isinstance(e, RateLimited)]
    assert (event.username, event.status, event.retry_after) == (mgmt_account.username, 429, 1)
    assert event.limit == "Visitor Privacy API (v3), 50/s"
    assert [r.status for r in mgmt_server.requests][-2:] == [429, 200]


@pytest.mark.mgmtauth(rate_limits=True)
def test_hosted_data_layer_answers_429_in_the_service_s_envelope_with_httpx(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    mgmt_clock: MgmtClock,
    get_token: Callable[[Account], str],
) -> None:
    mgmt_server.route("POST", DLE).respond_with_json({}, status=200)
    bearer = {"Authorization": f"Bearer {get_token(mgmt_account)}"}
    with httpx.Client() as client:
        url = f"{mgmt_server.url}{DLE}"
        statuses = [
            client.post(url, json={"k": "v"}, headers=bearer).status_code for _ in range(100)
        ]
        assert statuses == [200] * 100
        refused = client.post(url, json={"k": "v"}, headers=bearer)
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    body = refused.json()
    assert (body["returnCode"], body["retryAfter"]) == (429, 1)
    assert body["message"] == (
        "Too many requests: 100 requests to the Hosted Data Layer API (v2) for account "
        "'acme' within the last 1 s, the limit is 100/s: wait Retry-After (1 s) before "
        "calling again"
    )


def test_without_the_option_the_published_figures_do_not_apply(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    route = mgmt_server.route("GET", STATUS).respond_with_json({"publishId": "p-1"})
    bearer = {"Authorization": f"Bearer {_v3_token(mgmt_server, http, mgmt_account)}"}
    url = f"{mgmt_server.region_url}{STATUS}"
    assert {http.get(url, headers=bearer).status_code for _ in range(5)} == {200}
    assert route.call_count == 5
    assert not any(isinstance(e, RateLimited) for e in mgmt_server.events)


@pytest.mark.mgmtauth(rate_limits=True)
def test_publish_status_polled_at_once_after_a_429_is_told_to_honour_retry_after_with_aiohttp(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    mgmt_server.route("GET", STATUS).respond_with_json({"publishId": "p-1"})
    other = STATUS.replace("p-1", "p-2")
    mgmt_server.route("GET", other).respond_with_json({"publishId": "p-2"})
    bearer = {"Authorization": f"Bearer {_v3_token(mgmt_server, http, mgmt_account)}"}

    async def poll() -> list[tuple[int, str | None, object]]:
        answers = []
        async with aiohttp.ClientSession(headers=bearer) as session:
            for path in (STATUS, STATUS, STATUS, other):
                async with session.get(f"{mgmt_server.region_url}{path}") as answer:
                    body = await answer.json(content_type=None)
                    answers.append((answer.status, answer.headers.get("Retry-After"), body))
        return answers

    answers = asyncio.run(poll())
    assert [(s, r) for s, r, _ in answers] == [(200, None), (429, "1"), (429, "1"), (200, None)]
    assert answers[2][2] == {"message": "Too many requests"}
    first, again = [e for e in mgmt_server.events if isinstance(e, RateLimited)]
    assert first.waited is None
    assert (again.waited, again.asked) == (0, 1)
    text = mgmt_server.report_section()
    assert "retried 0 s after a 429 with Retry-After 1s; honour Retry-After" in text


@pytest.mark.mgmtauth(rate_limits=True)
def test_a_bulk_collect_call_counts_its_events_and_over_ten_is_a_400(
    mgmt_server: MgmtServer, mgmt_account: Account, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    bulk = mgmt_server.route("POST", "/v3/collect/bulk-event").respond_with_json({})
    bearer = {"Authorization": f"Bearer {_v3_token(mgmt_server, http, mgmt_account)}"}
    url = f"{mgmt_server.region_url}/v3/collect/bulk-event"

    def send(events: int) -> requests.Response:
        body = {"shared": {"tealium_account": "acme"}, "events": [{"e": i} for i in range(events)]}
        return http.post(url, json=body, headers=bearer)

    too_many = send(11)
    assert too_many.status_code == 400
    assert too_many.json() == {"message": "Bad Request"}  # v3's envelope
    assert "carried 11: split it" in too_many.headers["X-Mgmtauth-Diagnosis"]
    [event] = [e for e in mgmt_server.events if isinstance(e, RateLimited)]
    assert event.reason == (
        "a bulk call carries at most 10 events (the Collect HTTP API (v3), page "
        "api/v3/http-api/about), this one carried 11: split it"
    )
    assert [send(10).status_code for _ in range(10)] == [200] * 10  # 100 events
    assert send(1).status_code == 429
    assert bulk.call_count == 10


def test_a_route_s_own_rate_limit_answers_429_on_the_real_clock_with_urllib(
    mgmt_server: MgmtServer, mgmt_account: Account, get_token: Callable[[Account], str]
) -> None:
    # No mgmt_clock: the window follows the real clock; one call a minute cannot pass
    # twice within this test, however slow the machine.
    route = mgmt_server.route("GET", "/v2/things", rate_limit="1/min").respond_with_json([])
    assert repr(route).endswith("rate_limit='1/min'>")
    assert route.rate_limit == "1/min"
    request = urllib.request.Request(
        f"{mgmt_server.url}/v2/things",
        headers={"Authorization": f"Bearer {get_token(mgmt_account)}"},
    )
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 200
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(request)
    refused = excinfo.value
    assert refused.code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    body = json.loads(refused.read())
    assert body["returnCode"] == 429
    assert (
        "1 calls to route GET /v2/things within the last 60 s, the limit is 1/min"
        in (body["message"])
    )
    calls = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
    assert [c.status for c in calls] == [200]


@pytest.mark.parametrize("bad", ["50", "50/hour", "0/s"])
def test_a_malformed_rate_limit_is_refused_where_the_route_is_declared(
    mgmt_server: MgmtServer, bad: str
) -> None:
    with pytest.raises(ValueError, match=r"route\(\): rate_limit must be a rate '<N>/s' or"):
        mgmt_server.route("GET", "/v2/things", rate_limit=bad)
