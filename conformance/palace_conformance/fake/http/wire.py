"""HTTP/1.1 framing for the fake's HTTP transport: h11 parses, asyncio streams carry the bytes.

Every connection carries exactly one request and ends after its response (mempalace 3.11 sends
``Connection: close`` on everything), so :class:`Wire` models one request/response pair. It can
also misbehave on purpose: stop after a byte budget and reset the connection (``SO_LINGER`` 0, so
the peer sees ``ECONNRESET``), or cut a write in half.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import http.client
import io
import socket
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from http.server import DEFAULT_ERROR_MESSAGE  # type: ignore[attr-defined]  # not in typeshed
from typing import cast
from urllib.parse import urlsplit

import h11

from palace_conformance.errors import ConformanceError, UntrustedInputError

SERVER_HEADER = "BaseHTTP/0.6 Python/3.11.7"
READ_CHUNK = 64 * 1024
MAX_HEAD_BYTES = 64 * 1024
DRAIN_SECONDS = 0.5
RESET_GRACE_SECONDS = 0.05

Headers = list[tuple[str, str]]


#: how late a deadline's timer may run before the loop counts as having been busy past it
LOOP_LAG_SECONDS = 0.25


@contextlib.asynccontextmanager
async def client_deadline(seconds: float) -> AsyncIterator[None]:
    """``asyncio.timeout(seconds)`` for reading from a client, except that time the loop spent
    busy elsewhere is not the client's: when the timer runs late (the loop was blocked past the
    deadline) the read gets :data:`LOOP_LAG_SECONDS` more, enough for the loop to read what
    arrived meanwhile. With a plain timeout the late timer ran before that read, and a client
    that had sent its whole request in time was answered 400."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(None) as timeout:
        due = loop.time() + seconds
        handle: asyncio.TimerHandle

        def check() -> None:
            nonlocal due, handle
            now = loop.time()
            if now - due > LOOP_LAG_SECONDS:
                due = now + LOOP_LAG_SECONDS
                handle = loop.call_at(due, check)
            else:
                timeout.reschedule(now)

        handle = loop.call_at(due, check)
        try:
            yield
        finally:
            handle.cancel()


class ConnectionGone(ConformanceError):
    """The connection is over (peer left, or we reset it on purpose); stop producing output."""


