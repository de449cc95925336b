"""The rate-limit rule of API calls, driven directly on a manual clock: the rates it
reads, the published families and their paths, the sliding window and its Retry-After,
Collect's events per call, and a retry refused again inside a 429's Retry-After."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest
from hypothesis import given, settings, strategies as st

from pytest_mgmtauth import Options, RateLimited
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.flows.v3 import V3Flow
from pytest_mgmtauth._service.rate_limits import FAMILIES, Rate, family_of, parse_rate
from pytest_mgmtauth._service.records import Refusal
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock

MakeService = Callable[..., AuthService]

PROFILE = "/v3/customer/visitor/accounts/acme/profiles/main"
PRIVACY = "/v3/privacy/visitor/accounts/acme/profiles/main"
DLE = "/v2/dle/accounts/acme/profiles/main/datalayers/home"
STATUS = "/v3/tiq/accounts/acme/profiles/main/publish/{}/status"
BULK = "/v3/collect/bulk-event"


def _call(service: AuthService, path: str, *, body: bytes = b"", own: Rate | None = None) -> None:
    service.rate_limits.admit(
        username="ann",
        version="v3" if path.startswith("/v3/") else "v2",
        method="GET",
        path=path,
        body=body,
        own=own,
        route=f"GET {path}",
    )


def _admitted(service: AuthService, path: str, n: int, **kw: object) -> int:
    """How many of ``n`` calls in a row were admitted before the first refusal."""
    for i in range(n):
        try:
            _call(service, path, **kw)  # type: ignore[arg-type]
        except Refusal:
            return i
    return n


# -- rates ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rate"), [("50/s", Rate(50, "s")), ("5/min", Rate(5, "min")), (" 1/s ", Rate(1, "s"))]
)
def test_a_rate_is_a_count_per_second_or_minute(text: str, rate: Rate) -> None:
    assert parse_rate(text, what="rate_limit") == rate
    assert parse_rate(text, what="rate_limit").per == (1.0 if rate.unit == "s" else 60.0)


@pytest.mark.parametrize(
    "bad", ["50", "50/sec", "50/h", "0/s", "-1/s", "1.5/s", "fifty/s", "/s", "1000001/s", "9" * 40]
)
def test_a_malformed_rate_names_the_value_and_the_accepted_form(bad: str) -> None:
    with pytest.raises(ValueError, match=r"^route\(\): rate_limit must be a rate") as excinfo:
        parse_rate(bad, what="route(): rate_limit")
    text = str(excinfo.value)
    assert text.startswith("route(): rate_limit must be a rate '<N>/s' or '<N>/min'")
    assert "like '50/s'" in text
    assert text.endswith(f"got {bad!r}") or "characters" in text


@pytest.mark.parametrize("bad", [50, 1.5, None, b"50/s", ("50", "s")])
def test_a_rate_of_another_type_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match=r"rate_limit takes a rate like '50/s'"):
        parse_rate(bad, what="rate_limit")


# -- the families -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "title", "rate"),
    [
        (DLE, "Hosted Data Layer API (v2)", "100/s"),
        ("/v3/collect/event", "Collect HTTP API (v3)", "100/s"),
        ("/v3/collect/regional/bulk-event", "Collect HTTP API (v3)", "100/s"),
        (PROFILE, "Visitor Profile API (v3)", "50/s"),
        ("/v3/visitor/accounts/acme/profiles/main", "Visitor Profile API (v3)", "50/s"),
        (PRIVACY, "Visitor Privacy API (v3)", "50/s"),
        (STATUS.format("p-1"), "iQ Publish API's publish status (v3)", "1/s"),
    ],
)
def test_each_published_path_belongs_to_its_family(path: str, title: str, rate: str) -> None:
    found = family_of(path)
    assert found is not None
    assert (found[0].title, str(found[0].rate)) == (title, rate)


@pytest.mark.parametrize(
    "path",
    [
        "/v2/things",
        "/v1/dle/accounts/acme/profiles/main/datalayers/home",
        "/v3/tiq/accounts/acme/profiles/main/publish",
        "/v3/tiq/accounts/acme/profiles/main",
        "/v3/customers/accounts/acme/profiles/main/visitors",
    ],
)
def test_other_paths_belong_to_no_family(path: str) -> None:
    assert family_of(path) is None


def test_every_documented_path_of_a_family_is_matched_by_it() -> None:
    for family in FAMILIES:
        for template in family.paths:
            path = template.replace("{", "").replace("}", "")
            found = family_of(path)
            assert found is not None, template
            assert found[0] is family, template


# -- the option's windows --------------------------------------------------------------


def test_off_by_default_nothing_is_limited(make_service: MakeService) -> None:
    service = make_service()
    assert _admitted(service, PROFILE, 500) == 500
    assert not any(isinstance(e, RateLimited) for e in service.timeline.events)


def test_a_family_admits_its_figure_then_refuses_with_429_and_retry_after(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(rate_limits=True)
    assert _admitted(service, PROFILE, 60) == 50
    with pytest.raises(Refusal) as excinfo:
        _call(service, PROFILE)
    refusal = excinfo.value
    assert (refusal.status, refusal.return_code, refusal.retry_after) == (429, 429, 1)
    assert refusal.message.startswith("Too many requests: ")
    assert "50 requests to the Visitor Profile API (v3) for account 'acme' within the last 1 s" in (
        refusal.reason
    )
    clock.advance(1)  # the first call leaves the window
    assert _admitted(service, PROFILE, 60) == 50


def test_the_window_slides_and_retry_after_is_when_a_call_fits_again(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(rate_limits=True)
    own = Rate(3, "min")
    for _ in range(3):
        _call(service, "/x", own=own)
        clock.advance(10)  # calls at 0, 10, 20
    with pytest.raises(Refusal) as excinfo:
        _call(service, "/x", own=own)  # at 30: the call at 0 leaves at 60
    assert excinfo.value.retry_after == 30
    clock.advance(30)
    _call(service, "/x", own=own)  # at 60
    with pytest.raises(Refusal) as excinfo:
        _call(service, "/x", own=own)
    assert excinfo.value.retry_after == 10  # the call at 10 leaves at 70


def test_refused_calls_do_not_count(make_service: MakeService, clock: ManualClock) -> None:
    service = make_service(rate_limits=True)
    status = STATUS.format("p-1")
    _call(service, status)
    for _ in range(5):
        with pytest.raises(Refusal):
            _call(service, status)
    clock.advance(1)
    _call(service, status)  # the refusals did not fill the window


def test_publish_status_counts_per_publish_id(make_service: MakeService) -> None:
    service = make_service(rate_limits=True)
    _call(service, STATUS.format("p-1"))
    _call(service, STATUS.format("p-2"))
    with pytest.raises(Refusal) as excinfo:
        _call(service, STATUS.format("p-1"))
    assert "for publish id 'p-1'" in excinfo.value.reason


def test_families_and_accounts_have_windows_of_their_own(make_service: MakeService) -> None:
    service = make_service(rate_limits=True)
    assert _admitted(service, PRIVACY, 60) == 50
    assert _admitted(service, PROFILE, 60) == 50
    assert _admitted(service, PRIVACY.replace("acme", "umbrella"), 60) == 50


def test_a_route_s_own_rate_wins_over_its_family_and_needs_no_option(
    make_service: MakeService,
) -> None:
    service = make_service()
    assert _admitted(service, PROFILE, 10, own=Rate(2, "s")) == 2
    with pytest.raises(Refusal) as excinfo:
        _call(service, PROFILE, own=Rate(2, "s"))
    assert excinfo.value.reason.endswith(
        f"2 calls to route GET {PROFILE} within the last 1 s, the limit is 2/s: wait "
        "Retry-After (1 s) before calling again"
    )
    event = [e for e in service.timeline.events if isinstance(e, RateLimited)][-1]
    assert event.limit == f"route GET {PROFILE}, 2/s"


def _bulk(events: int) -> bytes:
    return json.dumps({"shared": {}, "events": [{"tealium_event": "x"}] * events}).encode()


def test_collect_counts_events_and_a_bulk_call_of_ten_is_ten(make_service: MakeService) -> None:
    service = make_service(rate_limits=True)
    for _ in range(10):
        _call(service, BULK, body=_bulk(10))
    with pytest.raises(Refusal) as excinfo:
        _call(service, "/v3/collect/event")
    assert excinfo.value.status == 429
    assert "100 events to the Collect HTTP API (v3)" in excinfo.value.reason


@pytest.mark.parametrize("body", [b"", b"not json", b'{"events": 3}', b'["events"]'])
def test_a_body_that_is_no_bulk_counts_one(make_service: MakeService, body: bytes) -> None:
    service = make_service(rate_limits=True)
    assert _admitted(service, BULK, 120, body=body) == 100


def test_a_bulk_call_over_ten_events_is_a_400_that_says_split_it(
    make_service: MakeService,
) -> None:
    service = make_service(rate_limits=True)
    with pytest.raises(Refusal) as excinfo:
        _call(service, BULK, body=_bulk(11))
    refusal = excinfo.value
    assert (refusal.status, refusal.retry_after) == (400, None)
    assert "at most 10 events" in refusal.reason
    assert "carried 11: split it" in refusal.reason
    assert _admitted(service, BULK, 200, body=_bulk(1)) == 100  # it counted nothing


# -- a retry inside Retry-After ---------------------------------------------------------


def test_a_retry_at_once_is_told_to_honour_retry_after(
    make_service: MakeService, clock: ManualClock
) -> None:
    service = make_service(rate_limits=True)
    status = STATUS.format("p-1")
    _call(service, status)
    with pytest.raises(Refusal):
        _call(service, status)
    clock.advance(0.25)
    with pytest.raises(Refusal) as excinfo:
        _call(service, status)
    assert excinfo.value.reason.startswith(
        "retried 0.25 s after a 429 with Retry-After 1s; honour Retry-After; "
    )
    first, again = [e for e in service.timeline.events if isinstance(e, RateLimited)]
    assert (first.waited, again.waited, again.asked) == (None, 0.25, 1)
    assert again.describe().endswith(
        "rate-limited (429, Retry-After 1s, iQ Publish API's publish status (v3), 1/s): "
        "retried 0.25 s after a 429 with Retry-After 1s; honour Retry-After"
    )
    clock.advance(1)
    _call(service, status)  # waited long enough


def test_a_client_that_slept_in_real_time_under_a_still_clock_is_told_so(
    make_service: MakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_mgmtauth._service import rate_limits

    real = [100.0]
    monkeypatch.setattr(rate_limits, "real_seconds", lambda: real[0])
    service = make_service(rate_limits=True)
    status = STATUS.format("p-1")
    _call(service, status)
    with pytest.raises(Refusal):
        _call(service, status)
    real[0] += 1.5  # slept Retry-After, but the test's clock did not move
    with pytest.raises(Refusal) as excinfo:
        _call(service, status)
    assert "after 1.5 s of real time" in excinfo.value.reason
    assert "mgmt_clock.advance" in excinfo.value.reason


# -- the envelopes -------------------------------------------------------------------


def test_v3_calls_answer_429_in_v3_s_envelope_and_v2_in_the_service_s() -> None:
    refusal = Refusal(429, 429, "why", message="Too many requests", retry_after=1)
    styled = V3Flow.api_error(refusal, Options())
    assert styled.body == {"message": "Too many requests"}
    assert (styled.status, styled.retry_after, styled.reason) == (429, 1, "why")
    assert V3Flow.api_error(Refusal(400, 400, "11 events"), Options()).body == {
        "message": "Bad Request"
    }
    assert V2Flow.api_error(refusal, Options()) is refusal


def test_the_option_is_declared_once_and_described_when_on() -> None:
    assert Options().rate_limits is False
    assert "rate_limits=True" in Options(rate_limits=True).describe()
    assert "rate_limits" not in Options().describe()
    with pytest.raises(TypeError, match="'rate_limits' must be True or False, got 'yes'"):
        Options(rate_limits="yes")  # type: ignore[arg-type]


# -- the window's promise, for any arrivals ----------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(1, 5),
    unit=st.sampled_from(["s", "min"]),
    gaps=st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0, 7.0, 30.0, 61.0]), max_size=40),
)
def test_no_window_admits_more_than_its_rate_and_retry_after_is_enough(
    count: int, unit: str, gaps: list[float]
) -> None:
    from pytest_mgmtauth._service.rate_limits import RateLimits
    from pytest_mgmtauth._service.timeline import Timeline

    clock = ManualClock()
    lock = threading.RLock()
    limits = RateLimits(Timeline(clock, lock), Options(), lock)
    rate = Rate(count, unit)
    admitted: list[float] = []

    def call() -> int | None:
        try:
            limits.admit(username=None, version="v2", method="GET", path="/x", own=rate, route="x")
        except Refusal as refusal:
            return refusal.retry_after
        admitted.append(clock())
        return None

    for gap in gaps:
        clock.advance(gap)
        retry_after = call()
        if retry_after is not None:
            assert retry_after >= 1
            clock.advance(retry_after)
            assert call() is None  # nothing else came: waiting Retry-After is enough
    for i, at in enumerate(admitted):
        inside = [t for t in admitted[i:] if t < at + rate.per]
        assert len(inside) <= count
