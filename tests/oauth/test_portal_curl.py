"""The developer portal's curl commands, copied verbatim from its pages (repository
Tealium/docs-site, folder administration/early-access/developer-portal/), run by bash
through the fake's proxy with only their placeholders filled in: a client written from
the pages must work against the fake unchanged.

The commands keep the pages' line breaks and quoting; ``{client_id}`` and the like are
replaced by the values of a client made with ``add_client()`` or ``mgmt_oauth_client``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime, timezone
from typing import Any

import jwt
import pytest

from pytest_mgmtauth import MgmtClock, MgmtServer, OAuthClient


@pytest.fixture(autouse=True)
def _late_2026(mgmt_clock: MgmtClock) -> None:
    """The pages' versions (2026-01 to 2026-07) leave Active 24 months after their month:
    the fake's time is pinned where they are Active, whatever the real date."""
    mgmt_clock.move_to(datetime(2026, 11, 1, tzinfo=timezone.utc))


pytestmark = [
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
    pytest.mark.mgmtauth(intercept=True),
]

#: dev-portal-authentication, "Request an access token": all profiles of an account.
AUTH_WILDCARD = """\
curl -X POST \\
https://api.tealiumapis.com/oauth/token \\
-u '{client_id}:{client_secret}' \\
-H 'Content-Type: application/x-www-form-urlencoded' \\
-d 'grant_type=client_credentials' \\
-d 'scope=tealium-corp:*:cdp-api:2026-07:labels:read'
"""

#: dev-portal-authentication: one profile.
AUTH_PROFILE = """\
curl -X POST \\
https://api.tealiumapis.com/oauth/token \\
-u '{client_id}:{client_secret}' \\
-H 'Content-Type: application/x-www-form-urlencoded' \\
-d 'grant_type=client_credentials' \\
-d 'scope=tealium-corp:main:cdp-api:2026-07:labels:read'
"""

#: dev-portal-authentication: "To request multiple scopes, separate them with a space"
#: (the page shows this line alone, in place of the first command's scope line).
AUTH_MULTIPLE = """\
-d 'scope=tealium-corp:*:cdp-api:2026-07:labels:read tealium-corp:*:cdp-api:2026-07:audiences:write'
"""

#: dev-portal-getting-started, "Step 3: Request an access token", with its example.
STARTED_TEMPLATE = """\
curl -X POST \\
https://api.tealiumapis.com/oauth/token \\
-u '{client_id}:{client_secret}' \\
-H 'Content-Type: application/x-www-form-urlencoded' \\
-d 'grant_type=client_credentials' \\
-d 'scope={space-separated-scopes}'
"""

STARTED_EXAMPLE = """\
curl -X POST \\
https://api.tealiumapis.com/oauth/token \\
-u 'a1b2c3d4e5f6:s3cr3tk3y' \\
-H 'Content-Type: application/x-www-form-urlencoded' \\
-d 'grant_type=client_credentials' \\
-d 'scope=acme-corp:main:cdp-api:2026-07:audiences:read acme-corp:main:cdp-api:2026-07:labels:read'
"""

#: dev-portal-authentication, "Make an authenticated request": one profile, then "Both
#: of the following requests work with a tealium-corp:*:cdp-api:2026-07:labels:read token".
AUTH_CALL = """\
curl -X GET \\
https://api.tealiumapis.com/v{YYYY-MM}/{api}/accounts/tealium-corp/profiles/main/labels \\
-H 'Authorization: Bearer {access_token}'
"""

AUTH_CALLS = """\
curl -X GET \\
https://api.tealiumapis.com/v{YYYY-MM}/{api}/accounts/tealium-corp/profiles/main/labels \\
-H 'Authorization: Bearer {access_token}'

curl -X GET \\
https://api.tealiumapis.com/v{YYYY-MM}/{api}/accounts/tealium-corp/profiles/staging/labels \\
-H 'Authorization: Bearer {access_token}'
"""

#: dev-portal-getting-started, "Step 4: Make an API call".
STARTED_CALL = """\
curl -X GET \\
https://api.tealiumapis.com/{version}/{api}/{api-endpoint} \\
-H 'Authorization: Bearer {access_token}' \\
-H 'Accept: application/json'
"""

#: dev-portal-api-versioning, "Incremental migration".
VERSIONING_CALLS = """\
# Migrate /audiences to the new version (has breaking changes)
curl -X GET \\
https://api.tealiumapis.com/v2026-06/cdp/audiences \\
-H 'Authorization: Bearer {token}'

# Keep /events on the old version (no changes between versions)
curl -X GET \\
https://api.tealiumapis.com/v2026-01/cdp/events \\
-H 'Authorization: Bearer {token}'
"""

LABELS_READ = "tealium-corp:*:cdp-api:2026-07:labels:read"
AUDIENCES_WRITE = "tealium-corp:*:cdp-api:2026-07:audiences:write"


def filled(command: str, **values: str) -> str:
    """The page's command with its placeholders replaced (``{name}`` -> ``values[name]``),
    nothing else changed."""
    for name, value in values.items():
        command = command.replace("{" + name + "}", value)
    assert "{" not in command.replace("{space-separated-scopes}", ""), command
    return command


def run(server: MgmtServer, command: str) -> Any:
    """The command run by bash with the proxy and CA variables of interception; its
    standard output, a JSON answer."""
    [answer] = run_all(server, command)
    return answer


def run_all(server: MgmtServer, command: str) -> list[Any]:
    """The JSON answers of the commands, in order."""
    env = {**{k: v for k, v in os.environ.items() if k not in server.env}, **server.env}
    result = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    answers, text, decoder = [], result.stdout.strip(), json.JSONDecoder()
    while text:
        answer, end = decoder.raw_decode(text)
        answers.append(answer)
        text = text[end:].lstrip()
    return answers


