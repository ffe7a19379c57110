"""Issue 13, the reference bridge over HTTP against hostile servers (real loopback sockets): no POST
without a deadline, and a flood of server requests neither starves the call's deadline nor leaves
unbounded work behind.

Times are checked only as "does not hang": an upper bound with ten seconds of slack.
"""

from __future__ import annotations

import asyncio
import io
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from palace_bridge import http
from palace_bridge.client import create_client
from palace_bridge.errors import PalaceProtocolError, PalaceTimeout
from palace_bridge.http import MAX_ANSWERS_IN_FLIGHT, HttpTransport
from palace_bridge.log import Log

from .hostile_http import Exchange, HostileHttp
from .support import remote_env, run

HANG_SLACK_S = 10.0
TEST_BOUND_S = 60.0  # past this the old bug is proven: fail instead of hanging pytest


@pytest.fixture
def hostile():
    servers: list[HostileHttp] = []

    def make(handler):
        server = HostileHttp(handler)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def test_start_is_bounded_when_the_initialized_notification_is_never_answered(hostile):
    """Item 5: ``notifications/initialized`` shares the handshake's deadline."""

    async def handler(message: dict, exchange: Exchange) -> None:
        if message.get("method") == "notifications/initialized":
            await exchange.hold()
        await exchange.accepted()

    server = hostile(handler)
    stderr = io.StringIO()
    client = create_client(remote_env(server.url, MEMPALACE_MCP_INIT_TIMEOUT_MS="1000",
                                      MEMPALACE_REMOTE_CONNECT_RETRIES="1"), stderr=stderr)

    async def main() -> tuple[bool, float, float]:
        began = time.monotonic()
        started = await asyncio.wait_for(client.start(), TEST_BOUND_S)
        start_s = time.monotonic() - began
        began = time.monotonic()
        await asyncio.wait_for(client.stop(), TEST_BOUND_S)
        return started, start_s, time.monotonic() - began

    started, start_s, stop_s = run(main())
    assert started is False
    assert server.methods().count("notifications/initialized") == 2  # first try and one retry
    assert start_s < 2 * 1.0 + HANG_SLACK_S
    assert stop_s < HANG_SLACK_S
    assert "unavailable after retries" in stderr.getvalue()


def test_a_never_answered_cancel_notice_does_not_outlive_its_budget(hostile):
    """Item 5: a cancel notice nobody answers ends by itself (the policy's message budget)."""

    async def handler(message: dict, exchange: Exchange) -> None:
        if message.get("method") in ("tools/call", "notifications/cancelled"):
            await exchange.hold()
        await exchange.accepted()

    server = hostile(handler)
    client = create_client(remote_env(server.url), stderr=io.StringIO())

    async def main() -> bool:
        assert await client.start()
        with pytest.raises(PalaceTimeout):
            await client.call_tool("mempalace_status", {}, timeout_ms=300)
        engine = client.engine
        assert engine._tasks, "the cancel notice is being sent"
        drained = await asyncio.wait_for(_until(lambda: not engine._tasks), TEST_BOUND_S)
        await client.stop()
        return drained

    assert run(main())
    assert "notifications/cancelled" in server.methods()


async def _until(predicate) -> bool:
    while not predicate():
        await asyncio.sleep(0.05)
    return True


