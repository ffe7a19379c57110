"""``run --server real``: the real server's measured start widens only the bounds that include
a palace start (a step or journal gap during which a child started, the bridge's stdio init
budget); the fake's allowance is 0, so its bounds never move."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from palace_conformance.real.start_time import StartFigure
from palace_conformance.real.world import INIT_BUDGET, RealServerSetup, widened_init_budget
from palace_conformance.runner.execution.world import FakePalace
from palace_conformance.runner.reports.console import _totals as summary_line
from palace_conformance.runner.results import RunResult, StepRecord
from palace_conformance.runner.verdict.judge import Observation, judge
from palace_conformance.scenarios.checks import evaluate
from palace_conformance.scenarios.model import Check, Scenario

SCENARIO = Scenario.from_json({
    "schema_version": 1, "id": "stdio.respawn.timed", "title": "t", "covers": [],
    "transports": ["stdio"],
    "steps": [{"op": "load"},
              {"op": "call_tool", "name": "mempalace_status", "args": {},
               "expect": {"elapsed_ms": {"at_least": 0, "slack_ms": 2500}}}]},
    Path("x.json"))


def _failed(journal: list[dict[str, Any]], start_ms: int) -> list[str]:
    steps = [StepRecord(index=0, key="0", op="load", ran=True, ok=True, elapsed_ms=10.0),
             StepRecord(index=1, key="1", op="call_tool", ran=True, ok=True, elapsed_ms=3000.0,
                        journal_start=0, journal_end=len(journal))]
    observation = Observation(scenario=SCENARIO, transport="stdio", steps=steps,
                              journal=journal, palace_start_ms=start_ms)
    return [r.pointer for r in judge(observation) if r.status == "fail"]


def test_a_step_during_which_a_child_started_gets_the_measured_start() -> None:
    respawned = [{"kind": "process_start", "t": 1.0}, {"kind": "recv", "t": 1.1,
                                                        "method": "tools/call"}]
    assert "/steps/1/expect/elapsed_ms" in _failed(respawned, 0)  # the fake: no allowance
    assert "/steps/1/expect/elapsed_ms" not in _failed(respawned, 600)
    assert "/steps/1/expect/elapsed_ms" in _failed(respawned, 400)  # 3000 > 2500 + 400
    same_child = [{"kind": "recv", "t": 1.1, "method": "tools/call"}]
    assert "/steps/1/expect/elapsed_ms" in _failed(same_child, 5000)  # no start in the step
    assert FakePalace().palace_start_ms == 0


def test_a_gap_across_a_start_gets_it_and_one_to_a_childs_creation_does_not() -> None:
    killed = Check.from_json({"check": "gap", "from": {"kind": "recv", "method": "initialize"},
                              "to": {"kind": "signal"}, "ms": {"at_least": 0, "slack_ms": 1000}})
    records = [{"kind": "recv", "method": "initialize", "t": 1.0}, {"kind": "signal", "t": 2.5}]
    assert not evaluate(killed, records).passed
    widened = evaluate(killed, records, start_allowance_ms=600)
    assert widened.passed and "+ 600 the real server's measured start" in widened.detail
    backoff = Check.from_json({"check": "gap", "from": {"kind": "process_exit"},
                               "to": {"kind": "process_start"},
                               "ms": {"at_least": 0, "slack_ms": 1000}})
    respawn = [{"kind": "process_exit", "t": 1.0},
               {"kind": "process_start", "t": 3.0, "created_t": 2.5}]
    assert not evaluate(backoff, respawn, start_allowance_ms=5000).passed  # measured to creation


def _scenario(env: dict[str, str], faults: list[dict[str, Any]] | None = None) -> Scenario:
    return Scenario.from_json({
        "schema_version": 1, "id": "stdio.init.budgeted", "title": "t", "covers": [],
        "transports": ["stdio", "http"], "env": env, "faults": faults or [],
        "steps": [{"op": "load"}]}, Path("x.json"))


def test_the_init_budget_a_scenario_sets_gets_the_start_on_stdio_only() -> None:
    scenario = _scenario({INIT_BUDGET: "1500"})
    env = {INIT_BUDGET: "1500"}
    assert widened_init_budget(env, scenario, "stdio", 1200) == "2700"
    assert widened_init_budget(env, scenario, "http", 1200) is None
    assert widened_init_budget(env, scenario, "stdio", 0) is None  # the fake
    for value in ("0", "2147483647", "1.5", "abc"):  # no budget, the largest, malformed
        odd = _scenario({INIT_BUDGET: value})
        assert widened_init_budget({INIT_BUDGET: value}, odd, "stdio", 1200) is None
    assert widened_init_budget({INIT_BUDGET: "1500"}, _scenario({}), "stdio", 1200) is None
    delayed = _scenario({INIT_BUDGET: "1500"}, [
        {"id": "slow", "on": {"method": "initialize", "nth": 1}, "action": "delay", "ms": 2000}])
    assert widened_init_budget(env, delayed, "stdio", 1200) is None  # timed against it


def test_the_figure_is_kept_in_the_results_and_shown_in_the_summary() -> None:
    figure = StartFigure(ms=1431, samples=(1611, 1431, 1064), load="16.83",
                         how="through the pre-started server")
    assert "1,431 ms (median of 1,611, 1,431, 1,064 ms; load average 16.83)" in figure.describe()
    run = RunResult(server="real", server_start=figure.describe())
    assert RunResult.from_json(run.to_json()).server_start == figure.describe()
    assert RunResult.from_json({}).server_start == ""
    assert "bounds that include a palace start get the real server's start" in summary_line(run)
    assert "palace start" not in summary_line(RunResult())
    assert RealServerSetup.__dataclass_fields__["palace_start"].default is None


def test_a_start_the_relay_saw_take_longer_than_the_measured_figure_counts_instead() -> None:
    respawned = [{"kind": "process_start", "t": 1.0},
                 {"kind": "recv", "t": 1.1, "method": "initialize"},
                 {"kind": "server_start", "t": 1.9, "ms": 800}]
    assert "/steps/1/expect/elapsed_ms" not in _failed(respawned, 400)  # 3000 <= 2500 + 800
    quicker = [*respawned[:2], {"kind": "server_start", "t": 1.9, "ms": 300}]
    assert "/steps/1/expect/elapsed_ms" in _failed(quicker, 400)  # the larger: 400 < 500
    assert "/steps/1/expect/elapsed_ms" not in _failed(quicker, 600)
    assert "/steps/1/expect/elapsed_ms" in _failed(respawned, 0)  # the fake: never
    unstarted = [{"kind": "server_start", "t": 1.9, "ms": 9000}]  # no start in the window
    assert "/steps/1/expect/elapsed_ms" in _failed(unstarted, 400)


def test_the_figure_follows_the_starts_the_relays_saw_never_below_the_first_measure() -> None:
    from palace_conformance.real.start_time import StartTracker

    first = StartFigure(ms=1000, samples=(900, 1000, 1100), load="15", how="cold")
    tracker = StartTracker(first)
    assert tracker.ms == 1000 and tracker.describe() == first.describe()
    tracker.observe([400, 500])  # a quieter machine: the first measure stays the floor
    assert tracker.ms == 1000
    tracker.observe([2500, 2600, 2700])  # the load rose: the median of the latest
    assert tracker.ms == 2500 and "now 2,500 ms (median of the last 5 starts" in \
        tracker.describe()
    tracker.observe([3000] * StartTracker.RECENT)  # only the latest count
    assert tracker.ms == 3000
    budget = widened_init_budget({INIT_BUDGET: "1500"}, _scenario({INIT_BUDGET: "1500"}),
                                 "stdio", tracker.ms)
    assert budget == "4500"
