"""The fake's side of a live run, as the glue reaches it: the run's link to the service
(``LiveRun``, made here from the variables the glue read) that each test's
``MgmtServer`` forwards through (``_http/forward.py``), and the one seam of a live run's
``MgmtServer`` (:class:`LiveMgmtServer`): what the service does not do skips the test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from .._http.forward import LiveRun, LiveTest, Upstream
from .resolution import outside
from .server import MgmtServer

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["LiveMgmtServer", "LiveRun", "LiveTest", "live_run"]

#: What a live run skips the test at, and why (:data:`SKIPPED`): what only the fake can
#: do (invent credentials, script faults, change state), and the reads of the fake's
#: timeline, which a live run does not keep (the service answers). A new public method
#: of ``MgmtServer`` of either kind goes here.
_FAKE_ONLY = (
    "add_account add_client rotate_client_secret revoke_client fail_next hang_next "
    "drop_connection_next reset_next drop_idle_connections malformed_next schedule_fault "
    "clear_faults expire revoke lock unlock rotate_key rotate_password schedule_clock_move"
)
_TIMELINE = (
    "events auth_count wait scheduled_faults protected_calls auth_calls pending_faults "
    "timeline assert_credential_reused assert_token_reused assert_auth_count "
    "assert_no_expired_credential_used assert_no_expired_token_used "
    "assert_no_refused_calls assert_logged_out assert_single_flight"
)
SKIPPED = dict.fromkeys(_FAKE_ONLY.split(), "is what only the fake can do") | dict.fromkeys(
    _TIMELINE.split(), "reads the fake's timeline, which a live run does not keep"
)


class LiveMgmtServer(MgmtServer):
    """A live run's ``MgmtServer`` (the plugin makes one for each test of the run):
    each name of :data:`SKIPPED` skips the test, naming the call; everything else is
    the fake's, forwarding each request to the service."""


def _skipping(name: str, why: str) -> Any:
    declared = getattr(MgmtServer, name)
    # An alias (assert_token_reused) is named as the method it stands for.
    function = declared.fget if isinstance(declared, property) else declared
    called = f"mgmt_server.{getattr(function, '__name__', name)}"
    said = f"{called} {why}: skipped in a live run (--mgmtauth-live)"

    def skip(self: MgmtServer, /, *args: object, **kwargs: object) -> NoReturn:
        __tracebackhide__ = True  # a failure shows the test's line, not this one
        live = self._binding.live
        assert live is not None
        live.run.fake_only(said)

    return property(skip) if isinstance(declared, property) else skip


for _name, _why in SKIPPED.items():
    setattr(LiveMgmtServer, _name, _skipping(_name, _why))


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