def test_a_flood_of_server_requests_is_bounded_and_the_deadline_still_fires(hostile):
    """Item 7: ten thousand ``ping``s on one SSE answer, never our response; the server holds
    every answer POST. At most MAX_ANSWERS_IN_FLIGHT answers are open at once, the call times out
    on time, and stop() leaves nothing running."""
    open_answers = 0
    most_open = 0

    async def handler(message: dict, exchange: Exchange) -> None:
        nonlocal open_answers, most_open
        if message.get("method") == "tools/call":
            await exchange.sse_start()
            batch = b"".join(
                b'event: message\ndata: {"jsonrpc":"2.0","id":"srv-%d","method":"ping"}\n\n' % n
                for n in range(1000))
            for _ in range(10):
                await exchange.sse_send(batch)
            await exchange.hold()
        elif "method" not in message:  # our answer to one of its pings: never acknowledged
            open_answers += 1
            most_open = max(most_open, open_answers)
            try:
                await exchange.hold()
            finally:
                open_answers -= 1
        await exchange.accepted()

    server = hostile(handler)
    client = create_client(remote_env(server.url, MEMPALACE_MCP_TIMEOUT_MS="2000"),
                           stderr=io.StringIO())

    async def main() -> tuple[float, float, float]:
        assert await client.start()
        began = time.monotonic()
        with pytest.raises(PalaceTimeout):
            await asyncio.wait_for(client.call_tool("mempalace_status", {}), TEST_BOUND_S)
        call_s = time.monotonic() - began
        began = time.monotonic()
        await asyncio.wait_for(client.stop(), TEST_BOUND_S)
        stop_s = time.monotonic() - began
        began = time.monotonic()  # whatever stop() left running must end by itself, soon
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if others:
            await asyncio.wait_for(asyncio.gather(*others, return_exceptions=True), TEST_BOUND_S)
        return call_s, stop_s, time.monotonic() - began

    call_s, stop_s, linger_s = run(main())
    assert 1 <= server.methods().count("response") <= MAX_ANSWERS_IN_FLIGHT
    assert most_open <= MAX_ANSWERS_IN_FLIGHT
    assert call_s < 2.0 + HANG_SLACK_S
    assert stop_s < HANG_SLACK_S
    assert linger_s < HANG_SLACK_S


def test_an_oversized_sse_event_is_a_protocol_error(hostile, monkeypatch):
    """Medium item: the SSE decoder is bounded, and its bound reaches the caller as a clear
    protocol error (the bound is lowered here so the test sends kilobytes, not 64 MiB)."""
    monkeypatch.setattr("palace_bridge.http.MAX_EVENT", 1000)

    async def handler(message: dict, exchange: Exchange) -> None:
        if message.get("method") == "tools/call":
            await exchange.sse_start()
            await exchange.sse_send(b"data: " + b"x" * 4000)
            await exchange.hold()
        await exchange.accepted()

    first_call_fails(hostile(handler), "30000", "grew past 1000 characters")


def test_an_answer_past_64_mib_is_a_protocol_error(hostile):
    """docs/choices.md: one HTTP answer is at most 64 MiB, whatever it declares; past that the
    call fails with an error naming the bound. The reference's own choice, which no scenario may
    pin (another bridge may take the answer whole), so this test sends the real 64 MiB and one
    byte more rather than lowering the bound as the others do."""
    bound = 64 * 1024 * 1024

    async def handler(message: dict, exchange: Exchange) -> None:
        if message.get("method") == "tools/call":
            text = {"type": "text", "text": "ok"}
            await exchange.json({"jsonrpc": "2.0", "id": message["id"],
                                 "result": {"content": [text], "_padding": "x" * bound}})
            return
        await exchange.accepted()

    first_call_fails(hostile(handler), "60000", f"exceeded {bound} bytes")


def test_an_sse_answer_past_the_body_bound_is_a_protocol_error(hostile, monkeypatch):
    """docs/choices.md: the 64 MiB bound holds for a whole SSE answer too, not only for one event:
    a stream of small keep-alives and stray events that runs past it fails the call at once with
    the bound's protocol error, instead of being read until the deadline. The reference's own
    choice (another bridge may read on), so no scenario pins it. The bound is lowered here
    (MAX_EVENT keeps its 64 MiB, set at import) and the stream sent in one write, so the bytes
    read never end exactly on the bound."""
    bound = 2000
    monkeypatch.setattr("palace_bridge.http.MAX_BODY", bound)

    async def handler(message: dict, exchange: Exchange) -> None:
        if message.get("method") == "tools/call":
            await exchange.sse_start()
            stray = b'event: message\ndata: {"jsonrpc":"2.0","id":"stray","result":{}}\n\n'
            await exchange.sse_send((b": keep-alive\n\n" + stray) * 100)  # about 8 KB
            await exchange.hold()
        await exchange.accepted()

    first_call_fails(hostile(handler), "3000", f"SSE answer to tools/call exceeded {bound} bytes")


