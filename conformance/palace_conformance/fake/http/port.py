"""Where one POST's answer is written: a lone reply becomes a JSON body, anything more (server
requests, notifications, progress, duplicates) a live ``text/event-stream``; and the response
framing both share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from palace_conformance.fake.brain import Brain, Exchange
from palace_conformance.fake.http.wire import (
    ConnectionGone,
    Headers,
    RequestHead,
    Wire,
)
from palace_conformance.fake.playback import FOREVER, encode, pause

JSON_TYPE = "application/json; charset=utf-8"
SSE_RETRY_MS = 200


@dataclass
class Call:
    """One connection's request, as the server sees it while answering."""

    conn: int
    wire: Wire
    head: RequestHead | None = None
    control: bool = False
    session_id: str | None = None
    extra: Headers = field(default_factory=list)  # headers every answer carries (session id)


class Withheld(NamedTuple):
    """A reply an ``sse`` fault held back, replayed to the GET that resumes its stream."""

    reply: bytes
    status: int = 200  # the resuming GET's status (``resume_status``); the body is the same


class PortOwner(Protocol):
    """What a port needs of the server that owns it."""

    brain: Brain
    resumable: dict[str, Withheld]

    def exit_process(self, code: int) -> None: ...


SSE_HEADERS: Headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]


