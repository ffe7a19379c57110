"""``palace-conformance fake http``: mempalace 3.11's HTTP transport, plus sessions and faults.

By default the fake answers like ``mempalace serve`` on loopback (FAKE-05), so a bridge cannot
tell them apart: ``POST /mcp`` only, one JSON response per request (200 even for JSON-RPC errors),
202 for notifications and client responses, 400 ``-32700`` for bad JSON or a chunked body, 413 over
16 MiB, ``GET /mcp`` 404, other methods 501, ``GET /healthz`` always open, ``Connection: close``
and ``Content-Length`` on everything. Every route checks Host (403), then Origin (403), then the
bearer token (401, stock HTML, no ``WWW-Authenticate``), then the path (404).

``--sessions`` switches to an SDK-style stateful server (FAKE-07, see ``sessions``). Faults from
the plan fire on the request they match: the HTTP-only ones (``http_status``, ``reset``, ``sse``,
``accept_202``, ``content_type``, ``forget_session``, ``rotate_token``) are decided in
:meth:`FakeHttpServer.answer`; the transport-neutral ones run through ``playback.play`` onto an
:class:`HttpPort`, which turns a lone reply into a JSON body and anything more (server requests,
notifications, progress, duplicates) into a live ``text/event-stream``.

Control API (unless ``--no-control``), same port, Host/Origin checked, no token, journaled as
``control`` records (details in ``control`` and ``docs/fake-control-api.md``)::

    POST   /_fake/faults            arm fault(s); 200 {"armed": [ids]} | 400 {"error": "..."}
    DELETE /_fake/faults            disarm all
    POST   /_fake/sessions/forget   forget all sessions, or {"id": ...}
    POST   /_fake/token             {"token": ...} replaces the bearer token
    GET    /_fake/journal           the journal records as JSON
    POST   /_fake/reset             no faults, no sessions, an empty palace

Journal records added here: ``http_request`` and ``http_response`` (with ``conn``, the
connection number), ``http_closed`` (a connection that ended without a complete response),
``http_dropped`` / ``http_withheld`` (output that had nowhere to go), ``session`` and ``control``.
The token is never written anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import re
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .brain import Brain, Exchange, rpc_error
from .control import PREFIX as CONTROL_PREFIX
from .control import ControlApi
from .faults import Fault
from .http_wire import BadRequest, ConnectionGone, Headers, RequestHead, Wire, error_page
from .journal import redact_headers
from .playback import FOREVER, encode, flood_stderr, pause, play
from .server import FakeOptions, build_brain
from .sessions import SESSION_HEADER, UNKNOWN, SessionTable

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
ORIGIN_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
BODY_LIMIT = 16 * 1024 * 1024
CONTROL_BODY_LIMIT = 4 * 1024 * 1024
READ_SECONDS = 10.0  # mempalace's handler socket timeout
JSON_TYPE = "application/json; charset=utf-8"
SSE_RETRY_MS = 200
TOKEN_ENV = "MEMPALACE_MCP_HTTP_TOKEN"
WRITER_WAIT_ENV = "MEMPALACE_MCP_WRITER_WAIT_SECONDS"
EXTRA_HOSTS_ENV = "MEMPALACE_MCP_EXTRA_ALLOWED_HOSTS"

PARSE_ERROR = rpc_error(None, -32700, "Parse error")
TOO_LARGE = rpc_error(None, -32600, "Request too large")
NO_STANDALONE_STREAM = rpc_error(None, -32600, "Method Not Allowed: no GET stream here")


def log(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (text + "\n").encode(errors="replace"))


@dataclass
class Call:
    """One connection's request, as the server sees it while answering."""

    conn: int
    wire: Wire
    head: RequestHead | None = None
    control: bool = False
    session_id: str | None = None
    extra: Headers = field(default_factory=list)  # headers every answer carries (session id)


