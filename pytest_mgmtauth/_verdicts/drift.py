"""Drift: where the fake's answers to a test differ from the service's recorded ones.

Both sides are normalised records (``_service/exchange_shape.py``), so nothing dynamic
(a token, a date, an id) differs between them. They are compared in order per method
and path: the first ``POST /v2/auth`` of the test with the first recorded, and so on;
an exchange one side made and the other did not is a difference too. Each difference
names the exchange, the field, the service's value and the fake's, and the option that
would make the fake answer like the service where one does: the flows declare which
option sets which field and to what (``Flow.sets``), and an option is named only when
one of its values makes the service's value; else the difference says no option does.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from .._service.exchange_shape import alphabet_classes
from .._service.flows.registry import answering_flow, option_sets
from .._service.options import Options, build_options

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._service.flows.base import Flow, Sets

__all__ = ["ABSENT", "NOT_SHOWN", "Drift", "compare", "drift_message", "moved_message"]

#: How a side that has no such field (or exchange) reads in a message.
ABSENT = "(absent)"
#: A recorded value that matches whatever the fake answers at that field and under it
#: (a snapshot written from a page that does not show it, or edited by hand).
NOT_SHOWN = "(not shown)"


@dataclasses.dataclass(frozen=True)
class Drift:
    """One field of one exchange where the fake answered unlike the service."""

    exchange: str
    field: str
    service: Any
    fake: Any
    option: str | None

    def line(self, *, then: str = "the service answered", now: str = "the fake") -> str:
        fix = (
            f" (the option that makes the fake answer so: {self.option})"
            if self.option
            else " (no option makes the fake answer so)"
        )
        values = f"{then} {_text(self.service)}, {now} {_text(self.fake)}"
        return f"{self.exchange}: {self.field}: {values}{fix}"


def _text(value: Any) -> str:
    return value if value == ABSENT else json.dumps(value, sort_keys=True)


def compare(recorded: Sequence[dict[str, Any]], observed: Sequence[dict[str, Any]]) -> list[Drift]:
    """The differences between the service's records of a test and the fake's."""
    groups: dict[tuple[str, str], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for side, records in enumerate((recorded, observed)):
        for record in records:
            key = (str(record.get("method")), str(record.get("path")))
            groups.setdefault(key, ([], []))[side].append(record)
    found: list[Drift] = []
    for (method, path), (service, fake) in groups.items():
        keys = [k for r in (*service, *fake) if isinstance(r.get("body"), dict) for k in r["body"]]
        flow = answering_flow(path, keys)
        for index in range(max(len(service), len(fake))):
            name = f"{method} {path} #{index + 1}"
            if index >= len(service) or index >= len(fake):
                made = "answered"
                a, b = (made if index < len(side) else ABSENT for side in (service, fake))
                option = option_for(flow, path, "exchange", a, b)
                found.append(Drift(name, "exchange", a, b, option))
                continue
            left, right = _flat(service[index]), _flat(fake[index])
            for field in [f for f, v in left.items() if v == NOT_SHOWN]:
                del left[field]
                for under in [f for f in right if f == field or f.startswith(f"{field}.")]:
                    del right[under]
            for field in sorted(left.keys() | right.keys(), key=_field_order):
                a, b = left.get(field, ABSENT), right.get(field, ABSENT)
                if a != b and not _same_alphabet(field, a, b, left):
                    found.append(Drift(name, field, a, b, option_for(flow, path, field, a, b)))
    return found


#: Below this chance, two random tokens of one alphabet would not show what two did.
_CHANCE = 1e-4


def _same_alphabet(field: str, service: Any, fake: Any, record: dict[str, Any]) -> bool:
    """Whether two opaque tokens' alphabets may be one format. Each is what one random
    token happened to hold: a utk, 21 characters of A-Z0-9, holds no digit about once in
    a thousand. They are one format when two tokens of the recorded length drawn from
    both alphabets together would leave out what each left out with a chance over
    :data:`_CHANCE`."""
    if not field.endswith(".opaque.alphabet"):
        return False
    length = record.get(field.removesuffix("alphabet") + "length")
    if not isinstance(length, int) or not isinstance(service, str) or not isinstance(fake, str):
        return False
    seen = [alphabet_classes(service), alphabet_classes(fake)]
    union = seen[0] | seen[1]
    if "a-z" in union:
        union.pop("a-f", None)  # a lower-case token whose letters were all a to f
    total = sum(union.values())
    chance = 1.0
    for classes in seen:
        covered = sum(size for part, size in classes.items() if part in union)
        if "a-f" in classes and "a-f" not in union:
            covered += classes["a-f"]
        chance *= (covered / total) ** length
    return chance > _CHANCE


def _field_order(field: str) -> tuple[int, str]:
    top = ("status", "auth", "content_type", "body", "headers")
    head = field.split(".", 1)[0]
    return (top.index(head) if head in top else len(top), field)


def _flat(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"body.token.jwt.lifetime": 1800, ...}``: every leaf of a record by its path
    (a list is a leaf: its items' order is the service's)."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if not prefix and key in ("method", "path"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def option_for(
    flow: type[Flow] | None, path: str, field: str, service: Any, fake: Any
) -> str | None:
    """The option one of whose values makes the fake answer ``field`` of an exchange at
    ``path`` (of ``flow``'s answers, :func:`answering_flow`) as the service did, by the
    flows' declarations; ``None`` if no option does."""
    # One side serves the flow's endpoint at this path and the other nothing: the
    # option that moves the endpoint makes the fake serve it there, or not.
    moved = (field == "status" and 404 in (service, fake)) or field == "exchange"
    for sets in option_sets(flow):
        if sets.field == "path" and moved and _takes(sets.option, path):
            return sets.option
        if sets.field == field and _makes(sets, service):
            return sets.option
    return None


def _makes(sets: Sets, value: Any) -> bool:
    """Whether a value of ``sets.option`` makes the field ``value``."""
    if sets.values:
        return any((None if value == ABSENT else value) == made for _, made in sets.values)
    return value != ABSENT and not isinstance(value, bool) and _takes(sets.option, value)


def _takes(option: str, value: Any) -> bool:
    """Whether ``option`` may be set to ``value`` (the field holds it as it is)."""
    try:
        build_options(Options(), {option: value}, where="drift")
    except (TypeError, ValueError):
        return False
    return True


def drift_message(found: Sequence[Drift], *, recorded: str, where: str) -> str:
    """The finding's text: each difference, and when and where the service's record is."""
    lines = [
        f"the fake answered unlike the service's recording of {recorded} ({where}):",
        *(f"  {d.line()}" for d in found),
    ]
    return "\n".join(lines)


def moved_message(found: Sequence[Drift], *, recorded: str, where: str) -> str:
    """What a live run found changed in the service since its earlier recording."""
    lines = [
        f"the service answers unlike its recording of {recorded} ({where}):",
        *(f"  {d.line(then='it answered', now='now')}" for d in found),
    ]
    return "\n".join(lines)
