"""``run --slack-factor F``: every declared slack widened by F, lower bounds fixed, F recorded."""

from __future__ import annotations

import pytest

from palace_conformance.cli import main
from palace_conformance.commands.usage import RunUsageError, slack_factor
from palace_conformance.runner.reports.merge import MergeError, merge_runs
from palace_conformance.runner.results import RunResult
from palace_conformance.scenarios.checks import evaluate
from palace_conformance.scenarios.model import Check, Timing


def test_the_factor_widens_the_slack_and_never_the_lower_bound() -> None:
    timing = Timing(at_least=1000, slack_ms=500)
    assert timing.admits(1500) and not timing.admits(1600)
    assert timing.admits(1600, 1.5) and timing.admits(1750, 1.5) and not timing.admits(1751, 1.5)
    assert not timing.admits(999, 3.0)
    assert timing.describe(2.0) == "1000..2000 ms (1000 + 500 slack x 2)"
    assert Timing(at_least=10).upper(4.0) is None


def test_a_gap_check_is_judged_with_the_factor() -> None:
    check = Check.from_json({"check": "gap", "from": {"kind": "a"}, "to": {"kind": "b"},
                             "ms": {"at_least": 100, "slack_ms": 100}})
    records = [{"kind": "a", "t": 1.0}, {"kind": "b", "t": 1.25}]
    assert not evaluate(check, records).passed
    widened = evaluate(check, records, slack_factor=2.0)
    assert widened.passed and "slack x 2" in widened.detail


@pytest.mark.parametrize("text", ["0.5", "0", "-1", "abc", "nan", "inf", ""])
def test_a_factor_below_one_or_not_a_number_is_refused(text: str) -> None:
    with pytest.raises(RunUsageError, match="give a number >= 1"):
        slack_factor("--slack-factor", text)


def test_the_command_refuses_a_bad_factor_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["run", "--slack-factor", "0.9", "--list"])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--slack-factor 0.9" in err


def test_the_factor_is_kept_in_the_results_and_merge_refuses_a_mix() -> None:
    run = RunResult(slack_factor=2.5, bridge="reference", shard="1/2")
    assert RunResult.from_json(run.to_json()).slack_factor == 2.5
    assert RunResult.from_json({}).slack_factor == 1.0
    other = RunResult(slack_factor=1.0, bridge="reference", shard="2/2")
    with pytest.raises(MergeError, match="--slack-factor"):
        merge_runs([("a.json", run), ("b.json", other)])
    same = RunResult(slack_factor=2.5, bridge="reference", shard="2/2")
    assert merge_runs([("a.json", run), ("b.json", same)]).slack_factor == 2.5


def test_a_servers_stop_allowance_widens_only_the_upper_bound_of_a_stdio_stop() -> None:
    from pathlib import Path

    from palace_conformance.real.world import RealServerSetup
    from palace_conformance.runner.execution.world import FakePalace
    from palace_conformance.runner.results import StepRecord
    from palace_conformance.runner.verdict.judge import Observation, judge
    from palace_conformance.scenarios.model import Scenario

    timing = Timing(at_least=1000, slack_ms=4000)
    assert timing.admits(8500, 1.0, 3500) and not timing.admits(8501, 1.0, 3500)
    assert not timing.admits(999, 1.0, 3500)
    assert timing.describe(1.0, 3500) == ("1000..8500 ms (1000 + 4000 slack + 3500 the "
                                          "server's stop)")
    assert FakePalace().stop_allowance_ms == 0
    assert RealServerSetup.__dataclass_fields__["stop_allowance_ms"].default > 0
    scenario = Scenario.from_json({
        "schema_version": 1, "id": "life.stop.timed", "title": "t", "covers": [],
        "transports": ["stdio", "http"],
        "steps": [{"op": "load"}, {"op": "call_tool", "name": "mempalace_status", "args": {},
                                   "expect": {"elapsed_ms": {"at_least": 0, "slack_ms": 1000}}},
                  {"op": "shutdown", "expect": {"elapsed_ms": {"at_least": 0,
                                                               "slack_ms": 1000}}}]},
        Path("x.json"))

    def failed(transport: str, allowance: int) -> list[str]:
        steps = [StepRecord(index=n, key=str(n), op=s.op, ran=True, ok=True, elapsed_ms=2500.0)
                 for n, s in enumerate(scenario.steps_for(transport))]
        observation = Observation(scenario=scenario, transport=transport, steps=steps,
                                  journal=[], stop_allowance_ms=allowance)
        return [r.pointer for r in judge(observation) if r.status == "fail"]

    assert any("/steps/2/" in w for w in failed("stdio", 0))
    assert not any("/steps/2/" in w for w in failed("stdio", 3500))  # the server's stop
    assert any("/steps/1/" in w for w in failed("stdio", 3500))  # a call is no stop
    assert any("/steps/2/" in w for w in failed("http", 3500))  # the runner's HTTP server
