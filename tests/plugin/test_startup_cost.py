"""What the plugin's modules do at import, made cheap for every run of pytest (issue 14,
zero cost): the pieces that replaced slower spellings must still mean the same."""

from __future__ import annotations

from pytest_mgmtauth._glue.report import _NOT_XML
from pytest_mgmtauth._service import options as _options, token_format as _token_format


def _xml_char(code: int) -> bool:
    """XML 1.0's Char production."""
    return (
        code in (0x9, 0xA, 0xD)
        or 0x20 <= code <= 0xD7FF
        or 0xE000 <= code <= 0xFFFD
        or 0x10000 <= code <= 0x10FFFF
    )


def test_the_junit_filter_removes_exactly_what_xml_cannot_hold() -> None:
    # Every range edge of the production and of the filter, and their neighbours.
    edges = [0x0, 0x8, 0x9, 0xA, 0xB, 0xC, 0xD, 0xE, 0x1F, 0x20, 0x7F, 0x85, 0xD7FF]
    edges += [0xD800, 0xDBFF, 0xDC00, 0xDFFF, 0xE000, 0xFFFD, 0xFFFE, 0xFFFF]
    edges += [0x10000, 0x1F600, 0x10FFFF]
    codes = sorted({c + d for c in edges for d in (-1, 0, 1) if 0 <= c + d <= 0x10FFFF})
    wrong = [hex(c) for c in codes if bool(_NOT_XML.fullmatch(chr(c))) == _xml_char(c)]
    assert wrong == []


def test_the_options_default_issuer_is_the_token_modules() -> None:
    # _options spells it out rather than import _token_format at startup.
    assert _options.ISSUER == _token_format.ISSUER
    assert _options.Options().issuer == _token_format.ISSUER


def test_the_sweeps_fault_kinds_are_the_scheduled_faults_in_order() -> None:
    # _sweep_plan names them from the vocabulary rather than import the fault table.
    from pytest_mgmtauth._service.faults import SCHEDULED_KINDS
    from pytest_mgmtauth._verdicts.sweep_plan import FAULT_KINDS

    assert tuple(SCHEDULED_KINDS) == FAULT_KINDS
