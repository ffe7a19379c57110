"""The Markdown summary: verdict, totals, failure table, baseline state, N/A list, timing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from palace_conformance.runner.reports import markdown
from palace_conformance.runner.reports.markdown import render_markdown
from palace_conformance.runner.results import (
    BaselineMark,
    CheckRecord,
    HostInfo,
    RunResult,
    ScenarioResult,
)

from .support import GOOD, cli, write_scenario


def failed(sid: str, transport: str, *checks: CheckRecord, covers: tuple[str, ...] = ("X-01",),
           baseline: BaselineMark | None = None, ms: float = 1000.0) -> ScenarioResult:
    return ScenarioResult(scenario=sid, transport=transport, status="failed", covers=covers,
                          checks=list(checks), baseline=baseline, duration_ms=ms,
                          reason=f"{checks[0].pointer}: {checks[0].message}" if checks else "")


def check(sid: str, transport: str, pointer: str, message: str, **kw: object) -> CheckRecord:
    return CheckRecord(sid, transport, pointer, "fail", message, **kw)  # type: ignore[arg-type]


def sample_run() -> RunResult:
    kind = check("tool.errors.kept", "stdio", "/steps/3/expect/error/kind",
                 "expected error kind 'tool_error', got 'exception'", step="unknown-param",
                 expected="tool_error", got="exception")
    count = check("tool.errors.kept", "stdio", "/expect/journal/0", "found 3 | 2 records\nhere",
                  expected={"check": "count", "equals": 2})
    known = check("stdio.respawn.cap", "http", "/setup", "Not testable: fake did not start")
    return RunResult(
        host=HostInfo(impl="my-host", bridge="my-bridge 1.2"), started_at="2026-03-15T10:00:00",
        duration_ms=12345.0,
        results=[
            failed("tool.errors.kept", "stdio", kind, count, covers=("TOOL-03", "TOOL-04"),
                   ms=4200),
            failed("stdio.respawn.cap", "http", known, baseline=BaselineMark(
                "fail", "upstream bug (#12)", "b.json"), ms=800),
            ScenarioResult(scenario="wake.fresh.inject", transport="stdio",
                           status="not_applicable",
                           reason="Not applicable: the host does not declare wakeup"),
            ScenarioResult(scenario="life.ok.fine", transport="stdio", status="passed",
                           duration_ms=9000),
            ScenarioResult(scenario="life.ok.fine", transport="parity", status="passed"),
        ],
        stale_baseline=["life.ok.fine[stdio]: passes now; remove it from the baseline",
                        "life.gone.x[*]: unknown scenario id (no such scenario; remove the "
                        "entry or fix the id)",
                        "tool.old.y[http]: expired on 2026-01-01; the failure counts again "
                        "(fix it, or renew 'expires' with a reason)"])


def table_rows(text: str, header: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_failing_run_summary() -> None:
    text = render_markdown(sample_run(), bundles="report/bundles", baseline="base/b.json")
    assert text.startswith("## ❌ palace-conformance: 1 failing result, 3 baseline problems\n")
    assert "**Bridge:** my-host · my-bridge 1.2 · started 2026-03-15T10:00:00 · 12.3 s" in text
    totals = table_rows(text, "| scenarios | results | passed | failed | known failures | not "
                              "testable | not applicable | baseline problems |")
    # the statuses add up to the results: "failed" leaves out the known failure
    assert cells(totals[0]) == ["4", "5", "2", "1", "1", "0", "1", "3"]

    rows = table_rows(text, "| Scenario | Transport | Check | Expected | Got | Behaviours |")
    assert len(rows) == 2  # the known failure is not in the table
    assert cells(rows[0]) == ["`tool.errors.kept`", "stdio",
                              "`/steps/3/expect/error/kind` (step `unknown-param`)",
                              '`"tool_error"`', '`"exception"`', "TOOL-03, TOOL-04"]
    # no "got" value: the message says what was seen; pipes escaped, newlines folded
    assert cells(rows[1])[3:5] == ['`{"check": "count", "equals": 2}`',
                                   "found 3 \\| 2 records here"]
    assert all(len(cells(r)) == 6 for r in rows)
    assert ("`palace-conformance replay report/bundles/tool.errors.kept--stdio` "
            "(add `--bridge reference` to compare)") in text


def test_baseline_section_groups_known_stale_unknown_and_expired() -> None:
    text = render_markdown(sample_run(), baseline="b.json")
    section = text.split("### Baseline (`b.json`)", 1)[1].split("<details>", 1)[0]
    assert "**Known failures (1)**:" in section
    assert ("- `stdio.respawn.cap` [http]: `/setup`: Not testable: fake did not start "
            "(baseline: upstream bug (#12))") in section
    assert "**Stale entries (they pass now: remove them) (1)**:" in section
    assert "- life.ok.fine[stdio]: passes now" in section
    assert "**Entries for unknown scenario ids (1)**:" in section
    assert "**Expired entries (their failures count again) (1)**:" in section
    assert "- tool.old.y[http]: expired on 2026-01-01" in section


def test_not_applicable_and_timing_are_folded() -> None:
    text = render_markdown(sample_run())
    assert "<details><summary>Not applicable (1)</summary>" in text
    assert "| `wake.fresh.inject` | stdio | the host does not declare wakeup |" in text
    timing = text.split("<summary>Timing: ", 1)[1]
    assert timing.startswith("3 run(s), 14.0 s of runs in 12.3 s</summary>")
    slowest = table_rows(text, "| Scenario | Transport | Seconds |")
    assert [cells(r)[0] for r in slowest] == ["`life.ok.fine`", "`tool.errors.kept`",
                                              "`stdio.respawn.cap`"]


def test_green_run_is_one_short_block() -> None:
    run = RunResult(host=HostInfo(impl="h"), duration_ms=1000.0, results=[
        ScenarioResult(scenario="life.ok.fine", transport="stdio", status="passed")])
    text = render_markdown(run)
    assert text.startswith("## ✅ palace-conformance: passed\n")
    assert "### Failures" not in text and "### Baseline" not in text


def test_long_failure_lists_are_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(markdown, "MAX_ROWS", 3)
    checks = [check("life.x.y", "stdio", f"/expect/journal/{i}", "no") for i in range(5)]
    text = render_markdown(RunResult(results=[failed("life.x.y", "stdio", *checks)]))
    rows = table_rows(text, "| Scenario | Transport | Check | Expected | Got | Behaviours |")
    assert len(rows) == 3
    assert "…and 2 more failing check(s): see results.json." in text


def test_long_values_are_clipped_and_backticks_do_not_break_code_spans() -> None:
    long = check("life.x.y", "stdio", "/steps/0/expect/result", "m", expected="a" * 300,
                 got="x`y")
    text = render_markdown(RunResult(results=[failed("life.x.y", "stdio", long)]))
    row = cells(table_rows(text, "| Scenario | Transport | Check | Expected | Got | "
                                 "Behaviours |")[0])
    assert row[3].endswith("…`") and len(row[3]) <= markdown.CELL_LIMIT + 2
    assert row[4] == '"x`y"'


def test_a_scalar_got_keeps_what_the_message_says_about_it() -> None:
    """``false`` alone hides the error's kind and text; ``1234.5`` alone hides its unit."""
    lost = check("http.s.x", "http", "/steps/2/expect/ok",
                 "expected ok true, got false (session_lost: MCP session expired)",
                 expected=True, got=False)
    slow = check("http.s.x", "http", "/steps/3/expect/elapsed_ms",
                 "took 1235 ms; expected at least 2000 ms", expected={"at_least": 2000},
                 got=1234.5)
    text = render_markdown(RunResult(results=[failed("http.s.x", "http", lost, slow)]))
    rows = [cells(r) for r in table_rows(text, "| Scenario | Transport | Check | Expected "
                                               "| Got | Behaviours |")]
    assert rows[0][3:5] == ["`true`", "expected ok true, got false (session_lost: MCP session "
                                      "expired)"]
    assert rows[1][3:5] == ['`{"at_least": 2000}`', "took 1235 ms; expected at least 2000 ms"]


def test_run_writes_summary_md_and_markdown_file(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    write_scenario(tmp_path / "s", "life.md.fails", {"ok": False})
    code, _, err = cli(capsys, "run", str(tmp_path / "s"), "--bridge", GOOD, "--transport",
                       "stdio", "--report-dir", str(tmp_path / "report"), "--markdown",
                       str(tmp_path / "pr.md"), "--level", "seed")  # it covers LIFE-01, a seed ID
    assert code == 1, err
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert summary == (tmp_path / "pr.md").read_text()
    assert "| `life.md.fails` | stdio | `/steps/0/expect/ok` (step `0`) | `false` " \
           "| expected ok false, got true | LIFE-01 |" in summary
    assert "palace-conformance replay " in summary and "life.md.fails--stdio" in summary


def test_markdown_to_a_missing_directory_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    code, _, err = cli(capsys, "run", "--markdown", "/nonexistent/dir/s.md")
    assert code == 2
    assert "--markdown /nonexistent/dir/s.md: directory /nonexistent/dir does not exist" in err
