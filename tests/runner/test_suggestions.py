"""Messages that lead: did-you-mean for bridge names, bridge prefixes and flags (under the
subcommand that did not know the flag), and *not testable* results with their reason in the
console's final section, summary.md's failures table and JUnit."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest

from palace_conformance import suggest
from palace_conformance.cli import main
from palace_conformance.runner.reports.console import render_summary
from palace_conformance.runner.reports.junit import to_xml
from palace_conformance.runner.reports.markdown import render_markdown
from palace_conformance.runner.results import CheckRecord, RunResult, ScenarioResult


def error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stopped:
        main(list(argv))
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize(("typed", "meant"), [
    ("refrence", "reference"), ("pi-extensoin:x.ts", "pi-extension:x.ts"),
    ("pi-mcp-adaptr", "pi-mcp-adapter"), ("pi-extention:src/a b.ts", "pi-extension:src/a b.ts"),
])
def test_a_mistyped_bridge_is_named_with_its_fix(capsys: pytest.CaptureFixture[str],
                                                 typed: str, meant: str) -> None:
    err = error_line(capsys, "run", "--bridge", typed, "--select", "wake.palace-down.silent")
    assert err == (f"palace-conformance run: --bridge {typed}: no such bridge; did you mean "
                   f"--bridge {meant}?")


def test_an_unknown_program_gets_no_made_up_suggestion() -> None:
    assert suggest.bridge("my-host") is None
    assert suggest.bridge("node host.mjs") is None
    assert suggest.bridge("reference") is None


def test_a_mistyped_flag_keeps_its_subcommand_and_names_the_nearest_flag(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert error_line(capsys, "run", "--sellect", "wake.*") == (
        "palace-conformance run: unrecognized arguments: --sellect (did you mean --select?) "
        "(see palace-conformance run --help)")
    assert error_line(capsys, "hosts", "status", "--jsn") == (
        "palace-conformance hosts status: unrecognized arguments: --jsn (did you mean --json?) "
        "(see palace-conformance hosts status --help)")
    err = error_line(capsys, "run", "--zzzzzz")
    assert err.startswith("palace-conformance run: unrecognized arguments: --zzzzzz (see ")


def _run_with_a_not_testable() -> RunResult:
    blocked = ScenarioResult(scenario="http.a", transport="http", status="not_testable",
                             covers=("HTTP-01",), reason="the host never answered hello",
                             path="/x/http.a.json")
    failed = ScenarioResult(scenario="stdio.b", transport="stdio", status="failed",
                            covers=("STDIO-02",), checks=[CheckRecord(
                                scenario="stdio.b", transport="stdio", pointer="/steps/0",
                                status="fail", message="timed out")])
    return RunResult(results=[blocked, failed])


def test_not_testable_reasons_reach_the_console_summary_and_junit() -> None:
    run = _run_with_a_not_testable()
    out = io.StringIO()
    render_summary(run, out, quiet=True)
    lines = out.getvalue().splitlines()
    at = lines.index("http.a [http] covers HTTP-01:")
    assert lines[at + 1] == "  not testable: the host never answered hello"
    markdown = render_markdown(run)
    assert ("| `http.a` | http | not testable | - | the host never answered hello | HTTP-01 |"
            in markdown)
    assert "| `stdio.b` | stdio | `/steps/0`" in markdown
    case = next(c for c in to_xml(run).iter("testcase") if c.get("name") == "http.a[http]")
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == "the host never answered hello"
    assert failure.get("type") == "not_testable"
    assert ET.tostring(case)  # serialisable
