"""The lifecycle of calendar-versioned API versions (dev-portal-api-lifecycle): Active for
24 months, End of Support for 12 (Sunset, Deprecation and Link on every answer), then
410; on the simulated clock, so that one test takes a client across it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import pytest
import requests

from pytest_mgmtauth import ApiCall, DeprecatedVersionCall, MgmtClock, MgmtServer
from pytest_mgmtauth._service.api_versions import (
    lifecycle_headers,
    parse_version,
    successor,
    version_call,
)
from pytest_mgmtauth._service.options import Options
from pytest_mgmtauth._service.records import Refusal
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock
from pytest_mgmtauth._verdicts.evidence import Evidence
from pytest_mgmtauth._verdicts.findings import findings
from pytest_mgmtauth._verdicts.versions import deprecated_calls

AUDIENCES = "/v2026-06/cdp/audiences"


def at(year: int, month: int, day: int = 1) -> float:
    return datetime(year, month, day, tzinfo=timezone.utc).timestamp()


# -- the rules ---------------------------------------------------------------------


def test_a_version_is_active_24_months_then_in_end_of_support_12_then_gone() -> None:
    version = parse_version(AUDIENCES)
    assert version is not None
    assert (version.name, version.family, version.rest) == ("2026-06", "cdp", "/audiences")
    assert version.phase(at(2026, 1)) == "active"  # not released yet: no deprecation
    assert version.phase(at(2028, 6) - 1) == "active"
    assert version.phase(at(2028, 6)) == "end_of_support"
    assert version.phase(at(2029, 6) - 1) == "end_of_support"
    assert version.phase(at(2029, 6)) == "end_of_life"
    assert parse_version("/v2/things") is None
    assert parse_version("/v2026-13/cdp/x") is None
    assert parse_version("/2026-06/cdp/x") is None


def test_the_headers_are_the_lifecycle_pages_example() -> None:
    # "a sunset date of June 2029 and a successor version at v2026-10". The page prints
    # "Mon, 01 Jun 2029": 1 June 2029 is a Friday, and an HTTP-date names its weekday.
    version = parse_version(AUDIENCES)
    assert version is not None
    assert lifecycle_headers(version, "/v2026-10/cdp/audiences", with_v=False) == (
        ("Sunset", "Fri, 01 Jun 2029 00:00:00 GMT"),
        ("Deprecation", "true"),
        ("Link", '</2026-10/cdp/audiences>; rel="successor-version"'),
    )
    assert lifecycle_headers(version, "/v2026-10/cdp/audiences", with_v=True)[2] == (
        "Link",
        '</v2026-10/cdp/audiences>; rel="successor-version"',
    )


def test_the_successor_is_the_option_else_the_newest_declared_else_derived() -> None:
    version = parse_version(AUDIENCES)
    assert version is not None
    declared = ["/v2026-10/cdp/audiences", "/v2027-03/cdp/labels", "/v2028-01/other/x"]
    assert successor(version, declared, "") == "2027-03"
    assert successor(version, declared, "2026-10") == "2026-10"
    assert successor(version, ["/v2025-01/cdp/old"], "") == "2028-06"


@pytest.mark.parametrize("value", ["v2026-10", "2026-13", "next", 2026])
def test_the_successor_option_is_a_version(value: object) -> None:
    with pytest.raises(ValueError, match="'api_successor' must be a version like '2026-10'"):
        Options(api_successor=value)  # type: ignore[arg-type]


def test_a_call_is_recorded_in_end_of_support_and_refused_with_410_at_end_of_life(
    make_service: Callable[..., AuthService], clock: ManualClock
) -> None:
    service = make_service()
    assert clock() < at(2028, 6)  # Active
    assert version_call(service.timeline, service.options, "GET", AUDIENCES, []) == ()
    clock.advance(at(2028, 7) - clock())
    headers = dict(version_call(service.timeline, service.options, "GET", AUDIENCES, []))
    assert headers["Sunset"] == "Fri, 01 Jun 2029 00:00:00 GMT"
    assert headers["Link"] == '</v2028-06/cdp/audiences>; rel="successor-version"'
    clock.advance(at(2029, 6) - clock())
    with pytest.raises(Refusal) as gone:
        version_call(service.timeline, service.options, "GET", AUDIENCES, [])
    assert gone.value.status == 410
    assert gone.value.body is not None
    assert "reached End of Life on 2029-06-01" in str(gone.value.body["message"])
    calls = [e for e in service.timeline.events if isinstance(e, DeprecatedVersionCall)]
    assert [(c.phase, c.status) for c in calls] == [("end_of_support", None), ("end_of_life", 410)]
    assert "is in End of Support (Sunset 2029-06-01)" in calls[0].describe()
    # An approved contract extension: no lifecycle at all.
    extended = make_service(api_lifecycle=False)
    assert version_call(extended.timeline, extended.options, "GET", AUDIENCES, []) == ()


# -- over the wire, on mgmt_clock ----------------------------------------------------


@pytest.mark.mgmtauth(sunset_check="off")  # this test crosses the lifecycle on purpose
def test_a_client_crosses_end_of_support_and_end_of_life_on_mgmt_clock(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    mgmt_server.route("GET", AUDIENCES, auth="oauth").respond_with_json(["a"])
    mgmt_server.route("GET", "/v2026-10/cdp/audiences", auth="oauth").respond_with_json(["b"])
    client = mgmt_server.add_client(["acme:*:cdp:*:audiences:read"])

    def get(path: str) -> requests.Response:
        token = http.post(
            mgmt_server.url_for("/oauth/token"),
            data={"grant_type": "client_credentials", "scope": client.scopes[0]},
            auth=(client.client_id, client.client_secret),
        ).json()["access_token"]
        return http.get(mgmt_server.url_for(path), headers={"Authorization": f"Bearer {token}"})

    mgmt_clock.move_to(datetime(2027, 1, 15, tzinfo=timezone.utc))
    active = get(AUDIENCES)
    assert (active.status_code, active.json()) == (200, ["a"])
    assert "Sunset" not in active.headers
    mgmt_clock.move_to(datetime(2028, 6, 1, tzinfo=timezone.utc))  # 24 months on
    deprecated = get(AUDIENCES)
    assert (deprecated.status_code, deprecated.json()) == (200, ["a"])
    assert deprecated.headers["Sunset"] == "Fri, 01 Jun 2029 00:00:00 GMT"
    assert deprecated.headers["Deprecation"] == "true"
    assert deprecated.headers["Link"] == '</v2026-10/cdp/audiences>; rel="successor-version"'
    assert "Sunset" not in get("/v2026-10/cdp/audiences").headers  # the successor: Active
    mgmt_clock.move_to(datetime(2029, 6, 1, tzinfo=timezone.utc))  # 36 months on
    gone = get(AUDIENCES)
    assert gone.status_code == 410
    assert gone.json()["error"] == "gone"
    assert get("/v2026-10/cdp/audiences").json() == ["b"]
    timeline = mgmt_server.timeline()
    assert "API version 2026-06 is in End of Support (Sunset 2029-06-01)" in timeline
    assert "-> 410: API version 2026-06 reached End of Life on 2029-06-01" in timeline


@pytest.mark.mgmtauth(sunset_check="off")
def test_a_refused_call_in_end_of_support_carries_the_headers_too(
    mgmt_server: MgmtServer, mgmt_clock: MgmtClock, http: requests.Session
) -> None:
    mgmt_server.expect_refusals()  # the 401 is this test's point
    mgmt_server.route("GET", AUDIENCES, auth="oauth").respond_with_json([])
    mgmt_clock.move_to(datetime(2028, 7, 1, tzinfo=timezone.utc))
    refused = http.get(mgmt_server.url_for(AUDIENCES))
    assert refused.status_code == 401
    assert refused.headers["Deprecation"] == "true"


# -- the teardown check ----------------------------------------------------------------

SUITE = """
from datetime import datetime, timezone