class BadRequest(UntrustedInputError):
    """The bytes were not an HTTP request h11 accepts; ``status`` is the status to answer."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


@dataclass(frozen=True)
class RequestHead:
    """A parsed request line and header block (names lower-cased, values latin-1 text)."""

    method: str
    target: str
    headers: Headers
    http_version: str
    #: ``Authorization`` as ``BaseHTTPRequestHandler`` reads it: h11 trims trailing whitespace
    #: (RFC 9110), mempalace does not, and its token compare is over the untrimmed value.
    authorization: str | None = None

    @property
    def path(self) -> str:
        """The path mempalace routes on: ``urlparse(self.path).path``, after
        ``BaseHTTPRequestHandler`` has collapsed leading slashes (``//mcp`` is ``/mcp``, never a
        host named ``mcp``; gh-87389, Python 3.11.4+)."""
        if not self.target.startswith("/"):
            return self.target
        return urlsplit("/" + self.target.lstrip("/")).path

    def header(self, name: str) -> str | None:
        """The first value of a header, like ``BaseHTTPRequestHandler.headers[name]``."""
        name = name.lower()
        return next((value for key, value in self.headers if key == name), None)

    @property
    def request_line(self) -> str:
        return f"{self.method} {self.target} HTTP/{self.http_version}"


def error_page(status: int, message: str | None = None) -> bytes:
    """The stock ``BaseHTTPRequestHandler.send_error`` HTML page that mempalace sends."""
    phrase, explain = _phrases(status)
    page: str = DEFAULT_ERROR_MESSAGE % {
        "code": status,
        "message": html.escape(message or phrase, quote=False),
        "explain": html.escape(explain, quote=False),
    }
    return page.encode("utf-8", "replace")


def _phrases(status: int) -> tuple[str, str]:
    try:
        known = HTTPStatus(status)
    except ValueError:
        return "Unknown", "Unknown"
    return known.phrase, known.description


def _stdlib_header(raw_head: bytes, name: str, fallback: str | None) -> str | None:
    """One header's value as ``http.client.parse_headers`` (BaseHTTP's parser) returns it."""
    _, _, block = raw_head.partition(b"\n")
    try:
        value = http.client.parse_headers(io.BytesIO(block)).get(name)
    except (http.client.HTTPException, ValueError):
        return fallback
    return fallback if value is None else str(value)


def reason_phrase(status: int) -> str:
    return _phrases(status)[0] if status != 413 else "Request Entity Too Large"


class Wire:
    """One HTTP exchange on one TCP connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 stamp: bool = True) -> None:
        self.reader = reader
        self.writer = writer
        #: add ``Server`` and ``Date`` to every response as BaseHTTP does; a relay that passes
        #: on another server's headers (``palace-conformance record``) turns it off
        self.stamp = stamp
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.sent = 0
        #: stop after this many response bytes and reset the connection (the ``reset`` fault)
        self.budget: int | None = None
        #: called once with (status, headers) when the response head goes out
        self.on_response: Callable[[int, Headers], None] = lambda status, headers: None
        self.closed = False
        self._head_bytes: bytearray | None = bytearray()  # raw bytes until the head is parsed
        self.head_only = False  # a HEAD request: answers carry their headers but no body
        transport = writer.transport
        if isinstance(transport, asyncio.WriteTransport):
            transport.set_write_buffer_limits(0)  # drain() then means "handed to the kernel"

    @property
    def peer(self) -> str:
        peer = self.writer.get_extra_info("peername")
        return str(peer[0]) if isinstance(peer, tuple) and peer else "-"

    # -- reading --------------------------------------------------------------------------

    async def _next_event(self) -> h11.Event | type[h11.PAUSED]:
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise BadRequest(exc.error_status_hint, str(exc)) from None
            if event is not h11.NEED_DATA:
                return cast("h11.Event | type[h11.PAUSED]", event)
            try:
                data = await self.reader.read(READ_CHUNK)
            except (ConnectionError, OSError):
                data = b""
            if self._head_bytes is not None:
                self._head_bytes += data
            self.h11.receive_data(data)

    async def read_head(self) -> RequestHead | None:
        """The next request's head; ``None`` if the peer closed before sending one."""
        event = await self._next_event()
        if not isinstance(event, h11.Request):
            return None
        raw = bytes(self._head_bytes or b"")
        self._head_bytes = None
        self.head_only = event.method == b"HEAD"
        raw = raw[: len(raw) - len(self.h11.trailing_data[0])]
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers]
        return RequestHead(
            method=event.method.decode("latin-1"),
            target=event.target.decode("latin-1"),
            headers=headers,
            http_version=event.http_version.decode("latin-1"),
            authorization=_stdlib_header(raw, "Authorization",
                                         next((v for k, v in headers if k == "authorization"),
                                              None)),
        )

    async def read_body(self, limit: int) -> bytes:
        """The whole request body (h11 undoes any framing); at most ``limit`` bytes are kept."""
        if self.h11.they_are_waiting_for_100_continue:  # as BaseHTTPRequestHandler does
            await self._raw_write(self._h11_send(h11.InformationalResponse(
                status_code=100, headers=[], reason=b"Continue")))
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self._next_event()
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size <= limit:
                    chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            else:
                raise BadRequest(400, "connection closed inside the request body")

    async def peer_gone(self) -> None:
        """Returns once the peer closes its side (or the socket fails); extra bytes are ignored."""
        while True:
            try:
                data = await self.reader.read(READ_CHUNK)
            except (ConnectionError, OSError):
                return
            if not data:
                return

    # -- writing --------------------------------------------------------------------------

    def _head(self, status: int, headers: Headers, reason: str | None) -> h11.Response:
        base = [("Server", SERVER_HEADER), ("Date", formatdate(usegmt=True))] if self.stamp else []
        return h11.Response(status_code=status, headers=base + headers,
                            reason=(reason or reason_phrase(status)).encode("latin-1", "replace"))

    async def send(self, status: int, headers: Headers, body: bytes = b"", *,
                   reason: str | None = None, half: bool = False) -> None:
        """A complete response with ``Content-Length``; ``half`` writes only half of the body."""
        if status < 200:  # an interim response only; the connection then ends without more
            await self._write(self._h11_send(h11.InformationalResponse(
                status_code=status, headers=[("Server", SERVER_HEADER), *headers],
                reason=reason_phrase(status).encode())))
            self.on_response(status, headers)
            return
        headers = [*headers, ("Content-Length", str(len(body)))]
        if status in (204, 304):
            headers, body = [h for h in headers if h[0] != "Content-Length"], b""
        if self.head_only:
            body = b""
        if not any(name.lower() == "connection" for name, _ in headers):
            headers.append(("Connection", "close"))
        head = self._h11_send(self._head(status, headers, reason))
        self.on_response(status, headers)
        if half:  # the caller then resets or holds the connection
            await self._write(head + body[: max(1, len(body) // 2)])
            return
        await self._write(head + self._h11_send(h11.Data(data=body)) if body else head)
        await self._write(self._h11_send(h11.EndOfMessage()))

    async def send_error(self, status: int, message: str | None = None,
                         reason: str | None = None) -> None:
        """``BaseHTTPRequestHandler.send_error``: stock HTML, ``Connection: close`` first."""
        headers = [("Connection", "close"), ("Content-Type", "text/html;charset=utf-8")]
        await self.send(status, headers, error_page(status, message), reason=reason)

    async def start_stream(self, status: int, headers: Headers) -> None:
        """A response head without a length; the body follows through :meth:`stream`."""
        head = self._h11_send(self._head(status, [*headers, ("Connection", "close")], None))
        self.on_response(status, headers)
        await self._write(head)

    async def stream(self, data: bytes, *, half: bool = False) -> None:
        out = self._h11_send(h11.Data(data=data))
        await self._write(out[: max(1, len(out) // 2)] if half else out)

    async def end_stream(self) -> None:
        await self._write(self._h11_send(h11.EndOfMessage()))

    def _h11_send(self, event: h11.Event) -> bytes:
        return self.h11.send(event) or b""

    async def _write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionGone("connection already closed")
        if self.budget is not None and self.sent + len(data) >= self.budget:
            await self._raw_write(data[: max(0, self.budget - self.sent)])
            await self.reset()
            raise ConnectionGone("reset after byte budget")
        await self._raw_write(data)

    async def _raw_write(self, data: bytes) -> None:
        if not data:
            return
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            self.closed = True
            raise ConnectionGone(str(exc)) from None
        self.sent += len(data)

    # -- ending ---------------------------------------------------------------------------

    async def reset(self) -> None:
        """Abort with a TCP RST, after giving what was written a moment to reach the peer."""
        if self.closed:
            return
        self.closed = True
        await asyncio.sleep(RESET_GRACE_SECONDS)
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def close(self) -> None:
        """Finish politely: FIN, then read and drop what the peer still sends (so no RST)."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.writer.can_write_eof():
                self.writer.write_eof()
            async with asyncio.timeout(DRAIN_SECONDS):
                await self.peer_gone()
        except (TimeoutError, ConnectionError, OSError):
            pass
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()

    async def abandon(self) -> None:
        """Close at once without draining (the peer already left)."""
        if self.closed:
            return
        self.closed = True
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()
