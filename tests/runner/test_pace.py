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


UNAVAILABLE = scenarios_dir() / "tool" / "tool.unavailable.host-keeps-working.json"


def test_a_paced_budget_moves_its_counts_by_the_bridges_own_budget(tmp_path: Path) -> None:
    """The host keeps working whatever the budget: a bridge fixed at 2 respawns (scenario: 1)
    is expected to start three children, and each extra attempt's backoff (its own 500 ms,
    doubled: 1000) plus a start widens the windows that could hold it, not the ones shorter
    than the scenario's 50 ms backoff."""
    scenario = load_scenario(UNAVAILABLE)
    profile = profile_with(tmp_path, {"MEMPALACE_MCP_MAX_RESPAWNS": {"fixed": 2},
                                      "MEMPALACE_MCP_RESPAWN_BACKOFF_MS": {"fixed": 500}})
    paced = pace.pace(profile, scenario)
    count = next(c for c in paced.changes if c.name == "MEMPALACE_MCP_MAX_RESPAWNS")
    assert count.count_delta == 1
    assert count.widen_ms == (1000 + 1000) * 5 // 4 + 1000
    assert timing(paced.scenario, ["expect", "journal", 0]) == {
        "check": "count", "match": {"kind": "process_start", "transport": "stdio"},
        "equals": 3, "transport": "stdio"}
    assert "budget_counts" not in paced.scenario.raw
    assert "MEMPALACE_MCP_MAX_RESPAWNS" not in paced.scenario.env
    assert "MEMPALACE_MCP_MAX_RESPAWNS=1 -> the bridge's budget of 2, its counts +1, windows " \
        "+3500 ms" in paced.note
    settle = paced.scenario.steps[2].params["max_ms"]
    assert settle >= 15000 + count.widen_ms
    # the original keeps its count
    assert timing(scenario, ["expect", "journal", 0, "equals"]) == 2


def test_an_absent_budget_is_no_respawn_and_a_budget_it_has_is_given(tmp_path: Path) -> None:
    scenario = load_scenario(UNAVAILABLE)
    absent = pace.pace(profile_with(tmp_path, {"MEMPALACE_MCP_MAX_RESPAWNS": {"absent": True}}),
                       scenario)
    assert timing(absent.scenario, ["expect", "journal", 0, "equals"]) == 1  # one start only
    assert absent.deadline_extra_ms == 0  # fewer attempts: nothing widens, nothing tightens
    renamed = profile_with(tmp_path, {"MEMPALACE_MCP_MAX_RESPAWNS": {"env": "MY_RESTARTS"}})
    assert pace.pace(renamed, scenario).scenario is scenario


def test_a_budget_that_is_the_behaviour_stays_essential(tmp_path: Path) -> None:
    """The cap itself (three starts, then the latch) cannot be judged at another budget."""
    cap = load_scenario(scenarios_dir() / "stdio" / "stdio.respawn.cap-with-backoff.json")
    profile = profile_with(tmp_path, {"MEMPALACE_MCP_MAX_RESPAWNS": {"fixed": 3}})
    assert pace.pace(profile, cap).changes == ()
    assert profile.translate_env(dict(cap.env))[1] == (
        "the scenario tests MEMPALACE_MCP_MAX_RESPAWNS=2 (essential, not pace); this bridge's "
        "is fixed at 3")


def test_the_loader_refuses_a_budget_count_that_points_at_nothing(tmp_path: Path) -> None:
    from palace_conformance.scenarios.loader import ScenarioError

    raw = json.loads(UNAVAILABLE.read_text())
    raw["budget_counts"] = {"MEMPALACE_MCP_MAX_RESPAWNS": ["/expect/journal/9/equals"]}
    path = tmp_path / "tool.unavailable.host-keeps-working.json"
    path.write_text(json.dumps(raw))
    try:
        load_scenario(path)
    except ScenarioError as exc:
        assert "/budget_counts/MEMPALACE_MCP_MAX_RESPAWNS/0" in str(exc)
        assert "/expect/journal/9/equals is no integer of this file" in str(exc)
    else:
        raise AssertionError("a budget count pointing at nothing was accepted")


ONE_TIMEOUT = {"MEMPALACE_MCP_INIT_TIMEOUT_MS": {"same_as": "MEMPALACE_MCP_TIMEOUT_MS"}}


def test_a_short_pace_timeout_that_also_bounds_the_start_up_is_raised(tmp_path: Path) -> None:
    """One timeout for everything (``same_as``): the stall scenario's 300 ms request timeout
    would bound the bridge's handshake too, and a loaded machine starts the palace slower than
    that; it is given 5 s instead, and the windows follow."""
    profile = profile_with(tmp_path, ONE_TIMEOUT)
    paced = pace.pace(profile, load_scenario(STALL))
    assert paced.scenario.env["MEMPALACE_MCP_TIMEOUT_MS"] == "5000"
    widen = (5000 - 300) * 5 // 4 + 1000
    assert paced.deadline_extra_ms == widen
    assert timing(paced.scenario, ["steps", 3, "expect", "elapsed_ms"]) == {
        "at_least": 300, "slack_ms": 2700 + widen}
    assert "MEMPALACE_MCP_TIMEOUT_MS=300 raised to 5000 (its start-up follows it, same_as)" \
        in paced.note
    assert profile.translate_env(dict(paced.scenario.env))[1] is None
    # without same_as the bridge is believed to have its own start-up budget: nothing raised
    assert pace.pace(profile_with(tmp_path, {}), load_scenario(STALL)).changes == ()


def test_a_follower_is_dropped_and_an_essential_one_that_differs_is_not_applicable(
        tmp_path: Path) -> None:
    profile = profile_with(tmp_path, ONE_TIMEOUT)
    cap = load_scenario(scenarios_dir() / "stdio" / "stdio.respawn.cap-with-backoff.json")
    paced = pace.pace(profile, cap)  # INIT 5000 (pace) follows TIMEOUT 5000: dropped, no wider
    assert "MEMPALACE_MCP_INIT_TIMEOUT_MS" not in paced.scenario.env
    assert paced.deadline_extra_ms == 0
    stall = load_scenario(scenarios_dir() / "stdio" / "stdio.init.stall-then-tolerant-respawn.json")
    why = profile.translate_env(dict(pace.pace(profile, stall).scenario.env),
                                own=set(stall.env))[1]
    assert why is not None and "follows MEMPALACE_MCP_TIMEOUT_MS (same_as)" in why
    one = load_scenario(scenarios_dir() / "stdio" /
                        "stdio.timeout.one-millisecond-is-a-timeout.json")
    why = profile.translate_env(dict(pace.pace(profile, one).scenario.env), own=set(one.env))[1]
    assert why == ("the scenario tests MEMPALACE_MCP_TIMEOUT_MS=1 (essential, not pace), and "
                   "this bridge's MEMPALACE_MCP_INIT_TIMEOUT_MS follows it (same_as): a start-up "
                   "bounded by 1 ms cannot be judged")


def test_a_knob_cannot_follow_itself(tmp_path: Path) -> None:
    from palace_conformance.runner.profile import ProfileError

    try:
        profile_with(tmp_path,
                     {"MEMPALACE_MCP_TIMEOUT_MS": {"same_as": "MEMPALACE_MCP_TIMEOUT_MS"}})
    except ProfileError as exc:
        assert "/knobs/MEMPALACE_MCP_TIMEOUT_MS/same_as: a knob cannot follow itself" in str(exc)
    else:
        raise AssertionError("a knob following itself was accepted")
