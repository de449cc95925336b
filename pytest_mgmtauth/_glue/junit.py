"""The JUnit XML side of the report: each test's ``mgmtauth timeline`` section written into
its testcase as ``<system-err>`` (:class:`JunitTimelines`, a plugin registered by
``plugin.py``)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

import pytest

from .report import SECTION_TITLE, section_text

if TYPE_CHECKING:
    from collections.abc import Generator


#: Characters XML 1.0 cannot hold (a request path can bring them into a timeline): the
#: complement of its Char production (tab, LF, CR, U+0020-U+D7FF, U+E000-U+FFFD,
#: U+10000-U+10FFFF), spelled as the few ranges it leaves out: the negated class of the
#: allowed ranges matches the same code points but is far slower to compile, at every
#: start of pytest.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class JunitTimelines:
    """Writes each test's ``mgmtauth timeline`` section into its JUnit XML testcase as
    ``<system-err>``, whatever ``junit_logging`` says (pytest writes only captured
    output there). Runs on the xdist controller, from the reports the workers send."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        #: Per test: the text to write, and the testcase's reporter, held at teardown.
        self._texts: dict[tuple[str, object], str] = {}
        self._held: dict[tuple[str, object], Any] = {}

    def _xml(self) -> Any:
        try:
            from _pytest.junitxml import xml_key
        except ImportError:  # pragma: no cover - a pytest without it
            return None
        return self._config.stash.get(xml_key, None)

    @staticmethod
    def _key(report: pytest.TestReport) -> tuple[str, object]:
        return report.nodeid, getattr(report, "node", None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        text = section_text(report)
        key = self._key(report)
        if text is not None:
            self._texts[key] = text
        held = None
        if report.when == "teardown" and key in self._texts:
            xml = self._xml()
            # junitxml closes the testcase while it handles this report: take it now, and
            # add to it after, so the element follows the <failure> or <error> (as the
            # JUnit schema orders them).
            held = xml.node_reporter(report) if xml is not None else None
        yield
        if report.when != "teardown":
            return
        text = self._texts.pop(key, None)
        if held is None or text is None:
            return
        element = ET.Element("system-err")
        element.text = _NOT_XML.sub(
            lambda m: f"#x{ord(m.group()):02X}",
            "\n".join([f" {SECTION_TITLE} ".center(80, "-"), text, ""]),
        )
        if "to_xml" in vars(held):  # closed: its testcase element is final, add to it
            held.to_xml().append(element)
        else:
            held.append(element)