import pytest
import requests


@pytest.fixture(autouse=True)
def route(mgmt_server, mgmt_clock):
    mgmt_server.route("GET", "/v2026-06/cdp/audiences", auth="oauth").respond_with_json([])
    mgmt_clock.move_to(datetime(2028, 7, 1, tzinfo=timezone.utc))


def call(mgmt_server):
    # Told by the first answer, the client calls the same version again: a finding.
    client = mgmt_server.add_client(["acme:*:cdp:*:audiences:read"])
    token = requests.post(
        mgmt_server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials", "scope": client.scopes[0]},
        auth=(client.client_id, client.client_secret),
    ).json()["access_token"]
    for _ in range(2):
        answer = requests.get(
            mgmt_server.url_for("/v2026-06/cdp/audiences"),
            headers={"Authorization": "Bearer " + token},
        )
        assert answer.headers["Deprecation"] == "true"


def test_warns(mgmt_server):
    call(mgmt_server)


@pytest.mark.mgmtauth(sunset_check="fail")
def test_fails(mgmt_server):
    call(mgmt_server)


@pytest.mark.mgmtauth(sunset_check="off")
def test_off(mgmt_server):
    call(mgmt_server)
"""


def test_a_call_past_active_warns_by_default_fails_or_is_let_go_as_the_option_says(
    mgmt_pytester: pytest.Pytester,
) -> None:
    mgmt_pytester.makepyfile(SUITE)
    result = mgmt_pytester.runpytest_inprocess("-p", "no:randomly", "-W", "default")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_fails _*",
            "*1 call went to API versions past Active: 1 after an earlier answer to the same "
            "client said its version ends (Sunset, Deprecation, Link); first: GET "
            "/v2026-06/cdp/audiences: API version 2026-06 is in End of Support (Sunset "
            "2029-06-01)*",
            "*Fix: move GET /v2026-06/cdp/audiences to /v2028-06/cdp/audiences. The first "
            "answer in End of Support carries Sunset, Deprecation and Link "
            'rel="successor-version": a client that reads them sends its later calls to the '
            "successor*",
        ]
    )
    result.stdout.fnmatch_lines(["*DeprecatedVersionWarning: pytest-mgmtauth: 1 call went*"])
    assert result.stdout.str().count("DeprecatedVersionWarning: pytest-mgmtauth") == 1


FOLLOWER = """
import re
from datetime import datetime, timezone

