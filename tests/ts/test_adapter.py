"""The real pi-mcp-adapter extension (npm, 2.36.0) loaded by the extension host.

The host writes the adapter's mcp.json from the bridge environment; the adapter then connects in
the background at session_start, registers every palace tool directly (``directTools``), and
reports failures as results, which the host turns into DRIVER.md error kinds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from palace_conformance.resources import tool_catalogue

from .support import host, of_kind, palace, payload


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_adapter_registers_and_calls_palace_tools(tmp_path: Path, transport: str) -> None:
    token = "adapter-token" if transport == "http" else None
    with palace(tmp_path / "palace", transport, token=token) as fake, \
            host("pi-mcp-adapter", tmp_path / "host") as h:
        hello = h.ok("hello").result
        assert hello["bridge"] == "pi-mcp-adapter 2.36.0"
        assert hello["capabilities"] == ["stdio", "http", "result_parts"]
        assert "capabilities_source" not in hello  # the host knows the adapter: authoritative
        effects = h.start_session(fake.bridge_env(), tmp_path)
        registered = {e["name"]: e["parameters"] for e in of_kind(effects, "tool_registered")}
        catalogue = {t["name"]: t["inputSchema"] for t in tool_catalogue()["tools"]}
        noise = [e for e in effects if e["kind"] in ("stderr", "error", "notify")]
        assert set(catalogue) <= set(registered), (noise, h.client.stderr_tail(10))
        assert registered["mempalace_search"]["properties"]["limit"] == \
            catalogue["mempalace_search"]["properties"]["limit"]

        mark = fake.mark()
        found = h.ok("call_tool", name="mempalace_search", args={"query": "adapter", "limit": 2})
        assert found.result["is_error"] is False
        assert payload(found.result)["query"] == "adapter"
        [call] = fake.calls("mempalace_search", since=mark)
        assert call["message"]["params"]["arguments"] == {"query": "adapter", "limit": 2}

        # a JSON-RPC error comes back as a "call_failed" result holding only the message: the
        # adapter drops the code, so the host can only map it by its text (here: exception)
        rpc = h.op("call_tool", name="mempalace_diary_read", args={}, validate=False)
        assert not rpc.ok and rpc.error["kind"] == "exception" and "code" not in rpc.error
        assert "Missing required parameter 'agent_name'" in rpc.error["message"]
        assert rpc.error["data"]["adapter_error"] == "call_failed"
        assert fake.records("send")[-1]["message"]["error"]["code"] == -32602

        seen = h.ok("introspect").result
        assert {"registerTool", "registerCommand", "getFlag", "events.emit"} <= set(
            seen["api_touched"])
        if transport == "stdio":
            assert any(c["argv"][0] == "mempalace-mcp" for c in seen["children"])
        else:
            assert seen["children"] == []
            posts = [r for r in fake.records("http_request") if r["method"] == "POST"]
            assert posts and all(r["headers"]["authorization"] == "Bearer <redacted>"
                                 for r in posts)
        assert h.ok("shutdown").result == {"children_alive": 0}
