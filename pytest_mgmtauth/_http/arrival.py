"""What the transport knew of a request when it handed it to the app: one
:class:`Arrival`, made by the connection's handler (``handler.py``) as it reads the
request, and carried by the request itself (:class:`FakeRequest`) to the app, the host
checks and the request log. It is the one way the package's modules pass a request's
state to each other.

Why it travels in the environ, under the one key :data:`ARRIVAL`: a WSGI server hands
its application nothing but the environ, and Werkzeug's handler calls the one
application of the server for every connection's requests. So the handler puts the
Arrival there, and the listeners' WSGI application (:func:`wsgi_application`) makes the
request that carries it; nothing else reads or writes an environ key of the package's
own.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from werkzeug import Request
from werkzeug.exceptions import HTTPException
from werkzeug.http import parse_cookie
from werkzeug.utils import cached_property

from .._service.secret_text import SecretMasker
from .errors import MAX_BODY_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from werkzeug import Response
    from werkzeug.datastructures import ImmutableMultiDict

    from .binding import Binding

#: The environ key of a request's :class:`Arrival` (see the module's text).
ARRIVAL = "mgmtauth.arrival"

#: :attr:`Arrival.listener` of a request that came to the region address (the second
#: listener, which stands for the ``v3_host``; see ``hosts.py``).
REGION_LISTENER = "region"


@dataclasses.dataclass(eq=False)
class Arrival:
    """One request, as the transport received it."""

    #: The test it belongs to: the one bound when its connection was accepted (on a
    #: kept-alive connection, when the request began); None when no test was bound.
    binding: Binding | None
    #: Which listener it came to: :data:`REGION_LISTENER`, or None for the fake's own.
    listener: str | None = None
    #: The host of the proxy's tunnel it came through (the intercept option), or None.
    tunnel_host: str | None = None
    #: The status (400, or 501 for a transfer coding the fake does not implement) and
    #: why its header section makes its framing invalid (``errors.framing_problem``).
    framing_problem: tuple[int, str] | None = None
    #: Its header lines as they arrived, for the request log (None: not known, the app
    #: was driven without the handler; the log takes Werkzeug's).
    headers: tuple[tuple[str, str], ...] | None = None
    #: Called once the app has its answer: the connection kept alive for the next
    #: request, or closed after a brief drain (``handler.py``).
    after_answer: Callable[[], None] | None = None
    #: Why its chunked body broke RFC 9112 7.1: set by the reader as it reads
    #: (:meth:`chunked_broke`); the answer is a 400 saying so.
    chunked_problem: str | None = None
    #: Its body, once read whole within the limit (``parsing.read_body``): for the
    #: request log.
    body: bytes | None = None

    def chunked_broke(self, reason: str) -> None:
        self.chunked_problem = reason


class FakeRequest(Request):
    """A request of the fake's listeners: Werkzeug's, with its :class:`Arrival`."""

    # One byte over the limit, so that a chunked body (no Content-Length) that is too
    # large reads as too large (read_body answers 413) instead of silently truncated.
    max_content_length = MAX_BODY_BYTES + 1
    max_form_memory_size = MAX_BODY_BYTES

    def __init__(self, environ: Any, populate_request: bool = True, shallow: bool = False):
        super().__init__(environ, populate_request, shallow)
        arrival = environ.get(ARRIVAL)
        #: What the transport knew of it (made without the handler: nothing, no test).
        self.arrival: Arrival = arrival if isinstance(arrival, Arrival) else Arrival(None)

    @cached_property
    def cookies(self) -> ImmutableMultiDict[str, str]:
        # Werkzeug joins headers.getlist("Cookie"), a walk of every header of the
        # environ, each name re-spelled, on every request; the one HTTP_COOKIE holds
        # them all already (the handler joins repeated Cookie lines with "; ").
        return parse_cookie(  # type: ignore[return-value]  # as Werkzeug's own
            self.environ.get("HTTP_COOKIE", ""), cls=self.dict_storage_class
        )

    def __repr__(self) -> str:
        # Shown in tracebacks (pytest prints a frame's arguments): Werkzeug's repr holds
        # the whole URL, and with it a utk in the query or a jsessionid in the path.
        masked = mask_for(self.arrival.binding)(_target(self))
        return f"<{type(self).__name__} {masked!r} [{self.method}]>"


def wsgi_application(answer: Callable[[Request], Response]) -> Any:
    """The WSGI application of the fake's listeners: each request made a
    :class:`FakeRequest` (with the Arrival its connection's handler made) and answered by
    ``answer``, then the Arrival's after-answer (keep-alive, or the brief drain)."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = FakeRequest(environ)
        with request:  # as Werkzeug's Request.application: its HTTP errors answered
            try:
                response: Any = answer(request)
            except HTTPException as exc:
                response = exc.get_response(environ)
            body: Iterable[bytes] = response(environ, start_response)
        after = request.arrival.after_answer
        if after is not None:
            after()
        return body

    return wsgi


def _target(request: Request) -> str:
    try:
        query = "&".join(f"{k}={v}" for k, v in request.args.items(multi=True))
    except Exception:  # a repr must not raise
        query = "<query not shown>"
    return request.path + (f"?{query}" if query else "")


def mask_for(binding: Binding | None) -> Callable[[str], str]:
    """The secret masker of the test a connection belongs to (JWTs only without one)."""
    return binding.service.timeline.redact if binding is not None else SecretMasker().mask
