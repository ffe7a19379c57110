"""Subject-fake runs beyond JSON-RPC: raw ``http`` steps, ``close_stdin``, ``kill_lock_holder``.

Each shipped scenario that uses them must pass as written and fail, at the right pointer, when
its expectation is wrong or the action it relies on does not happen.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.execution.world import World
from palace_conformance.scenarios.loader import load_scenario, scenarios_dir
from palace_conformance.scenarios.model import Scenario, Step

from .support import failing, options, shipped


def raw(sid: str) -> dict[str, Any]:
    path = scenarios_dir() / "fake" / f"{sid}.json"
    return copy.deepcopy(json.loads(path.read_text()))


def variant(directory: Path, data: dict[str, Any]) -> Scenario:
    """A changed copy of a shipped scenario, loaded (validated) like any other."""
    target = directory / "fake" / f"{data['id']}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data))
    return load_scenario(target)


def test_routes_and_limits_pass_and_a_wrong_status_fails_at_its_pointer(tmp_path: Path) -> None:
    result = run_scenario(shipped("fake.http.routes-and-limits"), "http",
                          options(work_root=tmp_path / "runs"))
    assert result.status == "passed", result.reason
    too_large = next(s for s in result.steps if s.key == "too-large")
    assert too_large.ok and too_large.result["status"] == 413
    assert too_large.request == {"op": "http", "method": "POST",
                                 "headers": {"Content-Type": "application/json"},
                                 "body_size": 16 * 1024 * 1024 + 1}
    assert set(too_large.result["headers"]) >= {"content-type", "content-length", "connection"}

    data = raw("fake.http.routes-and-limits")
    index = next(i for i, s in enumerate(data["steps"]) if s.get("as") == "too-large")
    data["steps"][index]["expect"]["result"]["status"] = 200  # a fake that reads 16 MiB + 1
    result = run_scenario(variant(tmp_path, data), "http", options(work_root=tmp_path / "runs"))
    assert result.status == "failed"
    assert list(failing(result)) == [f"/steps/{index}/expect/result"]
    assert "413" in failing(result)[f"/steps/{index}/expect/result"]


def test_the_check_order_scenario_fails_when_a_later_check_would_answer(tmp_path: Path) -> None:
    data = raw("fake.http.check-order-host-origin-token-path")
    data["steps"][0]["expect"]["result"]["status"] = 401  # a fake that checks the token first
    result = run_scenario(variant(tmp_path, data), "http", options(work_root=tmp_path))
    assert result.status == "failed"
    assert list(failing(result)) == ["/steps/0/expect/result"]


def test_close_stdin_reports_the_exit_code_and_later_rpcs_find_the_pipe_gone(
        tmp_path: Path) -> None:
    result = run_scenario(shipped("fake.stdio.stdin-eof-exits-zero"), "stdio",
                          options(work_root=tmp_path))
    assert result.status == "passed", result.reason
    eof = next(s for s in result.steps if s.key == "eof")
    assert (eof.ok, eof.result) == (True, {"exit_code": 0})
    assert [r["reason"] for r in result.journal if r["kind"] == "process_exit"] == ["stdin EOF"]


def test_takeover_fails_when_the_holder_is_not_killed(tmp_path: Path) -> None:
    data = raw("fake.lock.takeover-when-holder-dies")
    index = next(i for i, s in enumerate(data["steps"]) if s.get("as") == "holder-dies")
    data["steps"][index] = {"op": "sleep", "ms": 200}  # the holder lives on
    result = run_scenario(variant(tmp_path, data), "stdio", options(work_root=tmp_path))
    assert result.status == "failed"
    assert set(failing(result)) == {
        f"/steps/{index + 1}/expect/result", f"/steps/{index + 1}/expect/journal/0",
        f"/steps/{index + 2}/expect/result", "/expect/journal/0", "/expect/journal/1",
        "/expect/journal/2"}


def test_killing_a_lock_holder_that_does_not_exist_is_one_bad_request_line(
        tmp_path: Path) -> None:
    world = World(shipped("fake.stdio.stdin-eof-exits-zero"), "stdio", work_root=tmp_path)
    try:
        world.open()
        step = Step(index=0, op="server", params={"action": "kill_lock_holder"})
        ok, result, error = world.server_action(step)
    finally:
        world.close()
    assert (ok, result) == (False, None)
    assert error == {"kind": "bad_request", "message": "no lock holder to kill: the scenario "
                     "does not set palace.lock.held"}


def write_fake(directory: Path, data: dict[str, Any]) -> Scenario:
    body = {"schema_version": 1, "title": data["id"], "covers": ["FAKE-05"], "subject": "fake",
            **data}
    return variant(directory, body)


def test_an_http_step_without_a_response_is_connection_closed_or_timeout(
        tmp_path: Path) -> None:
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    scenario = write_fake(tmp_path, {
        "id": "fake.sample.no-response",
        "transports": ["http"],
        "faults": [{"id": "reset-first", "on": {"method": "ping", "nth": 1},
                    "action": "reset", "after_bytes": 0},
                   {"id": "stall-second", "on": {"method": "ping", "nth": 2},
                    "action": "stall", "ms": 5000}],
        "steps": [
            {"op": "http", "as": "reset", "method": "POST", "body": ping,
             "expect": {"error": {"kind": "connection_closed"}}},
            {"op": "http", "as": "stalled", "method": "POST", "body": ping, "timeout_ms": 300,
             "expect": {"error": {"kind": "timeout"},
                        "elapsed_ms": {"at_least": 300, "slack_ms": 4000}}},
            {"op": "server", "action": "kill"},
            {"op": "http", "as": "gone", "method": "GET", "path": "/healthz",
             "expect": {"error": {"kind": "connection_closed"}}},
        ],
    })
    result = run_scenario(scenario, "http", options(work_root=tmp_path))
    assert result.status == "passed", result.reason
    assert [s.error["kind"] for s in result.steps if s.op == "http"] == [
        "connection_closed", "timeout", "connection_closed"]
    assert all(s.result is None for s in result.steps if s.op == "http")
