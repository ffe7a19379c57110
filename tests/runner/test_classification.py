"""not_applicable (reported apart, never a failure) versus not_testable (a failure class)."""

from __future__ import annotations

from pathlib import Path

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.execution.suite import SuiteOptions, run_suite

from .support import options, scripted, shipped, write_scenario


def test_a_missing_capability_or_transport_is_not_applicable(tmp_path: Path) -> None:
    host = options(scripted("good", "stdio"), work_root=tmp_path)
    needs_wakeup = run_scenario(shipped("wake.fresh-session.inject-once"), "stdio", host)
    assert needs_wakeup.status == "not_applicable" and needs_wakeup.checks == []
    assert needs_wakeup.reason == "Not applicable: the host does not declare wakeup"
    over_http = run_scenario(shipped("life.handshake.initialize-first"), "http", host)
    assert over_http.reason == "Not applicable: the host does not declare http"
    assert not needs_wakeup.blocking and list(tmp_path.iterdir()) == []


def test_a_run_of_only_inapplicable_scenarios_judged_nothing_and_is_red(tmp_path: Path) -> None:
    """Each result is no failure (never blocking), but a gate that judged nothing is never green
    (issue 26)."""
    scenarios = [shipped("wake.fresh-session.inject-once"),
                 shipped("diary.command.prompt-names-agent-and-topic")]
    run = run_suite(scenarios, SuiteOptions(run=options(scripted("good", "stdio,http"),
                                                        work_root=tmp_path)))
    assert [r.status for r in run.results] == ["not_applicable"] * len(run.results)
    assert run.counts()["not_applicable"] == 4  # two transports + parity for the wake-up
    assert not any(r.blocking for r in run.results)
    assert run.nothing_judged and not run.ok and run.exit_code == 1


def test_a_host_that_cannot_load_the_bridge_is_not_testable(tmp_path: Path) -> None:
    scenario = shipped("life.transport.default-stdio-child")
    refused = run_scenario(scenario, "stdio", options(scripted("fail-load"), work_root=tmp_path))
    assert refused.status == "not_testable" and refused.blocking
    assert refused.reason == "Not testable: host failed to load the bridge: cannot load"
    [check] = refused.checks
    assert check.pointer == "/setup" and check.status == "fail"
    crashed = run_scenario(scenario, "stdio", options(scripted("crash:load"), work_root=tmp_path))
    assert crashed.status == "not_testable" and "exit code 3" in crashed.reason
    silent = run_scenario(scenario, "stdio", options(scripted("silent:hello"), grace_ms=200,
                                                     hello_timeout_ms=300, work_root=tmp_path))
    assert silent.status == "not_testable" and "'hello'" in silent.reason


def test_a_fake_that_does_not_start_makes_the_scenario_not_testable(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {
        "id": "life.runner.fake-dies-at-startup", "transports": ["http"],
        "faults": [{"id": "dies", "on": {"method": "$startup"}, "action": "startup_fail",
                    "code": 1, "stderr": "palace on fire"}],
        "steps": [{"op": "load"}, {"op": "shutdown"}]})
    result = run_scenario(scenario, "http", options(work_root=tmp_path / "work"))
    assert result.status == "not_testable"
    assert result.reason.startswith("Not testable: the HTTP fake did not start (exited 1)")
    assert "palace on fire" in result.reason


RELOAD = [{"op": "load"},
          {"op": "event", "name": "session_start", "payload": {"reason": "startup"}},
          {"op": "reload", "expect": {"ok": True}},
          {"op": "event", "name": "session_start", "payload": {"reason": "reload"}},
          {"op": "shutdown"}]


def test_a_host_that_cannot_reload_makes_a_reload_scenario_not_applicable(
        tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {"id": "life.reload.scripted", "transports": ["stdio"],
                                         "steps": RELOAD})
    refused = run_scenario(scenario, "stdio", options(scripted("no-reload"),
                                                      work_root=tmp_path / "work"))
    assert refused.status == "not_applicable" and not refused.blocking and refused.checks == []
    assert refused.reason == ("Not applicable: the host cannot reload its bridge: this bridge is "
                              "not a pi extension")
    assert [s.op for s in refused.steps] == ["load", "event", "reload"]  # nothing after it ran
    served = run_scenario(scenario, "stdio", options(scripted("good"),
                                                     work_root=tmp_path / "work"))
    assert served.status != "not_applicable"
    assert any(c.pointer == "/steps/2/expect/ok" and c.passed for c in served.checks)


