"""JUnit XML from a run, for CI test panels: one test case per scenario and transport.

``failed`` and ``not_testable`` are failures (each failing check in the message body);
``not_applicable`` is ``skipped`` with its reason; a failure a baseline expects is ``skipped``
too, named as such, so the panel stays green exactly when the exit code is 0.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from palace_conformance.runner.reports.tally import STATUS_WORDS, tally
from palace_conformance.runner.results import (
    FAILED,
    KNOWN_FAILURE,
    NOT_APPLICABLE,
    NOT_TESTABLE,
    RunResult,
    ScenarioResult,
)

#: a terminal's escape sequences (colours, cursor moves; CSI, OSC and two-character forms)
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
#: what XML 1.0 cannot hold at all (not even as a character reference)
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    """``text`` fit for an XML 1.0 document: terminal escapes removed, every other character
    XML forbids (control characters, lone surrogates, U+FFFE/FFFF) written as ``\\xNN``."""
    return NOT_XML.sub(lambda m: f"\\x{ord(m.group(0)):02x}", ANSI.sub("", text))


def _sanitize(element: ET.Element) -> None:
    """Every text, tail and attribute of ``element`` and below through :func:`xml_safe`."""
    for node in element.iter():
        if node.text:
            node.text = xml_safe(node.text)
        if node.tail:
            node.tail = xml_safe(node.tail)
        for key, value in node.attrib.items():
            node.attrib[key] = xml_safe(value)


def _case(result: ScenarioResult) -> ET.Element:
    case = ET.Element("testcase", classname=f"palace_conformance.{result.scenario.split('.')[0]}",
                      name=f"{result.scenario}[{result.transport}]",
                      time=f"{result.duration_ms / 1000:.3f}")
    if result.status in (FAILED, NOT_TESTABLE):
        body = "\n".join(f"{c.pointer}: {c.message}" for c in result.failures)
        if result.baseline is not None:
            ET.SubElement(case, "skipped", message=f"expected failure (baseline): "
                          f"{result.baseline.reason or result.reason}").text = body
        else:
            failure = ET.SubElement(case, "failure", type=result.status,
                                    message=result.reason or result.status)
            failure.text = body
    elif result.status == NOT_APPLICABLE:
        ET.SubElement(case, "skipped", message=result.reason or "not applicable")
    if result.host_stderr and result.status in (FAILED, NOT_TESTABLE):
        ET.SubElement(case, "system-err").text = result.host_stderr[-20000:]
    if result.covers:
        properties = ET.SubElement(case, "properties")
        for behaviour in result.covers:
            ET.SubElement(properties, "property", name="covers", value=behaviour)
    return case


def to_xml(run: RunResult) -> ET.ElementTree:
    counts = run.counts()
    suite = ET.Element("testsuite", name="palace-conformance",
                       tests=str(len(run.results) + len(run.not_run)),
                       failures=str(sum(1 for r in run.results if r.blocking)), errors="0",
                       skipped=str(counts[NOT_APPLICABLE] + counts[KNOWN_FAILURE]
                                   + len(run.not_run)),
                       time=f"{run.duration_ms / 1000:.3f}", timestamp=run.started_at)
    # the counts in the words of every report (reports/tally.py); testcases hold both
    bridge, fake = tally(run), tally(run, "fake")
    properties = ET.SubElement(suite, "properties")
    for name, value in (("scenarios", bridge.scenarios), ("results", bridge.results),
                        *((status, counts[status]) for status, _ in STATUS_WORDS),
                        ("self_test_scenarios", fake.scenarios),
                        ("self_test_results", fake.results)):
        ET.SubElement(properties, "property", name=name, value=str(value))
    for result in run.results:
        suite.append(_case(result))
    for scenario, transport in run.not_run:  # -x stopped before them: skipped, never passed
        case = ET.SubElement(suite, "testcase",
                             classname=f"palace_conformance.{scenario.split('.')[0]}",
                             name=f"{scenario}[{transport}]", time="0.000")
        ET.SubElement(case, "skipped", message="not run: the run stopped after the first "
                      "failure (-x)")
    for line in run.stale_baseline:
        case = ET.SubElement(suite, "testcase", classname="palace_conformance.baseline",
                             name=line.split(":", 1)[0])
        ET.SubElement(case, "failure", type="stale_baseline", message=line)
    root = ET.Element("testsuites")
    root.append(suite)
    _sanitize(root)  # a host's coloured stderr, a control character in a shard's message
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(run: RunResult, path: str | Path) -> None:
    to_xml(run).write(path, encoding="utf-8", xml_declaration=True)