Route = Callable[[Call], Awaitable[None]]


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
        self.resumable: dict[str, bytes] = {}  # priming event id -> withheld reply
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
            async with asyncio.timeout(READ_SECONDS):
                call.head = await call.wire.read_head()
        except TimeoutError:
            return
        except BadRequest as exc:
            self.brain.journal.record("http_request", method=None, path=None, error=str(exc),
                                      conn=call.conn)
            await call.wire.send_error(exc.status)
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
                await call.wire.send_error(501, reason, reason=reason)
                return
        if not self._host_allowed(head) or not self._origin_allowed(head):
            await call.wire.send_error(403)
            return
        if call.control:
            await self._control(call)
            return
        route, needs_token = self._route(head)
        if needs_token and not self._authorized(head):
            await call.wire.send_error(401)
            return
        await route(call)

    def _route(self, head: RequestHead) -> tuple[Route, bool]:
        """(handler, whether it needs the token) for a request that passed Host and Origin."""
        mcp = head.path == "/mcp"
        if head.method == "GET":
            if head.path == "/healthz":
                return self._healthz, False
            if mcp:
                return self._get_mcp, self.stateful or head.header("last-event-id") is not None
            return self._not_found, False  # mempalace: unknown GETs need no token
        if head.method == "DELETE":
            return (self._delete_session if mcp else self._not_found), True
        return (self._post_mcp if mcp else self._not_found), True

    def _host_allowed(self, head: RequestHead) -> bool:
        host = (head.header("host") or "").strip().lower()
        name, _, port = host.rpartition(":")
        if host in self.allowed_hosts or (port.isdigit() and name in self.allowed_hosts):
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
        await call.wire.send_error(404)

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
            await call.wire.send_error(404)

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
            await self._json(call, 400, PARSE_ERROR)  # mempalace reads Content-Length bodies only
            return
        if _declared_length(head) > BODY_LIMIT:
            await self._json(call, 413, TOO_LARGE)
            return
        try:
            async with asyncio.timeout(READ_SECONDS):
                body = await call.wire.read_body(BODY_LIMIT)
        except (TimeoutError, BadRequest) as exc:
            log(f"HTTP JSON-RPC read or parse error: {exc or 'timed out'}")
            await self._json(call, 400, PARSE_ERROR)
            return
        if self.stateful and not await self._admit(call, body):
            return
        meta = {"http": {"method": head.method, "path": head.path,
                         "headers": redact_headers(head.headers)}, "conn": call.conn}
        exchange = self.brain.receive(body, meta=meta)
        if exchange.log:
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
            await call.wire.send_error(401)
        elif fault("forget_session") is not None:
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
        reply = self.resumable.pop(event_id)
        self.brain.journal.record("http_resumed", conn=call.conn, last_event_id=event_id)
        await call.wire.start_stream(200, [*_SSE_HEADERS, *call.extra])
        await call.wire.stream(f"id: {event_id}-reply\n".encode() + _sse_event(reply))
        await call.wire.end_stream()

    async def _json(self, call: Call, status: int, payload: Any,
                    headers: Headers | None = None) -> None:
        await call.wire.send(status, [("Content-Type", JSON_TYPE), *call.extra, *(headers or [])],
                             encode(payload))

    # -- control -----------------------------------------------------------------------------

    async def _control(self, call: Call) -> None:
        assert call.head is not None and self.control is not None
        try:
            async with asyncio.timeout(READ_SECONDS):
                body = await call.wire.read_body(CONTROL_BODY_LIMIT)
        except (TimeoutError, BadRequest):
            await self._json(call, 400, {"error": "could not read the control request body"})
            return
        status, payload = self.control.handle(call.head.method, call.head.path, body)
        await self._json(call, status, payload)


def _declared_length(head: RequestHead) -> int:
    """The Content-Length h11 accepted (it rejects malformed ones before we get here)."""
    try:
        return int((head.header("content-length") or "0").split(",")[0])
    except ValueError:
        return 0


_SSE_HEADERS: Headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]


def _sse_event(data: bytes) -> bytes:
    lines = data.split(b"\n")
    return b"event: message\n" + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"


def _is_reply(message: dict[str, Any]) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


def _status_for(exchange: Exchange) -> int:
    """mempalace answers bad JSON with 400 and a dispatcher crash with 500; all else is 200.

    Judged on the palace's own reply (an injected ``error`` fault stays a 200), which play() has
    already computed by the time anything is written.
    """
    reply = exchange.reply() or {}
    code = (reply.get("error") or {}).get("code")
    if code == -32700 and exchange.kind == "invalid":
        return 400
    return 500 if code == -32603 else 200


