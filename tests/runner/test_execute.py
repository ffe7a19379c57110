"""The executor on shipped scenarios with the real reference host, fake and stand-ins."""

from __future__ import annotations

import json
from pathlib import Path

from palace_conformance import processes as procs
from palace_conformance.contract import DEFAULT_OP_TIMEOUT_MS
from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.verdict.judge import expectation_pointers

from .support import failing, mutant, options, scripted, shipped, write_scenario


def pointers(result: object) -> set[str]:
    return {c.pointer for c in result.checks}  # type: ignore[attr-defined]


def test_a_stdio_scenario_passes_with_a_record_for_every_expectation(tmp_path: Path) -> None:
    scenario = shipped("life.transport.default-stdio-child")
    result = run_scenario(scenario, "stdio", options(work_root=tmp_path))
    assert result.status == "passed", result.reason
    wanted = {p for step in scenario.steps for p in expectation_pointers(step)}
    wanted |= {"/expect/journal/0", "/expect/journal/1", "/expect/processes/spawned",
               "/expect/processes/alive_after_shutdown"}
    wanted |= {f"/steps/{i}" for i in range(len(scenario.steps))}
    assert wanted <= pointers(result)
    assert all(c.covers == ("LIFE-01",) for c in result.checks)
    status = next(s for s in result.steps if s.op == "call_tool")
    assert status.ok and status.elapsed_ms and status.journal_end > status.journal_start
    children = [r["pid"] for r in result.journal if r["kind"] == "process_start"]
    assert len(children) == 1 and not procs.alive(children[0])
    assert list(tmp_path.iterdir()) == []  # the run's world is gone
    assert result.outcome is not None and "3" in result.outcome["steps"]


def test_an_http_scenario_keeps_error_codes_and_messages(tmp_path: Path) -> None:
    result = run_scenario(shipped("tool.errors.rpc-errors-and-results-kept"), "http",
                          options(work_root=tmp_path))
    assert result.status == "passed", result.reason
    code = next(c for c in result.checks if c.pointer == "/steps/3/expect/error/code")
    assert code.passed and code.expected == -32602 and code.got == -32602 and code.step == (
        "unknown-param")
    assert any(r.get("kind") == "http_request" for r in result.journal)
    assert result.env["MEMPALACE_REMOTE_URL"].startswith("http://127.0.0.1:")


def test_a_fake_subject_scenario_runs_rpc_steps_on_both_transports(tmp_path: Path) -> None:
    scenario = shipped("fake.handshake.catalogue-and-versions")
    for transport in ("stdio", "http"):
        result = run_scenario(scenario, transport, options(work_root=tmp_path))
        assert result.status == "passed", (transport, result.reason)
        notification = result.steps[1]
        assert notification.ok and notification.result is None
        assert "/steps/2/expect/tools/order" in pointers(result)


def test_feeding_runs_the_stand_in_which_journals_helper_run(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    result = run_scenario(shipped("feed.shutdown.prepare-then-mine"), "stdio",
                          options(work_root=tmp_path, artifacts=kept))
    assert result.status == "passed", result.reason
    [run] = [r for r in result.journal if r["kind"] == "helper_run"]
    assert run["name"] == "mempalace-pi-session" and "--prepare" in run["argv"]
    [mine] = [r for r in result.journal if r.get("tool") == "mempalace_mine"]
    source = mine["message"]["params"]["arguments"]["source"]
    assert source.endswith("/feed-export") and "${TMP}" not in source
    target = kept / "feed.shutdown.prepare-then-mine" / "stdio"
    assert {"journal.jsonl", "host-stderr.txt", "result.json"} <= {p.name
                                                                   for p in target.iterdir()}
    assert json.loads((target / "result.json").read_text())["status"] == "passed"
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]  # run dir removed, copy kept


