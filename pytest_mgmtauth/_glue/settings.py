"""The options of the fake as pytest sees them: one ini setting ``mgmtauth_<name>`` and one
flag ``--mgmtauth-<name>`` per declaration of ``_service/options.py``, read into the
session's base options (defaults, then ini, then flags), and a test's options (the base,
then its ``mgmtauth`` markers from farthest to closest); and the sweep's settings
(``--mgmtauth-sweep``, ``--mgmtauth-sweep-points`` and their ini settings).

Every run of pytest imports this module (the flags, the report header): it imports the
option declarations and the sweep's plan (both small and pure), nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._service.options import (
    OPTION_NAMES,
    OPTION_SPECS,
    Options,
    build_options,
    check_option_names,
    name_source,
    shown_text,
)
from .._verdicts.sweep_plan import (
    DEFAULT_POINTS,
    FAULT_KINDS,
    SweepConfig,
    parse_faults_option,
    parse_points_option,
)

if TYPE_CHECKING:
    import pytest

    from .._service.options import OptionSpec


def add_options(parser: pytest.Parser, group: Any) -> None:
    """The ini settings and the flags, in the plugin's option group."""
    for spec in OPTION_SPECS:
        flag = "--mgmtauth-" + spec.flag[2:]
        help = f"{spec.flag_help} (overrides the ini; markers still win)"
        if spec.kind == "bool":
            # Switches the option away from its default (--mgmtauth-no-keep-alive).
            group.addoption(flag, action="store_true", default=None, help=help)
        else:
            group.addoption(
                flag, default=None, metavar=spec.metavar or spec.kind.upper(), help=help
            )
        parser.addini(f"mgmtauth_{spec.name}", spec.help, type="string", default=None)


def _parse(spec: OptionSpec, raw: str, where: str) -> Any:
    """The value ``raw`` (from ``where``) means; ValueError naming where it came from."""
    try:
        return spec.parse(raw)
    except ValueError as exc:
        raise ValueError(f"{where} {shown_text(raw)}: {exc}") from None


def read_options(config: pytest.Config) -> Options:
    """The base options: defaults, then ini settings, then command-line flags."""
    overrides: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for spec in OPTION_SPECS:
        raw = config.getini(f"mgmtauth_{spec.name}")
        if raw:
            overrides[spec.name] = _parse(spec, str(raw), f"mgmtauth_{spec.name} =")
            labels[spec.name] = f"mgmtauth_{spec.name}"
        flag = "--mgmtauth-" + spec.flag[2:]
        given = config.getoption(flag.lstrip("-").replace("-", "_"))
        if given is None:
            continue
        if spec.kind == "bool":
            if given:
                overrides[spec.name] = not spec.default
            continue
        overrides[spec.name] = _parse(spec, str(given), flag)
        labels[spec.name] = flag
    try:
        return build_options(Options(), overrides, where="mgmtauth ini settings")
    except (TypeError, ValueError) as exc:
        # Name the ini setting (or command-line flag) the value came from.
        message = name_source(str(exc), lambda name: labels.get(name, f"mgmtauth_{name}"))
        raise type(exc)(message) from None


def options_for(node: pytest.Item, base: Options) -> Options:
    """The options of one test: ini/CLI defaults, then markers from farthest to closest."""
    __tracebackhide__ = True
    merged: dict[str, Any] = {}
    for marker in reversed(list(node.iter_markers("mgmtauth"))):
        if marker.args:
            raise TypeError(
                f"@pytest.mark.mgmtauth takes keyword options only, got positional "
                f"{marker.args!r}; known options: {', '.join(OPTION_NAMES)}"
            )
        check_option_names(marker.kwargs, where="@pytest.mark.mgmtauth")
        merged.update(marker.kwargs)
    if not merged:
        return base  # frozen: shared, not rebuilt and checked again for every test
    return build_options(base, merged, where="@pytest.mark.mgmtauth")


# -- the sweep's settings (docs/sweeps.md) ---------------------------------------------


def add_sweep_options(parser: pytest.Parser, group: Any) -> None:
    group.addoption(
        "--mgmtauth-sweep",
        default=None,
        metavar="FAULTS",
        help="sweep every test that uses mgmt_server: comma-separated fault kinds "
        f"({', '.join(FAULT_KINDS)}) or 'all' (overrides the ini; the marker still wins)",
    )
    group.addoption(
        "--mgmtauth-sweep-points",
        default=None,
        metavar="N",
        help=f"points per fault kind of a sweep without its own (default {DEFAULT_POINTS})",
    )
    parser.addini(
        "mgmtauth_sweep",
        "sweep every test that uses mgmt_server with these fault kinds (comma-separated, or 'all')",
        type="string",
        default=None,
    )
    parser.addini(
        "mgmtauth_sweep_points",
        f"points per fault kind of a sweep (default {DEFAULT_POINTS})",
        type="string",
        default=None,
    )


def read_sweep_config(config: pytest.Config) -> SweepConfig:
    """``--mgmtauth-sweep`` / ``mgmtauth_sweep`` and the points; ValueError if bad."""
    faults: tuple[str, ...] = ()
    raw = config.getoption("mgmtauth_sweep") or config.getini("mgmtauth_sweep")
    if raw:
        faults = parse_faults_option(str(raw), "--mgmtauth-sweep / mgmtauth_sweep")
    points = DEFAULT_POINTS
    raw_points = config.getoption("mgmtauth_sweep_points") or config.getini("mgmtauth_sweep_points")
    if raw_points:
        points = parse_points_option(
            str(raw_points), "--mgmtauth-sweep-points / mgmtauth_sweep_points"
        )
    return SweepConfig(faults, points)
