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
