"""The reference host: DRIVER.md ops, error-kind mapping, deadlines, and a clean stdout."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from palace_bridge import errors
from palace_bridge.host import ToolDefinition, ToolOutcome
from palace_conformance import processes as procs
from palace_conformance.fake.journal import read_journal
from palace_conformance.fake.shims import install_shim
from palace_conformance.hosts import REFERENCE_HOST
from palace_conformance.hosts.reference import CAPABILITIES, ReferenceHost, error_payload
from palace_conformance.resources import tool_catalogue
from palace_conformance.runner.execution.driver import DriverClient
from palace_conformance.selftest.engine import mutant_argv
from palace_conformance.selftest.mutants import find

from .support import mutant


def test_hello_declares_every_capability_of_the_reference_bridge() -> None:
    with DriverClient(REFERENCE_HOST).start() as host:
        hello = host.hello()
    assert hello["protocol"] == 1
    assert set(hello["capabilities"]) == {"stdio", "http", "wakeup", "feeding", "diary_command",
                                          "provenance", "mailbox", "session_preamble",
                                          "keepalive", "cli", "helper_group_kill",
                                          "result_parts"}
    assert hello["capabilities"] == list(CAPABILITIES)


def test_unknown_ops_missing_names_and_deadlines_get_error_kinds_and_the_host_lives_on() -> None:
    with DriverClient(REFERENCE_HOST).start() as host:
        host.hello()
        unknown = host.request("teleport", deadline_ms=2000)
        assert not unknown.ok and unknown.error == {"kind": "bad_request",
                                                    "message": "unknown op 'teleport'"}
        tool = host.request("call_tool", {"name": "mempalace_status", "args": {}},
                            deadline_ms=2000)
        assert not tool.ok and tool.error is not None and tool.error["kind"] == "no_such_tool"
        command = host.request("command", {"name": "mempalace-diary"}, deadline_ms=2000)
        assert command.error is not None and command.error["kind"] == "no_such_command"
        slow = host.request("settle", {"quiet_ms": 5000, "max_ms": 5000, "timeout_ms": 200},
                            deadline_ms=200)
        assert not slow.ok and slow.error is not None and slow.error["kind"] == "host_timeout"
        assert slow.elapsed_ms < 2000
        assert host.request("list_tools", deadline_ms=2000).result == []  # still answering


def test_prints_to_stdout_inside_the_host_never_reach_the_protocol() -> None:
    with DriverClient(mutant("noisy-stdout")).start() as host:
        assert host.hello()["protocol"] == 1
        assert host.request("list_tools", deadline_ms=2000).ok
    assert "noise from the bridge during hello" in host.stderr_text()


@pytest.mark.parametrize(("error", "kind"), [
    (errors.PalaceTimeout("tools/call", 300), "timeout"),
    (errors.PalaceUnavailable("latched"), "unavailable"),
    (errors.PalaceConnectionClosed("child exited"), "connection_closed"),
    (errors.PalaceAuthError(401), "auth"),
    (errors.PalaceSessionLost(), "session_lost"),
    (errors.PalaceProtocolError("bad JSON"), "protocol"),
    (TimeoutError(), "timeout"),
    (RuntimeError("boom"), "exception"),
])
def test_bridge_errors_map_to_driver_kinds(error: Exception, kind: str) -> None:
    payload = error_payload(error)
    assert payload["kind"] == kind and payload["message"]


def test_tool_and_http_errors_keep_code_message_and_data() -> None:
    tool = error_payload(errors.PalaceToolError(-32001, "Peer MCP writer active",
                                                {"failure_kind": "peer_contention"}))
    assert tool == {"kind": "tool_error", "message": "Peer MCP writer active", "code": -32001,
                    "data": {"failure_kind": "peer_contention"}}
    http = error_payload(errors.PalaceHTTPError(503, {"code": -32000, "message": "busy"}))
    assert http["kind"] == "http_error" and http["data"] == {"status": 503}
    assert http["code"] == -32000
    assert error_payload(errors.PalaceAuthError(403))["data"] == {"status": 403}


def _host_with_tool(calls: list[dict[str, Any]]) -> ReferenceHost:
    host = ReferenceHost()

    async def execute(call_id: str, params: dict[str, Any]) -> ToolOutcome:
        calls.append(params)
        return ToolOutcome([{"type": "text", "text": "{\"ok\": 1}"}])

    schema = {"type": "object", "properties": {"limit": {"type": "integer", "maximum": 100}},
              "required": ["limit"]}
    host.host.register_tool(ToolDefinition("t", "t", "a tool", schema, execute))
    return host


def test_call_tool_validates_arguments_against_the_registered_schema_like_pi() -> None:
    calls: list[dict[str, Any]] = []
    host = _host_with_tool(calls)
    bad = asyncio.run(host.handle({"id": 1, "op": "call_tool", "name": "t",
                                   "args": {"limit": 500}}))
    assert bad["ok"] and bad["result"]["is_error"] is True and calls == []
    assert "limit" in bad["result"]["validation"][0]
    unchecked = asyncio.run(host.handle({"id": 2, "op": "call_tool", "name": "t",
                                         "args": {"limit": 500}, "validate": False}))
    assert unchecked["result"] == {"content": [{"type": "text", "text": "{\"ok\": 1}"}],
                                   "is_error": False}
    assert calls == [{"limit": 500}]


def test_a_schema_checked_in_the_warm_server_is_not_checked_again_in_a_host(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``warm_up`` (the warm server, before it forks hosts) checks the fake's catalogues' schemas
    against their metaschema once; a host validating a call against one of them judges the
    arguments alike without walking the metaschema again."""
    import jsonschema

    from palace_conformance.hosts import reference

    monkeypatch.setattr(reference, "_SOUND_SCHEMAS", set())
    reference.warm_up()
    schemas = [tool["inputSchema"] for name in ("full", "light")
               for tool in tool_catalogue(name)["tools"]]
    search = next(tool["inputSchema"] for tool in tool_catalogue()["tools"]
                  if tool["name"] == "mempalace_search")
    fresh = reference._validation_problems(search, {"query": 5, "limit": "x"})

    def walked(cls: Any, schema: Any, **_: Any) -> None:
        raise AssertionError(f"the metaschema was walked again for {schema!r}")

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", classmethod(walked))
    assert all(reference._validator_for(schema) is not None for schema in schemas)
    assert reference._validation_problems(search, {"query": 5, "limit": "x"}) == fresh
    assert any("query" in problem for problem in fresh)


