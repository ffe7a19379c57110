"""Plays an :class:`~.brain.Exchange` onto a transport: the one place fault timing is decided.

A transport implements :class:`Port` (emit a message, emit raw bytes, exit); this module decides the
order: pre-reply noise and server-initiated messages, stalls and delays, the reply itself, and
post-reply crashes. Transport-only faults (HTTP statuses, resets, SSE framing) are handled by the
HTTP transport around this call.

The stdio transport drives :func:`play` without an event loop (importing asyncio would double the
fake's cold start), so waiting and blocking work go through :func:`pause` and :func:`offload`, which
use the port's own ``pause``/``offload`` when it has them. Never await asyncio directly in here.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable, Sequence

from palace_conformance.fake.brain import Brain, Exchange
from palace_conformance.fake.faults import Fault

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any, Protocol

    class Port(Protocol):
        async def emit(self, message: dict[str, Any]) -> None: ...

        async def emit_raw(self, data: bytes) -> None: ...

        async def exit(self, code: int) -> None: ...

    Send = Callable[[dict[str, Any]], Awaitable[None]]


def encode(message: Any) -> bytes:
    """mempalace's framing: ``json.dumps`` default separators, raw UTF-8, no trailing newline."""
    return json.dumps(message, ensure_ascii=False).encode("utf-8", "replace")


FOREVER = None


async def pause(ms: int | None, port: Any = None) -> None:
    """Wait ``ms`` milliseconds (None: forever), blocking if the port says so (stdio)."""
    custom = getattr(port, "pause", None)
    if custom is not None:
        await custom(ms)
        return
    import asyncio

    if ms is None:
        await asyncio.Event().wait()
    else:
        await asyncio.sleep(ms / 1000.0)


