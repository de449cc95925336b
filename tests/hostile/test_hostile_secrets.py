"""No secret echoed, whatever field or place it arrives in (issue 9).

Every kind of secret of the world's accounts (API keys, passwords, bearer tokens, the
JSESSIONID and utk, an API key rotated out) is put in every input the fake reads: the
form fields (swapped, raw and encoded), the path, the query, cookie names and values,
headers, the method, a malformed request line, control-API JSON bodies. Then every
output channel is searched for any whole secret: answers (body and headers, checked
by ``World.send``), the events and the timeline, the failure messages of the
assertions, and (with pytester) the terminal output of ``-v --mgmtauth-report
--full-trace`` and the JUnit XML file.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, urlencode

import pytest
import requests
from hostile_support import SECRET_INPUTS_TRIED as TRIED, World, build_request, exchange
from hypothesis import given, settings, strategies as st

from pytest_mgmtauth import AuthRejected, Options
from pytest_mgmtauth._service.accounts import (
    fingerprint as fp,
    generate_api_key,
    generate_password,
)
from pytest_mgmtauth._standalone.server import AccountSpec, StandaloneServer

PROFILE = settings.get_profile("mgmtauth-hostile")
FORM = "application/x-www-form-urlencoded"


def _secrets_by_kind(world: World) -> dict[str, str]:
    return {
        "api key": world.full.api_key,
        "password": world.full.password,
        "other account's api key": world.limited.api_key,
        "other account's password": world.limited.password,
        "token": world.token,
        "other account's token": world.limited_token,
        "jsessionid": world.session_id,
        "utk": world.utk,
    }


def _form(fields: list[tuple[str, str]]) -> bytes:
    return urlencode(fields).encode()


def _post_form(path: str, body: bytes, content_type: str = FORM) -> bytes:
    return build_request("POST", path, [("Host", "x"), ("Content-Type", content_type)], body)


def _get(target: str, headers: Sequence[tuple[str | bytes, str | bytes]] = ()) -> bytes:
    return build_request("GET", target, [("Host", "x"), *headers])


def _places(world: World) -> dict[str, Callable[[str], bytes]]:
    """Every input the fake reads, as a raw request carrying ``s`` there."""
    user = world.full.username
    cookie = f"JSESSIONID={world.session_id}"

    def q(s: str) -> str:
        return quote(s, safe="")

    return {
        "v2 username (fields swapped)": lambda s: _post_form(
            "/v2/auth", _form([("username", s), ("key", user)])
        ),
        "v2 key of the wrong account": lambda s: _post_form(
            "/v2/auth", _form([("username", world.limited.username), ("key", s)])
        ),
        "v2 username un-encoded": lambda s: _post_form("/v2/auth", f"username={s}&key=x".encode()),
        "v2 username encoded twice": lambda s: _post_form(
            "/v2/auth", _form([("username", quote_plus(s)), ("key", "x")])
        ),
        "v2 stray field name": lambda s: _post_form(
            "/v2/auth", _form([(s, "1"), ("username", user)])
        ),
        "v2 content type": lambda s: _post_form("/v2/auth", _form([("username", user)]), s),
        "v1 username (password in it)": lambda s: _post_form(
            "/v1/login", _form([("username", s), ("password", user)])
        ),
        "v1 password of the wrong account": lambda s: _post_form(
            "/v1/login", _form([("username", world.limited.username), ("password", s)])
        ),
        "logout cookie value": lambda s: build_request(
            "POST", "/v1/logout", [("Host", "x"), ("Cookie", f"JSESSIONID={s}")]
        ),
        "path segment (404)": lambda s: _get(f"/nope/{q(s)}"),
        "path segment raw (404)": lambda s: _get(f"/nope/{s.replace(' ', '+')}"),
        "path parameter jsessionid": lambda s: _get(f"/v1/x;jsessionid={q(s)}"),
        "path of a v1 route": lambda s: _get(
            f"/v1/items;jsessionid={q(s)}?utk={q(world.utk)}", [("Cookie", cookie)]
        ),
        "query utk of a v1 route": lambda s: _get(f"/v1/items?utk={q(s)}", [("Cookie", cookie)]),
        "query name": lambda s: _get(f"/api/items?{q(s)}=1"),
        "query of a 404": lambda s: _get(f"/nope?token={q(s)}"),
        "cookie name": lambda s: _get("/v1/items", [("Cookie", f"{q(s)}=1")]),
        "cookie value": lambda s: _get("/v1/items", [("Cookie", f"JSESSIONID={s}")]),
        "authorization scheme": lambda s: _get("/api/items", [("Authorization", f"{s} x")]),
        "authorization alone": lambda s: _get("/api/items", [("Authorization", s)]),
        "bearer value": lambda s: _get("/api/items", [("Authorization", f"Bearer {s}")]),
        "bearer on a v1 route": lambda s: _get("/v1/items", [("Authorization", f"Bearer {s}")]),
        "utk header": lambda s: _get("/v1/items", [("Cookie", cookie), ("X-Utk", s)]),
        "header name": lambda s: _get("/api/items", [(s.replace(" ", "_"), "1")]),
        "method of /v2/auth": lambda s: build_request(
            s.replace(" ", "_"), "/v2/auth", [("Host", "x")]
        ),
        "method of a route": lambda s: build_request(
            s.replace(" ", "_"), "/api/items", [("Host", "x")]
        ),
        "malformed request line": lambda s: f"GET /v1/items?utk={s} HTTP/1.1 x\r\n\r\n".encode(),
        "bad version": lambda s: f"GET / {s}\r\nHost: x\r\n\r\n".encode(),
    }


# -- the three examples of the issue, as found ----------------------------------------


def test_swapped_v2_fields_get_the_key_as_a_fingerprint(world: World) -> None:
    key, user = world.full.api_key, world.full.username
    answer = world.send(_post_form("/v2/auth", _form([("username", key), ("key", user)])))
    assert answer.status == 401
    assert answer.json()["message"].startswith(f"Authentication failed: no account '{fp(key)}'")
    (event,) = [e for e in world.fake.events if isinstance(e, AuthRejected)]
    assert f"no account '{fp(key)}' exists" in event.reason


def test_a_jsessionid_path_parameter_is_not_echoed_by_the_404(world: World) -> None:
    answer = world.send(_get(f"/v1/x;jsessionid={world.session_id}"))
    assert answer.status == 404
    assert f"GET /v1/x;jsessionid={fp(world.session_id)};" in answer.json()["message"]


def test_the_request_repr_masks_the_utk(world: World) -> None:
    seen: list[str] = []

    def handler(request: Any) -> Any:
        seen.append(repr(request))
        raise RuntimeError("broken handler")

    world.routes["boom"] = world.fake.route("GET", "/v1/boom", auth="v1")
    world.routes["boom"].respond_with_handler(handler)
    cookie = ("Cookie", f"JSESSIONID={world.session_id}")
    answer = exchange(world.address, _get(f"/v1/boom?utk={world.utk}", [cookie]))
    world.side_requests += 1
    assert answer.status == 500
    assert seen == [f"<FakeRequest '/v1/boom?utk={fp(world.utk)}' [GET]>"]
    (error,) = world.errors
    world.errors.clear()  # seen here; not re-raised at teardown
    assert str(error) == "broken handler"


def _channels(world: World) -> str:
    """Every text the fake gives its user about this test, except the answers."""
    fake = world.fake
    parts = [fake.timeline()]
    for account in (world.full, world.limited):
        parts.append(fake.timeline(account.username))
    for event in fake.events:
        parts.append(repr(event))
        parts.append(event.describe())
        parts += [str(getattr(event, f.name)) for f in dataclasses.fields(event)]
    checks: list[Callable[[], object]] = [
        lambda: fake.assert_auth_count(10**6),
        lambda: fake.assert_token_reused(),
        lambda: fake.assert_no_expired_token_used(),
        lambda: fake.assert_logged_out(),
        lambda: fake.assert_single_flight(),
    ]
    failed = 0
    for check in checks:
        try:
            check()
        except AssertionError as exc:
            parts.append(str(exc))
            failed += 1
    assert failed, "no assertion failed: their messages were not looked at"
    return "\n".join(parts)


def _assert_nowhere(world: World, text: str) -> None:
    leaked = [s for s in world.secrets if s in text]
    assert not leaked, f"whole secrets in the fake's output: {[s[:8] + '...' for s in leaked]}"


@pytest.fixture
def rotated(world: World) -> str:
    """An API key the full account had, rotated out: still a secret."""
    old = world.full.api_key
    world.full = world.fake.rotate_key(world.full)
    world.secrets.add(world.full.api_key)
    return old


def test_every_secret_in_every_place_is_echoed_nowhere(world: World, rotated: str) -> None:
    secrets = {**_secrets_by_kind(world), "rotated-out api key": rotated}
    places = _places(world)
    tried = 0
    for _kind, secret in secrets.items():
        for _place, request_with in places.items():
            world.send(request_with(secret))  # checks the answer, headers and body
            tried += 1
    _assert_nowhere(world, _channels(world))
    TRIED["every secret in every place"] = tried
    assert tried == len(secrets) * len(places)


@st.composite
def _spelled(draw: st.DrawFn, secret: str) -> str:
    spellings: list[Callable[[str], str]] = [
        lambda s: s,
        quote_plus,
        lambda s: quote(s, safe=""),
        quote,
    ]
    return draw(st.sampled_from(spellings))(secret)


def test_secrets_in_random_places_and_spellings_are_echoed_nowhere(world: World) -> None:
    kinds = _secrets_by_kind(world)
    places = _places(world)
    noise = st.text(alphabet="abc/;=&?%+-_.~ ", max_size=8)
    count = {"n": 0}

    @settings(PROFILE, max_examples=max(50, PROFILE.max_examples // 4))
    @given(
        kind=st.sampled_from(sorted(kinds)),
        place=st.sampled_from(sorted(places)),
        data=st.data(),
        before=noise,
        after=noise,
    )
    def one(kind: str, place: str, data: st.DataObject, before: str, after: str) -> None:
        spelled = data.draw(_spelled(kinds[kind]), label="spelled")
        world.send(places[place](before + spelled + after))
        count["n"] += 1

    one()
    _assert_nowhere(world, _channels(world))
    TRIED["random places and spellings"] = count["n"]


def test_an_escape_that_completes_a_secret_echoes_it_nowhere(world: World) -> None:
    # Found by the test above: '%' before a key that starts '0e' arrives as '\x0e' and
    # the rest, whose escape (the diagnosis header's \x0e, a JSON body's \u000e, an
    # event's repr) completed the key. Secrets that start as escapes end, in every place.
    tails = ["0e", "12", "1F", "7f", "e9"]
    secrets = [tail + generate_api_key()[2:] for tail in tails]
    secrets += [tail + generate_password()[2:] for tail in tails]
    for i, secret in enumerate(secrets):
        world.fake.add_account(f"escaped{i}@example.com", password=secret)
    world.secrets.update(secrets)
    tried = 0
    for secret in secrets:
        for request_with in _places(world).values():
            world.send(request_with("%" + secret))  # checks the answer, headers and body
            world.send(request_with("%" + quote(secret, safe="")))
            tried += 2
    _assert_nowhere(world, _channels(world))
    diagnoses = [entry.diagnosis or "" for entry in world.fake.requests]
    _assert_nowhere(world, "\n".join(diagnoses))
    assert any("\\x0e" in d for d in diagnoses)  # the escape did reach the header
    TRIED["escapes before a secret"] = tried


# -- the standalone control API ---------------------------------------------------------

ALICE = AccountSpec(username="alice@example.com", api_key="k3y+e&y=%/1-long", password="pa+ss&1x")


@pytest.fixture
def standalone(tmp_path: Path, default_key_pem: bytes) -> Iterator[StandaloneServer]:
    key_file = tmp_path / "signing-key.pem"
    key_file.write_bytes(default_key_pem)
    server = StandaloneServer(
        Options(), port=0, accounts=[ALICE], routes=[("GET", "/v1/things")], key_file=str(key_file)
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_control_api_echoes_no_secret(standalone: StandaloneServer) -> None:
    with requests.Session() as http:
        http.trust_env = False
        url = standalone.url
        token = http.post(
            f"{url}/v2/auth", data={"username": ALICE.username, "key": ALICE.api_key}
        ).json()["token"]
        login = http.post(
            f"{url}/v1/login", data={"username": ALICE.username, "password": ALICE.password}
        )
        utk, session_id = login.json()["utk"], login.cookies["JSESSIONID"]
        secrets = [ALICE.api_key, ALICE.password, token, utk, session_id]
        bodies: list[tuple[str, str, Callable[[str], Any]]] = [
            ("POST", "/lock", lambda s: {"username": s}),
            ("POST", "/unlock", lambda s: {"username": s}),
            ("POST", "/rotate-key", lambda s: {"username": s}),
            ("POST", "/rotate-password", lambda s: {"username": s}),
            ("POST", "/expire", lambda s: {"credential": s + "x"}),
            ("POST", "/revoke", lambda s: {"credential": "x" + s}),
            ("POST", "/lock", lambda s: {s: 1}),
            ("POST", "/faults", lambda s: {"kind": s}),
            ("POST", "/faults", lambda s: {"kind": "fail", "version": s}),
            ("POST", "/clock/advance", lambda s: {"seconds": s}),
            ("POST", "/accounts", lambda s: {"username": s}),
            ("POST", "/routes", lambda s: {"path": "/x", "auth": s}),
            ("POST", "/routes", lambda s: {"path": "/x", "method": s}),
            ("GET", "/nope/{}", lambda s: None),
        ]
        tried = 0
        for secret in secrets:
            for method, path, body in bodies:
                target = path.format(quote(secret, safe=""))
                answer = http.request(method, f"{url}/_mgmtauth{target}", json=body(secret))
                assert 400 <= answer.status_code < 500, (target, answer.text)
                text = answer.text + json.dumps(dict(answer.headers))
                assert not [s for s in secrets if s in text], (method, target, answer.text)
                tried += 1
            # The timeline as JSON, after a failed v2 auth with fields swapped.
            http.post(f"{url}/v2/auth", data={"username": secret, "key": ALICE.username})
            http.get(f"{url}/v1/things;jsessionid={secret}")
            tried += 2
        events = http.get(f"{url}/_mgmtauth/events").text
        assert "AuthRejected" in events
        assert not [s for s in secrets if s in events]
        # After a reset, the sessions handed out before it are still secrets.
        assert http.post(f"{url}/_mgmtauth/reset", json={}).status_code == 200
        for target in (f"/nope;jsessionid={session_id}", f"/v1/things?utk={utk}"):
            answer = http.get(url + target, headers={"Cookie": f"JSESSIONID={session_id}"})
            assert answer.status_code in (401, 404)
            assert session_id not in answer.text
            assert utk not in answer.text
            tried += 1
    TRIED["control API"] = tried


# -- what a user sees: terminal output with --full-trace, JUnit XML ----------------------

INNER_SUITE = """
import json

