"""Parity: the first differing pointer between the stdio and HTTP outcomes fails the scenario."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.results import ScenarioResult
from palace_conformance.runner.verdict import parity
from palace_conformance.runner.verdict.normalise import first_difference
from palace_conformance.scenarios.model import Parity

from .support import mutant, options, shipped


def test_a_transport_specific_result_field_fails_parity_at_its_pointer(tmp_path: Path) -> None:
    scenario = shipped("life.handshake.initialize-first")
    host = options(mutant("http-details"), work_root=tmp_path)
    stdio, http = (run_scenario(scenario, t, host) for t in ("stdio", "http"))
    assert (stdio.status, http.status) == ("passed", "passed")  # each run alone looks fine
    compared = parity.compare(scenario, stdio, http)
    assert compared.status == "failed" and compared.transport == "parity"
    [check] = compared.checks
    assert check.pointer == "/parity" and check.step == "3"
    assert check.message.startswith("stdio and http differ at /steps/3/result/details: "
                                    "stdio null, http {\"transport\": \"http\"}")
    same = parity.compare(scenario, stdio, stdio)
    assert same.status == "passed"


def _run(transport: str, steps: dict[str, object], status: str = "passed") -> ScenarioResult:
    return ScenarioResult("life.handshake.initialize-first", transport, status,  # type: ignore[arg-type]
                          outcome={"steps": steps})


def test_ignored_pointers_and_transport_limited_steps_are_not_compared() -> None:
    scenario = shipped("life.handshake.initialize-first")
    left = {"3": {"ok": False, "error": {"kind": "timeout", "message": "child stalled"}}}
    right = {"3": {"ok": False, "error": {"kind": "timeout", "message": "HTTP read timed out"}},
             "extra": {"ok": True}}
    found = parity.compare(scenario, _run("stdio", left), _run("http", right))
    assert found.status == "failed" and "/steps/3/error/message" in found.reason
    ignoring = dataclasses.replace(scenario, parity=Parity(ignore=("/steps/3/error/message",)))
    assert parity.compare(ignoring, _run("stdio", left), _run("http", right)).status == "passed"


def test_parity_of_an_untestable_or_inapplicable_run() -> None:
    scenario = shipped("life.handshake.initialize-first")
    ok = _run("stdio", {})
    assert parity.compare(scenario, ok, _run("http", {}, "not_applicable")).status == (
        "not_applicable")
    broken = ScenarioResult(scenario.id, "http", "not_testable")
    result = parity.compare(scenario, ok, broken)
    assert result.status == "not_testable" and result.checks[0].status == "fail"


def test_first_difference_walks_objects_and_lists_in_order() -> None:
    assert first_difference({"a": [1, 2]}, {"a": [1, 2]}) is None
    assert first_difference({"a": [1, 2]}, {"a": [1, 3]}) == ("/a/1", 2, 3)
    assert first_difference({"a": 1}, {"a": 1, "b/c": 2}) == ("/b~1c", None, 2)
    assert first_difference([1], [1, 2]) == ("/1", None, 2)
    assert first_difference({"a": True}, {"a": 1}) == ("/a", True, 1)
    assert first_difference({"a": {"x": 1}}, {"a": {"x": 2}}, ignore=["/a"]) is None
