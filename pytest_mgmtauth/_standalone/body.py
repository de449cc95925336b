"""Reading a control request: its JSON body, checked for size and depth, and its fields
and query parameters one by one, each with an error that names it (:class:`ControlError`,
answered as a 4xx JSON body)."""

from __future__ import annotations

import json
import math
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._http.errors import (
    MAX_CONTROL_BODY,
    MAX_CONTROL_DEPTH,
    BodyTooLarge,
    read_limited_body,
)
from .._service.limits import shown

if TYPE_CHECKING:
    from collections.abc import Mapping

    from werkzeug import Request


class ControlError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _depth(data: Any) -> int:
    """How deeply arrays and objects nest in ``data`` (iterative: no recursion limit)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth)
            if depth > MAX_CONTROL_DEPTH:
                break
            stack.extend((v, depth + 1) for v in value)
    return deepest


class NotStandardJSON(ValueError):
    """JSON that Python's parser takes but RFC 8259 does not (and Node, Java, Go refuse
    to parse): ``NaN``, ``Infinity``, ``-Infinity``, or a number too large for a double
    (``1e999``). ``str()`` says which."""


def _refuse_constant(name: str) -> Any:
    raise NotStandardJSON(
        f"{name} is not a JSON value (RFC 8259 has no NaN or Infinity; Node, Java and Go "
        "refuse it): send a finite number"
    )


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else f"{text[:12]}...{text[-8:]}"
        raise NotStandardJSON(
            f"the number {shown} is too large for a double (it would read as {value}, which "
            "JSON cannot say; Node, Java and Go refuse it): send a finite number"
        )
    return value


def loads_standard(text: str | bytes) -> Any:
    """``json.loads``, refusing what RFC 8259 does not allow and other languages cannot
    read back: NaN, Infinity and numbers that overflow a double raise
    :class:`NotStandardJSON` (a ValueError); otherwise as ``json.loads``."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)


def read_json(request: Request, endpoint: str) -> dict[str, Any]:
    """A control request's body as a JSON object ({} when empty); ControlError (413,
    400) for a body too large, not JSON, nested too deeply, or not an object."""
    try:
        raw = read_limited_body(request, MAX_CONTROL_BODY)
    except BodyTooLarge as exc:
        raise ControlError(413, f"{endpoint}: {exc}") from None
    if not raw.strip():
        return {}
    try:
        data = loads_standard(raw)
    except NotStandardJSON as exc:
        raise ControlError(400, f"{endpoint}: the body is not standard JSON: {exc}") from None
    except RecursionError:
        raise ControlError(
            400, f"{endpoint}: the body nests deeper than {MAX_CONTROL_DEPTH} levels"
        ) from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, a 5000-digit int
        raise ControlError(
            400,
            f"{endpoint}: the body is not JSON ({exc}); send a JSON object, e.g. "
            "curl -H 'Content-Type: application/json' -d '{\"seconds\": 1800}'",
        ) from None
    if _depth(data) > MAX_CONTROL_DEPTH:
        raise ControlError(
            400, f"{endpoint}: the body nests deeper than {MAX_CONTROL_DEPTH} levels"
        )
    if not isinstance(data, dict):
        raise ControlError(
            400, f"{endpoint}: the body must be a JSON object, got {type(data).__name__}"
        )
    return data


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class Body:
    """A control request's JSON object, read field by field with named errors.

    ``query`` holds the query string of a GET (read with :meth:`flag` and checked
    against the endpoint's known parameters by :meth:`only_params`)."""

    query: Mapping[str, str] = MappingProxyType({})

    def __init__(self, endpoint: str, data: dict[str, Any], known: tuple[str, ...]) -> None:
        unknown = [k for k in data if k not in known]
        if unknown:
            raise ControlError(
                400,
                f"{endpoint}: unknown field {', '.join(map(shown, unknown[:5]))}; known fields: "
                f"{', '.join(known) or 'none'}",
            )
        self.endpoint = endpoint
        self.data = data

    def _get(self, name: str, types: tuple[type, ...], what: str, required: bool) -> Any:
        if name not in self.data or self.data[name] is None:
            if required:
                raise ControlError(400, f"{self.endpoint}: the field {name!r} ({what}) is required")
            return None
        value = self.data[name]
        if isinstance(value, bool) and bool not in types:
            value_ok = False
        else:
            value_ok = isinstance(value, types)
        if not value_ok:
            shown = json.dumps(value)
            if len(shown) > 60:  # its kind and size only: no part of a string
                shown = f"a JSON {type(value).__name__} of {len(shown)} characters"
            raise ControlError(
                400, f"{self.endpoint}: the field {name!r} must be {what}, got {shown}"
            )
        return value

    def text(self, name: str, *, required: bool = False) -> str | None:
        value = self._get(name, (str,), "a string", required)
        assert value is None or isinstance(value, str)
        return value

    def integer(self, name: str, *, required: bool = False) -> int | None:
        value = self._get(name, (int,), "an integer", required)
        assert value is None or isinstance(value, int)
        return value

    def number(self, name: str, *, required: bool = False) -> float | int | None:
        """A JSON number as parsed: an int stays an int (10**400 has no float), the
        range is for the operation to check."""
        value = self._get(name, (int, float), "a number", required)
        if isinstance(value, float) and not math.isfinite(value):
            raise ControlError(
                400, f"{self.endpoint}: the field {name!r} must be a finite number, got {value}"
            )
        assert value is None or isinstance(value, (int, float))
        return value

    def only_params(self, known: tuple[str, ...]) -> None:
        unknown = [k for k in self.query if k not in known]
        if unknown:
            raise ControlError(
                400,
                f"{self.endpoint}: unknown query parameter {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(known) or 'none'}",
            )

    def flag(self, name: str, default: bool) -> bool:
        raw = self.query.get(name)
        if raw is None:
            return default
        value = _BOOLEANS.get(raw.strip().lower())
        if value is None:
            raise ControlError(400, f"{self.endpoint}: ?{name}= takes true or false, got {raw!r}")
        return value

    def texts(self, name: str) -> list[str] | None:
        value = self._get(name, (list,), "a list of strings", False)
        if value is not None and not all(isinstance(v, str) for v in value):
            raise ControlError(
                400, f"{self.endpoint}: the field {name!r} must be a list of strings"
            )
        return value  # type: ignore[no-any-return]