import requests


def boom(request):
    raise RuntimeError("the handler broke")


def test_misuses_every_secret(mgmt_server, mgmt_account):
    url = mgmt_server.url
    mgmt_server.route("GET", "/v1/boom", auth="v1").respond_with_handler(boom)
    key, password, user = mgmt_account.api_key, mgmt_account.password, mgmt_account.username
    token = requests.post(url + "/v2/auth", data={"username": user, "key": key}).json()["token"]
    login = requests.post(url + "/v1/login", data={"username": user, "password": password})
    utk, sid = login.json()["utk"], login.headers["Set-Cookie"].split(";")[0].split("=")[1]
    with open("secrets.json", "w") as f:
        json.dump([key, password, token, utk, sid], f)
    # Fields swapped, a password as the username, secrets in paths and queries.
    requests.post(url + "/v2/auth", data={"username": key, "key": user})
    requests.post(url + "/v1/login", data={"username": password, "password": user})
    requests.get(url + "/v1/x;jsessionid=" + sid)
    requests.get(url + "/api/" + token)
    requests.get(url + "/v1/x?utk=" + utk)
    # A v1 handler that raises: the teardown traceback shows the request's repr.
    answer = requests.get(url + "/v1/boom?utk=" + utk, headers={"Cookie": "JSESSIONID=" + sid})
    assert answer.status_code == 500
    mgmt_server.assert_auth_count(99)
"""


def test_terminal_output_and_junit_xml_show_no_secret(mgmt_pytester: pytest.Pytester) -> None:
    mgmt_pytester.makepyfile(test_inner=INNER_SUITE)
    result = mgmt_pytester.runpytest(
        "-v", "--mgmtauth-report", "--full-trace", "--junitxml=out.xml", "-p", "no:randomly"
    )
    result.assert_outcomes(failed=1, errors=1)
    secrets = json.loads((mgmt_pytester.path / "secrets.json").read_text())
    output = result.stdout.str() + result.stderr.str()
    xml = (mgmt_pytester.path / "out.xml").read_text()
    for secret in secrets:
        assert secret not in output, f"a secret in the terminal output: {secret[:8]}..."
        assert secret not in xml, f"a secret in the JUnit XML: {secret[:8]}..."
    # The channels were really looked at: the failure, the timeline, the teardown error
    # with the request's repr (utk as a fingerprint), the report.
    assert "RuntimeError: the handler broke" in output
    assert "<FakeRequest '/v1/boom?utk=#" in output
    assert "no account '#" in output
    assert "mgmtauth: credentials per test" in output
    assert "the handler broke" in xml
    TRIED["pytester run"] = 7