def test_the_authentication_pages_token_requests(mgmt_server: MgmtServer) -> None:
    client = mgmt_server.add_client([LABELS_READ, AUDIENCES_WRITE])
    secrets = {"client_id": client.client_id, "client_secret": client.client_secret}
    wildcard = run(mgmt_server, filled(AUTH_WILDCARD, **secrets))
    assert wildcard["token_type"] == "Bearer"
    assert wildcard["expires_in"] == 7200
    assert wildcard["scope"] == LABELS_READ
    claims = jwt.decode(str(wildcard["access_token"]), options={"verify_signature": False})
    assert claims["scope"] == LABELS_READ
    both = AUTH_WILDCARD.replace(
        "-d 'scope=tealium-corp:*:cdp-api:2026-07:labels:read'\n", AUTH_MULTIPLE
    )
    assert run(mgmt_server, filled(both, **secrets))["scope"] == (
        f"{LABELS_READ} {AUDIENCES_WRITE}"
    )
    mgmt_server.assert_auth_count(2, version="oauth")


def test_a_profile_granted_by_name_is_requested_by_name(mgmt_server: MgmtServer) -> None:
    client = mgmt_server.add_client(["tealium-corp:main:cdp-api:2026-07:labels:read"])
    answer = run(
        mgmt_server,
        filled(AUTH_PROFILE, client_id=client.client_id, client_secret=client.client_secret),
    )
    assert answer["scope"] == "tealium-corp:main:cdp-api:2026-07:labels:read"


def test_the_getting_started_pages_token_requests(
    mgmt_server: MgmtServer, mgmt_oauth_client: OAuthClient
) -> None:
    # Its template, with the fixture's client and scope...
    template = filled(
        STARTED_TEMPLATE,
        client_id=mgmt_oauth_client.client_id,
        client_secret=mgmt_oauth_client.client_secret,
    ).replace("{space-separated-scopes}", " ".join(mgmt_oauth_client.scopes))
    assert run(mgmt_server, template)["scope"] == " ".join(mgmt_oauth_client.scopes)
    # ...and its example exactly as printed: the client the page names.
    mgmt_server.add_client(
        [
            "acme-corp:main:cdp-api:2026-07:audiences:read",
            "acme-corp:main:cdp-api:2026-07:labels:read",
        ],
        client_id="a1b2c3d4e5f6",
        client_secret="s3cr3tk3y",
    )
    example = run(mgmt_server, STARTED_EXAMPLE)
    assert example["scope"] == (
        "acme-corp:main:cdp-api:2026-07:audiences:read acme-corp:main:cdp-api:2026-07:labels:read"
    )
    assert example["expires_in"] == 7200


def token_of(server: MgmtServer, client: OAuthClient) -> str:
    """An access token by the authentication page's own command."""
    command = filled(AUTH_WILDCARD, client_id=client.client_id, client_secret=client.client_secret)
    return str(run(server, command.replace(LABELS_READ, " ".join(client.scopes)))["access_token"])


def test_the_authentication_pages_calls_with_a_wildcard_token(mgmt_server: MgmtServer) -> None:
    # Routes declared with auth="oauth" and no scope=: the scope comes from the path.
    for profile in ("main", "staging"):
        mgmt_server.route(
            "GET",
            f"/v2026-07/cdp-api/accounts/tealium-corp/profiles/{profile}/labels",
            auth="oauth",
        ).respond_with_json({"labels": [profile]})
    token = token_of(mgmt_server, mgmt_server.add_client([LABELS_READ]))
    values = {"YYYY-MM": "2026-07", "api": "cdp-api", "access_token": token}
    assert run(mgmt_server, filled(AUTH_CALL, **values)) == {"labels": ["main"]}
    assert run_all(mgmt_server, filled(AUTH_CALLS, **values)) == [
        {"labels": ["main"]},
        {"labels": ["staging"]},
    ]
    # A token of another resource gets the error the page publishes.
    audiences = mgmt_server.add_client(["tealium-corp:*:cdp-api:2026-07:audiences:read"])
    values["access_token"] = token_of(mgmt_server, audiences)
    assert run(mgmt_server, filled(AUTH_CALL, **values)) == {
        "error": "insufficient_scope",
        "message": "Token does not contain required scope: "
        "tealium-corp:main:cdp-api:2026-07:labels:read",
    }
    mgmt_server.expect_refusals()  # that 403 is this test's point


def test_the_getting_started_pages_call(mgmt_server: MgmtServer) -> None:
    path = "/v2026-07/cdp-api/accounts/acme-corp/profiles/main/audiences"
    mgmt_server.route("GET", path, auth="oauth").respond_with_json({"audiences": []})
    client = mgmt_server.add_client(["acme-corp:main:cdp-api:2026-07:audiences:read"])
    values = {
        "version": "v2026-07",
        "api": "cdp-api",
        "api-endpoint": "accounts/acme-corp/profiles/main/audiences",
        "access_token": token_of(mgmt_server, client),
    }
    command = filled(STARTED_CALL, **values)
    assert run(mgmt_server, command) == {"audiences": []}


def test_the_versioning_pages_calls_on_two_versions(mgmt_server: MgmtServer) -> None:
    # Its shape has no /accounts/{a}/profiles/{p}: a scope of the API in any account.
    mgmt_server.route("GET", "/v2026-06/cdp/audiences", auth="oauth").respond_with_json([1])
    mgmt_server.route("GET", "/v2026-01/cdp/events", auth="oauth").respond_with_json([2])
    client = mgmt_server.add_client(["acme:main:cdp:*:*:read"])
    command = filled(VERSIONING_CALLS, token=token_of(mgmt_server, client))
    assert run_all(mgmt_server, command) == [[1], [2]]
