"""Pace (runner/execution/pace.py): a scenario's speed-up values a bridge has no knob for are
dropped, and the windows they could have shortened follow the bridge's own fixed value."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from palace_conformance.runner.execution import pace
from palace_conformance.runner.profile import Profile, load_profile
from palace_conformance.scenarios.loader import load_scenario, scenarios_dir
from palace_conformance.scenarios.model import Scenario

STALL = scenarios_dir() / "stdio" / "stdio.timeout.stall-kills-child.json"


def profile_with(tmp_path: Path, knobs: dict[str, Any]) -> Profile:
    path = tmp_path / "p.profile.json"
    path.write_text(json.dumps({"schema_version": 1, "name": "p", "entry": "pi-extension:x.ts",
                                "knobs": knobs}))
    return load_profile(path)


def timing(scenario: Scenario, pointer: list[Any]) -> Any:
    value: Any = scenario.raw
    for key in pointer:
        value = value[key]
    return value


def test_a_fixed_30s_timeout_bridge_gets_windows_derived_from_its_own_timeout(
        tmp_path: Path) -> None:
    stall = load_scenario(STALL)
    profile = profile_with(tmp_path, {"MEMPALACE_MCP_TIMEOUT_MS": {"fixed": 30000},
                                      "MEMPALACE_MCP_RESPAWN_BACKOFF_MS": {"absent": True}})
    paced = pace.pace(profile, stall)
    # both pace values dropped: the bridge cannot be given them, and is not asked to
    assert "MEMPALACE_MCP_TIMEOUT_MS" not in paced.scenario.env
    assert "MEMPALACE_MCP_RESPAWN_BACKOFF_MS" not in paced.scenario.env
    assert paced.scenario.env_pace == frozenset()
    # 30000 - 300 = 29700 more, with 25 % + 1 s declared slack; the absent backoff adds nothing
    widen = 29700 + 29700 // 4 + 1000
    assert widen == 38125
    assert paced.deadline_extra_ms == widen
    call = timing(paced.scenario, ["steps", 3, "expect", "elapsed_ms"])
    assert call == {"at_least": 300, "slack_ms": 2700 + widen}  # the 30 s timeout fits
    assert call["at_least"] + call["slack_ms"] > 30000
    gap = timing(paced.scenario, ["expect", "journal", 1, "ms"])
    assert gap == {"at_least": 250, "slack_ms": 1250 + widen}
    assert paced.scenario.steps[2].params["max_ms"] == 5000 + widen  # the settle
    assert paced.scenario.steps[4].params["ms"] == 1500 + widen  # the sleep before shutdown
    assert paced.sleep_extra_ms == widen
    # the original is untouched, and its notes say what changed
    assert stall.env["MEMPALACE_MCP_TIMEOUT_MS"] == "300"
    assert "MEMPALACE_MCP_TIMEOUT_MS=300 -> the bridge's fixed 30000, windows +38125 ms" \
        in paced.note
    assert "MEMPALACE_MCP_RESPAWN_BACKOFF_MS=50 dropped (the bridge has none)" in paced.note


def test_a_window_shorter_than_the_pace_value_keeps_its_bound(tmp_path: Path) -> None:
    """A call that must fail "at once", long before the 5 s timeout, stays "at once"."""
    crash = load_scenario(scenarios_dir() / "stdio" / "stdio.respawn.after-crash.json")
    profile = profile_with(tmp_path, {"MEMPALACE_MCP_TIMEOUT_MS": {"fixed": 30000}})
    paced = pace.pace(profile, crash)
    assert timing(paced.scenario, ["steps", 3, "expect", "elapsed_ms"]) == \
        {"at_least": 0, "slack_ms": 2000}
    assert paced.deadline_extra_ms > 30000  # the runner still waits for a hung call


def test_a_doubling_backoff_counts_every_attempt_of_the_budget(tmp_path: Path) -> None:
    raw = copy.deepcopy(dict(load_scenario(STALL).raw))
    raw["env"] = {"MEMPALACE_MCP_RESPAWN_BACKOFF_MS": "50", "MEMPALACE_MCP_MAX_RESPAWNS": "2"}
    raw["env_pace"] = ["MEMPALACE_MCP_RESPAWN_BACKOFF_MS"]
    scenario = Scenario.from_json(raw, STALL)
    profile = profile_with(tmp_path, {"MEMPALACE_MCP_RESPAWN_BACKOFF_MS": {"fixed": 1050}})
    [change] = pace.pace(profile, scenario).changes
    assert change.repeats == 3  # 1 s, then 2 s: three first delays
    assert change.widen_ms == 3 * 1000 + 750 + 1000


def test_a_quicker_bridge_lowers_lower_bounds_and_keeps_the_upper(tmp_path: Path) -> None:
    profile = profile_with(tmp_path, {"MEMPALACE_MCP_TIMEOUT_MS": {"fixed": 100}})
    paced = pace.pace(profile, load_scenario(STALL))
    assert timing(paced.scenario, ["steps", 3, "expect", "elapsed_ms"]) == \
        {"at_least": 100, "slack_ms": 2900}
    assert timing(paced.scenario, ["expect", "journal", 1, "ms"]) == \
        {"at_least": 50, "slack_ms": 1450}
    assert paced.deadline_extra_ms == 0


def test_essential_values_and_knobs_the_bridge_has_are_left_to_the_profile(
        tmp_path: Path) -> None:
    stall = load_scenario(STALL)
    renamed = profile_with(tmp_path, {"MEMPALACE_MCP_TIMEOUT_MS": {"env": "MY_TIMEOUT_MS"}})
    assert pace.pace(renamed, stall).scenario is stall  # it has the knob: given as usual
    zero = load_scenario(scenarios_dir() / "stdio" / "stdio.timeout.zero-disables-both.json")
    fixed = profile_with(tmp_path, {"MEMPALACE_MCP_TIMEOUT_MS": {"fixed": 30000}})
    paced = pace.pace(fixed, zero)
    assert paced.changes == () and paced.scenario is zero  # essential: translate_env says N/A
    assert fixed.translate_env(dict(zero.env))[1] == (
        "the scenario tests MEMPALACE_MCP_TIMEOUT_MS=0 (essential, not pace); this bridge's is "
        "fixed at 30000")


def test_a_budget_sets_a_scenario_the_bridges_pace_lengthens_aside_as_too_slow(
        tmp_path: Path) -> None:
    from palace_conformance.runner.execution.execute import RunOptions
    from palace_conformance.runner.execution.suite import SuiteOptions, run_suite
    from palace_conformance.runner.reports.console import _totals
    from palace_conformance.runner.results import HostInfo, RunResult, ScenarioResult

    profile = profile_with(tmp_path, {"MEMPALACE_MCP_TIMEOUT_MS": {"fixed": 30000}})
    stall = load_scenario(STALL)
    quick = load_scenario(scenarios_dir() / "life" / "life.handshake.initialize-first.json")
    ran: list[str] = []

    def runner(scenario: Scenario, transport: str, *_: Any) -> ScenarioResult:
        ran.append(scenario.id)
        return ScenarioResult(scenario.id, transport, "passed")

    def suite(budget: int | None) -> RunResult:
        ran.clear()
        return run_suite([stall, quick], SuiteOptions(
            run=RunOptions(host_argv=("host",), profile=profile, work_root=tmp_path), jobs=1,
            transports=("stdio",), max_scenario_seconds=budget),
            host=HostInfo(argv=["host"], capabilities=("stdio",)), runner=runner)

    run = suite(60)  # +38 s of windows, +38 s of sleep: 76 s
    assert run.too_slow == [("stdio.timeout.stall-kills-child", "stdio", 76.25)]
    assert ran == ["life.handshake.initialize-first"] and run.not_run == []
    assert not run.ok  # set aside is never a pass
    assert "1 not run: too slow (the bridge's own pace adds more than --max-scenario-seconds: " \
           "stdio.timeout.stall-kills-child [stdio] +76 s)" in _totals(run)
    assert RunResult.from_json(run.to_json()).too_slow == run.too_slow
    assert suite(90).ok and sorted(ran) == sorted([stall.id, quick.id])
    assert suite(None).ok
