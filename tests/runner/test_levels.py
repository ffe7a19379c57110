"""Conformance levels: a core run counts what any bridge must do, a seed run the seed's conventions
too; the fake's self-tests are never the bridge's."""

from __future__ import annotations

from pathlib import Path

import pytest

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.results import (
    CORE,
    FAIL,
    FAKE,
    NOT_APPLICABLE,
    PASS,
    SEED,
    CheckRecord,
    counts_at,
    scenario_status,
)
from palace_conformance.runner.verdict.levels import check_level, scenario_level
from palace_conformance.scenarios.loader import ScenarioError

from .support import failing, mutant, options, scripted, shipped, write_scenario


def record(level: str, passed: bool) -> CheckRecord:
    return CheckRecord("s", "stdio", "/x", PASS if passed else FAIL, "m", level=level)


@pytest.mark.parametrize(("check", "run", "counts"), [
    (CORE, CORE, True), (CORE, SEED, True), (SEED, CORE, False), (SEED, SEED, True),
    (FAKE, CORE, True), (FAKE, SEED, True),
])
def test_which_checks_count_at_which_level(check: str, run: str, counts: bool) -> None:
    assert counts_at(check, run) is counts
    assert scenario_status([record(check, False)], run) == ("failed" if counts else "passed")


def test_a_scenario_is_core_when_it_covers_a_core_behaviour(tmp_path: Path) -> None:
    assert scenario_level(shipped("stdio.timeout.stall-kills-child")) == CORE  # STDIO-01/02
    assert scenario_level(shipped("feed.wing.defaults")) == SEED
    assert scenario_level(shipped("fake.errors.shapes-and-texts")) == FAKE
    seed = write_scenario(tmp_path, {"id": "life.lv.own", "covers": ["STDIO-01"],
                                     "level": "seed", "transports": ["stdio"],
                                     "steps": [{"op": "load"}]})
    assert scenario_level(seed) == SEED


def test_seed_only_parts_and_parity_are_seed_in_a_core_scenario(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {
        "id": "life.lv.parts", "covers": ["STDIO-01"], "transports": ["stdio"],
        "steps": [{"op": "load", "expect": {"ok": True, "effects": [
            {"check": "count", "match": {"kind": "stderr"}, "equals": 0},
            {"check": "absent", "match": {"kind": "notify"}}],
            "seed_only": ["/effects/1"]}}]})
    assert scenario_level(scenario) == CORE
    assert check_level(CORE, scenario.raw, "/steps/0/expect/effects/0") == CORE
    assert check_level(CORE, scenario.raw, "/steps/0/expect/effects/1") == SEED
    assert check_level(CORE, scenario.raw, "/steps/0/expect/ok") == CORE
    assert check_level(CORE, scenario.raw, "/steps/0") == CORE
    assert check_level(CORE, scenario.raw, "/parity") == SEED


def test_a_seed_only_pointer_that_names_nothing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError,
                       match=r"/steps/0/expect/seed_only/0: /effects/3 names nothing"):
        write_scenario(tmp_path, {
            "id": "life.lv.typo", "covers": ["STDIO-01"], "transports": ["stdio"],
            "steps": [{"op": "load", "expect": {"ok": True, "seed_only": ["/effects/3"]}}]})


def test_a_core_run_ignores_a_failed_seed_convention_and_says_so(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {
        "id": "life.lv.run", "covers": ["TOOL-02"], "transports": ["stdio"],
        "steps": [{"op": "load", "expect": {"ok": True, "effects": [
            {"check": "count", "match": {"kind": "stderr"}, "at_least": 1}],
            "seed_only": ["/effects/0"]}}]})
    at_seed = run_scenario(scenario, "stdio", options(scripted("good"), level=SEED))
    at_core = run_scenario(scenario, "stdio", options(scripted("good"), level=CORE))
    assert at_seed.status == "failed" and at_seed.failures
    assert at_core.status == "passed" and not at_core.failures
    assert [c.pointer for c in at_core.beyond_level] == ["/steps/0/expect/effects/0"]


def test_a_scenario_of_seed_conventions_only_is_not_applicable_at_core(tmp_path: Path) -> None:
    result = run_scenario(shipped("feed.wing.defaults"), "stdio",
                          options(scripted("good"), level=CORE))
    assert result.status == NOT_APPLICABLE and "--level seed" in result.reason


def test_no_orphan_is_judged_after_a_grace_at_core_but_when_shutdown_returns_at_seed(
        tmp_path: Path) -> None:
    """A child stopped politely but late (past the host's shutdown grace): at seed the child
    must be gone when shutdown returns; at core it is no orphan, and its exit is no SIGKILL."""
    scenario = shipped("life.shutdown.stdio-polite-close")
    seed = run_scenario(scenario, "stdio", options(mutant("late-stop"), level=SEED,
                                                   work_root=tmp_path))
    assert "/expect/processes/alive_after_shutdown" in failing(seed)
    core = run_scenario(scenario, "stdio", options(mutant("late-stop"), level=CORE,
                                                   work_root=tmp_path))
    assert core.status == "passed", failing(core)
    checks = {c.pointer: c for c in core.checks}
    assert checks["/expect/processes/alive_after_shutdown"].passed
    assert checks["/expect/processes/signals/SIGKILL"].passed  # it exited: stdin EOF


def test_at_core_a_child_kept_warm_is_judged_once_the_host_has_exited(tmp_path: Path) -> None:
    """A child kept across ``session_shutdown`` is fine while the host lives: at core the orphan
    is what outlives the host's exit (plus the grace); at seed it must be gone at shutdown."""
    scenario = shipped("life.shutdown.grandchild-dies-with-child")
    warm = run_scenario(scenario, "stdio", options(mutant("warm-child"), level=CORE,
                                                   work_root=tmp_path))
    assert warm.status == "passed", failing(warm)
    assert warm.steps[-1].key == "(teardown)" and warm.steps[-1].op == "exit"
    seed = run_scenario(scenario, "stdio", options(mutant("warm-child"), level=SEED,
                                                   work_root=tmp_path))
    assert "/expect/processes/alive_after_shutdown" in failing(seed)
    leaked = run_scenario(scenario, "stdio", options(mutant("warm-child-leaked"), level=CORE,
                                                     work_root=tmp_path))
    message = {c.pointer: c.message for c in leaked.checks if not c.passed}
    assert "alive after the host's exit" in \
        message["/expect/processes/alive_after_shutdown"], message
