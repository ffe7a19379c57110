"""The stdio transport: newline-delimited JSON, strictly one request at a time, like mempalace 3.11.

A stalled request blocks every later one (``ping`` included); stdin EOF and SIGTERM exit 0; a
broken stdout pipe ends the process quietly. Logs go to stderr with no prefix.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from .brain import Brain
from .faults import Fault
from .playback import encode, flood_stderr, pause, play

LINE_LIMIT = 256 * 1024 * 1024


def log(text: str) -> None:
    try:
        os.write(2, (text + "\n").encode())
    except OSError:
        pass


class StdioPort:
    """Writes whole lines to fd 1; exits the process on request."""

    def __init__(self, brain: Brain) -> None:
        self.brain = brain

    async def emit(self, message: dict[str, Any]) -> None:
        await self.emit_raw(encode(message) + b"\n")

    async def emit_raw(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                written = os.write(1, view)
                view = view[written:]
        except BrokenPipeError:
            self.brain.journal.record("process_exit", code=0, reason="stdout closed")
            self.brain.lease.release()
            os._exit(0)

    async def exit(self, code: int) -> None:
        self.brain.lease.release()
        os._exit(code)


def _apply_startup(brain: Brain, faults: list[Fault]) -> tuple[bool, int]:
    """Returns (ignore_sigterm, startup delay ms); exits for a ``startup_fail``."""
    ignore = any(f.action == "ignore_sigterm" for f in faults)
    delay = sum(int(f.params.get("ms", 0)) for f in faults if f.action == "delay")
    for fault in faults:
        if fault.action == "flood_stderr":
            flood_stderr(int(fault.params.get("bytes", 1 << 20)))
    return ignore, delay


async def serve_stdio(brain: Brain, argv: list[str]) -> int:
    faults = brain.start_process(argv)
    log("MemPalace MCP Server starting...")
    failing = next((f for f in faults if f.action == "startup_fail"), None)
    if failing is not None:
        await pause(int(failing.params.get("after_ms", 0)))
        text = failing.params.get("stderr")
        if text:
            log(str(text))
        code = int(failing.params.get("code", 1))
        brain.journal.record("process_exit", code=code, reason="fault startup_fail")
        return code
    ignore_sigterm, delay_ms = _apply_startup(brain, faults)

    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if ignore_sigterm and signum == signal.SIGTERM:
            brain.journal.record("signal", signal=name, action="ignored")
            return
        brain.journal.record("signal", signal=name, action="exit")
        brain.journal.record("process_exit", code=0, reason=name)
        brain.lease.release()
        os._exit(0)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)

    if delay_ms:
        await pause(delay_ms)
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    port = StdioPort(brain)
    while True:
        try:
            line = await reader.readline()
        except (asyncio.LimitOverrunError, ValueError):
            log("Server error: line too long")
            continue
        if not line:
            log("stdin EOF -- client disconnected, shutting down")
            brain.journal.record("process_exit", code=0, reason="stdin EOF")
            brain.lease.release()
            return 0
        text = line.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        exchange = brain.receive(text)
        if exchange.kind == "invalid" and exchange.message is None:
            log("Server error: JSONDecodeError")
        await play(brain, exchange, port)
