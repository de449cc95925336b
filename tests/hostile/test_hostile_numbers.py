"""Absurd numbers through every entry point, and the standalone control API under attack.

Issue 9: ``lockout_duration=nan``, ``token_ttl=10**12``, ``hang_next(seconds=1e300)``,
``{"seconds": 1e308}`` to the control API... were accepted and broke the fake later
(500s, OverflowErrors, a server answering 500 for good). Every entry point must now
refuse such a value up front, with a TypeError/ValueError (Python), a usage error (ini,
command line) or a 4xx JSON answer (control API) that names the option, the value and
the allowed range, and must leave the state as it was. What it accepts must stay usable.

The entry points: ``Options`` (the marker's kwargs), the ini settings' parser, the
``mgmtauth-server`` flags, ``mgmt_clock.advance``/``move_to``, the fault, lock and
expire methods of ``mgmt_server``, the control API's fields; and a marker run and an
ini run as a user sees them (pytester). The number of inputs tried is printed at the
end of the run ("mgmtauth hostile numbers: ...").
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import math
import string
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import given, settings, strategies as st

from pytest_mgmtauth import MgmtClock, MgmtServer, Options
from pytest_mgmtauth._glue.settings import _parse
from pytest_mgmtauth._service.limits import LATEST_TIME, MAX_ADVANCE, MAX_COUNT, MAX_DURATION
from pytest_mgmtauth._service.options import OPTION_NAMES, OPTION_SPEC, build_options
from pytest_mgmtauth._service.records import status_code
from pytest_mgmtauth._service.timeline import ManualClock, to_datetime
from pytest_mgmtauth._standalone.cli import build_parser, server_from_args
from pytest_mgmtauth._standalone.control import ControlAPI
from pytest_mgmtauth._standalone.server import AccountSpec, StandaloneServer, UsageError

PROFILE = settings.get_profile("mgmtauth-hostile")
#: Pure-Python entry points are cheap: every example of the profile. Entry points that
#: make HTTP requests (about eight per example) get a third of them.
HTTP_EXAMPLES = max(50, PROFILE.max_examples // 3)

DURATIONS = ("token_ttl", "refresh_margin", "lockout_duration", "session_timeout")
COUNTS = ("lockout_threshold", "throttle")
ALICE = AccountSpec(username="alice@example.com", api_key="alice-key-1", password="pa55-1")

#: Inputs tried, per entry point (printed at the end of the run).
TRIED: collections.Counter[str] = collections.Counter()


class _Tally:
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if TRIED:
            inputs = {k: v for k, v in TRIED.items() if not k.startswith("control API answered")}
            parts = ", ".join(f"{name}: {count}" for name, count in sorted(TRIED.items()))
            terminalreporter.write_line(
                f"mgmtauth hostile numbers: {sum(inputs.values())} inputs tried ({parts})"
            )


@pytest.fixture(scope="module", autouse=True)
def _tally(pytestconfig: pytest.Config) -> None:
    if not pytestconfig.pluginmanager.has_plugin("mgmtauth-hostile-numbers"):
        pytestconfig.pluginmanager.register(_Tally(), "mgmtauth-hostile-numbers")


# -- what an absurd number is -------------------------------------------------------------

SPECIAL: list[Any] = [
    math.nan,
    -math.nan,
    math.inf,
    -math.inf,
    -0.0,
    0,
    0.0,
    -1,
    5e-324,
    1e-300,
    1e300,
    1e308,
    3e11,
    10**12,
    10**400,
    -(10**400),
    MAX_DURATION,
    MAX_DURATION + 1,
    MAX_ADVANCE,
    MAX_ADVANCE + 1,
    MAX_COUNT,
    MAX_COUNT + 1,
    True,
    False,
    None,
    "60",
    "",
    "nan",
    b"60",
    [60],
    {"seconds": 60},
    1j,
    timedelta(days=365 * 11),
    timedelta(seconds=-1),
]

absurd = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.integers(min_value=10**15, max_value=10**500),
    st.floats(min_value=0, max_value=MAX_ADVANCE * 2),
    st.booleans(),
    st.text(max_size=8),
    st.timedeltas(),
)

#: How an ini file or a command line spells a number (and what else a user types).
number_texts = st.one_of(
    st.sampled_from(
        [
            *("nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400", "-0", "-0.0", "0"),
            *("1e308", "3e11", "1000000000000", "1" + "0" * 400, "1" + "0" * 5000, "0x10"),
            *("1_000", " 60 ", "true", "none", "", "½", "٣", "1e-320", "315360000"),
            *("315360001", "1.5", "--", "-"),
        ]
    ),
    absurd.map(str),
    st.text(alphabet=string.digits + ".-+eE_ xinfa", max_size=12),
)


def _refused_properly(exc: BaseException, name: str) -> None:
    """A refusal is a TypeError/ValueError that names what was wrong, without a flood."""
    assert isinstance(exc, (TypeError, ValueError)), repr(exc)
    message = str(exc)
    assert name in message, message
    assert len(message) < 600, message


def _representable(options: Options) -> None:
    """What an accepted value must allow: dates of the latest time plus the duration."""
    for name in DURATIONS:
        value = getattr(options, name)
        assert isinstance(value, float)
        assert math.isfinite(value)
        assert 0 <= value <= MAX_DURATION
        to_datetime(LATEST_TIME + value)  # no OverflowError, no "year out of range"
    assert options.margin < options.token_ttl
    for name in COUNTS:
        value = getattr(options, name)
        assert value is None or (type(value) is int and 1 <= value <= MAX_COUNT)


# -- the Python API -------------------------------------------------------------------------


class TestAbsurdNumbersThroughEveryEntryPoint:
    @settings(PROFILE)
    @given(name=st.sampled_from(OPTION_NAMES), value=absurd)
    def test_options_and_marker_kwargs(self, name: str, value: Any) -> None:
        TRIED["Options/marker kwargs"] += 1
        try:
            options = Options(**{name: value})
        except Exception as exc:
            _refused_properly(exc, name)
            return
        _representable(options)

    @settings(PROFILE)
    @given(name=st.sampled_from(OPTION_NAMES), text=number_texts)
    def test_ini_settings(self, name: str, text: str) -> None:
        TRIED["ini settings"] += 1
        try:
            value = _parse(OPTION_SPEC[name], text, f"mgmtauth_{name} =")
            options = build_options(Options(), {name: value}, where="ini")
        except Exception as exc:
            _refused_properly(exc, f"mgmtauth_{name}" if "expected" in str(exc) else name)
            return
        _representable(options)

    @settings(PROFILE)
    @given(
        flag=st.sampled_from(
            [
                *("--token-ttl", "--refresh-margin", "--lockout-duration", "--session-timeout"),
                *("--lockout-threshold", "--throttle", "--port"),
            ]
        ),
        text=number_texts,
    )
    def test_mgmtauth_server_flags(self, flag: str, text: str) -> None:
        TRIED["mgmtauth-server flags"] += 1
        stderr = io.StringIO()
        exit_code: object = None
        try:
            with contextlib.redirect_stderr(stderr):
                args = build_parser().parse_args(["--port", "0", f"{flag}={text}"])
            server = server_from_args(args)  # not started: no key, no socket
        except SystemExit as exc:  # argparse: not a number at all
            exit_code = exc.code
        except UsageError as exc:
            _refused_properly(ValueError(str(exc)), flag)
            return
        if exit_code is not None:
            assert exit_code == 2
            assert flag in stderr.getvalue()
            assert len(stderr.getvalue()) < 3000
            return
        _representable(server.options)

    @settings(PROFILE)
    @given(unit=st.sampled_from(["seconds", "minutes", "hours", "delta"]), value=absurd)
    def test_mgmt_clock_advance(self, mgmt_clock: MgmtClock, unit: str, value: Any) -> None:
        TRIED["mgmt_clock.advance"] += 1
        before = mgmt_clock.now()
        try:
            if unit == "delta":
                after = mgmt_clock.advance(value)
            else:
                after = mgmt_clock.advance(**{unit: value})
        except Exception as exc:
            _refused_properly(exc, "advance()")
            assert mgmt_clock.now() == before  # a refused advance moves nothing
            return
        assert before <= after < datetime(3000, 1, 2, tzinfo=timezone.utc)
        if after.year > 2900:  # keep room for more advances in the next examples
            mgmt_clock.move_to(datetime(2030, 1, 1))

    @settings(PROFILE)
    @given(year=st.integers(min_value=1, max_value=9999))
    def test_mgmt_clock_move_to(self, mgmt_clock: MgmtClock, year: int) -> None:
        TRIED["mgmt_clock.move_to"] += 1
        before = mgmt_clock.now()
        when = datetime(year, 6, 1, tzinfo=timezone.utc)
        if 1970 <= year < 3000:
            assert mgmt_clock.move_to(when) == when
            return
        with pytest.raises(ValueError, match="1970-01-01 to 3000-01-01"):
            mgmt_clock.move_to(when)
        assert mgmt_clock.now() == before

    @settings(PROFILE, max_examples=HTTP_EXAMPLES)
    @given(data=st.data())
    def test_mgmt_server_methods(
        self, mgmt_server: MgmtServer, http: requests.Session, data: st.DataObject
    ) -> None:
        """Faults, locks and expiry: a refused call adds no fault, no lock and no event;
        an accepted one still leaves a server that grants a token."""
        if not mgmt_server.accounts:
            mgmt_server.add_account("alice@example.com", api_key="alice-key-1")
        value = data.draw(absurd, label="value")
        calls: dict[str, Callable[[], object]] = {
            "hang_next": lambda: mgmt_server.hang_next(seconds=value),
            "hang_next(count)": lambda: mgmt_server.hang_next(count=value, seconds=1),
            "fail_next(count)": lambda: mgmt_server.fail_next(value),
            "fail_next(error)": lambda: mgmt_server.fail_next(error=value),
            "fail_next(retry_after)": lambda: mgmt_server.fail_next(error=429, retry_after=value),
            "reset_next": lambda: mgmt_server.drop_connection_next(value),
            "malformed_next": lambda: mgmt_server.malformed_next(value),
            "lock": lambda: mgmt_server.lock("alice@example.com", seconds=value),
            "expire": lambda: mgmt_server.expire(value),
            "revoke": lambda: mgmt_server.revoke(value),
        }
        what = data.draw(st.sampled_from(sorted(calls)), label="call")
        TRIED[f"mgmt_server.{what.split('(')[0]}"] += 1
        events, faults = list(mgmt_server.events), mgmt_server.pending_faults
        try:
            calls[what]()
        except Exception as exc:
            _refused_properly(exc, "")
            assert mgmt_server.events == events
            assert mgmt_server.pending_faults == faults
        mgmt_server.clear_faults()
        mgmt_server.unlock("alice@example.com")
        answer = http.post(
            mgmt_server.url_for("/v2/auth"),
            data={"username": "alice@example.com", "key": "alice-key-1"},
        )
        assert answer.status_code in (200, 429), answer.text  # 429: throttled, not broken

    def test_marker_values_as_a_user_sees_them(self, mgmt_pytester: pytest.Pytester) -> None:
        """One inner run, one test per (option, value): each refused value errors its
        test at setup with a message naming the option; each accepted one grants."""
        values = [v for v in SPECIAL if isinstance(v, (int, float))]
        cases = [(name, value) for name in DURATIONS + COUNTS for value in values]
        refused = 0
        for name, value in cases:
            hostile: dict[str, Any] = {name: value}  # a float for a count: on purpose
            try:
                Options(**hostile)
            except (TypeError, ValueError):
                refused += 1
        params = ",\n".join(
            f"    pytest.param({i}, marks=pytest.mark.mgmtauth({name}={value!r}), id='{name}-{i}')"
            for i, (name, value) in enumerate(cases)
        )
        mgmt_pytester.makepyfile(
            "import pytest, requests\nfrom math import nan, inf\n"
            f"@pytest.mark.parametrize('x', [\n{params}\n])\n"
            "def test_value(x, mgmt_server, mgmt_account):\n"
            "    answer = requests.post(mgmt_server.url_for('/v2/auth'), data={\n"
            "        'username': mgmt_account.username, 'key': mgmt_account.api_key})\n"
            "    assert answer.status_code == 200\n"
        )
        result = mgmt_pytester.runpytest_inprocess("-p", "no:randomly", "-q")
        TRIED["marker (pytester)"] += len(cases)
        result.assert_outcomes(passed=len(cases) - refused, errors=refused)
        out = result.stdout.str()
        assert "INTERNALERROR" not in out
        assert "OverflowError" not in out
        assert out.count("mgmtauth option '") >= refused

    @pytest.mark.parametrize(
        "text", ["nan", "inf", "-inf", "1e400", "-0", "1000000000000", "1" + "0" * 400]
    )
    def test_ini_values_as_a_user_sees_them(
        self, mgmt_pytester: pytest.Pytester, text: str
    ) -> None:
        TRIED["ini (pytester)"] += 1
        mgmt_pytester.makeini(f"[pytest]\nmgmtauth_lockout_duration = {text}\n")
        mgmt_pytester.makepyfile("def test_nothing(): pass")
        result = mgmt_pytester.runpytest_inprocess()
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            ["ERROR: mgmtauth_lockout_duration must be > 0 and <= 315360000 seconds (10 years)*"]
        )


# -- the control API ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def standalone(
    tmp_path_factory: pytest.TempPathFactory, default_key_pem: bytes
) -> Iterator[StandaloneServer]:
    key = Path(tmp_path_factory.mktemp("hostile-numbers")) / "key.pem"
    key.write_bytes(default_key_pem)
    server = StandaloneServer(
        Options(throttle=None),
        port=0,
        accounts=[ALICE],
        routes=[("GET", "/v2/things")],
        key_file=str(key),
        frozen_clock=True,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.trust_env = False
        yield session


JSON = "application/json"
#: Every endpoint of the control API with its fields: (method, path, fields).
ENDPOINTS = [
    (e["method"], e["path"].removeprefix("/_mgmtauth"), e["fields"])
    for e in ControlAPI(fake=None, clock=None, reset=None, check=None).describe()  # type: ignore[arg-type]
]
FIELDS = [
    "seconds",
    "minutes",
    "hours",
    "count",
    "error",
    "retry_after",
    "status",
    "kind",
    "clock",
    "version",
    "username",
    "credential",
    "path",
    "method",
    "json",
    "permissions",
    "api_key",
    "password",
    "auth",
    "permission",
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=10**30, max_value=10**400),
    st.sampled_from(["fail", "hang", "reset", "malformed", "v1", "v2", "simulated", "real"]),
    st.sampled_from(["alice@example.com", "/v2/x", "/_mgmtauth/x", "GET", "T1", "S1"]),
    st.text(max_size=10),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=5), inner, max_size=4),
    ),
    max_leaves=12,
)


@st.composite
def control_bodies(draw: st.DrawFn, known: list[str]) -> bytes:
    kinds = ["known", "known", "known", "object", "any", "raw", "deep", "number"]
    kind = draw(st.sampled_from(kinds if known else kinds[3:]))
    if kind == "known":  # the endpoint's own fields, with any JSON values
        fields = draw(st.dictionaries(st.sampled_from(known), json_values, max_size=4))
        return json.dumps(fields).encode()
    if kind == "object":
        fields = draw(st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4))
        return json.dumps(fields).encode()
    if kind == "any":
        return json.dumps(draw(json_values)).encode()
    if kind == "deep":
        depth = draw(st.integers(min_value=20, max_value=20_000))
        return b'{"seconds": ' + b"[" * depth + b"]" * depth + b"}"
    if kind == "number":  # numbers json.dumps cannot write: NaN, 1e999, 5000 digits
        field = draw(st.sampled_from(["seconds", "minutes", "hours", "count", "retry_after"]))
        number = draw(
            st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-0.0", "1" + "0" * 5000])
        )
        return f'{{"{field}": {number}, "username": "alice@example.com"}}'.encode()
    return draw(st.binary(max_size=64))


# one_of picks a branch uniformly: most requests pass the guards and reach the fields.
content_types = st.one_of(
    *[st.just(JSON)] * 6,
    st.sampled_from([f"{JSON}; charset=utf-8", "APPLICATION/JSON"]),
    st.sampled_from(
        [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
    ),
    st.sampled_from(["application/jsonx", "application/json-patch+json", "text/json", ""]),
)
hosts = st.one_of(
    *[st.none()] * 6,
    st.sampled_from(["localhost", "LOCALHOST:80", "127.1.2.3", "[::1]:9", "a.localhost"]),
    st.sampled_from(["evil.example", "evil.example:8765", "127.0.0.1.nip.io", "[::2]", "x"]),
    st.text(alphabet=string.ascii_letters + string.digits + ".-:[]", min_size=1, max_size=20),
)


def _snapshot(server: StandaloneServer, session: requests.Session) -> tuple[Any, ...]:
    base = f"{server.url}/_mgmtauth"
    return tuple(session.get(f"{base}{p}").json() for p in ("/clock", "/events", "/faults"))


def _check_alive(server: StandaloneServer, session: requests.Session) -> None:
    assert session.get(f"{server.url}/_mgmtauth/clock").status_code == 200
    granted = session.post(
        f"{server.url}/v2/auth", data={"username": ALICE.username, "key": ALICE.api_key}
    )
    assert granted.status_code == 200, granted.text


def _iso_time(text: str) -> datetime:
    """The control API's ISO time ('...Z'; Python 3.10's fromisoformat takes no 'Z')."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class TestControlApiValidation:
    @settings(PROFILE, max_examples=HTTP_EXAMPLES)
    @given(data=st.data())
    def test_any_control_request(
        self, standalone: StandaloneServer, session: requests.Session, data: st.DataObject
    ) -> None:
        """4xx JSON and nothing changed, or 2xx; the server answers 200 afterwards."""
        method, path, known = data.draw(st.sampled_from(ENDPOINTS), label="endpoint")
        body = data.draw(control_bodies(known), label="body")
        content_type = data.draw(content_types, label="content_type")
        host = data.draw(hosts, label="host")
        TRIED["control API requests"] += 1
        headers = {}
        if content_type is not None:
            headers["Content-Type"] = content_type
        if host is not None:
            headers["Host"] = host
        before = _snapshot(standalone, session)
        answer = session.request(
            method, f"{standalone.url}/_mgmtauth{path}", data=body, headers=headers
        )
        TRIED[f"control API answered {answer.status_code}"] += 1
        assert answer.status_code < 500, answer.text
        if answer.status_code < 400 and path == "/timeline":
            # The one answer that is text: the timeline the Python failure messages show.
            assert answer.headers["Content-Type"].startswith("text/plain")
            return
        assert answer.headers["Content-Type"] == JSON
        payload = answer.json()
        if answer.status_code >= 400:
            assert payload["returnCode"] == status_code(answer.status_code)
            assert isinstance(payload["message"], str)
            assert len(payload["message"]) < 2000
            assert _snapshot(standalone, session) == before
        elif method != "GET":
            # Accepted: put the fake back as it started (the clock keeps its time).
            reset = session.post(f"{standalone.url}/_mgmtauth/reset", json={})
            assert reset.status_code == 200
            assert session.get(f"{standalone.url}/_mgmtauth/clock").json()["now"] < "3000"
        _check_alive(standalone, session)
        session.post(f"{standalone.url}/_mgmtauth/reset", json={})  # drop the grant

    @settings(PROFILE, max_examples=HTTP_EXAMPLES)
    @given(
        field=st.sampled_from(["seconds", "minutes", "hours"]),
        value=st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            st.integers(min_value=-(10**20), max_value=10**400),
            st.sampled_from([True, "60", None, [1], -0.0, 0]),
        ),
    )
    def test_clock_advance_fields(
        self, standalone: StandaloneServer, session: requests.Session, field: str, value: Any
    ) -> None:
        """An advance is refused whole, or moves the clock exactly and before 3000."""
        TRIED["control API clock/advance"] += 1
        base = f"{standalone.url}/_mgmtauth"
        before = session.get(f"{base}/clock").json()["now"]
        answer = session.post(f"{base}/clock/advance", json={field: value})
        assert answer.status_code in (200, 400), answer.text
        now = session.get(f"{base}/clock").json()["now"]
        if answer.status_code == 400:
            assert now == before
            assert field in answer.json()["message"] or "how far" in answer.json()["message"]
        else:
            # As datetimes: '...:00Z' sorts after '...:00.000007Z' as text.
            moved_from, moved_to = _iso_time(before), _iso_time(now)
            assert moved_from <= moved_to < datetime(3000, 1, 1, tzinfo=timezone.utc)
            if moved_to.year >= 2900:
                assert isinstance(standalone.clock, ManualClock)  # frozen_clock=True
                standalone.clock.now = datetime(2030, 1, 1, tzinfo=timezone.utc).timestamp()
        _check_alive(standalone, session)
        session.post(f"{base}/reset", json={})
