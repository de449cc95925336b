"""Right verdicts (issue 29) where a user looks: sweeps with xfail and a lazily
authenticating client, a clock moved by another tool, refused calls over the wire and in
``/check``, v3 paths that name two accounts, forged lines in reports and JUnit XML, and
the docs' clients under strict (pytester and the wire)."""

from __future__ import annotations

import http.client
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import requests

from pytest_mgmtauth import Account, MgmtServer

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples"

#: What pytest's defaults do with warnings (in-process runs inherit this project's filters).
DEFAULT_WARNINGS = "[pytest]\nfilterwarnings = default::pytest_mgmtauth.AuthFindingWarning\n"


@pytest.fixture
def pytester(mgmt_pytester: pytest.Pytester) -> pytest.Pytester:
    return mgmt_pytester


def _examples(pytester: pytest.Pytester) -> None:
    for name in ("mgmt_client.py", "v3_client.py", "sweep_clients.py"):
        shutil.copy(EXAMPLES / name, pytester.path / name)


# -- item 4: expire@call1 and a client that checks expiry before each call -------------

LAZY_V2 = """
import pytest
from mgmt_client import MgmtClient


@pytest.mark.mgmtauth(strict=True)
@pytest.mark.mgmtauth_sweep(faults=("expire",), points=3)
def test_sync(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1])
    with MgmtClient(mgmt_server.url, mgmt_account.username, mgmt_account.api_key) as client:
        for _ in range(3):
            assert client.get("/v2/devices") == [1]
"""


def test_a_client_that_authenticates_on_its_first_call_passes_expire_at_call_1_strictly(
    pytester: pytest.Pytester,
) -> None:
    _examples(pytester)
    pytester.makepyfile(test_lazy=LAZY_V2)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=4)
    result.stdout.re_match_lines([r"  expire call +ok +ok +ok$"])


# -- item 5: an xfailed sweep point is xfail, and reached ------------------------------

XFAIL = """
import pytest
import requests


@pytest.mark.xfail(reason="this client never renews", strict=False)
@pytest.mark.mgmtauth_sweep(faults=("revoke",), points=2)
def test_sync(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1])
    token = requests.post(
        mgmt_server.url + "/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()["token"]
    for _ in range(2):
        answer = requests.get(
            mgmt_server.url + "/v2/devices", headers={"Authorization": "Bearer " + token}
        )
        answer.raise_for_status()
"""


def test_an_xfailed_point_whose_fault_fired_is_shown_as_xfail_not_as_not_reached(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_xfail=XFAIL)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(xfailed=2, xpassed=1)
    result.stdout.re_match_lines(
        [
            r"  baseline +XPASS$",
            r"  revoke call +xfail +xfail$",
            r"  \(ok: passed, FAIL: failed, xfail: failed as xfail expects, XPASS: passed though "
            r"marked xfail, -: point not reached, \*: passed with a note\)$",
            r"  verdict: revoke fails from call 1, as xfail expects \(2/2 points\): the client "
            r"never re-authenticates after a 401 with 1401$",
        ]
    )
    assert "not reached at any point" not in result.stdout.str()


# -- item 6: offsets after another tool moved the clock -------------------------------

JUMPS = """
import datetime as dt

import freezegun
import requests


def call(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1])
    token = requests.post(
        mgmt_server.url + "/v2/auth",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()["token"]
    requests.get(mgmt_server.url + "/v2/devices", headers={"Authorization": "Bearer " + token})


@freezegun.freeze_time("2031-03-04 05:06:07")
def test_freezegun_forward(mgmt_server, mgmt_account):
    call(mgmt_server, mgmt_account)
    print(mgmt_server.timeline())


@freezegun.freeze_time("2001-03-04 05:06:07")
def test_freezegun_back(mgmt_server, mgmt_account):
    call(mgmt_server, mgmt_account)
    print(mgmt_server.timeline())
"""

TIME_MACHINE = """
import datetime as dt

import time_machine

from test_jumps import call


@time_machine.travel(dt.datetime(2031, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc), tick=False)
def test_time_machine(mgmt_server, mgmt_account):
    call(mgmt_server, mgmt_account)
    print(mgmt_server.timeline())
"""


def test_offsets_count_from_the_start_on_the_clock_another_tool_moved(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_jumps=JUMPS)
    files = ["test_jumps.py"]
    try:
        import time_machine  # noqa: F401
    except ImportError:
        pass  # freezegun shows the same; time-machine is not a test dependency
    else:
        pytester.makepyfile(test_time_machine=TIME_MACHINE)
        files.append("test_time_machine.py")
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-s", *files)
    result.assert_outcomes(passed=len(files) * 2 - 1)
    out = result.stdout.str()
    issued = re.findall(r"^  (\S+)  T1 issued by /v2/auth \(#\w+\), valid until (\S+)$", out, re.M)
    assert issued == [("00:00:00", "00:30:00")] * len(issued)
    assert len(issued) == len(files) * 2 - 1


# -- item 7: refused calls over the wire, expect_refusals, /check ----------------------

