"""Scripted faults of the auth endpoints, carried out on the wire: which fault a request
to ``/v2/auth``, ``/v3/auth/...`` or ``/v1/login`` takes (``mgmt_server.fail_next``,
``hang_next``, ``drop_connection_next``, ``malformed_next``, or a scheduled one), and the
answer it gives instead (a failure, a hang, a cut-off body or a reset connection).
"""

from __future__ import annotations

import socket
import struct
from typing import TYPE_CHECKING

from werkzeug import Response

from .._service.service import SERVICE_MESSAGES, Refusal
from .errors import refusal_response
from .parsing import BadInput, read_form

if TYPE_CHECKING:
    from werkzeug import Request

    from .._service.faults import ScriptedFault
    from .._service.flows.base import Endpoint, Flow
    from .binding import Binding

#: How often a hang on the simulated clock looks at the clock, in real seconds.
_SIMULATED_HANG_POLL = 0.01


class ConnectionResetOnCue(ConnectionAbortedError):
    """Raised through Werkzeug so that it drops the connection without an answer; the
    socket was set to close with a TCP reset (SO_LINGER 0)."""


def scripted_fault(
    binding: Binding, request: Request, flow: type[Flow], endpoint: Endpoint
) -> ScriptedFault | None:
    """The fault this call of a flow's endpoint gets (already recorded), or ``None``."""
    version = flow.name
    service = binding.service
    due = service.auth_call_arrived()  # counted for scheduled faults (auth2...)
    if due is None and not service.faults.any_for(version):
        return None  # the common case: no form parsing for the fault's attribution
    fired = service.take_fault(
        version, request.method, request.path, _username_of(request, endpoint), scheduled=due
    )
    return fired.fault if fired is not None else None


def _username_of(request: Request, endpoint: Endpoint) -> str | None:
    """The form's username, to attribute a fault in the timeline; None if unreadable."""
    try:
        return read_form(request, request.path, endpoint.form).get("username")
    except BadInput:
        return None


def carry_out(
    fault: ScriptedFault, binding: Binding, request: Request, flow: type[Flow]
) -> Response | None:
    """The answer a scripted fault gives, or None to go on answering normally (after a
    hang). A reset raises :class:`ConnectionResetOnCue`."""
    if fault.kind == "fail":
        assert fault.status is not None
        assert fault.return_code is not None
        base = SERVICE_MESSAGES.get(fault.return_code, f"Service error {fault.return_code}")
        refusal = Refusal(
            fault.status,
            fault.return_code,
            "scripted fault: the test told the fake to fail this call",
            message=base,
            retry_after=fault.retry_after,
        )
        return refusal_response(flow.style(refusal))
    if fault.kind == "hang":
        assert fault.seconds is not None
        if fault.clock == "real":
            if binding.closed.wait(fault.seconds):
                reset_connection(request)
        else:
            service = binding.service
            until = service.now() + fault.seconds
            while service.now() < until:
                if binding.closed.wait(_SIMULATED_HANG_POLL):
                    reset_connection(request)
        return None
    if fault.kind == "reset":
        reset_connection(request)
    # "malformed": a 200 whose JSON stops in the middle, as if cut off on the way.
    field = "utk" if flow.credential == "session" else flow.answer_field
    body = f'{{"{field}": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzUxMiJ9.eyJzdWIiOi'
    return Response(body, status=200, content_type="application/json")


def reset_connection(request: Request) -> None:
    sock = request.environ.get("werkzeug.socket")
    if sock is not None:
        # Linger on, timeout 0: closing the socket sends RST instead of FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raise ConnectionResetOnCue(
        "connection reset on cue (drop_connection_next, or a scheduled reset)"
    )
