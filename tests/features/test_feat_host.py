"""The host interface: the recording host's effects, and the real subprocess runner."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from palace_bridge.host import (
    CommandDefinition,
    InjectedMessage,
    RecordingHost,
    ToolDefinition,
    ToolOutcome,
    run_subprocess,
)


async def _noop(args: str) -> None:
    return None


async def _echo(call_id: str, params: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome([{"type": "text", "text": f"{call_id}:{params}"}])


def test_effects_are_recorded_in_order() -> None:
    host = RecordingHost()
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    host.register_tool(ToolDefinition("t", "T", "a tool", schema, _echo))
    host.register_command(CommandDefinition("c", "a command", _noop))
    host.send_message("kind", "body", deliver_as="steer")
    host.send_user_message("hello", deliver_as="followUp")
    host.stderr("one line")
    assert host.effects == [
        {"kind": "tool_registered", "name": "t", "description": "a tool", "parameters": schema},
        {"kind": "command_registered", "name": "c", "description": "a command"},
        {"kind": "message", "custom_type": "kind", "content": "body", "display": True,
         "details": None, "deliver_as": "steer", "trigger_turn": False},
        {"kind": "user_message", "content": "hello", "deliver_as": "followUp"},
        {"kind": "stderr", "line": "one line"},
    ]
    assert host.effects[0]["parameters"] is schema
    outcome = asyncio.run(host.call_tool("t", {"n": 2}, call_id="x"))
    assert outcome.text == "x:{'n': 2}"


def test_emit_survives_a_raising_handler_and_collects_injections() -> None:
    host = RecordingHost()
    seen: list[str] = []

    async def broken(payload: dict) -> None:
        raise RuntimeError("handler bug")

    async def injector(payload: dict) -> InjectedMessage:
        seen.append(payload["prompt"])
        return InjectedMessage("wake", "context")

    host.on("before_agent_start", broken)
    unsubscribe = host.on("before_agent_start", injector)
    results = asyncio.run(host.emit("before_agent_start", {"prompt": "p"}))
    assert results == [InjectedMessage("wake", "context")] and seen == ["p"]
    assert [e["kind"] for e in host.effects] == ["error", "injected"]
    assert "handler bug" in host.effects[0]["message"]
    unsubscribe()
    assert asyncio.run(host.emit("before_agent_start", {"prompt": "p"})) == []


def test_exec_runs_a_real_process_with_the_given_env() -> None:
    host = RecordingHost()
    code = "import os, sys; print(os.environ['MARK']); sys.exit(3)"
    result = asyncio.run(host.exec([sys.executable, "-c", code], timeout_ms=10000,
                                   env={"MARK": "m-42"}))
    assert result.stdout.strip() == "m-42" and result.code == 3 and not result.killed
    assert host.of_kind("exec") == [{"kind": "exec", "argv": [sys.executable, "-c", code],
                                     "exit_code": 3, "timed_out": False}]


def test_exec_kills_on_timeout() -> None:
    started = time.monotonic()
    result = asyncio.run(run_subprocess(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        timeout_ms=300))
    elapsed = time.monotonic() - started
    assert result.killed and result.code == 128 + 15  # pi's code for SIGTERM
    assert 0.3 <= elapsed < 5


def test_exec_of_a_missing_program_is_a_result() -> None:
    result = asyncio.run(run_subprocess(["/nonexistent/mempalace-pi-session", "--prepare"]))
    assert result.code == 1 and not result.killed and result.stderr


def test_settle_waits_for_quiet() -> None:
    host = RecordingHost()

    async def scenario() -> float:
        async def late() -> None:
            await asyncio.sleep(0.1)
            host.stderr("late")

        task = asyncio.ensure_future(late())
        started = time.monotonic()
        await host.settle(quiet_ms=200, max_ms=3000)
        await task
        return time.monotonic() - started

    elapsed = asyncio.run(scenario())
    assert host.of_kind("stderr") == [{"kind": "stderr", "line": "late"}]
    assert elapsed >= 0.29
