"""An event's texts are masked in one pass over all of them (joined by NUL): every field
is still masked, none spills into the next, and a text with a NUL of its own falls back
to masking field by field."""

from __future__ import annotations

import threading

from pytest_mgmtauth import AuthRejected
from pytest_mgmtauth._service.accounts import fingerprint
from pytest_mgmtauth._service.timeline import ManualClock, Timeline, to_datetime

SECRET = "k3y+with&and=s0me-length-1234567890"


def _recorded(**texts: str) -> AuthRejected:
    timeline = Timeline(ManualClock(), threading.RLock())
    timeline.hold_secrets(SECRET)
    timeline.record(
        AuthRejected(
            at=to_datetime(timeline.now()),
            return_code=1401,
            **{"username": "user", "reason": "none", "account": "acme", **texts},
        )
    )
    [event] = timeline.events
    assert isinstance(event, AuthRejected)
    return event


def test_every_text_of_an_event_is_masked_and_the_others_kept() -> None:
    event = _recorded(username=f"x{SECRET}", reason=f"the key {SECRET} is wrong")
    assert SECRET not in repr(event)
    assert event.username == f"x{fingerprint(SECRET)}"
    assert event.reason == f"the key {fingerprint(SECRET)} is wrong"
    assert event.account == "acme"


def test_a_secret_split_across_two_fields_is_no_secret_of_either() -> None:
    half = len(SECRET) // 2
    event = _recorded(username=SECRET[:half], reason=SECRET[half:])
    assert (event.username, event.reason) == (SECRET[:half], SECRET[half:])


def test_a_text_with_a_nul_of_its_own_is_masked_field_by_field() -> None:
    event = _recorded(username="a\x00b", reason=f"{SECRET}\x00")
    assert event.username == "a\x00b"
    assert event.reason == f"{fingerprint(SECRET)}\x00"


def test_a_secret_an_escape_completes_is_masked_in_an_event() -> None:
    # Fields all visible ASCII are masked without the escaped renderings; one with a
    # control character is not: written as '\x12', it shows '12' before the rest.
    timeline = Timeline(ManualClock(), threading.RLock())
    timeline.hold_secrets("12abcdef99")
    timeline.record(
        AuthRejected(
            at=to_datetime(timeline.now()),
            return_code=1401,
            username="\x12abcdef99",
            reason="plain",
            account="acme",
        )
    )
    [masked] = timeline.events
    assert isinstance(masked, AuthRejected)
    assert (masked.username, masked.reason) == (fingerprint("12abcdef99"), "plain")