def test_an_sse_answer_may_reach_the_body_bound_exactly(hostile, monkeypatch):
    """The other side of the bound: a whole SSE answer of exactly MAX_BODY bytes is read (the
    bound is on what passes it, not on what reaches it)."""
    answer = (b'event: message\ndata: {"jsonrpc":"2.0","id":ID,'
              b'"result":{"content":[{"type":"text","text":"at the bound"}]}}\n\n')

    async def handler(message: dict, exchange: Exchange) -> None:
        if message.get("method") == "tools/call":
            body = b": keep-alive\n\n" + answer.replace(b"ID", str(message["id"]).encode())
            monkeypatch.setattr("palace_bridge.http.MAX_BODY", len(body))
            await exchange.sse_start()
            await exchange.sse_send(body)
            await exchange.hold()
            return
        await exchange.accepted()

    server = hostile(handler)
    client = create_client(remote_env(server.url, MEMPALACE_MCP_TIMEOUT_MS="5000"),
                           stderr=io.StringIO())

    async def main() -> str:
        assert await client.start()
        try:
            result = await asyncio.wait_for(client.call_tool("mempalace_status", {}),
                                            TEST_BOUND_S)
        finally:
            await client.stop()
        return result.content[0]["text"]

    assert run(main()) == "at the bound"


def first_call_fails(server: HostileHttp, timeout_ms: str, match: str) -> None:
    """Start a bridge on ``server``; its first call must fail with a protocol error naming
    ``match``."""
    client = create_client(remote_env(server.url, MEMPALACE_MCP_TIMEOUT_MS=timeout_ms),
                           stderr=io.StringIO())

    async def main() -> None:
        assert await client.start()
        try:
            with pytest.raises(PalaceProtocolError, match=match):
                await asyncio.wait_for(client.call_tool("mempalace_status", {}), TEST_BOUND_S)
        finally:
            await client.stop()

    run(main())


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A loopback palace URL whose peer never completes a TCP handshake: the listener's one-slot
    accept queue is already full, so the kernel drops every further SYN."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    filler = socket.create_connection(server.getsockname(), timeout=5)
    yield f"http://127.0.0.1:{server.getsockname()[1]}/mcp"
    filler.close()
    server.close()


def test_a_peer_that_never_completes_the_tcp_handshake_fails_the_try_at_the_connect_bound(
        black_hole: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The connect is the one wait httpx bounds itself: the handshake's own deadline (60 s here)
    is not what ends a try against a black hole."""
    monkeypatch.setattr(http, "CONNECT_TIMEOUT_S", 0.5)
    stderr = io.StringIO()
    client = create_client(remote_env(black_hole, MEMPALACE_MCP_INIT_TIMEOUT_MS="60000",
                                      MEMPALACE_REMOTE_CONNECT_RETRIES="0"), stderr=stderr)

    async def main() -> tuple[bool, float]:
        began = time.monotonic()
        started = await asyncio.wait_for(client.start(), TEST_BOUND_S)
        took = time.monotonic() - began
        await asyncio.wait_for(client.stop(), TEST_BOUND_S)
        return started, took

    started, took = run(main())
    assert started is False
    assert 0.5 <= took < 0.5 + HANG_SLACK_S
    assert "unavailable" in stderr.getvalue()


def test_the_connect_bound_is_ten_seconds_and_no_read_is_bounded_by_httpx() -> None:
    """The reference's own choice (docs/choices.md): 10 s for a TCP connect; a read is bounded
    by the call's deadline instead, which httpx does not know."""

    async def main() -> httpx.Timeout:
        transport = HttpTransport("http://127.0.0.1:9/mcp", None, Log(io.StringIO()))
        try:
            return transport._client.timeout
        finally:
            await transport._client.aclose()

    assert run(main()) == httpx.Timeout(None, connect=10.0)
