"""The bridge's own start-up words at the top of the reports (runner/verdict/startup.py), when
its palace tools are missing or it never reached a transport: with or without a profile."""

from __future__ import annotations

import io

from palace_conformance.runner.reports.console import render_summary
from palace_conformance.runner.reports.markdown import render_markdown
from palace_conformance.runner.results import (
    FAIL,
    NOT_TESTABLE,
    CheckRecord,
    RunResult,
    ScenarioResult,
    StepRecord,
)
from palace_conformance.runner.verdict.reach import UNREACHED_ID
from palace_conformance.runner.verdict.startup import startup_note

CATALOGUE = {"mempalace_search", "mempalace_status"}
REFUSAL = "Incompatible MemPalace 3.11.0: need 4.x"


def missing_tools(*registered: str) -> ScenarioResult:
    effects = [{"kind": "tool_registered", "name": n} for n in registered]
    effects.append({"kind": "notify", "level": "error", "message": REFUSAL})
    return ScenarioResult(
        scenario="tool.register.schemas-passed-through", transport="stdio", status="failed",
        steps=[StepRecord(index=0, key="load", op="load", ran=True, ok=True, effects=effects)],
        checks=[CheckRecord("tool.register.schemas-passed-through", "stdio",
                            "/steps/2/expect/tools/registered", FAIL,
                            "tools registered: missing ['mempalace_search'], unexpected []")])


def test_missing_tools_name_the_bridges_own_tools_and_words() -> None:
    result = missing_tools("palace_search", "mempalace_status")
    note = startup_note([result], [result], CATALOGUE, profiled=False)
    assert note == ("start-up: palace tools missing in 1 result(s); your bridge registers "
                    f"`palace_search`; it said: notify error: {REFUSAL}; next: map its tools "
                    "onto catalogue tools in a profile's tools.map (palace-conformance profile "
                    "init drafts it)")
    none = missing_tools()
    note = startup_note([none], [none], CATALOGUE, profiled=True)
    assert "it registered no palace tool; it said: notify error: " in note
    assert note.endswith("next: check that it can start mempalace-mcp from PATH, as the run "
                         "provides it")
    # said already by the observation's note: not said twice; nothing missing: nothing said
    assert startup_note([none], [none], CATALOGUE, profiled=False,
                        already=f"it said: notify error: {REFUSAL}") == ""
    passed = ScenarioResult(scenario="x", transport="stdio", status="passed")
    assert startup_note([passed], [passed], CATALOGUE, profiled=True) == ""


def test_an_unreached_transport_quotes_what_its_runs_said_and_reports_show_it() -> None:
    ran = missing_tools()
    ran.checks = []
    line = ScenarioResult(scenario=UNREACHED_ID, transport="stdio", status=NOT_TESTABLE,
                          reason="the bridge never reached the fake palace over stdio")
    note = startup_note([line], [ran], CATALOGUE, profiled=True)
    assert note.startswith("start-up: the bridge never reached the fake palace over stdio; "
                           f"it said: notify error: {REFUSAL}; next: ")
    assert "its profile's path_programs, files or knobs" in note
    run = RunResult(results=[line], start_note=note)
    assert RunResult.from_json(run.to_json()).start_note == note
    out = io.StringIO()
    render_summary(run, out)
    assert out.getvalue().splitlines()[1] == note  # at the top, under the header
    quiet = io.StringIO()
    render_summary(run, quiet, quiet=True)
    assert quiet.getvalue().splitlines()[0] == note
    assert f"**Start-up:** {note.removeprefix('start-up: ')}" in render_markdown(run)