import pytest
import requests

OLD = "/v2026-07/cdp-api/accounts/acme/profiles/main/labels"


@pytest.mark.mgmtauth(sunset_check="fail")
def test_follows_the_successor(mgmt_server, mgmt_clock):
    mgmt_server.route("GET", OLD, auth="oauth").respond_with_json(["old"])
    new = OLD.replace("2026-07", "2028-01")
    mgmt_server.route("GET", new, auth="oauth").respond_with_json(["new"])
    mgmt_clock.move_to(datetime(2028, 7, 1, tzinfo=timezone.utc))
    client = mgmt_server.add_client(["acme:*:cdp-api:*:labels:read"])
    token = requests.post(
        mgmt_server.url_for("/oauth/token"),
        data={"grant_type": "client_credentials", "scope": client.scopes[0]},
        auth=(client.client_id, client.client_secret),
    ).json()["access_token"]
    path = OLD
    for _ in range(3):
        answer = requests.get(
            mgmt_server.url_for(path), headers={"Authorization": "Bearer " + token}
        )
        assert answer.status_code == 200
        link = re.search(r'<([^>]*)>; rel="successor-version"', answer.headers.get("Link", ""))
        if link:
            path = link[1]
    assert answer.json() == ["new"]


@pytest.mark.mgmtauth(sunset_check="fail")
def test_a_version_at_end_of_life(mgmt_server, mgmt_clock):
    mgmt_server.route("GET", OLD, auth="oauth").respond_with_json([])
    mgmt_clock.move_to(datetime(2029, 7, 1, tzinfo=timezone.utc))
    assert requests.get(mgmt_server.url_for(OLD)).status_code == 410
