"""The fake's HTTP server: one :class:`~palace_conformance.fake.brain.Brain` behind routing,
the Host/Origin/token checks, the HTTP-only faults and the listening socket (the package
docstring says what it answers)."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from palace_conformance.fake.brain import Brain, Exchange, rpc_error
from palace_conformance.fake.faults import Fault
from palace_conformance.fake.http.control import DROPPED_HEADER, ControlApi, JournalBody
from palace_conformance.fake.http.control import PREFIX as CONTROL_PREFIX
from palace_conformance.fake.http.port import (
    JSON_TYPE,
    SSE_HEADERS,
    Call,
    HttpPort,
    Withheld,
    sse_event,
)
from palace_conformance.fake.http.wire import (
    BadRequest,
    ConnectionGone,
    Headers,
    RequestHead,
    Wire,
    client_deadline,
    error_page,
    reason_phrase,
)
from palace_conformance.fake.journal import redact_headers
from palace_conformance.fake.options import EXTRA_HOSTS_ENV
from palace_conformance.fake.playback import encode, play
from palace_conformance.fake.sessions import SESSION_HEADER, UNKNOWN, SessionTable

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
ORIGIN_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
BODY_LIMIT = 16 * 1024 * 1024
CONTROL_BODY_LIMIT = 4 * 1024 * 1024
READ_SECONDS = 10.0  # mempalace's handler socket timeout

PARSE_ERROR = rpc_error(None, -32700, "Parse error")
TOO_LARGE = rpc_error(None, -32600, "Request too large")
NO_STANDALONE_STREAM = rpc_error(None, -32600, "Method Not Allowed: no GET stream here")


def log(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (text + "\n").encode(errors="replace"))


Route = Callable[[Call], Awaitable[None]]


#: GET routes 3.11 serves only with the token (/statusz, the logstream, and every /sync/ path)
TOKEN_GETS = frozenset({"/statusz", "/logstream/stream"})


class FakeHttpServer:
    """The HTTP face of one :class:`Brain`: routing, checks, faults and the listening socket."""

    def __init__(self, brain: Brain, *, host: str = "127.0.0.1", token: str | None = None,
                 sessions: bool = False, control: bool = True) -> None:
        self.brain = brain
        self.host = host
        self.token = token
        self.stateful = sessions
        self.sessions = SessionTable()
        self.control = ControlApi(self) if control else None
        extra = [h.strip().lower() for h in os.environ.get(EXTRA_HOSTS_ENV, "").split(",")]
        self.allowed_hosts = {*LOOPBACK_HOSTS, host.lower(), *(h for h in extra if h)}
        self.methods = {"GET", "POST", "DELETE"} if sessions else {"GET", "POST"}
        self.resumable: dict[str, Withheld] = {}  # priming event id -> withheld reply
        self.port = 0
        self._conns = 0
        self._server: asyncio.Server | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, port: int = 0) -> int:
        bind = "127.0.0.1" if self.host == "localhost" else self.host.strip("[]")
        self._server = await asyncio.start_server(self._connection, bind, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host == "localhost" else self.host.strip("[]")
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/mcp"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1):
                    await self._server.wait_closed()

    def exit_process(self, code: int) -> None:
        """The ``exit`` fault: the whole server dies at once, like a crash."""
        self.brain.lease.release()
        os._exit(code)

    # -- connections -------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        """One connection; a shutdown that cancels it ends it quietly.

        Python 3.11's ``start_server`` prints a traceback for a handler that ends cancelled
        (fixed in 3.12), so a peer still open when the fake stops would look like a crash.
        """
        try:
            await self._serve_connection(reader, writer)
        except asyncio.CancelledError:
            writer.transport.abort()

    async def _serve_connection(self, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        self._conns += 1
        call = Call(conn=self._conns, wire=Wire(reader, writer))
        call.wire.on_response = lambda status, headers: self._responded(call, status, headers)
        try:
            await self._serve_one(call)
        except ConnectionGone:
            pass
        except Exception as exc:  # a fake must stay up whatever a request does to it
            log(f"HTTP handler error: {type(exc).__name__}: {exc}")
            self.brain.journal.record("http_error", conn=call.conn, error=repr(exc))
            if call.wire.sent == 0 and not call.wire.closed:
                with contextlib.suppress(Exception):
                    await self._json(call, 500, rpc_error(None, -32603, "Internal error"))
        finally:
            with contextlib.suppress(Exception):
                await (call.wire.reset() if call.wire.budget is not None else call.wire.close())

    async def _serve_one(self, call: Call) -> None:
        try:
            async with client_deadline(READ_SECONDS):
                call.head = await call.wire.read_head()
        except TimeoutError:
            return
        except BadRequest as exc:
            self.brain.journal.record("http_request", method=None, path=None, error=str(exc),
                                      conn=call.conn)
            await self._send_error(call, exc.status)
            return
        if call.head is not None:
            await self.respond(call)

    def _responded(self, call: Call, status: int, headers: Headers) -> None:
        head = call.head
        if call.control:
            self.brain.journal.record("control", method=head.method if head else None,
                                      path=head.path if head else None, status=status,
                                      conn=call.conn)
            return
        self.brain.journal.record("http_response", status=status,
                                  headers=redact_headers(headers), conn=call.conn)
        line = head.request_line if head else "-"
        log(f'HTTP {call.wire.peer} - "{line}" {status} -')

    # -- the decision ------------------------------------------------------------------------

    async def respond(self, call: Call) -> None:
        """Every request's fate, in mempalace's order: method, Host, Origin, token, path."""
        head = call.head
        assert head is not None
        call.control = self.control is not None and head.path.startswith(CONTROL_PREFIX)
        if not call.control:
            self.brain.journal.record("http_request", method=head.method, path=head.path,
                                      headers=redact_headers(head.headers), conn=call.conn)
            if head.method not in self.methods:
                reason = f"Unsupported method ({head.method!r})"
                await self._send_error(call, 501, reason, reason=reason)
                return
        if not self._host_allowed(head) or not self._origin_allowed(head):
            await self._send_error(call, 403)
            return
        if call.control:
            await self._control(call)
            return
        route, needs_token = self._route(head)
        if needs_token and not self._authorized(head):
            await self._unauthorized(call)
            return
        await route(call)

    async def _send_error(self, call: Call, status: int, message: str | None = None,
                          reason: str | None = None) -> None:
        """``BaseHTTPRequestHandler.send_error``: its ``log_error`` line first (3.11 logs it as
        ``HTTP <peer> - code N, message M``, before the access line), then the stock page."""
        log(f"HTTP {call.wire.peer} - code {status}, message {message or reason_phrase(status)}")
        await call.wire.send_error(status, message, reason=reason)

    async def _unauthorized(self, call: Call) -> None:
        log("HTTP request rejected: missing/invalid bearer token")
        await self._send_error(call, 401)

    def _route(self, head: RequestHead) -> tuple[Route, bool]:
        """(handler, whether it needs the token) for a request that passed Host and Origin."""
        mcp = head.path == "/mcp"
        if head.method == "GET":
            if head.path == "/healthz":
                return self._healthz, False
            if mcp:
                return self._get_mcp, self.stateful or head.header("last-event-id") is not None
            if head.path in TOKEN_GETS or head.path.startswith("/sync/"):
                # mempalace's ops routes (unmodelled here: 404 once past the token) follow the
                # bearer policy: without the token they are 401, like 3.11's
                return self._not_found, True
            return self._not_found, False  # mempalace: unknown GETs need no token
        if head.method == "DELETE":
            return (self._delete_session if mcp else self._not_found), True
        return (self._post_mcp if mcp else self._not_found), True

    def _host_allowed(self, head: RequestHead) -> bool:
        host = (head.header("host") or "").strip().lower()
        name, _, port = host.rpartition(":")
        # mempalace 3.11 pins Host to the port it bound: a loopback name with another port (a
        # port forward, a proxy) is refused unless MEMPALACE_MCP_EXTRA_ALLOWED_HOSTS names it
        if host in self.allowed_hosts or (port == str(self.port) and name in self.allowed_hosts):
            return True
        log(f"HTTP request rejected: Host {host!r} not allowed")
        return False

    def _origin_allowed(self, head: RequestHead) -> bool:
        origin = head.header("origin")
        if origin is None:
            return True
        try:
            hostname = urlsplit(origin.strip()).hostname
        except ValueError:
            hostname = None
        if hostname in ORIGIN_HOSTS:
            return True
        log(f"HTTP request rejected: cross-origin {origin!r}")
        return False

    def _authorized(self, head: RequestHead) -> bool:
        if self.token is None:
            return True
        given = (head.authorization or "").encode("latin-1", "replace")
        return hmac.compare_digest(given, f"Bearer {self.token}".encode())

    # -- routes ------------------------------------------------------------------------------

    async def _healthz(self, call: Call) -> None:
        await call.wire.send(200, [("Content-Type", "text/plain; charset=utf-8")], b"ok\n")

    async def _not_found(self, call: Call) -> None:
        await self._send_error(call, 404)

    async def _get_mcp(self, call: Call) -> None:
        head = call.head
        assert head is not None
        if self.stateful and not await self._admit(call, None):
            return
        event_id = head.header("last-event-id")
        if event_id is not None and event_id in self.resumable:
            await self._resume(call, event_id)
        elif self.stateful:
            await self._json(call, 405, NO_STANDALONE_STREAM, [("Allow", "POST, DELETE")])
        else:
            await self._send_error(call, 404)

    async def _delete_session(self, call: Call) -> None:
        if await self._admit(call, None):
            assert call.session_id is not None
            self.sessions.forget(call.session_id)
            self.brain.journal.record("session", event="deleted", session=call.session_id,
                                      conn=call.conn)
            await call.wire.send(200, [])

    async def _post_mcp(self, call: Call) -> None:
        head = call.head
        assert head is not None
        if "chunked" in (head.header("transfer-encoding") or "").lower():
            # mempalace reads Content-Length bodies only: a chunked one is an empty body to it
            log(f"HTTP JSON-RPC read or parse error: {_parse_problem(b'')}")
            await self._json(call, 400, PARSE_ERROR)
            return
        if _declared_length(head) > BODY_LIMIT:
            await self._json(call, 413, TOO_LARGE)
            return
        try:
            async with client_deadline(READ_SECONDS):
                body = await call.wire.read_body(BODY_LIMIT)
        except (TimeoutError, BadRequest) as exc:
            log(f"HTTP JSON-RPC read or parse error: {exc or 'timed out'}")
            # the peer hung up inside the body (a bridge that drops a request in flight as it
            # shuts down): 3.11 answers 400 to nobody; the journal says why the body is missing
            self.brain.journal.record("http_body_unread", conn=call.conn,
                                      peer_closed=isinstance(exc, BadRequest)
                                      and "peer closed" in str(exc))
            await self._json(call, 400, PARSE_ERROR)
            return
        if self.stateful and not await self._admit(call, body):
            return
        meta = {"http": {"method": head.method, "path": head.path,
                         "headers": redact_headers(head.headers)}, "conn": call.conn}
        exchange = self.brain.receive(body, meta=meta)
        # a body the brain could not parse: over HTTP 3.11 words it so, not as stdio's
        # "Server error: ..." (parsed again only then, so a good body costs one parse)
        problem = _parse_problem(body) if exchange.kind == "invalid" and exchange.log else None
        if problem is not None:
            log(f"HTTP JSON-RPC read or parse error: {problem}")
        elif exchange.log:
            log(exchange.log)
        await self.answer(call, exchange)

    async def _admit(self, call: Call, body: bytes | None) -> bool:
        """Sessions mode: bind the call to its session (opening one), or answer 400/404."""
        assert call.head is not None
        given = call.head.header(SESSION_HEADER)
        session_id, refusal = self.sessions.admit(given, body)
        if refusal is not None:
            await self._json(call, refusal.status, refusal.body())
            return False
        if given is None:
            self.brain.journal.record("session", event="opened", session=session_id,
                                      conn=call.conn)
        call.session_id = session_id
        call.extra = [(SESSION_HEADER, str(session_id))]
        return True

    # -- MCP answers -------------------------------------------------------------------------

    async def answer(self, call: Call, exchange: Exchange) -> None:
        """The response to one JSON-RPC message: HTTP faults first, then the palace via play()."""
        fault = exchange.fault
        if exchange.kind == "response":
            await call.wire.send(202, call.extra)
        elif (rotate := fault("rotate_token")) is not None:
            self.token = str(rotate.params["token"])
            self.brain.journal.record("http_token_rotated", conn=call.conn)
            await self._unauthorized(call)
        elif (forget := fault("forget_session")) is not None:
            # with ms: the request was in flight on a live session, which dies while it waits
            await asyncio.sleep(int(forget.params.get("ms") or 0) / 1000)
            if call.session_id is not None and self.sessions.forget(call.session_id):
                self.brain.journal.record("session", event="forgotten", session=call.session_id,
                                          conn=call.conn)
            await self._json(call, UNKNOWN.status, UNKNOWN.body())
        elif (status := fault("http_status")) is not None:
            await self._injected_status(call, status)
        elif fault("accept_202") is not None:
            await call.wire.send(202, call.extra)
        else:
            if (reset := fault("reset")) is not None:
                call.wire.budget = int(reset.params.get("after_bytes", 0))
            await self._play(call, exchange)

    async def _injected_status(self, call: Call, fault: Fault) -> None:
        status = int(fault.params["status"])
        body = fault.params.get("body")
        if body is None:
            kind = "text/html;charset=utf-8" if status >= 400 else None
            data = b"" if kind is None else error_page(status)
        elif isinstance(body, str):
            kind, data = "text/plain; charset=utf-8", body.encode()
        else:
            kind, data = JSON_TYPE, encode(body)
        kind = fault.params.get("content_type", kind)
        headers = [("Content-Type", str(kind))] if kind else []
        given = fault.params.get("headers") or {}
        extra = list(given.items()) if isinstance(given, dict) else []
        await call.wire.send(status, [*headers, *call.extra, *((str(k), str(v)) for k, v in extra)],
                             data)

    async def _play(self, call: Call, exchange: Exchange) -> None:
        """Run play() against the port while watching for the client hanging up."""
        port = HttpPort(self, call, exchange)
        await port.begin()
        playing = asyncio.ensure_future(play(self.brain, exchange, port))
        hangup = asyncio.ensure_future(call.wire.peer_gone())
        await asyncio.wait({playing, hangup}, return_when=asyncio.FIRST_COMPLETED)
        if not playing.done():
            playing.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionGone):
                await playing
            self.brain.journal.record("http_closed", conn=call.conn, reason="client disconnected")
            await call.wire.abandon()
            return
        hangup.cancel()
        playing.result()
        await port.finish()

    async def _resume(self, call: Call, event_id: str) -> None:
        """Replay a withheld reply as an event stream, with the ``sse`` fault's
        ``resume_status`` (200 unless set). A 2xx delivers it, so a later GET finds nothing;
        any other status keeps it withheld, so every retried GET is answered the same way."""
        reply, status = self.resumable[event_id]
        if 200 <= status < 300:
            del self.resumable[event_id]
        self.brain.journal.record("http_resumed", conn=call.conn, last_event_id=event_id,
                                  status=status)
        await call.wire.start_stream(status, [*SSE_HEADERS, *call.extra])
        await call.wire.stream(f"id: {event_id}-reply\n".encode() + sse_event(reply))
        await call.wire.end_stream()

    async def _json(self, call: Call, status: int, payload: Any,
                    headers: Headers | None = None) -> None:
        await call.wire.send(status, [("Content-Type", JSON_TYPE), *call.extra, *(headers or [])],
                             encode(payload))

    # -- control -----------------------------------------------------------------------------

    async def _control(self, call: Call) -> None:
        assert call.head is not None and self.control is not None
        try:
            async with client_deadline(READ_SECONDS):
                body = await call.wire.read_body(CONTROL_BODY_LIMIT)
        except (TimeoutError, BadRequest):
            await self._json(call, 400, {"error": "could not read the control request body"})
            return
        status, payload = self.control.handle(call.head.method, call.head.path, body)
        if isinstance(payload, JournalBody):
            await self._stream_journal(call, payload)
        else:
            await self._json(call, status, payload)

    async def _stream_journal(self, call: Call, body: JournalBody) -> None:
        """Each piece is made in a worker thread and written with back-pressure, so the loop
        stays free for other clients and at most a piece is held at once."""
        headers = [("Content-Type", JSON_TYPE)]
        if body.dropped:
            headers.append((DROPPED_HEADER, str(body.dropped)))
        await call.wire.start_stream(200, headers)
        pieces = body.pieces()
        while (piece := await asyncio.to_thread(next, pieces, None)) is not None:
            await call.wire.stream(piece)
        await call.wire.end_stream()


def _parse_problem(body: bytes) -> str | None:
    """What 3.11's HTTP handler logs for a body it cannot read as JSON (``str`` of the
    exception from ``json.loads(body.decode("utf-8"))``), or None for a JSON body."""
    try:
        json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return str(exc)
    return None


def _declared_length(head: RequestHead) -> int:
    """The Content-Length h11 accepted (it rejects malformed ones before we get here)."""
    try:
        return int((head.header("content-length") or "0").split(",")[0])
    except ValueError:
        return 0

