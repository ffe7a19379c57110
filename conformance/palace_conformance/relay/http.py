"""The HTTP relay: a reverse proxy on loopback that a bridge in remote mode points at, forwarding
every request on the MCP path to the real palace and passing the answers back as they come, while
handing each JSON-RPC message it sees to a callback (the same :class:`Message` the stdio relay
gives, so one draft builder serves both).

The bridge must not notice the relay: methods, bodies and end-to-end headers (``Authorization``,
``Mcp-Session-Id``, ``MCP-Protocol-Version``, ``Accept``, ``Last-Event-ID``, ...) go up unchanged;
status, headers and body come down unchanged, an event stream chunk by chunk as the palace writes
it (never held to its end). Two deliberate differences: ``Host`` is the upstream's (a palace pins
it), and the palace is asked for ``identity`` encoding, since the recorder must read what it
relays. Hop-by-hop headers are not relayed and every connection ends after its response (as
mempalace's own server does).

Every wait is bounded: the bridge's request head and body (:data:`READ_SECONDS`), the upstream's
connect (:data:`CONNECT_SECONDS`) and each of its reads (``read_s``); a bridge that hangs up ends
its upstream request at once. The h11 framing is the fake's :class:`Wire`, without its
BaseHTTP ``Server``/``Date`` stamp.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import SplitResult, urlsplit

import httpx

from palace_conformance.errors import PalaceError
from palace_conformance.fake.http.wire import BadRequest, ConnectionGone, Headers, RequestHead, Wire
from palace_conformance.relay.stdio import FROM_PALACE, TO_PALACE, Message

READ_SECONDS = 10.0  # the bridge's request head and body
CONNECT_SECONDS = 10.0  # the upstream's TCP (and TLS) connect
CLOSE_SECONDS = 2.0  # how long open exchanges get to end when the recorder stops
BODY_LIMIT = 64 * 1024 * 1024
#: not relayed (RFC 9110 7.6.1), plus what the relay sets itself: Host is the upstream's, the
#: lengths are re-framed, the encoding is asked as identity so the recorder can read the body
NOT_RELAYED = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                         "transfer-encoding", "upgrade", "host", "content-length",
                         "accept-encoding"})
SSE_TYPE = "text/event-stream"


class UpstreamError(PalaceError):
    """The recorder cannot start; the message names the problem and the fix."""


def log(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (f"palace-conformance record: {text}\n").encode(errors="replace"))


def parse_upstream(url: str) -> SplitResult:
    """The palace URL, checked: http(s), a host, a valid port (else :class:`UpstreamError`)."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  # raises ValueError for a port that is not 0-65535
    except ValueError as exc:
        raise UpstreamError(f"--upstream {url!r} is not a URL ({exc}); give the palace's full "
                            "URL, e.g. https://palace.example/mcp") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UpstreamError(f"--upstream {url!r} is not an http(s) URL with a host; give the "
                            "palace's full URL, e.g. https://palace.example/mcp")
    return parts


def check_loopback(host: str) -> str:
    """The address to bind for ``--host``: loopback only, since the relay sees the token."""
    if host.lower() == "localhost":
        return "127.0.0.1"
    bare = host.strip("[]")
    try:
        loopback = ipaddress.ip_address(bare).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UpstreamError(f"--host {host!r} is not a loopback address (the recorder sees the "
                            "bearer token); use 127.0.0.1, ::1 or localhost")
    return bare


def relayed(headers: Any) -> Headers:
    """The end-to-end headers of ``headers`` (name, value pairs), in order."""
    pairs = [(str(k), str(v)) for k, v in headers]
    named = {n.strip().lower() for k, v in pairs if k.lower() == "connection" for n in v.split(",")}
    return [(k, v) for k, v in pairs if k.lower() not in NOT_RELAYED and k.lower() not in named]


def messages_of(body: bytes) -> list[Any]:
    """The JSON-RPC messages of a JSON body (a batch is its elements); none when not JSON."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return []
    return parsed if isinstance(parsed, list) else [parsed]


class EventStream:
    """Incremental ``text/event-stream`` reader: feed it bytes, get each event's ``data``."""

    def __init__(self, limit: int = BODY_LIMIT) -> None:
        self._pending = bytearray()
        self._data: list[str] = []
        self._size = 0  # characters of data held for the event being read
        self._limit = limit
        self._skipping = False  # a line (or an event) past the limit: left out until its end

    def feed(self, chunk: bytes) -> Iterator[str]:
        """Linear in what is fed: the held bytes are only searched where new ones came in, and
        neither a line nor an event grows past ``limit`` (the overlong one is left out)."""
        searched = len(self._pending) - (1 if self._pending.endswith(b"\r") else 0)
        self._pending += chunk
        start = 0
        next_lf = self._pending.find(b"\n", searched)
        next_cr = self._pending.find(b"\r", searched)
        while True:
            # each kind of line end is searched for again only once it has been passed
            if 0 <= next_lf < start:
                next_lf = self._pending.find(b"\n", start)
            if 0 <= next_cr < start:
                next_cr = self._pending.find(b"\r", start)
            cut = min((i for i in (next_lf, next_cr) if i >= 0), default=-1)
            if cut < 0:
                break
            if cut == len(self._pending) - 1 and self._pending[cut] == 13:
                break  # a CR that may be half of a CRLF: wait for the next byte
            line = bytes(self._pending[start:cut]).decode("utf-8", errors="replace")
            start = cut + (2 if self._pending[cut:cut + 2] == b"\r\n" else 1)
            if self._skipping:
                self._skipping = bool(line)  # an overlong event ends at its blank line
                continue
            if not line:
                if self._data:
                    yield "\n".join(self._data)
                self._data, self._size = [], 0
            elif line.startswith("data"):
                name, _, value = line.partition(":")
                if name == "data":
                    self._data.append(value[1:] if value.startswith(" ") else value)
                    self._size += len(value)
                    if self._size > self._limit:
                        self._data, self._size, self._skipping = [], 0, True
        del self._pending[:start]
        if len(self._pending) > self._limit:  # a line with no end in sight: left out
            self._pending.clear()
            self._data, self._size, self._skipping = [], 0, True