async def offload(port: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """Run blocking ``fn`` off the event loop, or inline on a port that has no loop."""
    custom = getattr(port, "offload", None)
    if custom is not None:
        return await custom(fn, *args)
    import asyncio

    return await asyncio.to_thread(fn, *args)


#: bytes that are not UTF-8 in any reading: a lone continuation byte, an overlong encoding, a
#: surrogate, a byte UTF-8 never uses, and a truncated sequence
NOT_UTF8 = b"\x80 \xc0\xaf \xed\xa0\x80 \xff \xe2\x82"


def flood_stderr(size: int, invalid_utf8: bool = False) -> None:
    """Blocking writes to fd 2, like a chatty server: a bridge that never drains stderr
    stalls us. ``invalid_utf8``: each line carries bytes no UTF-8 decoder accepts."""
    filler = NOT_UTF8 + b" " * (54 - len(NOT_UTF8)) if invalid_utf8 else b"." * 54
    line = b"fake palace stderr flood " + filler + b"\n"
    written = 0
    while written < size:
        chunk = line * max(1, min(1024, (size - written) // len(line) + 1))
        os.write(2, chunk)
        written += len(chunk)


def write_stderr(pieces: Sequence[str], pause_ms: int = 0) -> None:
    """Write each piece to fd 2 with its own write, ``pause_ms`` apart (the ``write_stderr``
    fault): a reader gets a line in parts, as a server's stderr may arrive, so a bridge must not
    judge (redact) what it forwards one read at a time."""
    for index, piece in enumerate(pieces):
        if index and pause_ms:
            time.sleep(pause_ms / 1000.0)
        os.write(2, piece.encode("utf-8", "replace"))


def last_words(size: int, line: str) -> None:
    """A dying server's stderr (the ``exit`` fault's ``stderr_bytes`` and ``stderr``): a flood of
    ``size`` bytes, then ``line``. The pipe is first enlarged to hold them all (Linux, up to its
    ``pipe-max-size``), so they are written at once and still unread when the process is gone: a
    bridge must read a dead child's stderr to its end, not close it when it sees the exit."""
    tail = (line + "\n").encode("utf-8", "replace") if line else b""
    if size:
        import fcntl

        with contextlib.suppress(OSError, AttributeError):  # not a pipe, or not Linux
            fcntl.fcntl(2, fcntl.F_SETPIPE_SZ, size + len(tail) + 128)
        flood_stderr(size)
    if tail:
        os.write(2, tail)


def _timed_out_wait(reply: dict[str, Any] | None) -> bool:
    """Whether an ``event_wait`` reply is the empty timeout, which mempalace sends only at
    the end of the wait."""
    try:
        text = reply["result"]["content"][0]["text"]  # type: ignore[index]
        return bool(json.loads(text).get("timed_out"))
    except (TypeError, KeyError, IndexError, ValueError, AttributeError):
        return False


def retyped(request_id: Any) -> Any:
    """The same id in the other JSON type (``7`` <-> ``"7"``); None when there is none."""
    if isinstance(request_id, bool):
        return None
    if isinstance(request_id, int):
        return str(request_id)
    digits = request_id.removeprefix("-") if isinstance(request_id, str) else ""
    if digits and all(c in "0123456789" for c in digits):
        return int(request_id)
    return None


async def play(brain: Brain, exchange: Exchange, port: Port) -> None:
    journal = brain.journal

    async def send(message: dict[str, Any]) -> None:
        journal.record("send", message=message, method=message.get("method"), id=message.get("id"))
        await port.emit(message)

    async def send_raw(data: bytes, note: str) -> None:
        journal.record("send", raw=data[:4096].decode(errors="replace"), note=note,
                       size=len(data))
        await port.emit_raw(data)

    async def die(code: int, note: str) -> None:
        journal.record("process_exit", code=code, reason=note)
        await port.exit(code)

    if exchange.kind == "response":
        return
    fault = exchange.fault
    await _before_reply(brain, exchange, port, send)
    if (stall := fault("stall")) is not None:
        await pause(stall.params.get("ms"), port)
        journal.record("stall_end", fault_id=stall.id, id=exchange.request_id)
        return
    if (delay := fault("delay")) is not None:
        await pause(int(delay.params.get("ms", 0)), port)
    if (drip := fault("drip_progress")) is not None:
        await _drip_progress(drip, exchange, port, send)
    crash = fault("exit")

    async def crash_out(note: str) -> None:
        """The ``exit`` fault: its last words on stderr (if it has any), then the exit."""
        assert crash is not None
        if crash.params.get("stderr") or crash.params.get("stderr_bytes"):
            await offload(port, last_words, int(crash.params.get("stderr_bytes", 0)),
                          str(crash.params.get("stderr", "")))
        await die(int(crash.params.get("code", 1)), note)

    if crash is not None and crash.params.get("when", "before_reply") == "before_reply":
        await crash_out("fault exit before reply")
        return
    if (garbage := fault("garbage")) is not None:
        await send_raw(str(garbage.params.get("text", "this is not json")).encode() + b"\n",
                       "garbage")
    if exchange.hold_seconds and _timed_out_wait(exchange.reply()):
        await pause(int(exchange.hold_seconds * 1000), port)
    reply = exchange.reply()
    if reply is None:
        if crash is not None:
            await crash_out("fault exit after handling a notification")
        return
    if (retype := fault("retype_id")) is not None and "id" in reply:
        other = retyped(reply["id"])
        if other is not None:  # a decoy a loose id match would take for the answer
            await send({"jsonrpc": "2.0", "id": other,
                        "error": {"code": -32099, "message": "decoy: an answer to id "
                                  f"{json.dumps(other)}, not {json.dumps(reply['id'])}"}})
        if retype.params.get("then", "reply") == "stall":
            await pause(FOREVER, port)
            return
    reply = _rewritten(reply, fault)
    if (partial := fault("partial_line")) is not None:
        data = encode(reply)
        await send_raw(data[: max(1, len(data) // 2)], "partial line")
        if partial.params.get("then", "exit") == "exit":
            await die(int(partial.params.get("code", 1)), "fault exit after partial line")
        else:
            await pause(FOREVER, port)
        return
    await send(reply)
    if fault("duplicate_response") is not None:
        await send(reply)
    if crash is not None:
        await crash_out("fault exit after reply")


async def _before_reply(brain: Brain, exchange: Exchange, port: Port, send: Send) -> None:
    """What a fault does before the request is handled: stderr written, notifications and
    server requests sent."""
    fault = exchange.fault
    if (flood := fault("flood_stderr")) is not None:
        await offload(port, flood_stderr, int(flood.params.get("bytes", 1 << 20)),
                      bool(flood.params.get("invalid_utf8", False)))
    if (written := fault("write_stderr")) is not None:
        await offload(port, write_stderr, list(written.params["pieces"]),
                      int(written.params.get("pause_ms") or 0))
    for f in exchange.faults:
        if f.action == "notify":
            await send({"jsonrpc": "2.0", "method": f.params["method"],
                        "params": f.params.get("params", {})})
        elif f.action == "server_request":
            await send({"jsonrpc": "2.0", "id": brain.next_server_request_id(),
                        "method": f.params["method"], "params": f.params.get("params", {})})


async def _drip_progress(drip: Fault, exchange: Exchange, port: Port, send: Send) -> None:
    """``drip_progress``: progress notifications at an interval, then the reply or a stall."""
    meta = ((exchange.message or {}).get("params") or {}).get("_meta") or {}
    token = meta.get("progressToken", f"fake-progress-{exchange.request_id}")
    count = int(drip.params.get("count", 3))
    for step in range(1, count + 1):
        await pause(int(drip.params.get("interval_ms", 100)), port)
        await send({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "total": count}})
    if drip.params.get("then", "reply") == "stall":
        await pause(FOREVER, port)


def _rewritten(reply: dict[str, Any], fault: Callable[[str], Fault | None]) -> dict[str, Any]:
    """The reply as the ``wrong_id``, ``error``, ``result`` and ``oversized`` faults change it."""
    if (wrong := fault("wrong_id")) is not None:
        reply = {**reply, "id": wrong.params.get("reply_id", f"wrong-{reply.get('id')}")}
    if (override := fault("error")) is not None and "id" in reply:
        reply = {"jsonrpc": "2.0", "id": reply["id"],
                 "error": {k: v for k, v in (("code", override.params["code"]),
                                             ("message", override.params.get("message", "error")),
                                             ("data", override.params.get("data")))
                           if v is not None}}
    if (result := fault("result")) is not None and "id" in reply:
        reply = {"jsonrpc": "2.0", "id": reply["id"], "result": result.params.get("result", {})}
    if (big := fault("oversized")) is not None and "result" in reply:
        size = int(big.params.get("bytes", 11 << 20))
        reply = {**reply, "result": {**reply["result"], "_padding": "x" * size}}
    return reply
