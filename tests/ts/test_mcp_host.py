"""pi's own MCP client as a bridge: raw ``McpClient`` and pi 1.6.0's ``McpServerConnection``.

The two shapes must differ exactly where the research says pi's wrapper differs from the bare
client: after a forgotten HTTP session the wrapper re-initializes and retries once, the raw client
does not; after the stdio child dies the wrapper respawns on the next call, the raw client is
closed for good.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import CATALOGUE_TOOLS, host, of_kind, palace, payload

SHAPES = {"raw": "pi-mcp", "wrapped": "pi-mcp:wrapped"}


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("shape", ["raw", "wrapped"])
def test_lists_the_catalogue_and_calls_a_tool(tmp_path: Path, shape: str, transport: str) -> None:
    token = "tok-123" if transport == "http" else None
    with palace(tmp_path / "palace", transport, token=token) as fake, \
            host(SHAPES[shape], tmp_path / "host") as h:
        hello = h.ok("hello").result
        assert hello["capabilities"] == ["stdio", "http", "result_parts"]
        assert hello["impl"] == f"palace-conformance-pi-mcp-host-{shape}"
        assert "@earendil-works/pi-mcp 1.6.0" in hello["bridge"]
        effects = h.start_session(fake.bridge_env(), tmp_path)
        assert len(of_kind(effects, "tool_registered")) == CATALOGUE_TOOLS
        assert len(h.ok("list_tools").result) == CATALOGUE_TOOLS

        wrote = h.ok("call_tool", name="mempalace_diary_write",
                     args={"agent_name": "pi", "entry": "SESSION:x|drove.pi-mcp"})
        assert wrote.result["is_error"] is False and payload(wrote.result)["success"] is True
        read = h.ok("call_tool", name="mempalace_diary_read", args={"agent_name": "pi"})
        assert "drove.pi-mcp" in read.result["content"][0]["text"]
        assert [c["tool"] for c in fake.calls()] == ["mempalace_diary_write",
                                                     "mempalace_diary_read"]
        [init] = [r for r in fake.records("recv") if r.get("method") == "initialize"]
        assert init["message"]["params"]["clientInfo"]["name"] == "pi"
        children = h.ok("introspect").result["children"]
        if transport == "stdio":
            assert [c["argv"][0] for c in children] == ["mempalace-mcp"]
        else:
            assert children == []
            posts = [r for r in fake.records("http_request") if r["method"] == "POST"]
            assert posts and all(r["headers"]["authorization"] == "Bearer <redacted>"
                                 for r in posts)
        assert h.ok("shutdown").result == {"children_alive": 0}


@pytest.mark.parametrize("shape", ["raw", "wrapped"])
def test_forgotten_session_only_the_wrapper_reinitializes(tmp_path: Path, shape: str) -> None:
    with palace(tmp_path / "palace", "http", sessions=True,
                faults=("forget_session@mempalace_search",)) as fake, \
            host(SHAPES[shape], tmp_path / "host") as h:
        h.start_session(fake.bridge_env(), tmp_path)
        assert fake.count("initialize") == 1
        search = h.op("call_tool", name="mempalace_search", args={"query": "x"})
        after = h.op("call_tool", name="mempalace_status", args={})
        statuses = [r["status"] for r in fake.records("http_response")]
        assert 404 in statuses
        if shape == "raw":
            assert not search.ok and search.error["kind"] == "session_lost"
            assert not after.ok and after.error["kind"] == "session_lost"  # never heals
            assert fake.count("initialize") == 1
            assert len(fake.calls("mempalace_search")) == 1
        else:
            assert search.ok and payload(search.result)["query"] == "x"
            assert after.ok and after.result["is_error"] is False
            assert fake.count("initialize") == 2  # one new session ...
            assert len(fake.calls("mempalace_search")) == 2  # ... and one retry
        assert [r["event"] for r in fake.records("session")][:2] == ["opened", "forgotten"]


@pytest.mark.parametrize("shape", ["raw", "wrapped"])
def test_dead_stdio_child_only_the_wrapper_respawns(tmp_path: Path, shape: str) -> None:
    with palace(tmp_path / "palace", "stdio", faults=("exit@mempalace_search,code=1",)) as fake, \
            host(SHAPES[shape], tmp_path / "host") as h:
        h.start_session(fake.bridge_env(), tmp_path)
        crashed = h.op("call_tool", name="mempalace_search", args={"query": "x"})
        assert not crashed.ok and crashed.error["kind"] == "connection_closed"
        after = h.op("call_tool", name="mempalace_status", args={})
        starts = {r["pid"] for r in fake.records("process_start")}
        if shape == "raw":
            assert not after.ok and after.error["kind"] == "unavailable"
            assert "MCP client is closed" in after.error["message"]
            assert len(starts) == 1
        else:
            assert after.ok and after.result["is_error"] is False
            assert len(starts) == 2
        assert h.ok("shutdown").result == {"children_alive": 0}