class HttpPort:
    """Where play() writes for one POST: a lone reply becomes a JSON body, more becomes SSE."""

    def __init__(self, server: FakeHttpServer, call: Call, exchange: Exchange) -> None:
        self.server = server
        self.call = call
        self.wire = call.wire
        self.exchange = exchange
        self.journal = server.brain.journal
        fault = exchange.fault
        self.sse = fault("sse")
        self.stream_only = self.sse is not None or fault("duplicate_response") is not None
        kind = fault("content_type")
        self.content_type = str(kind.params.get("value", "text/html")) if kind else JSON_TYPE
        # Over HTTP a partial line is half a response and a dead connection, not a dead server:
        # take it away from play() and cut the reply here instead.
        self.partial = fault("partial_line")
        exchange.faults = [f for f in exchange.faults if f.action != "partial_line"]
        self.mode: str | None = None  # None until the first byte; then "json" or "sse"

    @property
    def _sse_params(self) -> dict[str, Any]:
        return self.sse.params if self.sse is not None else {}

    async def begin(self) -> None:
        """An ``sse`` fault opens the stream (priming event, keep-alives) before any message."""
        if self.sse is not None and self.exchange.kind != "notification":
            await self._open_stream()

    async def emit(self, message: dict[str, Any]) -> None:
        await self._deliver(encode(message), reply=_is_reply(message), raw=False)

    async def emit_raw(self, data: bytes) -> None:
        await self._deliver(data, reply=False, raw=True)

    async def exit(self, code: int) -> None:
        self.server.exit_process(code)

    async def _deliver(self, data: bytes, *, reply: bool, raw: bool) -> None:
        if raw:
            data = data.rstrip(b"\n")  # play() frames raw bytes as a stdio line
        if self.exchange.kind == "notification" or self.mode == "json":
            self.journal.record("http_dropped", conn=self.call.conn, size=len(data),
                                why="a notification's 202 carries no body" if self.mode is None
                                else "the JSON response was already sent")
            return
        if self.mode is None and (self.stream_only or not (reply or raw)):
            await self._open_stream()
        if self.mode is None:
            await self._send_json(data, cut=reply)
        elif reply and self._sse_params.get("close_without_response"):
            self._withhold(data)
        else:
            await self._event(data, cut=reply)

    async def _send_json(self, body: bytes, *, cut: bool) -> None:
        self.mode = "json"
        half = cut and self.partial is not None
        await self.wire.send(_status_for(self.exchange),
                             [("Content-Type", self.content_type), *self.call.extra], body,
                             half=half)
        if half:
            await self._after_cut()

    async def _open_stream(self) -> None:
        self.mode = "sse"
        await self.wire.start_stream(200, [*_SSE_HEADERS, *self.call.extra])
        params = self._sse_params
        if params.get("priming_id") is not None:
            await self.wire.stream(f"id: {params['priming_id']}\nretry: {SSE_RETRY_MS}\n"
                                   "data: \n\n".encode())
        for _ in range(int(params.get("keepalives", 0))):
            await pause(int(params.get("event_delay_ms", 0)))
            await self.wire.stream(b": keepalive\n\n")

    async def _event(self, data: bytes, *, cut: bool) -> None:
        await pause(int(self._sse_params.get("event_delay_ms", 0)))
        half = cut and self.partial is not None
        await self.wire.stream(_sse_event(data), half=half)
        if half:
            await self._after_cut()

    def _withhold(self, data: bytes) -> None:
        priming = self._sse_params.get("priming_id")
        if priming is not None:
            self.server.resumable[str(priming)] = data
        self.journal.record("http_withheld", conn=self.call.conn, id=self.exchange.request_id,
                            resumable=priming is not None)

    async def _after_cut(self) -> None:
        assert self.partial is not None
        self.journal.record("http_closed", conn=self.call.conn, reason="partial_line",
                            sent=self.wire.sent)
        if self.partial.params.get("then", "exit") == "stall":
            await pause(FOREVER)
        await self.wire.reset()
        raise ConnectionGone("partial response")

    async def finish(self) -> None:
        """After play(): end the stream, or 202 a message that wants no answer, or hang up."""
        message = self.exchange.message or {}
        if self.mode == "sse":
            await self.wire.end_stream()
        elif self.mode is None and (self.exchange.kind == "notification" or "id" not in message):
            await self.wire.send(202, self.call.extra)
        elif self.mode is None:
            self.journal.record("http_closed", conn=self.call.conn, reason="no response")


# -- the command -----------------------------------------------------------------------------


_SECRET_IN_SPEC = re.compile(r"(token=)[^,]*")


def _redacted_argv(argv: list[str]) -> list[str]:
    """argv for the journal: the ``--token`` value and any ``token=`` in a fault spec hidden."""
    out: list[str] = []
    for index, arg in enumerate(argv):
        previous = argv[index - 1] if index else ""
        if previous == "--token":
            out.append("<redacted>")
        elif arg.startswith("--token="):
            out.append("--token=<redacted>")
        else:
            out.append(_SECRET_IN_SPEC.sub(r"\1<redacted>", arg))
    return out


async def _startup(brain: Brain) -> tuple[int | None, bool]:
    """Obey ``$startup`` faults: (exit code if start-up must fail, whether SIGTERM is ignored)."""
    faults = brain.start_process(_redacted_argv(sys.argv))
    failing = next((f for f in faults if f.action == "startup_fail"), None)
    if failing is not None:
        await pause(int(failing.params.get("after_ms", 0)))
        if failing.params.get("stderr"):
            log(str(failing.params["stderr"]))
        code = int(failing.params.get("code", 1))
        brain.journal.record("process_exit", code=code, reason="fault startup_fail")
        return code, False
    for fault in faults:
        if fault.action == "flood_stderr":
            flood_stderr(int(fault.params.get("bytes", 1 << 20)))
    await pause(sum(int(f.params.get("ms", 0)) for f in faults if f.action == "delay"))
    return None, any(f.action == "ignore_sigterm" for f in faults)


