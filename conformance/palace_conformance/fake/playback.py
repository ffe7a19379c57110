"""Plays an :class:`~.brain.Exchange` onto a transport: the one place fault timing is decided.

A transport implements :class:`Port` (emit a message, emit raw bytes, exit); this module decides the
order: pre-reply noise and server-initiated messages, stalls and delays, the reply itself, and
post-reply crashes. Transport-only faults (HTTP statuses, resets, SSE framing) are handled by the
HTTP transport around this call.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Protocol

from .brain import Brain, Exchange


class Port(Protocol):
    async def emit(self, message: dict[str, Any]) -> None: ...

    async def emit_raw(self, data: bytes) -> None: ...

    async def exit(self, code: int) -> None: ...


def encode(message: Any) -> bytes:
    """mempalace's framing: ``json.dumps`` default separators, raw UTF-8, no trailing newline."""
    return json.dumps(message, ensure_ascii=False).encode()


FOREVER = None


async def pause(ms: int | None) -> None:
    if ms is None:
        await asyncio.Event().wait()
    else:
        await asyncio.sleep(ms / 1000.0)


def flood_stderr(size: int) -> None:
    """Blocking writes to fd 2, like a chatty server: a bridge that never drains stderr stalls us."""
    line = b"fake palace stderr flood " + b"." * 54 + b"\n"
    written = 0
    while written < size:
        chunk = line * max(1, min(1024, (size - written) // len(line) + 1))
        os.write(2, chunk)
        written += len(chunk)


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
    if (flood := fault("flood_stderr")) is not None:
        await asyncio.to_thread(flood_stderr, int(flood.params.get("bytes", 1 << 20)))
    for f in exchange.faults:
        if f.action == "notify":
            await send({"jsonrpc": "2.0", "method": f.params["method"],
                        "params": f.params.get("params", {})})
        elif f.action == "server_request":
            await send({"jsonrpc": "2.0", "id": brain.next_server_request_id(),
                        "method": f.params["method"], "params": f.params.get("params", {})})
    if (stall := fault("stall")) is not None:
        await pause(stall.params.get("ms"))
        journal.record("stall_end", fault_id=stall.id, id=exchange.request_id)
        return
    if (delay := fault("delay")) is not None:
        await pause(int(delay.params.get("ms", 0)))
    if (drip := fault("drip_progress")) is not None:
        meta = ((exchange.message or {}).get("params") or {}).get("_meta") or {}
        token = meta.get("progressToken", f"fake-progress-{exchange.request_id}")
        count = int(drip.params.get("count", 3))
        for step in range(1, count + 1):
            await pause(int(drip.params.get("interval_ms", 100)))
            await send({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": step, "total": count}})
        if drip.params.get("then", "reply") == "stall":
            await pause(FOREVER)
    crash = fault("exit")
    if crash is not None and crash.params.get("when", "before_reply") == "before_reply":
        await die(int(crash.params.get("code", 1)), "fault exit before reply")
        return
    if (garbage := fault("garbage")) is not None:
        await send_raw(str(garbage.params.get("text", "this is not json")).encode() + b"\n",
                       "garbage")
    if exchange.hold_seconds and exchange.reply() is not None:
        reply = exchange.reply()
        if reply and json.loads(reply["result"]["content"][0]["text"]).get("timed_out"):
            await asyncio.sleep(exchange.hold_seconds)
    reply = exchange.reply()
    if reply is None:
        return
    if (wrong := fault("wrong_id")) is not None:
        reply = {**reply, "id": wrong.params.get("id", f"wrong-{reply.get('id')}")}
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
    if (partial := fault("partial_line")) is not None:
        data = encode(reply)
        await send_raw(data[: max(1, len(data) // 2)], "partial line")
        if partial.params.get("then", "exit") == "exit":
            await die(int(partial.params.get("code", 1)), "fault exit after partial line")
        else:
            await pause(FOREVER)
        return
    await send(reply)
    if fault("duplicate_response") is not None:
        await send(reply)
    if crash is not None:
        await die(int(crash.params.get("code", 1)), "fault exit after reply")
