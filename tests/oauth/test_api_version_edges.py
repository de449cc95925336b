"""The lifecycle of calendar-versioned API versions at its edges (issue 43, part 2): a
version whose End of Life falls after year 9999, a path whose successor ``Link`` holds
what a header may not, and digits that are not ASCII."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from datetime import datetime, timezone

import pytest
import requests

from pytest_mgmtauth import MgmtClock, MgmtServer
from pytest_mgmtauth._service.api_versions import parse_version, successor_link, version_call
from pytest_mgmtauth._service.flows.oauth_scopes import parse_scope
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.service import AuthService

# -- year 10000 ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["9997-01", "9998-01", "9999-12"])
def test_a_version_whose_end_of_life_is_past_year_9999_stays_active(
    make_service: Callable[..., AuthService], name: str
) -> None:
    version = parse_version(f"/v{name}/cdp/audiences")
    assert version is not None
    assert version.ends is None
    last = datetime(9999, 12, 31, 23, 59, tzinfo=timezone.utc).timestamp()
    assert version.phase(last) == "active"
    service = make_service()
    assert version_call(service.timeline, service.options, "GET", f"/v{name}/cdp/x", []) == ()


def test_the_last_version_that_ends_in_year_9999_still_ends() -> None:
    version = parse_version("/v9996-12/cdp/audiences")
    assert version is not None
    last_month = datetime(9999, 12, 1, tzinfo=timezone.utc).timestamp()
    assert version.phase(last_month) == "end_of_life"


def test_a_route_on_version_9998_answers(mgmt_server: MgmtServer, http: requests.Session) -> None:
    mgmt_server.route("GET", "/v9998-01/cdp/audiences", auth="oauth").respond_with_json([])
    client = mgmt_server.add_client(["acme:*:cdp:*:audiences:read"])
    token = http.post(
        mgmt_server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials", "scope": client.scopes[0]},
        auth=(client.client_id, client.client_secret),
    ).json()["access_token"]
    answer = http.get(
        mgmt_server.url_for("/v9998-01/cdp/audiences"),
        headers={"Authorization": f"Bearer {token}"},
    )
    assert (answer.status_code, answer.json()) == (200, [])
    assert "Sunset" not in answer.headers


# -- the successor Link ----------------------------------------------------------------


def _head(server: MgmtServer, target: bytes) -> tuple[int, dict[str, str]]:
    """Status and headers of ``GET target`` on a keep-alive connection (a missing
    answer fails the test by its timeout)."""
    address = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((address[0], int(address[1])), timeout=10) as sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: api.tealiumiq.com\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    lines = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers


@pytest.mark.parametrize(
    ("target", "link"),
    [
        (b"/v2026-06/cdp/%E6%97%A5", "/v2028-06/cdp/%E6%97%A5"),  # beyond Latin-1
        (b"/v2026-06/cdp/\xe6\x97\xa5", "/v2028-06/cdp/%E6%97%A5"),  # sent unescaped
        (b"/v2026-06/cdp/a%0Db%0A", "/v2028-06/cdp/a%0Db%0A"),  # CR, LF
        (b"/v2026-06/cdp/a>b", "/v2028-06/cdp/a%3Eb"),
        (b"/v2026-06/cdp/a%20b%3E", "/v2028-06/cdp/a%20b%3E"),
        (b"/v2026-06/cdp/a%2Fb/%zz", "/v2028-06/cdp/a%2Fb/%25zz"),  # kept as sent
        (b"http://api.tealiumiq.com/v2026-06/cdp/x?q=%0D", "/v2028-06/cdp/x"),
    ],
)
@pytest.mark.mgmtauth(sunset_check="off")
def test_the_successor_link_is_the_path_as_sent_in_uri_characters(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock, target: bytes, link: str
) -> None:
    mgmt_server.expect_refusals()  # no credential: the 401 carries the headers too
    mgmt_server.route("GET", re.compile(r"/v2026-06/cdp/.*"), auth="v2").respond_with_json([])
    mgmt_clock.move_to(datetime(2028, 7, 1, tzinfo=timezone.utc))
    status, headers = _head(mgmt_server, target)
    assert status == 401
    assert headers["Link"] == f'<{link}>; rel="successor-version"'


def test_a_link_from_the_decoded_path_encodes_every_byte_a_uri_may_not_hold() -> None:
    # The app driven without the server knows only the decoded path.
    version = parse_version("/v2026-06/cdp/a b>%\r\u65e5")
    assert version is not None
    assert successor_link(version, "2028-06", None) == "/v2028-06/cdp/a%20b%3E%25%0D%E6%97%A5"


# -- ASCII digits ----------------------------------------------------------------------

FULL_WIDTH = "\uff12\uff10\uff12\uff16-10"  # "２０２６-10"


def test_only_ascii_digits_make_a_version() -> None:
    with pytest.raises(ValueError, match="'api_successor' must be a version like '2026-10'"):
        Options(api_successor=FULL_WIDTH)
    assert parse_version(f"/v{FULL_WIDTH}/cdp/audiences") is None
    with pytest.raises(ValueError, match="is not a version like '2026-07'"):
        parse_scope(f"acme:main:cdp:{FULL_WIDTH}:audiences:read")


@pytest.mark.mgmtauth(sunset_check="off")
def test_the_410_at_end_of_life_carries_the_same_link(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock
) -> None:
    mgmt_server.route("GET", re.compile(r"/v2026-06/cdp/.*"), auth="v2").respond_with_json([])
    mgmt_clock.move_to(datetime(2029, 7, 1, tzinfo=timezone.utc))
    status, headers = _head(mgmt_server, b"/v2026-06/cdp/%0D%E6%97%A5")
    assert status == 410
    assert headers["Link"] == '</v2028-06/cdp/%0D%E6%97%A5>; rel="successor-version"'