def test_a_host_that_hangs_mid_scenario_is_killed_and_later_steps_fail(tmp_path: Path) -> None:
    result = run_scenario(shipped("life.transport.default-stdio-child"), "stdio",
                          options(scripted("silent:call_tool"), op_timeout_ms=300, grace_ms=200,
                                  work_root=tmp_path))
    assert result.status == "failed"
    failed = {c.pointer: c.message for c in result.checks if c.status == "fail"}
    assert "host did not answer 'call_tool' within 500 ms" in failed["/steps/3"]
    assert failed["/steps/3/expect/ok"].startswith("not judged: host did not answer")
    assert failed["/steps/4"].startswith("shutdown: not run: host did not answer 'call_tool'")
    # the hang costs its deadline and grace, not the 15 s default op deadline (a generous bound:
    # CI machines are shared); the settle before it waits (up to its max_ms, 5 s) for tools this
    # host never registers, so it is left out
    [settle] = [s for s in result.steps if s.op == "settle"]
    assert settle.elapsed_ms is not None
    assert result.duration_ms - settle.elapsed_ms < DEFAULT_OP_TIMEOUT_MS


def test_a_held_lock_is_held_by_another_process_for_the_whole_run(tmp_path: Path) -> None:
    result = run_scenario(shipped("fake.lock.loser-is-read-only"), "stdio",
                          options(work_root=tmp_path))
    assert result.status == "passed", result.reason
    [contended, *_] = [r for r in result.journal if r.get("event") == "contended"]
    assert "fake hold-lock" in contended["holder"]  # the runner's lock holder, not a fake
    assert list(tmp_path.iterdir()) == []


def test_an_exit_step_judges_what_outlived_the_host(tmp_path: Path) -> None:
    scenario = shipped("life.exit.host-exit-leaves-no-child")
    result = run_scenario(scenario, "stdio", options(work_root=tmp_path))
    assert result.status == "passed", result.reason
    assert [s.op for s in result.steps][-2:] == ["call_tool", "exit"]  # no teardown exit after it
    # the bridge's stop is still in its 30 s grace when the host's wait for it (5 s) ends
    assert result.steps[-1].elapsed_ms is not None and result.steps[-1].elapsed_ms >= 5000
    leaked = run_scenario(scenario, "stdio", options(mutant("no-kill-at-exit"),
                                                     work_root=tmp_path))
    assert failing(leaked) == {"/expect/processes/alive_after_shutdown":
                               "processes: 1 fake process(es) alive after the host's exit; "
                               "expected 0"}
    pids = [r["pid"] for r in leaked.journal if r["kind"] in ("process_start",
                                                               "descendant_start")]
    assert len(pids) == 2 and not any(procs.alive(pid) for pid in pids)  # cleanup ended them


def test_an_abrupt_exit_leaves_the_children_to_the_bridges_exit_hook(tmp_path: Path) -> None:
    scenario = shipped("life.exit.abrupt-end-leaves-no-child")
    result = run_scenario(scenario, "stdio", options(work_root=tmp_path))
    assert result.status == "passed", result.reason
    assert result.steps[-1].request is not None and result.steps[-1].request["op"] == "abandon"
    leaked = run_scenario(scenario, "stdio", options(mutant("no-kill-at-exit"),
                                                     work_root=tmp_path))
    assert failing(leaked) == {"/expect/processes/alive_after_shutdown":
                               "processes: 1 fake process(es) alive after the host's exit; "
                               "expected 0"}


def test_a_host_that_lingers_after_exit_is_killed_at_the_steps_deadline(tmp_path: Path) -> None:
    data = {"id": "life.sample.exit", "transports": ["stdio"],
            "steps": [{"op": "load"}, {"op": "exit", "timeout_ms": 300}]}
    scenario = write_scenario(tmp_path, data)
    quick = run_scenario(scenario, "stdio", options(scripted("linger:0"), work_root=tmp_path))
    assert quick.status == "passed", quick.reason
    assert [s.op for s in quick.steps] == ["load", "exit"]
    slow = run_scenario(scenario, "stdio", options(scripted("linger:60000"), work_root=tmp_path))
    assert failing(slow) == {"/steps/1": "exit: host still running 300 ms after it answered "
                             "'exit'; killed it"}
