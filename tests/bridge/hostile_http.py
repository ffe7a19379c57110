"""A hostile MCP server over HTTP for the bridge's hardening tests: raw HTTP/1.1 on a real loopback
socket, in its own thread and event loop, so it keeps misbehaving whatever the bridge's loop does.

It answers ``initialize`` and ``tools/list`` like a palace would; everything else goes to the
test's ``handler``, which may answer, hold the exchange open forever, or flood it. Exchanges still
held when the test ends are cut by :meth:`HostileHttp.close`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

PROTOCOL = "2025-06-18"
#: what a test's handler gets: the POSTed JSON-RPC message and the exchange to answer on
Handler = Callable[[dict[str, Any], "Exchange"], Awaitable[None]]


class Exchange:
    """One POST: answer it with JSON, 202, an SSE stream, raw bytes, or never."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.answered = False
        self.closing = False  # hang up once answered (see :meth:`raw`)

    async def json(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        await self._head(200, {"Content-Type": "application/json",
                               "Content-Length": str(len(data))})
        self.writer.write(data)
        await self.writer.drain()

    async def accepted(self) -> None:
        await self._head(202, {"Content-Length": "0"})

    async def sse_start(self) -> None:
        """An SSE answer whose body runs until the connection closes."""
        await self._head(200, {"Content-Type": "text/event-stream", "Connection": "close"})

    async def sse_send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def raw(self, data: bytes) -> None:
        """Write ``data`` as the whole answer (any status line, headers and framing, or none),
        then hang up: after garbage the connection cannot carry another exchange."""
        self.answered = True
        self.closing = True
        self.writer.write(data)
        await self.writer.drain()

    async def hold(self) -> None:
        """Never answer: the bridge's deadline is the only way out."""
        await asyncio.Event().wait()

    async def _head(self, status: int, headers: dict[str, str]) -> None:
        self.answered = True
        lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()


class HostileHttp:
    """Serve on ``127.0.0.1`` (ephemeral port) until :meth:`close`; ``url`` ends in ``/mcp``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[dict[str, Any]] = []  # every POSTed message, in arrival order
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the hostile HTTP server did not start")
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def methods(self) -> list[str]:
        return [m.get("method") or "response" for m in list(self.seen)]

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in header_lines if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if not request_line.startswith("POST"):
                    await Exchange(writer)._head(405, {"Content-Length": "0"})
                    continue
                message = json.loads(body)
                self.seen.append(message)
                exchange = Exchange(writer)
                await self._answer(message, exchange)
                if not exchange.answered or exchange.closing:
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            return
        except asyncio.CancelledError:  # close(): the exchange is cut, quietly
            return
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer(self, message: dict[str, Any], exchange: Exchange) -> None:
        method = message.get("method")
        if method == "initialize":
            await exchange.json({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": PROTOCOL, "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"}}})
        elif method == "tools/list":
            await exchange.json({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [
                {"name": "mempalace_status", "inputSchema": {"type": "object"}}]}})
        else:
            await self.handler(message, exchange)
