"""Fixtures of the async-under-the-clock tests: the real-time guard (asyncclock_guard)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from asyncclock_guard import GUARD_SECONDS, run_async_within

T = TypeVar("T")


@pytest.fixture
def run_async() -> Callable[..., Any]:
    """``run_async(main, what=..., seconds=..., loop=...)``: the guard as a fixture."""

    def run(
        main: Callable[[], Coroutine[Any, Any, T]],
        *,
        what: str,
        seconds: float = GUARD_SECONDS,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> T:
        __tracebackhide__ = True
        result: T = run_async_within(seconds, main, what=what, loop=loop)
        return result

    return run
