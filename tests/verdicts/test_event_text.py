"""Issue 11: one event-to-text path, and reading the timeline writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest
from domain_support import admitted

from pytest_mgmtauth import (
    AccountLocked,
    AccountLockedManually,
    BadRequest,
    LogoutRejected,
    SessionExpired,
    TokenIssued,
)
from pytest_mgmtauth._service.events import format_offset, iso_time, timeline_origin
from pytest_mgmtauth._service.flows.v1 import V1Flow
from pytest_mgmtauth._service.flows.v2 import V2Flow
from pytest_mgmtauth._service.records import Refusal
from pytest_mgmtauth._service.service import AuthService
from pytest_mgmtauth._service.timeline import ManualClock, to_datetime
from pytest_mgmtauth._standalone.messages import event_json
from pytest_mgmtauth._verdicts.evidence import Evidence

MakeService = Callable[..., AuthService]

AT = to_datetime(1_700_000_000)


def _hhmm(value: datetime) -> str:
    return f"<{value.timestamp():.0f}>"


def test_describe_renders_complete_text_with_the_given_time_format() -> None:
    issued = TokenIssued(
        at=AT, username="u", token="T1", fingerprint="fp", expires_at=to_datetime(1_700_001_800)
    )
    locked = AccountLocked(at=AT, username="u", failures=5, until=to_datetime(1_700_000_900))
    manual = AccountLockedManually(at=AT, username="u", until=to_datetime(1_700_000_060))
    for event in (issued, locked, manual):
        assert "{" not in event.describe(_hhmm)
        assert "{" not in event.describe()
    assert issued.describe(_hhmm) == "token T1 (fp) issued, valid to <1700001800>"
    assert locked.describe() == (
        "account locked after 5 failed logins in a row, until 2023-11-14T22:28:20Z"
    )
    assert manual.describe(_hhmm) == "account locked on cue, until <1700000060>"


def test_control_api_and_timeline_render_through_the_events_own_text() -> None:
    locked = AccountLocked(at=AT, username="u", failures=5, until=to_datetime(1_700_000_900))
    assert event_json(locked)["description"] == locked.describe(iso_time)
    assert locked.line(_hhmm) == "account locked after 5 failed logins in a row, until <1700000900>"


def test_a_timeline_line_names_a_missing_account_except_for_requests_without_one() -> None:
    rejected = LogoutRejected(at=AT, username=None, reason="no session")
    assert rejected.line(iso_time) == "/v1/logout rejected: no session  [no known account]"
    bad = BadRequest(at=AT, username=None, method="GET", path="/x", status=400, reason="r")
    assert bad.line(iso_time) == "GET /x -> 400 bad request: r"


def test_the_time_origin_is_one_function_for_service_and_assertions(
    service: AuthService, clock: ManualClock
) -> None:
    account = service.accounts.add_account()
    clock.advance(0.5)
    service.flow(V2Flow).grant(account.username, account.api_key)
    evidence = Evidence(
        service.timeline.events,
        service.options,
        service.timeline.started_at,
        service.timeline.now(),
    )
    assert evidence.origin == timeline_origin(service.timeline.events, service.timeline.started_at)
    assert format_offset(-1) == "-00:00:01"


def test_reading_events_writes_nothing(make_service: MakeService, clock: ManualClock) -> None:
    service = make_service(session_timeout=60)
    account = service.accounts.add_account()
    session = service.flow(V1Flow).login(account.username, account.password)
    clock.advance(3600)
    recorded = len(service.timeline._events)
    first = service.timeline.events
    second = service.timeline.events
    assert len(service.timeline._events) == recorded  # computed, not recorded
    assert first == second
    assert [type(e) for e in first][-1] is SessionExpired
    assert session.ended_at is None
    # The next write records it, at the moment it happened; reads see no difference.
    with pytest.raises(Refusal):
        admitted(service, "v1", session=session.session_id, utk=session.utk, path="/x")
    assert session.end_reason == "timeout"
    expired = [e for e in service.timeline.events if isinstance(e, SessionExpired)]
    assert expired == [e for e in first if isinstance(e, SessionExpired)]


def test_logged_out_rejected_is_a_deprecated_alias_of_logout_rejected() -> None:
    import pytest_mgmtauth

    with pytest.warns(DeprecationWarning, match="use pytest_mgmtauth.LogoutRejected"):
        old = pytest_mgmtauth.LoggedOutRejected
    assert old is LogoutRejected
    assert isinstance(LogoutRejected(at=AT, username=None, reason="r"), old)
    with pytest.warns(DeprecationWarning, match="LoggedOutRejected is deprecated"):
        from pytest_mgmtauth import LoggedOutRejected  # noqa: F401
    assert "LoggedOutRejected" not in pytest_mgmtauth.__all__
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        pytest_mgmtauth.NoSuchName  # noqa: B018
