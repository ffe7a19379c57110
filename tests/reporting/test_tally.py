"""One vocabulary of counts (docs/runner.md, "Counting"): the console, summary.md, JUnit and
``matrix`` say the same scenarios, results and self-tests, and the statuses add up."""

from __future__ import annotations

from dataclasses import replace

from palace_conformance.runner.compare.matrix import build
from palace_conformance.runner.compare.sources import Source
from palace_conformance.runner.reports import console
from palace_conformance.runner.reports.junit import to_xml
from palace_conformance.runner.reports.markdown import render_markdown
from palace_conformance.runner.reports.tally import STATUS_WORDS, tally
from palace_conformance.runner.results import RunResult, ScenarioResult

from .test_markdown import sample_run


def with_self_tests() -> RunResult:
    run = sample_run()
    fake = [ScenarioResult(scenario="fake.errors.shapes", transport=t, status="passed",
                           subject="fake") for t in ("stdio", "http", "parity")]
    return replace(run, results=[*run.results, *fake], stale_baseline=[])


def test_the_statuses_add_up_to_the_results_and_self_tests_stay_apart() -> None:
    run = with_self_tests()
    bridge, fake = tally(run), tally(run, "fake")
    assert (bridge.scenarios, bridge.results) == (4, 5)
    assert sum(bridge.statuses.values()) == bridge.results
    assert bridge.statuses == {"passed": 2, "failed": 1, "known_failure": 1, "not_testable": 0,
                               "not_applicable": 1}
    assert (fake.scenarios, fake.results, fake.statuses["passed"]) == (1, 3, 3)


def test_every_report_says_the_same_numbers() -> None:
    run = with_self_tests()
    words = ("4 scenarios, 5 results: 2 passed, 1 failed, 1 known failure, 0 not testable, "
             "1 not applicable")
    self_tests = "self-tests (the fake's own, not the bridge's): 1 scenario, 3 results: 3 passed"
    line = console._totals(run)
    assert words in line and self_tests in line
    text = render_markdown(run)
    assert "| 4 | 5 | 2 | 1 | 1 | 0 | 1 | 0 |" in text  # scenarios, results, statuses, problems
    assert self_tests[0].upper() + self_tests[1:] + "." in text
    props = {p.get("name"): p.get("value")
             for p in to_xml(run).getroot().iter("property") if p.get("name") != "covers"}
    assert props == {"scenarios": "4", "results": "5", "passed": "2", "failed": "1",
                     "known_failure": "1", "not_testable": "0", "not_applicable": "1",
                     "self_test_scenarios": "1", "self_test_results": "3"}
    matrix = build([Source("b", run, "b", ())], behaviours={}, areas={})
    assert matrix.tally(0).phrase() == words
    assert matrix.tally(0, "fake").results == 3
    assert [w for _, w in STATUS_WORDS] == ["passed", "failed", "known failures",
                                            "not testable", "not applicable"]
