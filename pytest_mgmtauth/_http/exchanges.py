"""Keeping a test's exchanges with the fake, for comparison with the service's recording
(drift): only for a test that asked (:func:`record_exchanges`), so a
test without a snapshot pays one dictionary look-up per request.

Called from ``FakeApp`` once an answer is decided; the exchanges are kept raw and
normalised by the reader (``_service/exchange_shape.py``)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from .._service.exchange_shape import REFUSED_STATUSES, Exchange

if TYPE_CHECKING:
    from werkzeug import Request, Response

    from .binding import Binding

__all__ = ["keep_exchange", "record_exchanges"]

_KEPT: weakref.WeakKeyDictionary[Binding, list[Exchange]] = weakref.WeakKeyDictionary()


def record_exchanges(binding: Binding) -> list[Exchange]:
    """Keep ``binding``'s exchanges from now on; the list they are added to."""
    return _KEPT.setdefault(binding, [])


def keep_exchange(
    binding: Binding, request: Request, response: Response, *, protected: bool
) -> None:
    """Add the exchange to ``binding``'s list, if it keeps one. ``protected``: whether it
    is an API call, a call to a declared route (any other path the fake does not serve,
    an unknown route's 404, is recorded whole, like an endpoint's answer)."""
    kept = _KEPT.get(binding)
    if kept is None:
        return
    status = response.status_code
    # A protected call's data body is never read (nor kept): only a refusal's shape.
    body = b"" if protected and status not in REFUSED_STATUSES else response.get_data()
    kept.append(
        Exchange(
            method=request.method,
            path=request.path,
            status=status,
            headers=tuple(response.headers.items()),
            body=body,
            protected=protected,
        )
    )
