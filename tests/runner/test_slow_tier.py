"""The slow tier (``fixtures/slow/``): loaded by ``run --slow`` and ``fixtures validate`` only."""

from __future__ import annotations

from pathlib import Path

import pytest

from palace_conformance.cli import main
from palace_conformance.runner.verdict.baseline import shipped_scenario_ids
from palace_conformance.scenarios.loader import (
    load_catalogue,
    scenarios_dir,
    shipped_roots,
    slow_scenarios_dir,
)
from palace_conformance.scenarios.model import Scenario

SLOW = "knob.defaults.request-timeout-60s"


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PALACE_CONFORMANCE_LAST_FAILED_DIR", raising=False)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_the_slow_tier_is_apart_from_the_catalogue() -> None:
    slow = load_catalogue([slow_scenarios_dir()])
    assert not slow.problems and SLOW in {s.id for s in slow.scenarios}
    assert not {s.id for s in slow.scenarios} & {s.id for s in load_catalogue().scenarios}
    assert shipped_roots(slow=False) == [scenarios_dir()]
    assert shipped_roots(slow=True) == [scenarios_dir(), slow_scenarios_dir()]
    assert SLOW in shipped_scenario_ids()  # a baseline may name a slow scenario


def _lower_bounds_ms(scenario: Scenario) -> list[int]:
    """Every duration's lower bound: a step's ``elapsed_ms`` or a journal ``gap``'s ``ms``."""
    found = []
    gaps = list(scenario.expect.journal)
    for step in scenario.steps:
        if step.expect is not None:
            gaps += step.expect.journal
            if step.expect.elapsed_ms is not None:
                found.append(step.expect.elapsed_ms.at_least)
    found += [int(check.raw["ms"]["at_least"]) for check in gaps if check.kind == "gap"]
    return found


def test_every_slow_scenario_waits_out_a_default_of_30_s_or_more() -> None:
    slow = load_catalogue([slow_scenarios_dir()]).scenarios
    assert len(slow) >= 5  # the 60 s, 30 s, 120 s, 300 s and 600 s defaults
    for scenario in slow:
        assert max(_lower_bounds_ms(scenario), default=0) >= 30000, scenario.id


def test_run_loads_the_slow_tier_only_with_slow(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "run", "--list", "--select", "knob.defaults.*")
    assert code == 0, err
    assert SLOW not in out and "knob.defaults.request-timeout-not-short" in out
    code, out, err = cli(capsys, "run", "--slow", "--list", "--select", "knob.defaults.*")
    assert code == 0, err
    assert SLOW in out and "knob.defaults.request-timeout-not-short" in out


def test_validate_checks_the_slow_tier(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "fixtures", "validate")
    total = len(load_catalogue().scenarios) + len(load_catalogue([slow_scenarios_dir()]).scenarios)
    assert code == 0 and out.strip() == f"{total} scenario(s) valid"
