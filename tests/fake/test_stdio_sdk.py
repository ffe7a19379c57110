"""The official MCP Python SDK (``mcp`` 2.x) talks to ``palace-fake-mcp`` over stdio.

mcp 2.x probes ``server/discover`` before ``initialize`` (mode "auto"); the fake, like mempalace,
refuses the unknown method at once, so the SDK falls back to the 2025-11-25 handshake.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters

from palace_conformance.fake.journal import read_journal

from .stdio_harness import FAKE_MCP

pytestmark = pytest.mark.sdk


def test_sdk_client_lists_calls_fails_and_pings(tmp_path: Path) -> None:
    home, journal = tmp_path / "home", tmp_path / "journal.jsonl"
    home.mkdir()
    state = tmp_path / "state.json"  # an initialised palace: a bare fake in a new HOME has none
    state.write_text(json.dumps({"initialised": True}), encoding="utf-8")
    params = StdioServerParameters(
        command=str(FAKE_MCP), args=["--palace", str(tmp_path / "palace")],
        env={"HOME": str(home), "PALACE_FAKE_JOURNAL": str(journal),
             "PALACE_FAKE_STATE": str(state)})
    seen: dict[str, object] = {}

    async def session() -> None:
        with anyio.fail_after(60):
            await talk()

    async def talk() -> None:
        async with Client(params, read_timeout_seconds=20) as client:
            seen["version"] = client.protocol_version
            seen["server"] = (client.server_info.name, client.server_info.version)
            tools = await client.list_tools()
            seen["tools"] = [tool.name for tool in tools.tools]
            status = await client.call_tool("mempalace_status", {})
            seen["status"] = json.loads(status.content[0].text)
            seen["status_is_error"] = status.is_error
            with pytest.raises(MCPError) as caught:
                await client.call_tool("mempalace_diary_read", {"agent": "x"})
            seen["error"] = (caught.value.error.code, caught.value.error.message)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ping is deprecated for 2026-07-28, fine here
                seen["ping"] = await client.send_ping()

    anyio.run(session)

    assert seen["version"] == "2025-11-25"
    assert seen["server"] == ("mempalace", "3.11.0")
    assert len(seen["tools"]) == 47 and seen["tools"][0] == "mempalace_status"  # type: ignore
    assert seen["status"]["total_drawers"] == 0  # type: ignore[index]
    assert not seen["status_is_error"]
    assert seen["error"] == (-32602, "Unknown parameter 'agent' for tool mempalace_diary_read")
    assert seen["ping"] is not None

    records = read_journal(journal)
    methods = [r["method"] for r in records if r["kind"] == "recv"]
    assert methods[:3] == ["server/discover", "initialize", "notifications/initialized"]
    discover_reply = next(r for r in records if r["kind"] == "send")
    assert discover_reply["message"]["error"] == {
        "code": -32601, "message": "Unknown method: server/discover"}
    assert "ping" in methods
    assert records[-1]["kind"] == "process_exit" and records[-1]["code"] == 0