V3_WRONG_PROFILE = """
import pytest
import requests


def client_run(mgmt_server, account):
    for profile in ("main", "dev"):
        mgmt_server.route(
            "GET", f"/v3/x/accounts/acme/profiles/{profile}/visitors"
        ).respond_with_json([])
    # The bug: the token of 'main' is sent for 'dev'; after each 401 it authenticates
    # again (for 'main' again) and carries on with the next profile.
    for _ in range(3):
        token = requests.post(
            mgmt_server.url + "/v3/auth/accounts/acme/profiles/main",
            data={"username": account.username, "key": account.api_key},
        ).json()["token"]
        for profile in ("main", "dev"):
            requests.get(
                f"{mgmt_server.url}/v3/x/accounts/acme/profiles/{profile}/visitors",
                headers={"Authorization": "Bearer " + token},
            )


def test_default(mgmt_server, mgmt_account):
    client_run(mgmt_server, mgmt_account)


@pytest.mark.mgmtauth(strict=True)
def test_strict(mgmt_server, mgmt_account):
    client_run(mgmt_server, mgmt_account)


@pytest.mark.mgmtauth(strict=True)
def test_on_purpose(mgmt_server, mgmt_account):
    mgmt_server.expect_refusals()
    client_run(mgmt_server, mgmt_account)
"""


def test_a_v3_token_sent_for_another_profile_warns_by_default_and_fails_strictly(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    pytester.makepyfile(test_v3=V3_WRONG_PROFILE)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    result.assert_outcomes(passed=3, errors=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at teardown of test_strict _*",
            "pytest-mgmtauth: 3 protected call(s) of account * were refused because the "
            "client sent the wrong credential; first: GET "
            "/v3/x/accounts/acme/profiles/dev/visitors with T1 at 00:00:* -> 401 (1401: "
            "token T1 is for acme/main, but this call is for profile acme/dev*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["test_v3.py::test_default", "  *RefusedCallWarning: pytest-mgmtauth: 3 protected call(s)*"]
    )
    assert "test_on_purpose" not in result.stdout.str().split("warnings summary")[1]


def test_refused_call_warning_is_public() -> None:
    import pytest_mgmtauth
    from pytest_mgmtauth import AuthFindingWarning, RefusedCallWarning

    assert "RefusedCallWarning" in pytest_mgmtauth.__all__
    assert issubclass(RefusedCallWarning, AuthFindingWarning)
    assert RefusedCallWarning.__module__ == "pytest_mgmtauth"


def test_the_wire_attributes_a_v1_call_without_its_cookie_by_its_utk(
    mgmt_server: MgmtServer, mgmt_account: Account
) -> None:
    mgmt_server.expect_refusals()
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    http = requests.Session()
    http.trust_env = False
    for _ in range(2):  # the cookie-jar bug, logging in again after each 401
        answer = http.post(
            mgmt_server.url + "/v1/login",
            data={"username": mgmt_account.username, "password": mgmt_account.password},
        )
        refused = http.get(mgmt_server.url + "/v1/things", params={"utk": answer.json()["utk"]})
        assert refused.status_code == 401
    found = mgmt_server.teardown_findings()
    assert found == []  # expect_refusals took it over
    from pytest_mgmtauth._verdicts.findings import findings

    assert [(f.kind, f.username) for f in findings(mgmt_server.scene())] == [
        ("refused_call", mgmt_account.username)
    ]


# -- item 8: a v3 path that also names another account, over the wire -----------------


@pytest.mark.parametrize(
    "raw",
    [
        "/v3/accounts/acme/profiles/main/accounts/other/profiles/dev",
        "/v3/accounts/acme/profiles/main/x%2F..%2F..%2F..%2F..%2Faccounts%2Fother%2Fprofiles%2Fdev",
        "/v3/accounts/acme/profiles/main/x/../../../../accounts/other/profiles/dev",
        "/v3/accounts/acme%2Fprofiles%2Fmain/accounts/other/profiles/dev/x",
    ],
)
def test_a_v3_token_is_refused_on_a_path_that_names_another_account_anywhere(
    mgmt_server: MgmtServer, mgmt_account: Account, raw: str
) -> None:
    mgmt_server.expect_refusals()
    mgmt_server.route(
        "GET", re.compile(r"^/v3/accounts/[^/]+/profiles/[^/]+/.*$")
    ).respond_with_json({})
    token = requests.post(
        mgmt_server.url + "/v3/auth/accounts/acme/profiles/main",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()["token"]
    host, port = mgmt_server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", raw, headers={"Authorization": "Bearer " + token})
        answer = connection.getresponse()
        answer.read()
    finally:
        connection.close()
    assert answer.status == 401
    own = requests.get(
        mgmt_server.url + "/v3/accounts/acme/profiles/main/visitors",
        headers={"Authorization": "Bearer " + token},
    )
    assert own.status_code == 200


# -- item 9: forged lines in the report section and JUnit XML --------------------------

FORGE = """
import requests


def test_forge(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1])
    requests.get(mgmt_server.url + "/v2/x%0A%20%2000:00:00%20%20T9%20issued%20by%20/v2/auth")
    assert False
"""


def test_a_newline_in_a_request_path_forges_no_line_in_the_section_or_the_junit_xml(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_forge=FORGE)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "--junitxml=report.xml")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "'/v2/x\\n  00:00:00  T9 issued by /v2/auth' -> 404: no route declares it" in out
    assert not re.search(r"^ *00:00:00  T9 issued", out, re.M)
    xml = ET.parse(pytester.path / "report.xml").getroot()
    texts = "\n".join(e.text or "" for e in xml.iter() if e.text)
    assert "T9 issued by /v2/auth" in texts
    assert not re.search(r"^ *00:00:00  T9 issued", texts, re.M)
