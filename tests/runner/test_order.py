"""Runs start longest first (runner/execution/order.py), so the long ones overlap the short ones
instead of being the run's tail."""

from __future__ import annotations

import json
from pathlib import Path

from palace_conformance.runner.execution import order
from palace_conformance.runner.execution.suite import plan
from palace_conformance.scenarios.loader import load_catalogue, shipped_roots
from palace_conformance.scenarios.model import Scenario


def _job(scenario_id: str, transport: str = "stdio") -> tuple[Scenario, str]:
    class Fake:
        id = scenario_id
    return (Fake(), transport)  # type: ignore[return-value]


def test_the_longest_run_starts_first_and_unknown_runs_count_as_the_median() -> None:
    jobs = [_job("a"), _job("b"), _job("c"), _job("new"), _job("b", "http")]
    durations = {"a[stdio]": 1.0, "b[stdio]": 9.0, "c[stdio]": 3.0, "b[http]": 5.0}
    started = [(s.id, t) for s, t in order.longest_first(jobs, durations)]
    assert started == [("b", "stdio"), ("b", "http"), ("new", "stdio"), ("c", "stdio"),
                       ("a", "stdio")]
    # no figures: the order given (the catalogue's) stands
    assert order.longest_first(jobs, {}) == jobs


def test_a_missing_or_broken_file_leaves_the_order_alone(tmp_path: Path) -> None:
    assert order.expected_durations.__wrapped__(tmp_path / "missing.json") == {}
    broken = tmp_path / "broken.json"
    broken.write_text("[1, 2")
    assert order.expected_durations.__wrapped__(broken) == {}
    fine = tmp_path / "fine.json"
    fine.write_text(json.dumps({"x[stdio]": 2, "y[http]": "soon"}))
    assert order.expected_durations.__wrapped__(fine) == {"x[stdio]": 2.0}


def test_the_shipped_durations_name_most_of_the_catalogues_runs() -> None:
    """A refresh is due when scenarios come and go (benchmarks/durations.py): the file must still
    name most runs, or the order falls back towards the catalogue's."""
    runs = {order.key(s.id, t)
            for s, t in plan(load_catalogue(shipped_roots(slow=False)).scenarios,
                             ("stdio", "http"))}
    named = set(order.expected_durations()) & runs
    assert len(named) >= 0.8 * len(runs), f"{len(named)} of {len(runs)} runs have a duration"


def test_a_suite_starts_its_runs_longest_first_by_default() -> None:
    """run_suite's default order is order.longest_first over the shipped durations: with one
    worker, the runs start in that order, not the catalogue's."""
    from palace_conformance.runner.execution.suite import SuiteOptions, run_suite
    from palace_conformance.runner.results import PASSED, HostInfo, ScenarioResult

    from .support import options, shipped

    scenarios = [shipped("life.handshake.initialize-first"),
                 shipped("life.transport.chosen-once-at-load")]
    started: list[str] = []

    def runner(scenario: Scenario, transport: str, *_: object) -> ScenarioResult:
        started.append(order.key(scenario.id, transport))
        return ScenarioResult(scenario=scenario.id, transport=transport, status=PASSED)

    run_suite(scenarios, SuiteOptions(run=options(), jobs=1),
              host=HostInfo(capabilities=("stdio", "http")), runner=runner)
    durations = order.expected_durations()
    assert all(k in durations for k in started)
    assert started == sorted(started, key=lambda k: -durations[k])
    assert started != [order.key(s.id, t) for s, t in plan(scenarios, ("stdio", "http"))]
