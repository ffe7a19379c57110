"""Parity: the first differing pointer between the stdio and HTTP outcomes fails the scenario."""

from __future__ import annotations

from pathlib import Path

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.results import ScenarioResult
from palace_conformance.runner.verdict import parity

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


def test_parity_of_an_untestable_or_inapplicable_run() -> None:
    scenario = shipped("life.handshake.initialize-first")
    ok = _run("stdio", {})
    assert parity.compare(scenario, ok, _run("http", {}, "not_applicable")).status == (
        "not_applicable")
    broken = ScenarioResult(scenario.id, "http", "not_testable")
    result = parity.compare(scenario, ok, broken)
    assert result.status == "not_testable" and result.checks[0].status == "fail"
