"""The console keeps one line per result: a multi-line failure (an HTML error page, a traceback)
is folded and cut, and every status label fits its column."""

from __future__ import annotations

import io

from palace_conformance.runner.reports.console import (
    LABEL_WIDTH,
    LABELS,
    LINE_LIMIT,
    PlainProgress,
    label,
    render_summary,
)
from palace_conformance.runner.results import (
    BaselineMark,
    CheckRecord,
    HostInfo,
    RunResult,
    ScenarioResult,
)

PAGE = "<html>\n<head><title>502 Bad Gateway</title></head>\n" + "<p>upstream</p>\n" * 30


def failing(sid: str, message: str, baseline: BaselineMark | None = None) -> ScenarioResult:
    check = CheckRecord(sid, "http", "/steps/2/expect/ok", "fail", message)
    return ScenarioResult(scenario=sid, transport="http", status="failed", checks=[check],
                          reason=f"/steps/2/expect/ok: {message}", baseline=baseline,
                          duration_ms=1200.0)


def test_a_multi_line_failure_is_one_folded_line_under_its_result() -> None:
    out = io.StringIO()
    progress = PlainProgress(out)
    progress.start(1)
    progress.done(failing("http.errors.page", f"http_error: {PAGE}"))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[1].startswith("    /steps/2/expect/ok: http_error: <html> <head><title>502")
    assert len(lines[1].strip()) <= LINE_LIMIT and lines[1].endswith("…")


def test_the_summary_lists_each_failing_check_on_one_line() -> None:
    out = io.StringIO()
    run = RunResult(host=HostInfo(impl="h"), results=[failing("http.errors.page", PAGE)])
    render_summary(run, out)
    [line] = [x for x in out.getvalue().splitlines() if x.startswith("  /steps/2/expect/ok")]
    assert "<title>502 Bad Gateway</title>" in line and len(line) <= LINE_LIMIT + 40


def test_every_label_fits_its_column() -> None:
    known = BaselineMark(expected="fail", reason="upstream bug", source="b.json")
    labels = [*LABELS.values(), label(failing("x.y.z", "no", baseline=known))]
    assert "FAIL (expected)" in labels
    assert all(len(text) <= LABEL_WIDTH for text in labels if "TESTABLE" not in text)
    out = io.StringIO()
    progress = PlainProgress(out)
    progress.start(2)
    progress.done(failing("x.y.z", "no", baseline=known))
    progress.done(ScenarioResult(scenario="x.y.w", transport="http", status="passed"))
    first, _, last = out.getvalue().splitlines()
    assert first.index(" http ") == last.index(" http "), (first, last)  # columns line up