def test_a_schema_the_warm_server_never_saw_is_checked_and_an_unusable_one_lets_calls_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from palace_conformance.hosts import reference

    monkeypatch.setattr(reference, "_SOUND_SCHEMAS", set())
    assert reference._validation_problems({"type": 5}, {"anything": 1}) == []
    assert not reference._SOUND_SCHEMAS  # an unusable schema is never taken as sound
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert reference._validation_problems(schema, {"n": "x"}) == ["n: 'x' is not of type 'integer'"]
    assert len(reference._SOUND_SCHEMAS) == 1
    odd = {**schema, "x-note": object()}  # not JSON: checked each time, never remembered
    assert reference._validation_problems(odd, {"n": 1.5}) == ["n: 1.5 is not of type 'integer'"]
    assert len(reference._SOUND_SCHEMAS) == 1


def test_the_warm_server_checks_the_catalogues_schemas_before_it_forks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from palace_conformance.hosts import reference
    from palace_conformance.runner.execution import warm_server

    monkeypatch.setattr(reference, "_SOUND_SCHEMAS", set())
    warm_server._warm_up()
    assert len(reference._SOUND_SCHEMAS) >= len({json.dumps(t["inputSchema"], sort_keys=True)
                                                 for t in tool_catalogue()["tools"]})


def _host_with_gated_tools(log: list[str]) -> ReferenceHost:
    """Tools ``first`` and ``second`` each wait until the other has started: they end only when
    both run at once (one after the other, in either order, the first to run waits forever)."""
    host = ReferenceHost()
    started = {"first": asyncio.Event(), "second": asyncio.Event()}

    def gated(name: str, other: str, is_error: bool) -> Any:
        async def execute(call_id: str, params: dict[str, Any]) -> ToolOutcome:
            log.append(f"{name} started")
            started[name].set()
            await started[other].wait()
            log.append(f"{name} ended")
            return ToolOutcome([{"type": "text", "text": name}], is_error=is_error)
        return execute

    schema = {"type": "object", "properties": {}}
    host.host.register_tool(ToolDefinition("first", "first", "gated", schema,
                                           gated("first", "second", False)))
    host.host.register_tool(ToolDefinition("second", "second", "gated", schema,
                                           gated("second", "first", True)))
    return host


