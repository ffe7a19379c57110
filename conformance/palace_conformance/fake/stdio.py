"""The stdio transport: newline-delimited JSON, strictly one request at a time, like mempalace 3.11.

A stalled request blocks every later one (``ping`` included); stdin EOF and SIGTERM exit 0; a
broken stdout pipe ends the process quietly. Logs go to stderr with no prefix.

There is no event loop here, on purpose: mempalace's loop is a blocking ``readline`` and so is this
one, and not importing asyncio keeps the fake's cold start well under the real server's. The shared
:func:`~.playback.play` coroutine is driven to completion in one step because this port's
``pause``/``offload``/``emit`` block instead of suspending.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine

from palace_conformance.fake.brain import Brain
from palace_conformance.fake.faults import Fault
from palace_conformance.fake.journal import kit_env
from palace_conformance.fake.playback import encode, play
from palace_conformance.fake.startup import startup_faults

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any, BinaryIO

STDIN_EOF = "stdin EOF -- client disconnected, shutting down"


def log(text: str) -> None:
    """One stderr line, mempalace style (no level or logger prefix)."""
    with contextlib.suppress(OSError):
        os.write(2, (text + "\n").encode("utf-8", "replace"))


def run_to_end(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never truly suspends (every await it reaches blocks instead)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("stdio playback tried to suspend; use playback.pause/offload, not asyncio")


class StdioPort:
    """Writes whole lines to fd 1 and waits by blocking; exits the process on request."""

    def __init__(self, brain: Brain) -> None:
        self.brain = brain
        self.parent = os.getppid()

    async def emit(self, message: dict[str, Any]) -> None:
        try:
            data = encode(message)
        except (ValueError, RecursionError):  # e.g. an echoed id nested too deep to serialise
            data = encode({"jsonrpc": "2.0", "id": None,
                           "error": {"code": -32603, "message": "Internal error"}})
        await self.emit_raw(data + b"\n")

    async def emit_raw(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                written = os.write(1, view)
                view = view[written:]
        except OSError:  # EPIPE and friends: the client is gone, as mempalace treats it
            log("stdout write failed -- client disconnected, shutting down")
            self.brain.journal.record("process_exit", code=0, reason="stdout closed")
            self.brain.lease.release()
            os._exit(0)

    async def exit(self, code: int) -> None:
        self.brain.lease.release()
        os._exit(code)

    async def pause(self, ms: int | None) -> None:
        # A stalled real server would outlive a dead client; the fake must not, or every
        # crashed bridge under test would leak a child. So a wait ends when the parent is gone.
        deadline = None if ms is None else time.monotonic() + ms / 1000.0
        while deadline is None or time.monotonic() < deadline:
            step = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if step > 0:
                time.sleep(step)
            if os.getppid() != self.parent:
                self.brain.journal.record("process_exit", code=0, reason="parent gone")
                self.brain.lease.release()
                os._exit(0)

    async def offload(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


def _install_signals(brain: Brain, ignore_sigterm: bool) -> None:
    """SIGTERM/SIGHUP/SIGINT exit 0 (the lease is released), unless told to ignore SIGTERM."""

    def on_signal(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if ignore_sigterm and signum == signal.SIGTERM:
            brain.journal.record("signal", signal=name, action="ignored")
            return
        brain.journal.record("signal", signal=name, action="exit")
        brain.journal.record("process_exit", code=0, reason=name)
        brain.lease.release()
        os._exit(0)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, on_signal)


def _startup(brain: Brain, faults: list[Fault]) -> int | None:
    """Obey ``$startup`` faults: an exit code for ``startup_fail``, else None once ready."""
    start = startup_faults(faults)
    if start.fail_code is not None:
        time.sleep(start.fail_after_ms / 1000.0)
        if start.fail_stderr:
            log(start.fail_stderr)
        return start.record_failure(brain)
    _install_signals(brain, start.ignore_sigterm)
    start.start_serving(brain)
    return None


def serve_lines(brain: Brain, stdin: BinaryIO) -> int:
    """The request loop: read a line, answer it (faults included), repeat until EOF."""
    port = StdioPort(brain)
    while True:
        line = stdin.readline()
        if not line:
            log(STDIN_EOF)
            brain.journal.record("process_exit", code=0, reason="stdin EOF")
            brain.lease.release()
            return 0
        text = line.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        exchange = brain.receive(text)
        if exchange.log:
            log(exchange.log)
        run_to_end(play(brain, exchange, port))


def serve_stdio(brain: Brain, argv: list[str], stdin: BinaryIO | None = None) -> int:
    """Serve stdin/stdout until EOF, a signal or a fault ends it; returns the exit code."""
    faults = brain.start_process(argv, env=kit_env(os.environ))
    log("MemPalace MCP Server starting...")
    code = _startup(brain, faults)
    if code is not None:
        return code
    return serve_lines(brain, stdin if stdin is not None else sys.stdin.buffer)