def test_a_reload_step_that_expects_the_refusal_is_judged(tmp_path: Path) -> None:
    steps = [*RELOAD[:2], {"op": "reload", "expect": {"error": {"kind": "bad_request"}}}]
    scenario = write_scenario(tmp_path, {"id": "life.reload.refusal", "transports": ["stdio"],
                                         "steps": steps})
    judged = run_scenario(scenario, "stdio", options(scripted("no-reload"),
                                                     work_root=tmp_path / "work"))
    assert judged.status != "not_applicable"
    assert judged.status == "passed"
    assert any(c.pointer == "/steps/2/expect/error/kind" and c.passed for c in judged.checks)


def test_a_host_that_cannot_abandon_makes_an_abrupt_exit_not_applicable(tmp_path: Path) -> None:
    steps = [{"op": "load"}, {"op": "exit", "abrupt": True, "expect": {"ok": True}}]
    scenario = write_scenario(tmp_path, {"id": "life.exit.scripted", "transports": ["stdio"],
                                         "steps": steps})
    refused = run_scenario(scenario, "stdio", options(scripted("no-abandon"),
                                                      work_root=tmp_path / "work"))
    assert refused.status == "not_applicable" and not refused.blocking and refused.checks == []
    assert refused.reason == ("Not applicable: the host cannot end without stopping its bridge "
                              "(driver op 'abandon'): unknown op 'abandon'")
    served = run_scenario(scenario, "stdio", options(scripted("good"),
                                                     work_root=tmp_path / "work"))
    assert served.status == "passed", served.reason
    assert served.steps[-1].request == {"op": "abandon", "timeout_ms": served.steps[-1].request[
        "timeout_ms"]}  # the abrupt exit goes out as 'abandon', the flag itself is not sent
    assert [s.op for s in served.steps] == ["load", "exit"]  # no teardown exit after it


CONCURRENT = [{"op": "load"},
              {"op": "event", "name": "session_start", "payload": {"reason": "startup"}},
              {"op": "call_tools", "calls": [{"name": "mempalace_status"},
                                             {"name": "mempalace_search",
                                              "args": {"query": "q"}}],
                "expect": {"ok": True}},
              {"op": "shutdown"}]


def test_a_host_that_cannot_make_concurrent_calls_makes_the_scenario_not_applicable(
        tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, {"id": "http.concurrent.scripted",
                                         "transports": ["stdio"], "steps": CONCURRENT})
    refused = run_scenario(scenario, "stdio", options(scripted("no-concurrency"),
                                                      work_root=tmp_path / "work"))
    assert refused.status == "not_applicable" and not refused.blocking and refused.checks == []
    assert refused.reason == ("Not applicable: the host cannot make concurrent calls: unknown "
                              "op 'call_tools'")
    assert [s.op for s in refused.steps] == ["load", "event", "call_tools"]
    served = run_scenario(scenario, "stdio", options(scripted("good"),
                                                     work_root=tmp_path / "work"))
    assert served.status != "not_applicable"
    assert [s.op for s in served.steps][:4] == ["load", "event", "call_tools", "shutdown"]


def test_a_host_slow_to_say_hello_is_started_once_more_and_the_run_is_judged(
        tmp_path: Path) -> None:
    # no bridge is loaded before hello: a host the machine's load kept silent is the kit's
    # problem, not the bridge's, so the run goes on with a second host and says so
    scenario = write_scenario(tmp_path, {"id": "life.runner.slow-host", "transports": ["stdio"],
                                         "steps": [{"op": "load"}, {"op": "shutdown"}]})
    marker = tmp_path / "first-host-started"
    result = run_scenario(scenario, "stdio", options(scripted(f"slow-start:{marker}"),
                                                     grace_ms=200, hello_timeout_ms=300,
                                                     work_root=tmp_path / "work"))
    assert marker.exists() and result.status == "passed", result.reason
    [note] = [c for c in result.checks if c.pointer == "/setup"]
    assert note.status == "pass" and "started twice" in note.message and "'hello'" in note.message
    # a host that is silent both times is not testable, its reason the second silence
    silent = run_scenario(scenario, "stdio", options(scripted("silent:hello"), grace_ms=200,
                                                     hello_timeout_ms=300,
                                                     work_root=tmp_path / "work2"))
    assert silent.status == "not_testable" and "'hello'" in silent.reason
