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

from .._service.exchange_shape import ERROR_CODE_KEYS, TYPE_NAMES, alphabet_classes
from .._service.flows.registry import answering_flow, declared, option_sets
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
        fix = _fix([self.option] if self.option else [])
        if self.field == "exchange":  # one side made no such exchange
            values = _MADE[then == _THEN_MOVED][self.service == ABSENT]
            return f"{self.exchange}: {values}{fix}"
        values = f"{then} {_text(self.field, self.service)}, {now} {_text(self.field, self.fake)}"
        return f"{self.exchange}: {self.field}: {values}{fix}"


def _fix(options: Sequence[str]) -> str:
    """How a difference's line ends: the options that make the fake answer so, or none."""
    if options:
        return f" (the option that makes the fake answer so: {', '.join(options)})"
    return " (no option makes the fake answer so)"


#: How an exchange only one side made reads: [moved?][the service's side absent?].
_THEN_MOVED = "it answered"
_MADE = (
    ("made with the service, not with the fake", "made with the fake, not with the service"),
    ("made in the earlier recording, not now", "made now, not in the earlier recording"),
)
#: The leaves under a token's shape that hold values, not types (``exchange_shape``).
_TOKEN_VALUES = frozenset(("alg", "typ", "lifetime", "length", "alphabet"))


def _text(field: str, value: Any) -> str:
    """A recorded value as a message shows it: a type as ``<string>``, any other value
    as JSON (a code, a status, a header's shape), ``(absent)`` as it is."""
    if value == ABSENT:
        return ABSENT
    return _render(value, typed=_holds_types(field))


def _holds_types(field: str) -> bool:
    """Whether ``field`` of a record holds the types of the answer's values: the body's
    keys, but for codes and a token's format."""
    if not field.startswith("body."):
        return False
    if ".jwt.claims." in field:
        return True
    leaf = field.rsplit(".", 1)[-1]
    if ".jwt." in field or ".opaque." in field:
        return leaf not in _TOKEN_VALUES
    return leaf not in ERROR_CODE_KEYS and leaf not in declared().code_keys


def _render(value: Any, *, typed: bool) -> str:
    if typed and isinstance(value, str) and value in TYPE_NAMES:
        return f"<{value}>"
    if typed and isinstance(value, list):
        return "[" + ", ".join(_render(v, typed=True) for v in value) + "]"
    return json.dumps(value, sort_keys=True)


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


#: The field under which each cookie's attributes are recorded, by the cookie's name.
_COOKIES = "headers.set-cookie."


def _lines(found: Sequence[Drift], *, moved: bool) -> list[str]:
    """One line per difference; the cookies one side set and the other did not, one line
    per exchange (``headers.set-cookie: JSESSIONID gone, SESSIONID new``)."""
    lines: list[str] = []
    cookies: dict[str, list[Drift]] = {}
    for drift in found:
        if drift.field.startswith(_COOKIES) and ABSENT in (drift.service, drift.fake):
            if drift.exchange not in cookies:
                cookies[drift.exchange] = []
                lines.append(drift.exchange)  # replaced below, in its place
            cookies[drift.exchange].append(drift)
            continue
        lines.append(drift.line(then=_THEN_MOVED, now="now") if moved else drift.line())
    for exchange, named in cookies.items():
        service_only = [d.field.removeprefix(_COOKIES) for d in named if d.fake == ABSENT]
        fake_only = [d.field.removeprefix(_COOKIES) for d in named if d.fake != ABSENT]
        if moved:  # the service's side is then, the fake's now
            parts = [f"{n} gone" for n in service_only] + [f"{n} new" for n in fake_only]
        else:
            parts = [f"{n} from the service only" for n in service_only]
            parts += [f"{n} from the fake only" for n in fake_only]
        fix = _fix(sorted({d.option for d in named if d.option}))
        lines[lines.index(exchange)] = f"{exchange}: headers.set-cookie: {', '.join(parts)}{fix}"
    return lines


def drift_message(found: Sequence[Drift], *, recorded: str, where: str) -> str:
    """The finding's text: it is drift, each difference, when and where the service's
    record is, and what to do."""
    options = sorted({d.option for d in found if d.option})
    fixes = []
    if options:
        fixes.append(
            f"set the option named ({', '.join(options)}: a marker, an ini setting or a "
            "flag, see the Reference) and the fake answers like the service"
        )
    if any(d.option is None for d in found):
        fixes.append(
            "report a difference no option makes: the fake cannot be told to make it "
            "(pytest-mgmtauth's issue tracker)"
        )
    fixes.append(
        "if the service moved since the recording, record the test anew with pytest --mgmtauth-live"
    )
    return "\n".join(
        [
            f"drift: the fake answered unlike the service's recording of {recorded} ({where}):",
            *(f"  {line}" for line in _lines(found, moved=False)),
            "Fix: " + "; or ".join(fixes) + ".",
        ]
    )


def moved_message(found: Sequence[Drift], *, recorded: str, where: str, whole: bool = True) -> str:
    """What a live run found changed in the service since its earlier recording. A test
    that did not run to its end (``whole`` False) made fewer exchanges than recorded:
    those are counted, not listed."""
    cut = [] if whole else [d for d in found if d.field == "exchange" and d.fake == ABSENT]
    shown = [d for d in found if d not in cut]
    lines = [
        f"the service answers unlike its recording of {recorded} ({where}):",
        *(f"  {line}" for line in _lines(shown, moved=True)),
    ]
    if cut:
        lines.append(
            f"  {len(cut)} recorded exchange(s) not made now: the test stopped before them"
        )
    return "\n".join(lines)
