"""Which scenarios a server can serve, read off each scenario (no real server needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.real.traits import REAL_SERVER
from palace_conformance.runner.reports.console import not_applicable_by_reason
from palace_conformance.runner.results import NOT_APPLICABLE, PASSED, RunResult, ScenarioResult
from palace_conformance.scenarios.loader import load_catalogue, shipped_roots
from palace_conformance.scenarios.model import Scenario
from palace_conformance.scenarios.server_needs import (
    FAKE_SERVER,
    SERVER_CAPABILITIES,
    ServerTraits,
    checked_kinds,
    needs,
    reason_label,
    unmet_reason,
)

#: a real server with no fault relay in front of it (how ``run --server real`` served it before
#: ``relay/fault_*.py``): what the reasons below are worded against
NO_RELAY = ServerTraits(
    name="real", capabilities=frozenset({"palace_seed", "server_kill", "lock_holder"}),
    journal_kinds=frozenset({"process_start", "process_exit", "signal", "recv", "send",
                             "http_request", "http_response", "helper_run"}))


def _scenario(**fields: Any) -> Scenario:
    data: dict[str, Any] = {"schema_version": 1, "id": "x.y.z", "title": "t", "covers": [],
                            "transports": ["stdio", "http"],
                            "steps": [{"op": "load"}, {"op": "shutdown"}]}
    data.update(fields)
    return Scenario.from_json(data, Path("x.json"))


@pytest.fixture(scope="module")
def catalogue() -> list[Scenario]:
    loaded = load_catalogue(shipped_roots(slow=True))
    assert not loaded.problems
    return loaded.scenarios


def test_the_fake_serves_every_scenario_of_the_catalogue(catalogue: list[Scenario]) -> None:
    assert FAKE_SERVER.capabilities == frozenset(SERVER_CAPABILITIES)
    for scenario in catalogue:
        for transport in scenario.transports:
            assert unmet_reason(scenario, transport, FAKE_SERVER) is None, scenario.id


def test_a_plain_scenario_needs_nothing() -> None:
    assert needs(_scenario(), "stdio", REAL_SERVER.journal_kinds) == []
    assert unmet_reason(_scenario(), "http", REAL_SERVER) is None


def test_faults_name_their_actions_on_the_transport_they_apply_to() -> None:
    scenario = _scenario(faults=[
        {"id": "a", "on": {"method": "tools/call"}, "action": "stall"},
        {"id": "b", "on": {"method": "tools/call"}, "action": "exit"},
        {"id": "c", "on": {"method": "tools/call"}, "action": "http_status", "status": 500}])
    assert unmet_reason(scenario, "stdio", NO_RELAY) == (
        "on the real server, needs fault injection (exit, stall)")
    assert "exit, http_status, stall" in (unmet_reason(scenario, "http", NO_RELAY) or "")


def test_control_actions_sessions_and_the_fakes_self_tests() -> None:
    steps = [{"op": "load"}, {"op": "server", "action": "rotate_token", "token": "t2"},
             {"op": "server", "action": "forget_sessions"}, {"op": "shutdown"}]
    scenario = _scenario(steps=steps, transports=["http"], http={"sessions": True})
    reason = unmet_reason(scenario, "http", NO_RELAY)
    assert reason == ("on the real server, needs the fake's control API (forget_sessions, "
                      "rotate_token); needs stateful HTTP sessions")
    fake = _scenario(subject="fake", steps=[{"op": "rpc", "message": {"jsonrpc": "2.0",
                                                                      "method": "ping",
                                                                      "id": 1}}])
    assert unmet_reason(fake, "stdio", NO_RELAY) == "on the real server, a self-test of the fake"


def test_the_fault_relays_give_the_real_server_faults_sessions_and_the_control_api() -> None:
    steps = [{"op": "load"}, {"op": "server", "action": "rotate_token", "token": "t2"},
             {"op": "shutdown"}]
    scenario = _scenario(steps=steps, transports=["http"], http={"sessions": True}, faults=[
        {"id": "a", "on": {"method": "tools/call"}, "action": "stall"},
        {"id": "b", "on": {"method": "tools/call"}, "action": "http_status", "status": 500}],
        expect={"journal": [{"check": "count", "match": {"kind": "fault"}, "equals": 2}]})
    assert unmet_reason(scenario, "http", REAL_SERVER) is None
    assert unmet_reason(scenario, "http", NO_RELAY) is not None
    inside = _scenario(expect={"journal": [
        {"check": "count", "match": {"kind": "lease"}, "equals": 1}]})
    assert unmet_reason(inside, "stdio", REAL_SERVER) == (  # the fake's palace, not the wire
        "on the real server, checks journal records only the fake writes (lease)")


def test_seeds_kills_and_lock_holders_are_needs_the_real_server_meets() -> None:
    scenario = _scenario(
        palace={"diary": [{"agent_name": "pi", "entry": "e", "topic": "general"}],
                "lock": {"held": True}},
        steps=[{"op": "load"}, {"op": "server", "action": "kill"}, {"op": "shutdown"}])
    found = {need.capability for need in needs(scenario, "stdio")}
    assert found == {"palace_seed", "server_kill", "lock_holder"}
    assert unmet_reason(scenario, "stdio", REAL_SERVER) is None


def test_journal_kinds_only_the_fake_writes_but_absent_checks_hold_anywhere() -> None:
    scenario = _scenario(expect={"journal": [
        {"check": "count", "match": {"kind": "fault"}, "equals": 1},
        {"check": "sequence", "items": [{"kind": "recv"}, {"kind": "session"}]},
        {"check": "absent", "match": {"kind": "lease"}}]})
    assert checked_kinds(scenario, "stdio") == {"fault", "recv", "session"}
    assert unmet_reason(scenario, "stdio", NO_RELAY) == (
        "on the real server, checks journal records only the fake writes (fault, session)")


def test_every_catalogue_need_is_a_declared_capability(catalogue: list[Scenario]) -> None:
    seen = set()
    for scenario in catalogue:
        for transport in scenario.transports:
            for need in needs(scenario, transport, REAL_SERVER.journal_kinds):
                assert need.capability in SERVER_CAPABILITIES
                seen.add(need.capability)
    # the catalogue exercises every need (else a capability is dead vocabulary)
    assert seen == set(SERVER_CAPABILITIES)


def test_reasons_are_counted_by_their_first_label() -> None:
    assert reason_label("on the real server, needs fault injection (stall); needs stateful "
                        "HTTP sessions") == "needs fault injection"

    def result(status: str, reason: str = "", transport: str = "stdio") -> ScenarioResult:
        return ScenarioResult(scenario="s", transport=transport, status=status, reason=reason)

    run = RunResult(results=[
        result(NOT_APPLICABLE, "Not applicable: on the real server, needs fault injection (a)"),
        result(NOT_APPLICABLE, "Not applicable: on the real server, needs fault injection (b)"),
        result(NOT_APPLICABLE, "Not applicable: the host does not declare mailbox"),
        result(NOT_APPLICABLE, "Not applicable: not run on stdio, http", "parity"),
        result(PASSED)], server="real")
    run.results.append(ScenarioResult(scenario="fake.x", transport="stdio", subject="fake",
                                      status=NOT_APPLICABLE, reason="Not applicable: on the "
                                      "real server, a self-test of the fake"))
    assert not_applicable_by_reason(run) == [("needs fault injection", 2),
                                             ("parity, a transport not applicable", 1),
                                             ("the host does not declare mailbox", 1)]
    assert RunResult.from_json(json.loads(json.dumps(run.to_json()))).server == "real"


def test_only_a_patterns_own_kind_counts_not_one_inside_a_message() -> None:
    scenario = _scenario(expect={"journal": [
        {"check": "count", "equals": 1,
         "match": {"kind": "recv", "message": {"params": {"arguments": {"kind": "note"}}}}},
        {"check": "count", "match": {"kind": "fault"}, "equals": 0},
        {"check": "order", "first": {"kind": {"$in": ["lease", "recv"]}},
         "then": {"kind": "send"}},
        {"check": "gap", "from": {"kind": "signal"}, "to": {"kind": "process_exit"}, "ms": 10}]})
    assert checked_kinds(scenario, "stdio") == {"recv", "lease", "send", "signal", "process_exit"}


def test_the_runner_declares_such_a_run_not_applicable_before_building_a_world(
        catalogue: list[Scenario], tmp_path: Path) -> None:
    from palace_conformance.real.install import RealServer
    from palace_conformance.real.world import RealServerSetup
    from palace_conformance.runner.execution.execute import RunOptions, run_scenario

    # a server that does not exist: nothing may be started for a run it cannot serve
    setup = RealServerSetup(server=RealServer(python=tmp_path / "none", version="3.11.0"),
                            embedding_url="http://127.0.0.1:9/v1", template_home=tmp_path)
    scenario = next(s for s in catalogue if s.id == "life.shutdown.stdio-polite-close")
    result = run_scenario(scenario, "stdio", RunOptions(host_argv=("false",), server=setup))
    assert result.status == NOT_APPLICABLE
    assert result.reason == ("Not applicable: on the real server, needs the server to exit on "
                             "stdin EOF inside the bridge's stop grace")
    assert list(tmp_path.iterdir()) == []


def test_a_stop_that_must_never_signal_needs_a_prompt_exit_on_eof(
        catalogue: list[Scenario]) -> None:
    polite = next(s for s in catalogue if s.id == "life.shutdown.stdio-polite-close")
    assert unmet_reason(polite, "stdio", REAL_SERVER) == (
        "on the real server, needs the server to exit on stdin EOF inside the bridge's stop "
        "grace")
    relaxed = _scenario(expect={"processes": {"signals": {"SIGTERM": {"at_most": 1}}}})
    assert unmet_reason(relaxed, "stdio", REAL_SERVER) is None
    strict = _scenario(expect={"processes": {"signals": {"SIGTERM": 0}}})
    assert unmet_reason(strict, "stdio", REAL_SERVER) is not None
    assert unmet_reason(strict, "http", REAL_SERVER) is None  # no child to signal there


def test_a_load_gets_the_real_servers_start_allowance_unless_the_scenario_bounds_it(
        tmp_path: Path) -> None:
    from palace_conformance.real.install import RealServer
    from palace_conformance.real.world import RealServerSetup
    from palace_conformance.runner.execution.execute import RunOptions, op_deadline
    from palace_conformance.scenarios.model import Step

    setup = RealServerSetup(server=RealServer(python=tmp_path / "none", version="3.11.0"),
                            embedding_url="http://127.0.0.1:9/v1", template_home=tmp_path)
    fake, real = RunOptions(host_argv=("h",)), RunOptions(host_argv=("h",), server=setup)
    load = Step.from_json(0, {"op": "load"})
    bounded = Step.from_json(0, {"op": "load", "timeout_ms": 4000})
    call = Step.from_json(1, {"op": "call_tool", "name": "mempalace_status", "args": {}})
    assert op_deadline(load, real) == op_deadline(load, fake) + setup.start_allowance_ms
    assert op_deadline(bounded, real) == op_deadline(bounded, fake) == 4000
    assert op_deadline(call, real) == op_deadline(call, fake)


def test_the_summary_counts_the_bridges_results_by_reason_and_the_fakes_apart() -> None:
    import io

    from palace_conformance.runner.reports.console import render_summary

    run = RunResult(server="real", results=[
        ScenarioResult(scenario="a", transport="stdio", status=NOT_APPLICABLE,
                       reason="Not applicable: on the real server, needs fault injection (exit)"),
        ScenarioResult(scenario="fake.x", transport="http", subject="fake",
                       status=NOT_APPLICABLE,
                       reason="Not applicable: on the real server, a self-test of the fake"),
        ScenarioResult(scenario="b", transport="stdio", status=PASSED)])
    out = io.StringIO()
    render_summary(run, out, quiet=True)
    totals, reasons = out.getvalue().strip().splitlines()[-2:]
    assert "1 passed" in totals and "1 not applicable" in totals
    assert totals.endswith("against the real mempalace server")
    assert "self-tests (the fake's own, not the bridge's): 1 scenario, 1 result: 1 not " \
        "applicable" in totals
    assert reasons == "not applicable, by reason: 1 needs fault injection"


def test_a_diff_against_the_real_server_masks_the_random_part_of_event_ids() -> None:
    from palace_conformance.runner.compare import volatile
    from palace_conformance.runner.compare.drift_trace import Masks

    [rule] = volatile.REAL_SERVER_TEXT_RULES
    text = "evt_20261202T003408_661adc631c0f (seq 3)"
    assert volatile.Masker().text(text) == "evt_<time>_661adc631c0f (seq 3)"  # the fake's counts
    assert volatile.Masker(extra=[rule]).text(text) == "evt_<time>_<id> (seq 3)"
    assert volatile.Masker(extra=[rule]).text(rule.example) == rule.masked
    masks = Masks.between((), (), real_server=True)
    assert masks.real_server and any("real server" in m for m in masks.describe())
    assert not Masks.between((), ()).real_server
