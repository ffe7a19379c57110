"""The official MCP Python SDK (``mcp`` 2.x) talks streamable HTTP to the fake, both modes."""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .http_support import Fake, running_fake

pytestmark = pytest.mark.sdk


async def sdk_session(url: str, token: str | None) -> dict[str, Any]:
    """Connect, list tools, write and read the diary, ping; report what the SDK saw."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10, read=30))
    async with http, Client(streamable_http_client(url, http_client=http),
                            read_timeout_seconds=20) as client:
        tools = await client.list_tools()
        wrote = await client.call_tool("mempalace_diary_write",
                                       {"agent_name": "sdk", "entry": "hello from the sdk"})
        read = await client.call_tool("mempalace_diary_read", {"agent_name": "sdk"})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ping is deprecated in 2026-07-28, still legacy-valid
            pong = await client.send_ping()
        return {
            "version": client.protocol_version,
            "server": client.server_info.name if client.server_info else None,
            "tools": [tool.name for tool in tools.tools],
            "wrote": json.loads(wrote.content[0].text),
            "wrote_error": wrote.is_error,
            "read": read.content[0].text,
            "pong": pong,
        }


def connect(fake: Fake, token: str | None = None) -> dict[str, Any]:
    return asyncio.run(asyncio.wait_for(sdk_session(fake.url, token), 60))


def assert_full_session(seen: dict[str, Any]) -> None:
    assert seen["server"] == "mempalace"
    assert len(seen["tools"]) == 47
    assert seen["tools"][0].startswith("mempalace_")
    assert seen["wrote"]["success"] is True and not seen["wrote_error"]
    assert "hello from the sdk" in seen["read"]
    assert seen["pong"] is not None


def test_stateless_mode_serves_the_sdk_with_and_without_a_token(tmp_path: Path) -> None:
    with running_fake(tmp_path) as fake:
        assert_full_session(connect(fake))
        # the SDK probes server/discover first; a prompt -32601 makes it fall back to initialize
        [discover] = [r for r in fake.records("recv") if r.get("method") == "server/discover"]
        [reply] = [r for r in fake.records("send") if r.get("id") == discover["id"]]
        assert reply["message"]["error"]["code"] == -32601
        assert reply["t"] - discover["t"] < 0.1
        assert [r["method"] for r in fake.records("recv") if r.get("method")][-5:] == [
            "notifications/initialized", "tools/list", "tools/call", "tools/call", "ping"]
        assert not fake.records("session")
        assert {r["status"] for r in fake.records("http_response")} <= {200, 202, 404}

        assert fake.control("POST", "token", {"token": "sdk-token"}).status_code == 200
        mark = fake.mark()
        assert_full_session(connect(fake, "sdk-token"))
        auth = {r["headers"].get("authorization") for r in fake.records("http_request", mark)}
        assert auth == {"Bearer <redacted>"}
        assert 401 not in {r["status"] for r in fake.records("http_response", mark)}


def test_sessions_mode_serves_the_sdk_with_a_token_and_it_deletes_its_session(
        tmp_path: Path) -> None:
    with running_fake(tmp_path, "--sessions", "--token", "sdk-token") as fake:
        assert_full_session(connect(fake, "sdk-token"))
        events = [r["event"] for r in fake.records("session")]
        assert events == ["opened", "deleted"]
        session = fake.records("session")[0]["session"]
        tools_call = [r for r in fake.records("recv") if r.get("method") == "tools/call"]
        assert len(tools_call) == 2
        assert all(r["http"]["headers"]["mcp-session-id"] == session for r in tools_call)
        auth = {r["headers"].get("authorization") for r in fake.records("http_request")}
        assert auth == {"Bearer <redacted>"}
        assert "sdk-token" not in fake.journal_path.read_text()
