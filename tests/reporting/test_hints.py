"""A capability declared but never seen at work gets one hint line, not silence."""

from __future__ import annotations

from pathlib import Path

from palace_conformance.runner.reports.hints import capability_hints
from palace_conformance.runner.results import HostInfo, RunResult, ScenarioResult, StepRecord
from palace_conformance.scenarios.model import Scenario


def scenario(sid: str, requires: list[str]) -> Scenario:
    return Scenario.from_json({"schema_version": 1, "id": sid, "title": sid, "covers": ["DIARY-01"],
                               "transports": ["stdio"], "requires": requires,
                               "steps": [{"op": "load"}]}, Path(f"{sid}.json"))


def result(sid: str, effects: list[dict], status: str = "failed") -> ScenarioResult:
    return ScenarioResult(sid, "stdio", status,  # type: ignore[arg-type]
                          steps=[StepRecord(0, "0", "load", ran=True, effects=effects)])


def test_a_capability_never_at_work_in_the_runs_that_need_it_gets_a_hint() -> None:
    scenarios = [scenario("diary.a", ["diary_command"]), scenario("diary.b", ["diary_command"]),
                 scenario("wake.a", ["wakeup"])]
    run = RunResult(host=HostInfo(capabilities=("stdio", "diary_command", "wakeup")), results=[
        result("diary.a", []), result("diary.b", [{"kind": "stderr", "line": "x"}]),
        result("wake.a", [{"kind": "injected", "custom_type": "t", "content": "c"}], "passed")])
    assert capability_hints(run, scenarios) == [
        "hint: declared diary_command, but no command was registered in the 2 run(s) that need "
        "it: declare fewer capabilities (a profile's claims.capabilities)?"]


def test_no_hint_when_the_capability_was_seen_or_never_needed() -> None:
    scenarios = [scenario("diary.a", ["diary_command"])]
    seen = RunResult(host=HostInfo(capabilities=("diary_command", "feeding")), results=[
        result("diary.a", [{"kind": "command_registered", "name": "d"}])])
    assert capability_hints(seen, scenarios) == []
    skipped = RunResult(host=HostInfo(capabilities=("diary_command",)), results=[
        result("diary.a", [], "not_applicable")])
    assert capability_hints(skipped, scenarios) == []
    quiet = RunResult(host=HostInfo(capabilities=("diary_command",)), results=[
        result("diary.a", [], "passed")])  # nothing failed: nothing to explain
    assert capability_hints(quiet, scenarios) == []
