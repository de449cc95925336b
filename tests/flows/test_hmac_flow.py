"""A grant-less flow defined in the test suite, with no edit to the package (an example
"Adding a flow" in docs/architecture.md points to): every protected call is signed with
the account's API key (``Authorization: TLM-HMAC username=<u>, ts=<unix s>, sig=<hex
HMAC-SHA256>``); the key itself never travels. Registered for this module only."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import time

import pytest
import requests

from pytest_mgmtauth import Account, AccountLocked, ApiCall, MgmtServer
from pytest_mgmtauth.flows import (
    AUTH_FAILED,
    Authorization,
    Credential,
    Flow,
    MalformedCall,
    Received,
    registered,
)

# -- the flow ---------------------------------------------------------------------------

#: How far a request's ts may be from the service's clock.
MAX_SKEW = 300
_HEADER = re.compile(r"^TLM-HMAC\s+(?P<params>.*)$")


def signature(key: str, method: str, path: str, ts: str) -> str:
    return hmac.new(key.encode(), f"{method}\n{path}\n{ts}".encode(), hashlib.sha256).hexdigest()


@dataclasses.dataclass(frozen=True)
class HmacSignature(Credential):
    username: str | None = None
    ts: str | None = None
    sig: str | None = None


class HmacFlow(Flow):
    name = "hmac"
    title = "TLM-HMAC signed calls"
    path_title = "TLM-HMAC"
    secret = "API key"
    credential = None  # nothing granted: every call is signed with the key
    attempt = "signed request"
    auth_hosts = ("api.tealiumiq.com",)
    api_hosts = ("api.tealiumiq.com",)

    @classmethod
    def fix_refused(cls) -> str:
        return (
            "'Authorization: TLM-HMAC username=<u>, ts=<unix seconds>, sig=<hex "
            "HMAC-SHA256(api_key, METHOD\\npath\\nts)>' on every call"
        )

    def carried(self, received: Received) -> str | None:
        values = received.header("Authorization")
        if values and values[0].strip().upper().startswith("TLM-HMAC"):
            return "a TLM-HMAC signature"
        return None

    def read(self, received: Received) -> HmacSignature:
        values = received.header("Authorization")
        if not values:
            return HmacSignature(
                missing=True, problem="no Authorization header: sign the call with TLM-HMAC"
            )
        found = _HEADER.match(values[0].strip())
        if found is None:
            return HmacSignature(problem="the Authorization header is not 'TLM-HMAC ...'")
        params = {}
        for part in found["params"].split(","):
            name, eq, value = part.strip().partition("=")
            if not eq:
                raise MalformedCall(400, f"TLM-HMAC parameter {name!r} has no value")
            params[name] = value
        missing = [p for p in ("username", "ts", "sig") if not params.get(p)]
        if missing:
            return HmacSignature(
                username=params.get("username"),
                problem=f"TLM-HMAC lacks {', '.join(missing)}",
            )
        if not params["ts"].isdigit():
            return HmacSignature(
                username=params["username"], problem="ts must be whole unix seconds"
            )
        return HmacSignature(username=params["username"], ts=params["ts"], sig=params["sig"])

    def owner(self, credential: Credential) -> tuple[str | None, str | None]:
        if isinstance(credential, HmacSignature) and credential.username in self.service.accounts:
            return credential.username, None
        return None, None

    def authorize(self, credential: Credential, call, permission: str | None) -> Authorization:
        assert isinstance(credential, HmacSignature)
        service = self.service
        refuse = self.refuse_in_call(call)
        with service.mutex:
            username = credential.username
            account = service.accounts.get(username) if username else None
            if credential.problem or account is None or username is None:
                who = username if account is not None else None
                reason = credential.problem or service.accounts.unknown_account(username or "")
                refuse(who, AUTH_FAILED, reason)
            service.lockout.check(self, username, call.now, refuse)
            assert credential.ts is not None
            assert credential.sig is not None
            skew = call.now - int(credential.ts)
            if abs(skew) > MAX_SKEW:
                refuse(
                    username,
                    AUTH_FAILED,
                    f"the request is stale: its ts is {abs(skew):.0f} s "
                    f"{'behind' if skew > 0 else 'ahead of'} the service's clock (at most "
                    f"{MAX_SKEW} s allowed); sign every request with the current time",
                )
            expected = signature(account.api_key, call.method, call.path, credential.ts)
            if not hmac.compare_digest(expected, credential.sig.lower()):
                service.lockout.failed(
                    self,
                    username,
                    call.now,
                    "the TLM-HMAC signature does not match: sign METHOD + '\\n' + path + "
                    "'\\n' + ts with HMAC-SHA256 and the account's API key, hex-encoded",
                    refuse,
                )
            service.lockout.succeeded(username)
            service.credentials.check_permission(call, username, "HMAC", permission)
            return Authorization(username, self.name, "HMAC")


@pytest.fixture(autouse=True, scope="module")
def _hmac_flow_registered():
    with registered(HmacFlow):
        yield


# -- a client ---------------------------------------------------------------------------


def signed_get(
    mgmt_server: MgmtServer,
    account: Account,
    path: str,
    *,
    ts: int | None = None,
    key: str | None = None,
) -> requests.Response:
    stamp = str(int(time.time()) if ts is None else ts)
    sig = signature(key or account.api_key, "GET", path, stamp)
    header = f"TLM-HMAC username={account.username}, ts={stamp}, sig={sig}"
    return requests.get(mgmt_server.url + path, headers={"Authorization": header})


@pytest.fixture
def things(mgmt_server):
    return mgmt_server.route("GET", "/v8/things", auth="hmac").respond_with_json(["a"])


# -- the tests --------------------------------------------------------------------------


def test_signed_call_reaches_the_handler(mgmt_clock, mgmt_server, mgmt_account, things):
    answer = signed_get(mgmt_server, mgmt_account, "/v8/things")
    assert answer.status_code == 200, answer.text
    assert answer.json() == ["a"]
    assert things.call_count == 1
    [call] = [e for e in mgmt_server.events if isinstance(e, ApiCall)]
    assert call.authenticated
    assert call.version == "hmac"
    assert call.username == mgmt_account.username


def test_wrong_signature_is_a_1401(mgmt_clock, mgmt_server, mgmt_account, things):
    mgmt_server.expect_refusals()
    answer = signed_get(mgmt_server, mgmt_account, "/v8/things", key="not-the-key-at-all")
    assert answer.status_code == 401
    body = answer.json()
    assert body["returnCode"] == 1401
    assert body["message"].startswith("Authentication failed: the TLM-HMAC signature")
    assert things.call_count == 0


def test_stale_request_is_refused(mgmt_clock, mgmt_server, mgmt_account, things):
    mgmt_server.expect_refusals()
    ts = int(time.time())
    mgmt_clock.advance(seconds=MAX_SKEW)
    assert signed_get(mgmt_server, mgmt_account, "/v8/things", ts=ts).status_code == 200
    mgmt_clock.advance(seconds=1)
    answer = signed_get(mgmt_server, mgmt_account, "/v8/things", ts=ts)
    assert answer.status_code == 401
    assert answer.json()["returnCode"] == 1401
    assert "stale" in answer.json()["message"]
    assert "301 s behind" in answer.json()["message"]
    ahead = signed_get(mgmt_server, mgmt_account, "/v8/things", ts=int(time.time()) + 301)
    assert "ahead of" in ahead.json()["message"]


def test_failures_lock_the_account_then_it_unlocks(mgmt_clock, mgmt_server, mgmt_account, things):
    mgmt_server.expect_refusals()
    threshold = mgmt_server.options.lockout_threshold
    for _ in range(threshold):
        wrong = signed_get(mgmt_server, mgmt_account, "/v8/things", key="wrong-key-123")
        assert wrong.json()["returnCode"] == 1401
    [locked] = [e for e in mgmt_server.events if isinstance(e, AccountLocked)]
    assert locked.version == "hmac"
    assert locked.failures == threshold
    right = signed_get(mgmt_server, mgmt_account, "/v8/things")
    assert right.status_code == 401
    assert right.json()["returnCode"] == 1402
    assert "try again in 10 minutes" in right.json()["message"]
    mgmt_clock.advance(seconds=mgmt_server.options.lockout_duration)
    assert signed_get(mgmt_server, mgmt_account, "/v8/things").status_code == 200
    # and on cue
    mgmt_server.lock(mgmt_account)
    assert signed_get(mgmt_server, mgmt_account, "/v8/things").json()["returnCode"] == 1402
    mgmt_server.unlock(mgmt_account)
    assert signed_get(mgmt_server, mgmt_account, "/v8/things").status_code == 200
    timeline = mgmt_server.timeline()
    assert "account locked after 5 failed signed requests in a row" in timeline


def test_request_log_never_holds_the_key(mgmt_clock, mgmt_server, mgmt_account, things):
    mgmt_server.expect_refusals()
    ts = str(int(time.time()))
    sig = signature(mgmt_account.api_key, "GET", "/v8/things", ts)
    signed_get(mgmt_server, mgmt_account, "/v8/things")
    signed_get(mgmt_server, mgmt_account, "/v8/things", key="wrong-key-123")
    logged = repr(mgmt_server.requests) + mgmt_server.timeline() + repr(mgmt_server.events)
    assert mgmt_account.api_key not in logged
    first = mgmt_server.requests[0]
    # What the package does with the signature: it does not know it is a credential,
    # so the request log keeps it as sent.
    assert first.header("Authorization") == (
        f"TLM-HMAC username={mgmt_account.username}, ts={ts}, sig={sig}"
    )


def test_no_grants_to_count(mgmt_server, mgmt_account, things):
    with pytest.raises(ValueError, match="grants no credentials"):
        mgmt_server.auth_count(version="hmac")
    assert mgmt_server.auth_count() == 0


def test_a_bearer_route_tells_the_signature_header_as_its_scheme(mgmt_server, mgmt_account):
    mgmt_server.expect_refusals()
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    answer = signed_get(mgmt_server, mgmt_account, "/api/things")
    assert answer.status_code == 401
    # Told as another scheme, not as "3 Authorization values" (its own commas).
    message = answer.json()["message"]
    assert "the Authorization scheme is 'TLM-HMAC', not 'Bearer'" in message
    assert "Authorization values" not in message
