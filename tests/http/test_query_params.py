"""A query parameter the fake reads, sent twice, is a 400 naming it (issue 29, item
13): Werkzeug's ``args.get`` silently took the first ``utk``."""

from __future__ import annotations

from collections.abc import Callable

import requests

from pytest_mgmtauth import Account, BadRequest, MgmtServer


def test_a_repeated_utk_is_400_naming_it(
    mgmt_server: MgmtServer,
    mgmt_account: Account,
    v1_login: Callable[[Account], tuple[str, str]],
    http: requests.Session,
) -> None:
    items = mgmt_server.route("GET", "/v1/items").respond_with_json({"items": []})
    session_id, utk = v1_login(mgmt_account)
    answer = http.get(
        f"{mgmt_server.url}/v1/items",
        params=[("utk", utk), ("utk", "OTHER")],
        headers={"Cookie": f"JSESSIONID={session_id}"},
    )
    assert (answer.status_code, answer.json()["returnCode"]) == (400, 1400), answer.text
    assert "the query parameter 'utk' appears 2 times; send it once" in answer.json()["message"]
    assert items.call_count == 0
    event = mgmt_server.events[-1]
    assert isinstance(event, BadRequest)
    assert event.status == 400
    # The same utk twice is refused too: which one counts is not guessed.
    twice = http.get(
        f"{mgmt_server.url}/v1/items",
        params=[("utk", utk), ("utk", utk)],
        headers={"Cookie": f"JSESSIONID={session_id}"},
    )
    assert twice.status_code == 400
    once = http.get(
        f"{mgmt_server.url}/v1/items",
        params={"utk": utk},
        headers={"Cookie": f"JSESSIONID={session_id}"},
    )
    assert once.status_code == 200