def test_call_tools_runs_every_call_at_once_and_answers_in_request_order() -> None:
    log: list[str] = []
    host = _host_with_gated_tools(log)
    reply = asyncio.run(host.handle({"id": 7, "op": "call_tools", "calls": [
        {"name": "first", "args": {}, "timeout_ms": 5000},
        {"name": "second", "timeout_ms": 5000}]}))
    assert reply["ok"], reply
    first, second = reply["result"]["calls"]
    # one after the other, the first to run would wait for the other and time out
    assert sorted(log[:2]) == ["first started", "second started"]
    assert sorted(log[2:]) == ["first ended", "second ended"]
    assert first["ok"] and first["result"] == {"content": [{"type": "text", "text": "first"}],
                                               "is_error": False}
    assert second["ok"] and second["result"]["is_error"] is True
    assert isinstance(first["ms"], float) and isinstance(second["ms"], float)


def test_one_failed_call_is_that_calls_outcome_never_the_ops() -> None:
    log: list[str] = []
    host = _host_with_gated_tools(log)
    reply = asyncio.run(host.handle({"id": 8, "op": "call_tools", "calls": [
        {"name": "first", "timeout_ms": 200}, {"name": "nope"}]}))
    assert reply["ok"], reply
    stalled, missing = reply["result"]["calls"]
    assert stalled["ok"] is False and stalled["error"]["kind"] == "host_timeout"
    assert missing["ok"] is False and missing["error"]["kind"] == "no_such_tool"
    assert log == ["first started"]  # nothing released it: its own deadline ended it


@pytest.mark.parametrize("calls", [None, [], [{"name": "first"}], [{"name": "first"}] * 9,
                                   [{"name": "first"}, "second"]])
def test_call_tools_needs_two_to_eight_call_objects(calls: Any) -> None:
    reply = asyncio.run(_host_with_gated_tools([]).handle(
        {"id": 9, "op": "call_tools", "calls": calls}))
    assert reply["ok"] is False and reply["error"]["kind"] == "bad_request"
    assert "2 to 8" in reply["error"]["message"]


def test_effects_are_reported_once_and_stderr_also_goes_to_the_host_stderr(
        capsys: pytest.CaptureFixture[str]) -> None:
    host = ReferenceHost()
    host.host.stderr("mempalace: a warning\nwith two lines")
    first = asyncio.run(host.handle({"id": 1, "op": "list_tools"}))
    second = asyncio.run(host.handle({"id": 2, "op": "list_tools"}))
    assert first["effects"] == [{"kind": "stderr", "line": "mempalace: a warning"},
                                {"kind": "stderr", "line": "with two lines"}]
    assert second["effects"] == []
    assert "mempalace: a warning" in capsys.readouterr().err


def test_set_env_changes_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PC_TEST_GONE", "x")
    host = ReferenceHost()
    reply = asyncio.run(host.handle({"id": 1, "op": "set_env",
                                     "env": {"PC_TEST_NEW": "1", "PC_TEST_GONE": None}}))
    assert reply["ok"] and reply["result"] is None
    assert os.environ.get("PC_TEST_NEW") == "1" and "PC_TEST_GONE" not in os.environ
    monkeypatch.delenv("PC_TEST_NEW")


