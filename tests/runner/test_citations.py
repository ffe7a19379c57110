"""Per-check citations (an expectation's ``cites``): a failed check fails only the behaviours it
cites in ``matrix``'s roll-up, so a scenario covering two behaviours turns only the broken one
red."""

from __future__ import annotations

from pathlib import Path

import pytest

from palace_conformance.runner.compare.matrix import build
from palace_conformance.runner.compare.sources import Source
from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.results import CORE, HostInfo, RunResult
from palace_conformance.runner.verdict.citations import check_covers
from palace_conformance.scenarios.loader import ScenarioError

from .support import failing, options, scripted, shipped, write_scenario

TWO = ["STDIO-01", "KNOB-02"]


def test_a_check_cites_the_most_specific_cited_part_else_every_covered_behaviour(
        tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {
        "id": "life.cite.parts", "covers": TWO, "transports": ["stdio"],
        "steps": [{"op": "load", "expect": {
            "ok": True,
            "effects": [{"check": "count", "match": {"kind": "stderr"}, "equals": 0},
                        {"check": "absent", "match": {"kind": "notify"}}],
            "cites": {"/effects": ["KNOB-02"], "/effects/1": ["STDIO-01"]}}},
            {"op": "shutdown", "reason": "quit", "expect": {"ok": True,
                                                             "cites": {"": ["STDIO-01"]}}}]})
    assert check_covers(scenario, "/steps/0/expect/effects/0") == ("KNOB-02",)
    assert check_covers(scenario, "/steps/0/expect/effects/1") == ("STDIO-01",)
    assert check_covers(scenario, "/steps/0/expect/ok") == tuple(TWO)  # cited by nothing
    assert check_covers(scenario, "/steps/1/expect/ok") == ("STDIO-01",)  # "": all of it
    assert check_covers(scenario, "/steps/0") == tuple(TWO)  # the step itself did not run
    assert check_covers(scenario, "/parity") == tuple(TWO)


@pytest.mark.parametrize(("cites", "problem"), [
    ({"/effects/3": ["KNOB-02"]}, r"/steps/0/expect/cites/~1effects~13: /effects/3 names nothing"),
    ({"/ok": ["LIFE-06"]}, r"cites LIFE-06, which the scenario does not cover"),
    ({"/ok": []}, r"/steps/0/expect/cites/~1ok"),  # the schema: at least one behaviour
])
def test_a_citation_that_names_nothing_or_another_behaviour_is_refused(
        tmp_path: Path, cites: dict[str, list[str]], problem: str) -> None:
    with pytest.raises(ScenarioError, match=problem):
        write_scenario(tmp_path, {
            "id": "life.cite.typo", "covers": TWO, "transports": ["stdio"],
            "steps": [{"op": "load", "expect": {"ok": True, "cites": cites}}]})


def test_a_failed_check_fails_only_the_behaviour_it_cites_in_the_matrix(tmp_path: Path) -> None:
    """A real run: the scripted host's load prints nothing on stderr, so the KNOB-02 check
    (a warning expected) fails while the STDIO-01 one passes; STDIO-01 stays green."""
    scenario = write_scenario(tmp_path, {
        "id": "life.cite.run", "covers": TWO, "transports": ["stdio"],
        "steps": [{"op": "load", "expect": {
            "ok": True,
            "effects": [{"check": "count", "match": {"kind": "stderr"}, "at_least": 1}],
            "cites": {"/effects": ["KNOB-02"], "/ok": ["STDIO-01"]}}}]})
    result = run_scenario(scenario, "stdio", options(scripted("good"), level=CORE))
    assert list(failing(result)) == ["/steps/0/expect/effects/0"]
    assert [c.covers for c in result.failures] == [("KNOB-02",)]
    host = HostInfo(argv=["x"], bridge="b", capabilities=("stdio",))
    matrix = build([Source("b", RunResult(host=host, results=[result]), "b", ("stdio",))],
                   behaviours={b: b for b in TWO}, areas={"life": "life"})
    assert matrix.behaviour_status(0, "KNOB-02") == "failed"
    assert matrix.behaviour_status(0, "STDIO-01") == "passed"
    uncited = write_scenario(tmp_path, {  # without cites the same failure fails both
        "id": "life.cite.bare", "covers": TWO, "transports": ["stdio"],
        "steps": [{"op": "load", "expect": {
            "ok": True,
            "effects": [{"check": "count", "match": {"kind": "stderr"}, "at_least": 1}]}}]})
    bare = run_scenario(uncited, "stdio", options(scripted("good"), level=CORE))
    matrix = build([Source("b", RunResult(host=host, results=[bare]), "b", ("stdio",))],
                   behaviours={b: b for b in TWO}, areas={"life": "life"})
    assert matrix.behaviour_status(0, "STDIO-01") == "failed"


def test_the_shipped_stdio_04_scenarios_cite_their_checks() -> None:
    """The issue's case: a core run whose bridge left an orphan in the LIFE-06 scenario turned
    STDIO-04 red; the orphan checks now cite LIFE-06 alone, the unbounded wait STDIO-04."""
    stuck = shipped("life.shutdown.stuck-child-term-then-kill")
    assert check_covers(stuck, "/expect/processes/alive_after_shutdown") == ("LIFE-06",)
    assert check_covers(stuck, "/expect/journal/0") == ("LIFE-06",)
    assert check_covers(stuck, "/steps/3/expect/error/kind") == ("STDIO-04",)
    assert check_covers(stuck, "/steps/4/expect/ok") == ("LIFE-06",)
    both = shipped("stdio.timeout.zero-disables-both")
    assert check_covers(both, "/expect/effects/1") == ("KNOB-02",)
    assert check_covers(both, "/expect/processes/spawned") == ("STDIO-04",)
    assert check_covers(both, "/steps/3/expect/elapsed_ms") == ("STDIO-04",)