async def _take_lease(brain: Brain) -> bool:
    """A writable mempalace HTTP server holds the writer lease from start-up on."""
    try:
        wait = max(0.0, float(os.environ.get(WRITER_WAIT_ENV, "0")))
    except ValueError:
        wait = 0.0
    contention = brain.lease.acquire()
    if contention is not None and wait > 0:
        log(f"Writable MCP HTTP startup is waiting up to {wait:g} s for the writer lease: "
            f"{contention.reason}")
        clock = asyncio.get_running_loop().time
        deadline = clock() + wait
        backoff = 0.5
        while contention is not None and clock() < deadline:
            await asyncio.sleep(min(backoff, deadline - clock()))
            backoff = min(backoff * 2, 5.0)
            contention = brain.lease.acquire()
    if contention is not None:
        log(f"Writable MCP HTTP startup refused: {contention.reason}")
        brain.journal.record("lease", event="contended", palace=brain.lease.palace,
                             holder=contention.holder)
        brain.journal.record("process_exit", code=2, reason="writer lease held elsewhere")
        return False
    brain.journal.record("lease", event="acquired", palace=brain.lease.palace)
    return True


def _write_ready_file(path: str, url: str, port: int) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ready-", dir=target.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": url, "port": port, "pid": os.getpid()}, handle)
    os.replace(tmp, target)


WATCH_ENV = "PALACE_FAKE_WATCH_PID"


def _watch_owner(reason: list[str], stopped: asyncio.Event) -> asyncio.Task[None] | None:
    """Stop when the process named by ``PALACE_FAKE_WATCH_PID`` is gone.

    A runner that is killed outright cannot clean up; without this its HTTP fakes would linger.
    """
    raw = os.environ.get(WATCH_ENV, "")
    if not raw.isdigit():
        return None
    owner = int(raw)

    async def watch() -> None:
        while True:
            await asyncio.sleep(0.5)
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                reason.append("owner gone")
                stopped.set()
                return
            except PermissionError:
                continue

    return asyncio.get_running_loop().create_task(watch())


async def _serve(brain: Brain, *, host: str, port: int, token: str | None, sessions: bool,
                 ready_file: str | None, control: bool) -> int:
    log("MemPalace MCP HTTP server starting...")
    failed, ignore_sigterm = await _startup(brain)
    if failed is not None:
        return failed
    if not await _take_lease(brain):
        return 2
    server = FakeHttpServer(brain, host=host, token=token, sessions=sessions, control=control)
    try:
        await server.start(port)
    except OSError as exc:
        log(f"palace-conformance fake http: cannot listen on {host}:{port}: {exc.strerror}; "
            "pick another --port (0 picks a free one)")
        brain.lease.release()
        return 2
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    reason: list[str] = []

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if ignore_sigterm and signum == signal.SIGTERM:
            brain.journal.record("signal", signal=name, action="ignored")
            return
        brain.journal.record("signal", signal=name, action="exit")
        reason.append(name)
        stopped.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, on_signal, signum)
    if ready_file:
        try:
            _write_ready_file(ready_file, server.url, server.port)
        except OSError as exc:
            log(f"palace-conformance fake http: cannot write --ready-file {ready_file}: "
                f"{exc.strerror}; pick a writable path")
            brain.lease.release()
            return 2
    log(f"MemPalace MCP HTTP server listening on {server.url}")
    watcher = _watch_owner(reason, stopped)
    await stopped.wait()
    if watcher is not None:
        watcher.cancel()
    await server.close()
    brain.journal.record("process_exit", code=0, reason=reason[0] if reason else "stopped")
    brain.lease.release()
    return 0


def run_http(options: FakeOptions, *, host: str, port: int, token: str | None, sessions: bool,
             ready_file: str | None, control: bool) -> int:
    """Serve the fake over HTTP until SIGTERM; returns the process exit code."""
    if host.lower() not in LOOPBACK_HOSTS:
        print(f"palace-conformance fake http: refusing to bind non-loopback host {host!r}; "
              "use 127.0.0.1, localhost or ::1", file=sys.stderr)
        return 2
    if token is None or token == "":
        token = os.environ.get(TOKEN_ENV) or None
    brain = build_brain(options, "http")
    try:
        return asyncio.run(_serve(brain, host=host, port=port, token=token, sessions=sessions,
                                  ready_file=ready_file, control=control))
    except KeyboardInterrupt:
        return 0