def test_the_host_reads_requests_from_a_file_or_dev_null(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text('{"id": 1, "op": "hello"}\nnot json\n{"id": 2, "op": "exit"}\n')
    with open(requests, "rb") as stdin:
        done = subprocess.run(REFERENCE_HOST, stdin=stdin, capture_output=True, timeout=30)
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0
    assert [(r["id"], r["ok"]) for r in replies] == [(1, True), (None, False), (2, True)]
    assert replies[1]["error"]["kind"] == "bad_request"
    empty = subprocess.run(REFERENCE_HOST, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=30)
    assert (empty.returncode, empty.stdout) == (0, b"")


def test_noting_env_reads_records_the_names_from_env_looks_up_then_restores_it() -> None:
    from palace_bridge.config import BridgeConfig
    from palace_conformance.hosts.reference import _noting_env_reads

    original = BridgeConfig.__dict__["from_env"]
    names: set[str] = set()
    with _noting_env_reads(names):
        config = BridgeConfig.from_env({"MEMPALACE_MCP_TIMEOUT_MS": "1234", "UNRELATED": "x"})
    assert config.timeout_ms == 1234  # the bridge still gets its values
    assert "MEMPALACE_MCP_TIMEOUT_MS" in names and "MEMPALACE_FEED" in names
    assert "UNRELATED" not in names
    assert BridgeConfig.__dict__["from_env"] is original


def test_introspect_reports_the_names_the_bridge_read_never_the_values(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"],
           "MEMPALACE_REMOTE_URL": "http://127.0.0.1:9/mcp",  # nothing listens: fails fast
           "MEMPALACE_REMOTE_TOKEN": "token-value-never-reported",
           "MEMPALACE_REMOTE_CONNECT_RETRIES": "0"}
    with DriverClient(REFERENCE_HOST).start() as host:
        host.hello()
        assert host.request("load", {"env": env, "cwd": str(tmp_path)}, deadline_ms=20000).ok
        found = host.request("introspect", deadline_ms=2000).result
    observed = found["observed"]
    assert {"MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN",
            "MEMPALACE_MCP_TIMEOUT_MS"} <= set(observed["env_reads"])
    assert observed["env_reads"] == sorted(observed["env_reads"])
    assert observed["files"] == [] and observed["spawned"] == []  # remote: no child
    assert "token-value-never-reported" not in json.dumps(found)


def _stdio_palace(root: Path) -> dict[str, str]:
    """The environment of a bridge whose palace is the fake on PATH (stdio), journaled."""
    install_shim(root / "bin")
    (root / "home").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_FAKE_", "MEMPALACE_", "MEMPAL_"))}
    env.update(PATH=f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}", HOME=str(root / "home"),
               PALACE_FAKE_JOURNAL=str(root / "journal.jsonl"), MEMPALACE_FEED="0")
    return env


def _reloaded(host: DriverClient, env: dict[str, str], cwd: Path) -> tuple[Any, Any, Any]:
    """load, session_start, one call, reload: (first children, reload reply, children after)."""
    host.hello()
    assert host.request("load", {"env": env, "cwd": str(cwd)}, deadline_ms=20000).ok
    assert host.request("event", {"name": "session_start", "payload": {"reason": "startup"}},
                        deadline_ms=20000).ok
    assert host.request("call_tool", {"name": "mempalace_status", "args": {}},
                        deadline_ms=20000).ok
    before = host.request("introspect", deadline_ms=2000).result["children"]
    reloaded = host.request("reload", deadline_ms=30000)
    after = host.request("introspect", deadline_ms=2000).result["children"]
    return before, reloaded, after


def test_reload_stops_the_old_instance_and_loads_a_new_one(tmp_path: Path) -> None:
    env = _stdio_palace(tmp_path)
    with DriverClient(REFERENCE_HOST).start() as host:
        [first], reloaded, children = _reloaded(host, env, tmp_path)
        assert reloaded.ok, reloaded.error
        assert len(reloaded.result["tools"]) == len(tool_catalogue()["tools"])
        assert "session_shutdown" in reloaded.result["events"]
        # the old child is still listed, and gone: session_shutdown(reload) stopped it
        assert len(children) == 2 and children[0]["pid"] == first["pid"]
        assert [c["alive"] for c in children] == [False, True]
        called = host.request("call_tool", {"name": "mempalace_status", "args": {}},
                              deadline_ms=20000)
        assert called.ok and called.result["is_error"] is False
        assert host.request("shutdown", {"reason": "quit"}, deadline_ms=20000).result == {
            "children_alive": 0}
    journal = read_journal(tmp_path / "journal.jsonl")
    calls = [r["pid"] for r in journal if r.get("method") == "tools/call"]
    assert calls == [first["pid"], children[1]["pid"]]  # the new instance used its own child


