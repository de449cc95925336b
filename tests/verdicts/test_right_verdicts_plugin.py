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
    # time-machine's travel and freezegun's decorator (time-machine is in the test extra).
    pytester.makepyfile(test_jumps=JUMPS, test_time_machine=TIME_MACHINE)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-s")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    issued = re.findall(r"^  (\S+)  T1 issued by /v2/auth \(#\w+\), valid until (\S+)$", out, re.M)
    assert issued == [("00:00:00", "00:30:00")] * 3


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
                f"{mgmt_server.region_url}/v3/x/accounts/acme/profiles/{profile}/visitors",
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
            "/v3/x/accounts/acme/profiles/dev/visitors with T1 at 00:00:* -> 401 (Unauthorized: "
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

    assert [(f.kind, f.username) for f in findings(mgmt_server.evidence())] == [
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
    host, port = mgmt_server.region_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", raw, headers={"Authorization": "Bearer " + token})
        answer = connection.getresponse()
        answer.read()
    finally:
        connection.close()
    assert answer.status == 401
    own = requests.get(
        mgmt_server.region_url + "/v3/accounts/acme/profiles/main/visitors",
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


# -- the done-when table: the bugs are caught, the docs' clients pass everything ------

BUG_CLIENTS = """
import re
import requests

JSESSIONID = re.compile(r"^JSESSIONID=([^;]*)")


def v2_auth(server, account, *, encoded=True):
    if encoded:
        answer = requests.post(
            server.url + "/v2/auth", data={"username": account.username, "key": account.api_key}
        )
    else:
        answer = requests.post(
            server.url + "/v2/auth",
            data=f"username={account.username}&key={account.api_key}",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
    answer.raise_for_status()
    return answer.json()["token"]


def v2_get(server, token, path):
    return requests.get(server.url + path, headers={"Authorization": "Bearer " + token})


def v1_login(server, account, password=None):
    answer = requests.post(
        server.url + "/v1/login",
        data={"username": account.username, "password": password or account.password},
    )
    return answer
"""

#: The six classic bugs and the two v3 bugs, one test each, as a user's suite has them.
BUGS = """
import pytest, requests
from clients import v2_auth, v2_get, v1_login, JSESSIONID


def test_login_per_call(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    for _ in range(3):
        assert v2_get(mgmt_server, v2_auth(mgmt_server, mgmt_account), "/api/things").ok


def test_never_renews(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    token = v2_auth(mgmt_server, mgmt_account)
    for _ in range(3):
        answer = v2_get(mgmt_server, token, "/api/things")
        if answer.status_code == 401:  # renews only after a 401
            token = v2_auth(mgmt_server, mgmt_account)
            answer = v2_get(mgmt_server, token, "/api/things")
        assert answer.ok
        mgmt_clock.advance(minutes=31)


def test_unencoded_key(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/api/things").respond_with_json([])
    assert v2_get(
        mgmt_server, v2_auth(mgmt_server, mgmt_account, encoded=False), "/api/things"
    ).ok


def test_cookie_jar(mgmt_server, mgmt_account):
    mgmt_server.route("GET", "/v1/things").respond_with_json([])
    for _ in range(2):  # logs in again after each 401 and moves on
        http = requests.Session()
        utk = http.post(
            mgmt_server.url + "/v1/login",
            data={"username": mgmt_account.username, "password": mgmt_account.password},
        ).json()["utk"]
        http.get(mgmt_server.url + "/v1/things", params={"utk": utk})


@pytest.mark.mgmtauth(lockout_threshold=3)
def test_lockout_hammering(mgmt_server, mgmt_account):
    answers = [v1_login(mgmt_server, mgmt_account, "wrong").status_code for _ in range(3)]
    # then hammers with the right password while locked, in a loop
    for _ in range(5):
        answer = v1_login(mgmt_server, mgmt_account)
        if answer.ok:
            break
    assert answer.ok


def test_1469_retried(mgmt_server):
    account = mgmt_server.add_account(permissions=["read"])
    mgmt_server.route("GET", "/api/admin", permission="admin").respond_with_json([])
    token = v2_auth(mgmt_server, account)
    for _ in range(3):
        answer = v2_get(mgmt_server, token, "/api/admin")
        if answer.status_code == 401:
            token = v2_auth(mgmt_server, account)


def test_v3_wrong_profile(mgmt_server, mgmt_account):
    for p in ("main", "dev"):
        mgmt_server.route("GET", f"/v3/x/accounts/acme/profiles/{p}/v").respond_with_json([])
    for _ in range(3):
        token = requests.post(
            mgmt_server.url + "/v3/auth/accounts/acme/profiles/main",
            data={"username": mgmt_account.username, "key": mgmt_account.api_key},
        ).json()["token"]
        for p in ("main", "dev"):
            requests.get(
                f"{mgmt_server.region_url}/v3/x/accounts/acme/profiles/{p}/v",
                headers={"Authorization": "Bearer " + token},
            )


def test_v3_no_renewal(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v3/x/accounts/acme/profiles/main/v").respond_with_json([])
    auth = lambda: requests.post(
        mgmt_server.url + "/v3/auth/accounts/acme/profiles/main",
        data={"username": mgmt_account.username, "key": mgmt_account.api_key},
    ).json()["token"]
    token = auth()
    for _ in range(3):
        answer = requests.get(
            f"{mgmt_server.region_url}/v3/x/accounts/acme/profiles/main/v",
            headers={"Authorization": "Bearer " + token},
        )
        if answer.status_code == 401:
            token = auth()
        mgmt_clock.advance(minutes=31)
"""

#: The docs' clients, swept at every fault kind, strict, with require_logout.
GOOD = """
import pytest
from mgmt_client import MgmtClient, MgmtSessionClient
from v3_client import V3Client
from sweep_clients import RecoveringClient

ALL = ("expire", "revoke", "throttle", "unavailable", "reset")
pytestmark = [
    pytest.mark.mgmtauth(strict=True, require_logout=True),
    pytest.mark.mgmtauth_sweep(faults=ALL, points=4),
]


def test_recovering(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1])
    c = RecoveringClient(
        mgmt_server.url,
        mgmt_account.username,
        mgmt_account.api_key,
        sleep=lambda s: mgmt_clock.advance(seconds=s),
    )
    c.connect()
    for _ in range(3):
        assert c.get("/v2/devices") == [1]


def test_v2(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v2/devices").respond_with_json([1])
    with MgmtClient(
        mgmt_server.url,
        mgmt_account.username,
        mgmt_account.api_key,
        sleep=lambda s: mgmt_clock.advance(seconds=s),
    ) as c:
        for _ in range(3):
            assert c.get("/v2/devices") == [1]
            mgmt_clock.advance(minutes=20)


def test_v1(mgmt_server, mgmt_account, mgmt_clock):
    mgmt_server.route("GET", "/v1/devices").respond_with_json([1])
    with MgmtSessionClient(
        mgmt_server.url,
        mgmt_account.username,
        mgmt_account.password,
        sleep=lambda s: mgmt_clock.advance(seconds=s),
    ) as c:
        for _ in range(3):
            assert c.get("/v1/devices") == [1]
            mgmt_clock.advance(minutes=20)


def test_v3(mgmt_server, mgmt_account, mgmt_clock):
    for p in ("main", "dev"):
        mgmt_server.route(
            "GET", f"/v3/customers/accounts/acme/profiles/{p}/visitors"
        ).respond_with_json({"p": p})
    c = V3Client(
        mgmt_server.url,
        mgmt_account.username,
        mgmt_account.api_key,
        sleep=lambda s: mgmt_clock.advance(seconds=s),
    )
    for _ in range(2):
        for p in ("main", "dev"):
            r = c.get("acme", p, f"customers/accounts/acme/profiles/{p}/visitors")
            assert r.status_code == 200
        mgmt_clock.advance(minutes=20)
"""


def test_the_classic_and_v3_bugs_are_caught_by_default_and_under_strict(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    _examples(pytester)
    pytester.makepyfile(clients=BUG_CLIENTS, test_bugs=BUGS)
    default = pytester.runpytest_inprocess("-p", "no:randomly")
    # The un-encoded key and the lockout hammering fail the test itself (the fake refuses
    # them with a diagnosis); the other six are the teardown check's findings.
    default.assert_outcomes(passed=6, failed=2, warnings=6)
    default.stdout.fnmatch_lines(
        [
            "test_bugs.py::test_login_per_call",
            "  *TokenChurnWarning: *",
            "test_bugs.py::test_never_renews",
            "  *ExpiredCredentialWarning: *",
            "test_bugs.py::test_cookie_jar",
            "  *RefusedCallWarning: *",
            "test_bugs.py::test_1469_retried",
            "  *TokenChurnWarning: *",
            "test_bugs.py::test_v3_wrong_profile",
            "  *RefusedCallWarning: *",
            "test_bugs.py::test_v3_no_renewal",
            "  *ExpiredCredentialWarning: *",
        ],
        consecutive=False,
    )
    strict = pytester.runpytest_inprocess("-p", "no:randomly", "--mgmtauth-strict")
    strict.assert_outcomes(passed=6, failed=2, errors=6)
    strict.stdout.fnmatch_lines(
        [
            "FAILED test_bugs.py::test_unencoded_key - *",
            "FAILED test_bugs.py::test_lockout_hammering - *",
            "ERROR test_bugs.py::test_login_per_call - Failed: pytest-mgmtauth: token chur*",
            "ERROR test_bugs.py::test_never_renews - Failed: pytest-mgmtauth: the client p*",
            "ERROR test_bugs.py::test_cookie_jar - Failed: pytest-mgmtauth: 2 protected ca*",
            "ERROR test_bugs.py::test_1469_retried - Failed: pytest-mgmtauth: token churn:*",
            "ERROR test_bugs.py::test_v3_wrong_profile - Failed: pytest-mgmtauth: 3 protec*",
            "ERROR test_bugs.py::test_v3_no_renewal - Failed: pytest-mgmtauth: the client *",
        ]
    )


def test_the_docs_clients_pass_every_check_and_every_sweep_point_under_strict(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(DEFAULT_WARNINGS)
    _examples(pytester)
    pytester.makepyfile(test_good=GOOD)
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == outcomes.get("errors", 0) == 0, result.stdout.str()
    assert "warnings" not in outcomes
    verdicts = re.findall(r"^  verdict: (.*)$", result.stdout.str(), re.M)
    assert len(verdicts) == 4
    for verdict in verdicts:
        parts = verdict.split("; ")
        assert [p.split(" at ")[0] for p in parts] == [
            f"survives {kind}" for kind in ("expire", "revoke", "throttle", "unavailable", "reset")
        ], verdict
        assert "but" not in verdict