"""


def test_the_call_whose_answer_reveals_end_of_support_is_no_finding_one_at_end_of_life_is(
    mgmt_pytester: pytest.Pytester,
) -> None:
    # Issue 43, 1: a client that follows Link rel="successor-version" after its first
    # answer in End of Support passes even under sunset_check="fail".
    mgmt_pytester.makepyfile(FOLLOWER)
    result = mgmt_pytester.runpytest_inprocess("-p", "no:randomly", "-W", "default")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_a_version_at_end_of_life _*",
            "*1 call went to API versions past Active: 1 at End of Life (410); first: GET "
            "/v2026-07/cdp-api/accounts/acme/profiles/main/labels -> 410: API version "
            "2026-07 reached End of Life on 2029-07-01*",
        ]
    )
    assert "test_follows_the_successor" not in result.stdout.str()


def answered(service: AuthService, client: str | None, path: str) -> None:
    """A call past Active as the transport makes it: the version's event on arrival,
    then the route's event once it is answered."""
    version_call(service.timeline, service.options, "GET", path, [])
    record_answer(service, client, path)


def record_answer(service: AuthService, client: str | None, path: str) -> None:
    now = datetime.fromtimestamp(service.timeline.now(), tz=timezone.utc)
    service.timeline.record(
        ApiCall(
            at=now,
            username=client,
            method="GET",
            path=path,
            version="oauth",
            credential="T1",
            status=200,
        )
    )


def evidence_of(service: AuthService) -> Evidence:
    timeline = service.timeline
    return Evidence(timeline.events, service.options, timeline.started_at, timeline.now())


def test_told_is_per_client_and_per_api(
    make_service: Callable[..., AuthService], clock: ManualClock
) -> None:
    service = make_service()
    clock.advance(at(2028, 7) - clock())
    answered(service, "app-1", AUDIENCES)  # told
    answered(service, "app-2", AUDIENCES)  # another client: told now
    answered(service, "app-1", "/v2026-06/other/x")  # another API of the same version
    answered(service, "app-1", AUDIENCES)  # told before: the one finding
    found = deprecated_calls(evidence_of(service))
    assert [(c.path, c.phase) for c in found] == [(AUDIENCES, "end_of_support")]
    assert len(found) == 1


def test_calls_in_flight_when_end_of_support_began_were_told_nothing(
    make_service: Callable[..., AuthService], clock: ManualClock
) -> None:
    service = make_service()
    clock.advance(at(2028, 7) - clock())
    # Three calls of one client's pool arrive before the first answer is made.
    for _ in range(3):
        version_call(service.timeline, service.options, "GET", AUDIENCES, [])
    for _ in range(3):
        record_answer(service, "app-1", AUDIENCES)
    assert deprecated_calls(evidence_of(service)) == []
    answered(service, "app-1", AUDIENCES)  # after the answers: told
    assert len(deprecated_calls(evidence_of(service))) == 1


FORGED = "\u2028  00:00:00  T9 issued by /v2/auth (#abcdef), valid until 00:30:00"


def test_the_move_line_shows_a_path_from_a_request_escaped(
    make_service: Callable[..., AuthService], clock: ManualClock
) -> None:
    # Issue 43, part 2, 13: U+2028 (or a newline) in a path must not start a line of
    # its own in the finding's "Fix: move ..." paragraph (report, JUnit XML).
    service = make_service()
    clock.advance(at(2028, 7) - clock())
    path = AUDIENCES + FORGED
    for _ in range(2):
        answered(service, "app-1", path)
    (finding,) = findings(evidence_of(service), kinds=["deprecated_version"])
    forged = [
        line for line in finding.message.splitlines() if line.lstrip().startswith("00:00:00  T9")
    ]
    assert forged == [], finding.message
    assert "Fix: move GET '/v2026-06/cdp/audiences\\u2028  00:00:00  T9" in finding.fix
