"""GitHub's workflow-command and step-file rules, as palace_conformance.ci writes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from palace_conformance.ci.annotations import annotation_lines
from palace_conformance.ci.workflow_commands import (
    append_outputs,
    command,
    escape_data,
    escape_property,
    workspace_relative,
)
from palace_conformance.runner.results import CheckRecord, RunResult, ScenarioResult


def test_data_escapes_percent_cr_and_lf_and_properties_also_colon_and_comma() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = command("error", "line one\nline two", file="src/x,y.ts", title="s [stdio]: /steps/0")
    assert line == ("::error file=src/x%2Cy.ts,title=s [stdio]%3A /steps/0::"
                    "line one%0Aline two")
    assert "\n" not in line


def test_a_message_cannot_forge_a_second_command() -> None:
    line = command("error", "got: x\n::warning::forged", title="t")
    # one line: the runner reads a command only at a line's start, and this one has no newline
    assert line == "::error title=t::got: x%0A::warning::forged"


def test_blank_properties_are_left_out() -> None:
    assert command("notice", "m", file=None, title="") == "::notice::m"


def test_outputs_use_the_delimiter_form_for_multi_line_values(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("earlier=1\n")
    append_outputs(out, {"count": "3", "text": "a\nb"})
    lines = out.read_text().splitlines()
    assert lines[:2] == ["earlier=1", "count=3"]
    head, delimiter = lines[2].split("<<")
    assert head == "text" and lines[3:] == ["a", "b", delimiter]
    with pytest.raises(ValueError, match="not a step output name"):
        append_outputs(out, {"bad name": "x"})


def test_workspace_relative(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    inside = tmp_path / "src" / "ext.ts"
    assert workspace_relative(str(inside), str(tmp_path)) == "src/ext.ts"
    assert workspace_relative("/elsewhere/ext.ts", str(tmp_path)) is None
    assert workspace_relative(str(inside), None) is None


def _failed_run(message: str, path: str, *, checks: int = 1) -> RunResult:
    failures = [CheckRecord(scenario="stdio.x", transport="stdio", pointer=f"/steps/{i}/expect",
                            status="fail", message=message, covers=("STDIO-02",),
                            expected="a", got="b") for i in range(checks)]
    result = ScenarioResult(scenario="stdio.x", transport="stdio", status="failed",
                            covers=("STDIO-02",), path=path, checks=failures)
    testable = ScenarioResult(scenario="http.y", transport="http", status="not_testable",
                              reason="the host never answered hello")
    return RunResult(results=[result, testable])


def test_annotations_name_scenario_check_and_behaviours_and_point_into_the_workspace(
        tmp_path: Path) -> None:
    scenario = tmp_path / "scenarios" / "x.json"
    run = _failed_run("expected exit, got hang", str(scenario))
    lines = annotation_lines(run, workspace=str(tmp_path))
    assert lines[0] == ("::error file=scenarios/x.json,title=stdio.x [stdio] /steps/0/expect "
                        "(STDIO-02)::expected exit, got hang%0Aexpected: a%0Agot: b")
    assert lines[1] == ("::error title=http.y [http] not testable::not testable: the host never "
                        "answered hello")
    # outside the workspace: the bridge's file stands in, when it is inside
    lines = annotation_lines(run, workspace=str(tmp_path / "ws"), fallback_files=[
        "/nowhere/a.ts", str(tmp_path / "ws" / "ext.ts")])
    assert lines[0].startswith("::error file=ext.ts,")


def test_a_stale_baseline_entry_points_at_the_baseline(tmp_path: Path) -> None:
    run = RunResult(results=[], stale_baseline=["stdio.x [stdio]: passes now; remove the entry"])
    (tmp_path / "ci").mkdir()
    lines = annotation_lines(run, workspace=str(tmp_path), baseline=str(tmp_path / "ci" / "b.json"))
    assert lines == ["::error file=ci/b.json,title=stale baseline entry::stdio.x [stdio]: "
                     "passes now; remove the entry"]


def test_annotations_are_redacted_and_capped(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPALACE_REMOTE_TOKEN", "s3cret-token-value")
    run = _failed_run("sent Bearer s3cret-token-value", "", checks=12)
    lines = annotation_lines(run, workspace=str(tmp_path))
    assert not any("s3cret-token-value" in line for line in lines)
    assert "<redacted-secret-1>" in lines[0]
    assert len(lines) == 11 and lines[-1].startswith("::notice::3 more failing check(s)")
