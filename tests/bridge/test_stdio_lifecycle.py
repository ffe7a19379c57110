"""LIFE and TOOL behaviours over the local stdio child, against the real fake on PATH."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal

import pytest

from palace_bridge.client import ToolResult, ToolSpec
from palace_bridge.errors import PalaceToolError, PalaceUnavailable
from palace_conformance.resources import tool_catalogue

from .support import Scenario, alive, eventually, run, wait_until


@pytest.fixture
def scenario(tmp_path):
    return Scenario(tmp_path)


def test_life01_default_transport_is_a_local_child_found_on_path(scenario):
    async def main():
        client = scenario.client()
        assert not client.remote
        assert await client.start()
        pids = client.child_pids
        await client.stop()
        return pids

    pids = run(main())
    assert pids == scenario.pids() and len(pids) == 1
    start = scenario.records("process_start")[0]
    assert start["transport"] == "stdio"


def test_life03_transport_is_chosen_once_at_load(scenario):
    async def main():
        env = scenario.env
        from palace_bridge.client import create_client

        client = create_client(env, stderr=scenario.stderr)
        env["MEMPALACE_REMOTE_URL"] = "http://127.0.0.1:9/mcp"  # too late: ignored
        assert await client.start()
        result = await client.call_tool("mempalace_status", {})
        await client.stop()
        return client.remote, result

    remote, result = run(main())
    assert not remote and not result.is_error
    assert len(scenario.pids()) == 1


def test_life04_handshake_order_before_any_tool_call(scenario):
    async def main():
        client = scenario.client()
        await client.start()
        await client.call_tool("mempalace_status", {})
        await client.stop()

    run(main())
    assert scenario.wire()[:4] == ["initialize", "notifications/initialized", "tools/list",
                                   "tools/call"]
    init = scenario.received("initialize")[0]["message"]
    assert init["params"]["protocolVersion"] == "2025-11-25"
    assert init["params"]["clientInfo"]["name"] == "palace-bridge"


def test_life04_tools_list_follows_next_cursor(scenario):
    catalogue = tool_catalogue()["tools"]
    first_page = catalogue[:5]
    scenario.plan = {"faults": [{
        "id": "page-1", "on": {"method": "tools/list", "nth": 1}, "action": "result",
        "result": {"tools": first_page, "nextCursor": "page-2-opaque"}}]}

    async def main():
        client = scenario.client()
        await client.start()
        tools = await client.tools()
        await client.stop()
        return tools

    tools = run(main())
    lists = scenario.received("tools/list")
    assert len(lists) == 2
    assert "params" not in lists[0]["message"] or "cursor" not in lists[0]["message"]["params"]
    assert lists[1]["message"]["params"] == {"cursor": "page-2-opaque"}
    assert [t.name for t in tools] == [t["name"] for t in first_page + catalogue]


def test_life06_stop_closes_stdin_and_leaves_no_process(scenario):
    async def main():
        client = scenario.client()
        await client.start()
        pid = client.child_pids[0]
        await client.stop()
        return pid, client.child_pids

    pid, after = run(main())
    assert after == []
    assert not alive(pid)
    exits = scenario.records("process_exit")
    assert exits[-1]["reason"] == "stdin EOF", "closing stdin comes first"


def test_life06_stop_escalates_to_sigterm_then_sigkill(scenario):
    """A child stuck in a request never sees EOF, and this one ignores SIGTERM too."""
    scenario.faults = ["stall@mempalace_status", "ignore_sigterm@$startup"]

    async def main():
        import asyncio

        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="0", MEMPALACE_MCP_KILL_GRACE_MS="200")
        await client.start()
        pid = client.child_pids[0]
        call = asyncio.create_task(client.call_tool("mempalace_status", {}))
        assert await eventually(lambda: scenario.received("tools/call"), 5)
        await asyncio.sleep(0.05)
        await client.stop()
        outcome = await asyncio.gather(call, return_exceptions=True)
        return pid, outcome[0]

    pid, outcome = run(main())
    assert not alive(pid)
    signals = scenario.records("signal")
    assert [(s["signal"], s["action"]) for s in signals] == [("SIGTERM", "ignored")]
    assert not [r for r in scenario.records("process_exit") if r["pid"] == pid], \
        "only SIGKILL ended it (no clean exit recorded)"
    assert isinstance(outcome, Exception)


def test_tool01_every_schema_is_passed_through_unchanged(scenario):
    async def main():
        client = scenario.client()
        await client.start()
        tools = await client.tools()
        await client.stop()
        return tools

    tools = run(main())
    catalogue = tool_catalogue()["tools"]
    assert len(tools) == 47
    for spec, expected in zip(tools, catalogue, strict=True):
        assert isinstance(spec, ToolSpec)
        assert spec.name == expected["name"]
        assert spec.input_schema == expected["inputSchema"]
        assert spec.description == expected["description"]
        assert spec.annotations == expected.get("annotations")


def test_tool02_arguments_reach_tools_call_unchanged(scenario):
    arguments = {"type": "ask", "stream": "s", "body": "héllo\nwörld → ✓",
                 "metadata": {"n": 1, "f": 2.5, "t": True, "none": None,
                              "nested": {"list": [1, "two", {"three": 3}]}},
                 "artifact_ids": ["a", "b"]}

    async def main():
        client = scenario.client()
        await client.start()
        with contextlib.suppress(PalaceToolError):  # the wire is what we check here
            await client.call_tool("mempalace_event_append", arguments)
        await client.stop()

    run(main())
    sent = scenario.received("tools/call")[0]["message"]["params"]
    assert sent == {"name": "mempalace_event_append", "arguments": arguments}
    assert json.dumps(sent["arguments"]) == json.dumps(arguments), "key order kept too"


def test_tool03_is_error_results_are_results_not_exceptions(scenario):
    content = [{"type": "text", "text": "embedding model failed"}]
    scenario.plan = {"faults": [
        {"id": "is-error", "on": {"method": "tools/call", "tool": "mempalace_search"},
         "action": "result", "result": {"content": content, "isError": True}},
        {"id": "soft-fail", "on": {"method": "tools/call", "tool": "mempalace_status"},
         "action": "result",
         "result": {"content": [{"type": "text", "text": '{"success": false, "error": "x"}'}],
                    "structuredContent": {"success": False}}}]}

    async def main():
        client = scenario.client()
        await client.start()
        bad = await client.call_tool("mempalace_search", {"query": "q"})
        soft = await client.call_tool("mempalace_status", {})
        await client.stop()
        return bad, soft

    bad, soft = run(main())
    assert isinstance(bad, ToolResult) and bad.is_error and bad.content == content
    assert bad.text == "embedding model failed"
    assert not soft.is_error and soft.text == '{"success": false, "error": "x"}'
    assert soft.structured == {"success": False}
    assert soft.raw["content"] == soft.content


@pytest.mark.parametrize(("tool", "arguments", "fault", "code", "needle"), [
    ("mempalace_diary_read", {"agent": "pi"}, None, -32602,
     "Unknown parameter 'agent' for tool mempalace_diary_read"),
    ("mempalace_add_drawer", {"wing": "w", "room": "r", "content": "c"},
     "lock_held@mempalace_add_drawer,pid=4242", -32001, "Peer MCP writer active"),
    ("mempalace_nope", {}, None, -32601, "Unknown tool: mempalace_nope"),
])
def test_tool04_json_rpc_errors_keep_code_message_and_data(scenario, tool, arguments, fault,
                                                           code, needle):
    if fault:
        scenario.faults = [fault]

    async def main():
        client = scenario.client()
        await client.start()
        with pytest.raises(PalaceToolError) as caught:
            await client.call_tool(tool, arguments)
        after = await client.call_tool("mempalace_status", {})
        await client.stop()
        return caught.value, after

    error, after = run(main())
    assert error.code == code and needle in error.message and needle in str(error)
    if code == -32001:
        assert error.data["failure_kind"] == "peer_contention"
        assert "4242" in error.data["reason"]
    assert not after.is_error, "the session goes on after a tool error"
    assert len(scenario.pids()) == 1


def test_tool05_unavailable_at_load_registers_nothing_and_raises_nothing(tmp_path):
    scenario = Scenario(tmp_path)

    async def main():
        client = scenario.client(PATH="/nonexistent-dir")
        started = await client.start()
        tools = await client.tools()
        with pytest.raises(PalaceUnavailable):
            await client.call_tool("mempalace_status", {})
        await client.stop()
        return started, tools, client.available

    started, tools, available = run(main())
    assert (started, tools, available) == (False, [], False)
    assert scenario.pids() == []


@pytest.mark.parametrize("stall", [False, True])
def test_life06_no_orphans_even_when_the_server_started_helpers(scenario, stall):
    """The child runs in its own process group, and the whole group goes on stop/kill."""
    real = scenario.bin / "mempalace-mcp-real"
    (scenario.bin / "mempalace-mcp").rename(real)
    marker = scenario.root / "helper.pid"
    wrapper = scenario.bin / "mempalace-mcp"
    wrapper.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > '{marker}'\nexec '{real}' \"$@\"\n")
    wrapper.chmod(0o755)
    if stall:
        scenario.faults = ["stall@mempalace_status"]

    async def main():
        client = scenario.client()
        await client.start()
        if stall:  # a timeout kills the child: its helper must go too
            with contextlib.suppress(Exception):
                await client.call_tool("mempalace_status", {})
        await client.stop()

    run(main())
    helper = int(marker.read_text())
    gone = wait_until(lambda: not alive(helper), 5)
    if not gone:
        os.kill(helper, signal.SIGKILL)  # clean up our own helper before failing
    assert gone, "the helper outlived its server"


def test_a_server_command_through_a_file_cannot_run_and_is_not_retried(tmp_path):
    """A MEMPALACE_MCP_BIN whose directory part is a file (ENOTDIR) is a command that cannot run,
    like one not found (ENOENT) or not executable (EACCES): the start gives up at once, with no
    respawn attempts (the reference's choice: retrying a path that cannot be run helps nobody;
    no rule fixes it, so no scenario does)."""
    scenario = Scenario(tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")

    async def main():
        client = scenario.client(MEMPALACE_MCP_BIN=str(a_file / "mempalace-mcp"),
                                 MEMPALACE_MCP_MAX_RESPAWNS="3",
                                 MEMPALACE_MCP_RESPAWN_BACKOFF_MS="60000")
        # a respawn would wait its 60 s backoff first: giving up at once ends far inside 30 s
        started = await asyncio.wait_for(client.start(), 30)
        with pytest.raises(PalaceUnavailable):
            await asyncio.wait_for(client.call_tool("mempalace_status", {}), 30)
        await client.stop()
        return started

    assert run(main()) is False
    assert scenario.pids() == []