class HttpRelay:
    """The reverse proxy: :meth:`start` binds, :meth:`serve` runs until :meth:`stop`."""

    def __init__(self, upstream: str, on_message: Callable[[Message], None], *,
                 host: str = "127.0.0.1", port: int = 0, read_s: float = 120.0) -> None:
        self.upstream = parse_upstream(upstream)
        self.bind = check_loopback(host)
        self.wanted_port = port
        self.on_message = on_message
        self.read_s = read_s
        self.path = self.upstream.path or "/"
        self.origin = f"{self.upstream.scheme}://{self.upstream.netloc}"
        #: bearer tokens and session ids seen in headers: the draft must never hold them
        self.secrets: set[str] = set()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self._open: set[asyncio.Task[None]] = set()
        self._stopped = asyncio.Event()

    @property
    def url(self) -> str:
        """What the bridge is given (``MEMPALACE_REMOTE_URL``): this relay, the palace's path."""
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        query = f"?{self.upstream.query}" if self.upstream.query else ""
        return f"http://{host}:{self.port}{self.path}{query}"

    async def check_upstream(self) -> None:
        """Fail fast on a palace nobody can reach (DNS, refused, silent), before binding."""
        scheme_port = 443 if self.upstream.scheme == "https" else 80
        where = f"{self.upstream.hostname}:{self.upstream.port or scheme_port}"
        try:
            async with asyncio.timeout(CONNECT_SECONDS):
                _, writer = await asyncio.open_connection(self.upstream.hostname,
                                                          self.upstream.port or scheme_port)
        except TimeoutError:
            raise UpstreamError(f"--upstream {where} did not accept a connection within "
                                f"{CONNECT_SECONDS:.0f} s; check the URL and that the palace "
                                "is running") from None
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise UpstreamError(f"cannot reach --upstream {where} ({reason}); check the URL "
                                "and that the palace is running") from None
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()

    async def start(self) -> None:
        await self.check_upstream()
        try:
            self._server = await asyncio.start_server(self._connection, self.bind,
                                                      self.wanted_port)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UpstreamError(f"--port {self.wanted_port} on {self.bind} is in use; pick "
                                    "another port, or 0 for a free one") from None
            raise UpstreamError(f"cannot listen on {self.bind}:{self.wanted_port} "
                                f"({exc.strerror or exc}); pick another --host or --port") from None
        self.port = self._server.sockets[0].getsockname()[1]
        timeout = httpx.Timeout(connect=CONNECT_SECONDS, read=self.read_s, write=self.read_s,
                                pool=CONNECT_SECONDS)
        self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    def stop(self) -> None:
        self._stopped.set()

    async def serve(self) -> None:
        """Relay until :meth:`stop`; then end every open exchange (bounded) and close."""
        await self._stopped.wait()
        if self._server is not None:
            self._server.close()
        for task in list(self._open):
            task.cancel()
        if self._open:
            await asyncio.wait(list(self._open), timeout=CLOSE_SECONDS)
        if self._client is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLOSE_SECONDS):
                    await self._client.aclose()

    # -- one connection ----------------------------------------------------------------------

    def _record(self, direction: str, message: Any) -> None:
        self.on_message(Message(direction, time.monotonic(), message))

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open.add(task)
        wire = Wire(reader, writer, stamp=False)
        try:
            await self._serve_one(wire)
        except (ConnectionGone, asyncio.CancelledError):
            pass
        except Exception as exc:  # a relay stays up whatever one request does
            log(f"relay error: {type(exc).__name__}: {exc}")
            if wire.sent == 0 and not wire.closed:
                with contextlib.suppress(Exception):
                    await self._fail(wire, 502, f"the recorder failed: {type(exc).__name__}")
        finally:
            self._open.discard(task)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await wire.close()

    async def _serve_one(self, wire: Wire) -> None:
        try:
            async with asyncio.timeout(READ_SECONDS):
                head = await wire.read_head()
                if head is None:
                    return
                if head.path != self.path:
                    await self._fail(wire, 404, f"the recorder relays {self.path} only")
                    return
                if int((head.header("content-length") or "0").split(",")[0] or 0) > BODY_LIMIT:
                    await self._fail(wire, 413, "the recorder relays bodies up to 64 MiB")
                    return
                body = await wire.read_body(BODY_LIMIT)
        except TimeoutError:
            return
        except (BadRequest, ValueError) as exc:
            await self._fail(wire, getattr(exc, "status", 400), f"bad request: {exc}")
            return
        self.seen_request(head)
        for message in messages_of(body):
            self._record(TO_PALACE, message)
        exchange = asyncio.ensure_future(self._exchange(wire, head, body))
        hangup = asyncio.ensure_future(wire.peer_gone())
        try:
            await asyncio.wait({exchange, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # the bridge hung up (or the recorder stops): the upstream request ends too
            exchange.cancel()
            hangup.cancel()
            ended = await asyncio.gather(exchange, hangup, return_exceptions=True)
        if isinstance(ended[0], Exception):
            raise ended[0]

    def seen_request(self, head: RequestHead) -> None:
        """A request the relay is about to pass up (its body read): a hook for a subclass that
        journals the exchange; the recorder needs none."""

    def seen_response(self, status: int, headers: Headers) -> None:
        """The palace's status and headers, before its body is passed on: a hook, like
        :meth:`seen_request`."""

    def _upstream_headers(self, head: RequestHead) -> Headers:
        headers = relayed(head.headers)
        if head.authorization is not None:  # as sent, untrimmed (a palace compares it whole)
            headers = [(k, head.authorization if k.lower() == "authorization" else v)
                       for k, v in headers]
            scheme, _, token = head.authorization.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                self.secrets.add(token.strip())
        session = head.header("mcp-session-id")
        if session:
            self.secrets.add(session)
        return [*headers, ("Accept-Encoding", "identity")]

    async def _exchange(self, wire: Wire, head: RequestHead, body: bytes) -> None:
        assert self._client is not None
        request = self._client.build_request(head.method, self.origin + head.target,
                                             headers=self._upstream_headers(head),
                                             content=body or None)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException:
            log(f"{head.method} {head.target}: the palace did not answer within "
                f"{self.read_s:g} s; the bridge gets 504")
            await self._fail(wire, 504, "the palace did not answer in time")
            return
        except httpx.HTTPError as exc:
            log(f"{head.method} {head.target}: cannot reach the palace ({exc or type(exc)}); "
                "the bridge gets 502")
            await self._fail(wire, 502, "cannot reach the palace")
            return
        try:
            await self._answer(wire, response)
        except httpx.TimeoutException:
            log(f"{head.method} {head.target}: the palace went silent for {self.read_s:g} s "
                "mid-answer; the connection is cut")
            await wire.abandon()
        except httpx.HTTPError as exc:
            log(f"{head.method} {head.target}: the palace's answer broke off ({exc}); the "
                "connection is cut")
            await wire.abandon()
        finally:
            with contextlib.suppress(Exception):
                await response.aclose()

    async def _answer(self, wire: Wire, response: httpx.Response) -> None:
        session = response.headers.get("mcp-session-id")
        if session:
            self.secrets.add(session)
        headers = relayed(response.headers.multi_items())
        kind = response.headers.get("content-type", "").lower()
        length = response.headers.get("content-length", "")
        if SSE_TYPE not in kind and length.isdigit() and int(length) <= BODY_LIMIT:
            data = b"".join([chunk async for chunk in response.aiter_raw()])
            for message in messages_of(data):  # as the fake journals: what it sends, then how
                self._record(FROM_PALACE, message)
            self.seen_response(response.status_code, response.headers.multi_items())
            await wire.send(response.status_code, headers, data,
                            reason=response.reason_phrase or None)
            return
        self.seen_response(response.status_code, response.headers.multi_items())
        await wire.start_stream(response.status_code, headers)
        events = EventStream() if SSE_TYPE in kind else None
        whole: list[bytes] = []  # a body of unknown length that is not a stream: kept whole
        kept = 0
        async for chunk in response.aiter_raw():
            await wire.stream(chunk)  # passed on before anything else is done with it
            if events is None:
                if kept < BODY_LIMIT:
                    whole.append(chunk)
                    kept += len(chunk)
                continue
            for event_data in events.feed(chunk):
                for message in messages_of(event_data.encode()):
                    self._record(FROM_PALACE, message)
        await wire.end_stream()
        for message in messages_of(b"".join(whole)):
            self._record(FROM_PALACE, message)

    async def _fail(self, wire: Wire, status: int, text: str) -> None:
        """The relay's own answer (the palace's never came): one line of plain text."""
        await wire.send(status, [("Content-Type", "text/plain; charset=utf-8")],
                        f"palace-conformance record: {text}\n".encode())