def test_reload_with_a_bridge_that_ignores_it_keeps_the_old_child_in_every_count(
        tmp_path: Path) -> None:
    env = _stdio_palace(tmp_path)
    with DriverClient(mutant_argv(find("life-reload-leaks-child"))).start() as host:
        [first], reloaded, children = _reloaded(host, env, tmp_path)
        assert reloaded.ok, reloaded.error
        assert [c["alive"] for c in children] == [True, True]
        stopped = host.request("shutdown", {"reason": "quit", "grace_ms": 300},
                               deadline_ms=20000)
        assert stopped.result == {"children_alive": 1}  # the new one stopped, the old one not
        assert host.request("exit", deadline_ms=10000).ok
        assert host.close(grace_s=10) == 0
    # the host's exit stopped every instance's client: the old child saw its stdin close
    deadline = time.monotonic() + 10
    while procs.alive(first["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    exits = {r["pid"]: r["reason"] for r in read_journal(tmp_path / "journal.jsonl")
             if r["kind"] == "process_exit"}
    assert exits.get(first["pid"]) == "stdin EOF"


def test_reload_uses_the_current_environment_and_needs_a_loaded_bridge(tmp_path: Path) -> None:
    env = _stdio_palace(tmp_path)
    with DriverClient(REFERENCE_HOST).start() as host:
        host.hello()
        early = host.request("reload", deadline_ms=5000)
        assert not early.ok and early.error is not None and early.error["kind"] == "bad_request"
        assert host.request("load", {"env": env, "cwd": str(tmp_path)}, deadline_ms=20000).ok
        assert host.request("set_env", {"env": {
            "MEMPALACE_REMOTE_URL": "http://127.0.0.1:9/mcp",  # nothing listens: fails fast
            "MEMPALACE_REMOTE_CONNECT_RETRIES": "0"}}, deadline_ms=2000).ok
        reloaded = host.request("reload", deadline_ms=30000)
        assert reloaded.ok and reloaded.result["tools"] == []  # remote now, and unreachable
        children = host.request("introspect", deadline_ms=2000).result["children"]
        assert len(children) == 1 and not children[0]["alive"]  # no new local child
    starts = [r for r in read_journal(tmp_path / "journal.jsonl")
              if r["kind"] == "process_start"]
    assert len(starts) == 1


def test_cli_runs_palace_bridge_as_a_user_would_with_the_given_environment(
        tmp_path: Path) -> None:
    """The ``cli`` op runs the bridge's program in a process of its own: its exit status and
    both streams come back whole, with exactly the environment given (here no palace)."""
    env = {"PATH": str(tmp_path / "no-such-bin"), "HOME": str(tmp_path)}
    with DriverClient(REFERENCE_HOST).start() as host:
        host.hello()
        down = host.request("cli", {"args": ["tools"], "env": env, "cwd": str(tmp_path)},
                            deadline_ms=20000)
        usage = host.request("cli", {"args": ["call", "mempalace_status", "[1]"], "env": env},
                             deadline_ms=20000)
        refused = host.request("cli", {"args": "tools", "env": env}, deadline_ms=2000)
    assert down.ok and down.result["exit_code"] == 3 and down.result["stdout"] == ""
    assert down.result["stderr"].endswith(
        "palace-bridge: local palace (mempalace-mcp) unavailable: mempalace-mcp not found on "
        "PATH\n")
    assert usage.ok and usage.result == {
        "exit_code": 2, "stdout": "",
        "stderr": "palace-bridge: JSON-ARGS must be a JSON object such as '{\"limit\": 3}'\n"}
    assert refused.error is not None and refused.error["kind"] == "bad_request"
    assert "a list of strings" in refused.error["message"]


def test_cli_past_its_deadline_kills_the_programs_group_and_the_host_lives_on(
        tmp_path: Path) -> None:
    """``run`` waits on stdin for ever; the op's deadline kills it (host_timeout) and the host
    answers the next request."""
    env = {"PATH": str(tmp_path / "no-such-bin"), "HOME": str(tmp_path)}
    with DriverClient(REFERENCE_HOST).start() as host:
        host.hello()
        slow = host.request("cli", {"args": ["run"], "env": env, "stdin": "",
                                    "timeout_ms": 60000}, deadline_ms=70000)
        assert slow.ok and slow.result["exit_code"] == 3  # stdin closed: run ends at once
        hung = host.request("cli", {"args": ["-c", "x"], "env": env}, deadline_ms=20000)
        assert hung.ok and hung.result["exit_code"] == 2  # argparse: unknown option
