"""The fake's side of a live run, as the glue reaches it: the run's link to the service
(``LiveRun``, made here from the variables the glue read) that each test's
``MgmtServer`` forwards through (``_http/forward.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from .._http.forward import LiveRun, Upstream
from .resolution import outside

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["LiveRun", "live_run"]


def live_run(
    *,
    upstream: str | None,
    cafile: str | None,
    secrets: tuple[str, ...],
    fake_only: Callable[[str], NoReturn],
) -> LiveRun:
    """The run's link to the service, its TLS context made now (before any test's
    interception); ValueError if ``upstream`` is not an https URL or ``cafile`` not a
    file of CA certificates."""
    target = Upstream(url=upstream, cafile=cafile)
    target.check()
    # The service's hosts are the fake's in this process (resolution.py): not for the
    # connections that forward to the service itself.
    return LiveRun(upstream=target, secrets=secrets, fake_only=fake_only, outside=outside)