def sse_event(data: bytes, event: str = "message") -> bytes:
    lines = data.split(b"\n")
    return (b"event: " + event.encode() + b"\n"
            + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n")


#: the bytes each ``line_ending`` of an ``sse`` fault ends a line with (``mixed``: see _mixed)
LINE_ENDINGS = {"lf": b"\n", "crlf": b"\r\n", "cr": b"\r"}
#: a blank line and the line before it, or a line end with more after it (``mixed`` endings)
_MIXED_LINE_END = re.compile(rb"\n\n|\n(?=.)", re.DOTALL)


def _mixed(data: bytes) -> bytes:
    """``line_ending: mixed``: a line with another line after it ends in a lone CR, the line
    before a blank line in CRLF and the blank line in LF, all three in one stream as the SSE
    standard allows. A lone CR is never right before an LF (the pair would be one CRLF), so the
    lines are those of the LF stream; a client that takes a CR with any later LF for a CRLF
    loses the line after it."""
    return _MIXED_LINE_END.sub(lambda m: b"\r\n\n" if m.group() == b"\n\n" else b"\r", data)


#: what an ``sse`` fault's ``unknown_fields`` puts last in each event: fields whose names differ
#: from the standard's only by case, which a client ignores as it ignores any field it does not
#: know (last, so that a client that took them for ``event``, ``data`` and ``retry`` keeps what
#: they say: a wait of a day before it resumes the stream)
UNKNOWN_FIELDS = b"Event: error\nData: an unknown field\nRetry: 86400000\n"


#: what an ``sse`` fault's ``invalid_utf8`` sends first: a comment line holding bytes that are
#: not UTF-8 (a lone continuation byte, then 0xFF and 0xFE, which UTF-8 never uses). The SSE
#: standard decodes a stream with replacement (U+FFFD), so a client reads on; one that decodes
#: strictly fails the call
NOT_UTF8_COMMENT = b": \x80\xff\xfe not UTF-8\n\n"


def decoy_answer(request_id: Any, event: str) -> dict[str, Any]:
    """What an ``sse`` fault's ``decoy_event`` carries: a response to the very request, with a
    result no tool gives (a text that says it is a decoy), so a client that reads an event of
    another type than ``message`` as JSON-RPC shows the agent this instead of the answer."""
    return {"jsonrpc": "2.0", "id": request_id,
            "result": {"content": [{"type": "text", "text": f"decoy: an SSE {event!r} event is "
                                    "not a JSON-RPC message"}], "isError": False}}


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

    def __init__(self, server: PortOwner, call: Call, exchange: Exchange) -> None:
        self.server = server
        self.call = call
        self.wire = call.wire
        self.exchange = exchange
        self.journal = server.brain.journal
        fault = exchange.fault
        self.sse = fault("sse")
        # a decoy before the reply (retype_id) needs a stream, as a second reply does
        self.stream_only = self.sse is not None or any(
            fault(name) is not None for name in ("duplicate_response", "retype_id"))
        answer = fault("answer_status")  # the real answer under another status (2xx, 3xx)
        self.status = int(answer.params["status"]) if answer is not None else None
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
        await self.wire.send(self.status or _status_for(self.exchange),
                             [("Content-Type", self.content_type), *self.call.extra], body,
                             half=half)
        if half:
            await self._after_cut()

    async def _open_stream(self) -> None:
        self.mode = "sse"
        await self.wire.start_stream(self.status or 200, [*SSE_HEADERS, *self.call.extra])
        params = self._sse_params
        if params.get("priming_id") is not None:
            retry = params.get("retry_ms")
            retry_line = ("" if params.get("no_retry")
                          else f"retry: {SSE_RETRY_MS if retry is None else int(retry)}\n")
            unknown = UNKNOWN_FIELDS if params.get("unknown_fields") else b""
            await self._stream(f"id: {params['priming_id']}\n{retry_line}"
                               "data: \n".encode() + unknown + b"\n")
        if params.get("invalid_utf8"):
            self.journal.record("http_invalid_utf8", conn=self.call.conn)
            await self._stream(NOT_UTF8_COMMENT)
        for _ in range(int(params.get("keepalives", 0))):
            await pause(int(params.get("event_delay_ms", 0)))
            await self._stream(b": keepalive\n\n")
        decoy = params.get("decoy_event")
        if decoy is not None and self.exchange.kind == "request":
            message = decoy_answer(self.exchange.request_id, str(decoy))
            self.journal.record("http_decoy", conn=self.call.conn, event=decoy, id=message["id"])
            await self._stream(self._sse_event(encode(message), str(decoy)))
        garbage = params.get("garbage_event")
        if garbage is not None and self.exchange.kind == "request":
            self.journal.record("http_garbage_event", conn=self.call.conn,
                                id=self.exchange.request_id)
            await self._stream(self._sse_event(str(garbage).encode()))

    async def _event(self, data: bytes, *, cut: bool) -> None:
        await pause(int(self._sse_params.get("event_delay_ms", 0)))
        half = cut and self.partial is not None
        await self._stream(self._sse_event(data), half=half)
        if half:
            await self._after_cut()

    def _sse_event(self, data: bytes, event: str = "message") -> bytes:
        framed = sse_event(data, event)
        if self._sse_params.get("unknown_fields"):  # before the blank line that ends it
            return framed[:-1] + UNKNOWN_FIELDS + b"\n"
        return framed

    async def _stream(self, data: bytes, *, half: bool = False) -> None:
        """One write of the event stream, in the fault's ``line_ending`` (the events are built
        with LF, and JSON data holds no raw CR or LF), in pieces of ``chunk_bytes`` each flushed
        before the next, so a client reads them apart (a CR and its LF in two reads); the half
        write of a ``partial_line`` goes out in one piece."""
        params = self._sse_params
        ending = str(params.get("line_ending") or "lf")
        data = _mixed(data) if ending == "mixed" else data.replace(b"\n", LINE_ENDINGS[ending])
        size = params.get("chunk_bytes")
        if half or not size:
            await self.wire.stream(data, half=half)
            return
        for at in range(0, len(data), int(size)):
            await self.wire.stream(data[at:at + int(size)])

    def _withhold(self, data: bytes) -> None:
        priming = self._sse_params.get("priming_id")
        if priming is not None:
            status = self._sse_params.get("resume_status")
            self.server.resumable[str(priming)] = Withheld(data, 200 if status is None
                                                           else int(status))
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
