"""The stdio fault relay: the ``mempalace-mcp`` a bridge starts in a real-server world, standing
between it and the real ``mempalace-mcp`` with the fake's fault plan in hand.

Every line the bridge writes goes to :class:`~.fault_brain.RelayBrain` (journaled, faults
decided) and is played by the fake's own ``play()``: a message no fault touches goes to the real
server and its answer comes back byte for byte; a matching one gets its fault (a stall, a crash,
garbage, half a line, a rewritten or duplicated answer, a server request, ...) around, or instead
of, the real answer. ``$startup`` faults are the relay's: it fails, floods stderr, starts slowly,
ignores SIGTERM or starts a grandchild as the fake would, before the real server is started.

Like the fake, the relay is strictly one request at a time (so is the real server): a stalled
request holds every later one. Lines the server writes unasked go straight to the bridge. The
server is the relay's child, in a process group of its own (a signal to the bridge's child's group
reaches the relay alone), and dies with it (``PR_SET_PDEATHSIG``); a signal the relay takes is
passed on to it (unless the plan says to ignore SIGTERM), and the relay ends with its exit code.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from palace_conformance.fake.brain import Exchange
from palace_conformance.fake.faults import load_plan
from palace_conformance.fake.journal import Journal
from palace_conformance.fake.playback import play
from palace_conformance.fake.startup import startup_faults
from palace_conformance.fake.stdio import StdioPort, log, run_to_end
from palace_conformance.relay import zygote
from palace_conformance.relay.fault_brain import RelayBrain
from palace_conformance.relay.stdio import lines, write_all
from palace_conformance.relay.zygote import ZygoteProcess, server_environment

#: the relay's configuration, written by the world beside the launcher
CONFIG_NAME = ".fault-relay.json"
#: the journal record of the real server's start as the bridge waited on it (``ms``)
START_RECORD = "server_start"
EXIT_WAIT_S = 10.0  # how long the server may take to exit after EOF or a signal
ANSWERS_POLL_S = 0.01  # how often a wait for the server takes the bridge's answers meanwhile
POLL_S = 0.2  # how often a wait for the server looks whether the bridge is still there


def die_with_parent() -> None:
    """In the server, before exec: SIGKILL when the relay dies (Linux; elsewhere a no-op)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _drain(stream: IO[bytes]) -> None:
    """Copy the server's held-back stderr to the relay's, as it comes, until it ends."""
    while chunk := stream.read(65536):
        with contextlib.suppress(OSError):
            sys.stderr.buffer.write(chunk)
            sys.stderr.buffer.flush()


def _id_key(value: Any) -> str:
    """A reply id as a key that tells ``1`` from ``"1"`` and holds any JSON value."""
    return type(value).__name__ + ":" + json.dumps(value, sort_keys=True, default=str)


def expected_reply(exchange: Exchange) -> str | None:
    """The id key of the reply the real server owes this message, or None when it owes none:
    a request (a method and a non-null id) is answered with its id, a line that is not a JSON
    object with a null id; a notification, or a null id, gets no answer worth waiting for."""
    if exchange.kind == "invalid":
        return _id_key(None)
    message = exchange.message or {}
    if exchange.kind == "request" and message.get("id") is not None:
        return _id_key(message.get("id"))
    return None


class RelayPort(StdioPort):
    """The fake's stdio port with a lock (the server's unasked lines are written by another
    thread) and the real server's own bytes written for a reply no fault rewrote."""

    def __init__(self, relay: FaultRelay) -> None:
        super().__init__(relay.brain)
        self.relay = relay
        self.lock = threading.Lock()

    async def emit(self, message: dict[str, Any]) -> None:
        original = self.relay.original_line(message)
        if original is not None:
            await self.emit_raw(original)
        else:
            await super().emit(message)

    async def emit_raw(self, data: bytes) -> None:
        with self.lock:
            await super().emit_raw(data)

    async def exit(self, code: int) -> None:
        self.relay.kill_server()
        await super().exit(code)


class FaultRelay:
    """One relayed server; :meth:`run` returns the exit code the relay ends with."""

    def __init__(self, config: Mapping[str, Any], early: ZygoteProcess | None = None) -> None:
        self.config = config
        self.early = early  # the real server the launcher already asked the zygote for
        journal = Journal(config["journal"], "stdio")
        plan = load_plan(config["plan"])
        self.brain = RelayBrain(transport="stdio", plan=plan, journal=journal,
                                palace=str(config["palace"]), forward=self.forward)
        self.proc: subprocess.Popen[bytes] | ZygoteProcess | None = None
        self.replies: queue.Queue[tuple[dict[str, Any], bytes]] = queue.Queue()
        self.waiting: str | None = None  # the id key of the reply being waited for
        self.waiting_lock = threading.Lock()
        self.last: tuple[dict[str, Any], bytes] | None = None  # the reply forward() returned
        self.port = RelayPort(self)
        self.ignore_sigterm = False
        self.reason: str | None = None  # why the server was asked to end: EOF, a signal
        self.started = False  # the server answered an initialize (its start was journaled)
        self.inbound: queue.Queue[bytes] = queue.Queue()  # the bridge's lines (_read_bridge)
        self.pending: collections.deque[bytes] = collections.deque()  # read, not yet played
        self._ending = threading.Lock()

    # -- the real server -------------------------------------------------------------------

    def start_server(self) -> bool:
        env = server_environment(self.config, os.environ)
        command = [str(part) for part in self.config["command"]]
        # the pre-started real server, if the run has one: a fork of a warm zygote (asked for
        # by the launcher before the relay's imports, else now)
        self.proc = self.early or zygote.spawn(self.config, env, stdin=True, stdout=True)
        if self.proc is not None:
            if self.proc.stderr is not None:  # held back while the relay started: now its turn
                threading.Thread(target=_drain, args=(self.proc.stderr,), daemon=True,
                                 name="relay-stderr").start()
            threading.Thread(target=self._down, daemon=True, name="relay-down").start()
            return True
        try:
            # its own process group: a signal the bridge sends the child's group reaches the
            # relay alone, which passes it on (or ignores it) as the plan says
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         env=env, bufsize=0, preexec_fn=die_with_parent,
                                         start_new_session=True)
        except OSError as exc:
            log(f"palace-conformance: cannot start the real server {command[0]!r}: {exc}")
            return False
        threading.Thread(target=self._down, daemon=True, name="relay-down").start()
        return True

    def kill_server(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()

    def _down(self) -> None:
        """The server's lines: the awaited reply to the waiter, anything else to the bridge."""
        assert self.proc is not None and self.proc.stdout is not None
        for line in lines(self.proc.stdout.fileno()):
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                message = None
            if isinstance(message, dict) and "method" not in message:
                with self.waiting_lock:
                    if self.waiting is not None and _id_key(message.get("id")) == self.waiting:
                        self.waiting = None
                        self.replies.put((message, line))
                        continue
            self._unasked(line, message)
        self.end(self._server_code(), self.reason or "server exited")

    def _unasked(self, line: bytes, message: Any) -> None:
        """A line the server wrote that no waiter claims: journaled and passed on as it is."""
        if isinstance(message, dict):
            self.brain.journal.record("send", message=message, method=message.get("method"),
                                      id=message.get("id"))
        else:
            self.brain.journal.record("send", raw=line[:4096].decode(errors="replace"),
                                      note="not JSON", size=len(line))
        with self.port.lock:
            if not write_all(1, line):
                self.end(0, "stdout closed")

    def _server_code(self) -> int:
        assert self.proc is not None
        try:
            code = self.proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(EXIT_WAIT_S)
        return code if code >= 0 else 128 - code

    def end(self, code: int, reason: str) -> None:
        """The relay's end (once, from whichever thread sees it first)."""
        if not self._ending.acquire(blocking=False):
            return
        self.brain.journal.record("process_exit", code=code, reason=reason)
        with contextlib.suppress(OSError):
            sys.stdout.flush()
        os._exit(code)

    # -- forwarding ------------------------------------------------------------------------

    def forward(self, text: str, exchange: Exchange) -> dict[str, Any] | None:
        """Send the bridge's line to the server; wait for the reply it owes, if any."""
        assert self.proc is not None and self.proc.stdin is not None
        key = expected_reply(exchange)
        with self.waiting_lock:
            self.waiting = key
        began = time.monotonic()
        if not write_all(self.proc.stdin.fileno(), text.encode("utf-8", "surrogateescape")
                         + b"\n"):
            return None  # the server is gone; its end is the relay's (see _down)
        if key is None:
            return None
        parent = os.getppid()
        while True:
            self._answers_meanwhile()
            try:
                reply, line = self.replies.get(
                    timeout=ANSWERS_POLL_S if self.brain.issued_requests else POLL_S)
            except queue.Empty:
                if os.getppid() != parent:
                    self.kill_server()
                    self.end(0, "parent gone")
                continue
            self.last = (reply, line)
            if exchange.method == "initialize" and not self.started:
                # how long the bridge's initialize waited on the real server: its start, which
                # the fake's does not have (the judge widens a bound across it by this much)
                self.started = True
                self.brain.journal.record(
                    START_RECORD, ms=round((time.monotonic() - began) * 1000))
            return reply

    def _read_bridge(self) -> None:
        """The bridge's lines, as they come, for the loop (``b""``: EOF)."""
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            self.inbound.put(line)
            if not line:
                return

    def _answers_meanwhile(self) -> None:
        """While a request waits on the real server: the bridge's answers to the requests the
        relay sent it (a ``server_request`` fault), received as they come, as the fake (whose
        replies take no time) would; anything else waits its turn, in order."""
        while True:
            try:
                line = self.inbound.get_nowait()
            except queue.Empty:
                return
            if not self.pending and line and self._answers_ours(line):
                self.brain.receive(line.decode("utf-8", errors="replace").strip())
            else:
                self.pending.append(line)

    def _answers_ours(self, line: bytes) -> bool:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return False
        return (isinstance(message, dict) and "method" not in message
                and ("result" in message or "error" in message)
                and isinstance(message.get("id"), str)
                and message["id"] in self.brain.issued_requests)

    def original_line(self, message: dict[str, Any]) -> bytes | None:
        """The server's own bytes for ``message`` when it is the reply as it came."""
        if self.last is not None and self.last[0] is message:
            line = self.last[1]
            self.last = None
            return line if line.endswith(b"\n") else line + b"\n"
        return None

    # -- the process -----------------------------------------------------------------------

    def _on_signal(self, number: int, _frame: object) -> None:
        name = signal.Signals(number).name
        if self.ignore_sigterm and number == signal.SIGTERM:
            self.brain.journal.record("signal", signal=name, action="ignored")
            return
        self.brain.journal.record("signal", signal=name, action="exit")
        self.reason = name
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(number)
        else:
            self.end(0, name)

    def _startup(self) -> int | None:
        """Obey ``$startup`` faults as the stdio fake does; an exit code when start-up fails."""
        start = startup_faults(self.brain.start_process(list(sys.argv)))
        if start.fail_code is not None:
            time.sleep(start.fail_after_ms / 1000.0)
            if start.fail_stderr:
                log(start.fail_stderr)
            return start.record_failure(self.brain)
        self.ignore_sigterm = start.ignore_sigterm
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(number, self._on_signal)
        start.start_serving(self.brain)
        return None

    def run(self) -> int:
        code = self._startup()
        if code is not None:
            return code
        if not self.start_server():
            self.brain.journal.record("process_exit", code=127, reason="real server did not start")
            return 127
        threading.Thread(target=self._read_bridge, daemon=True, name="relay-up").start()
        while True:
            line = self.pending.popleft() if self.pending else self.inbound.get()
            if not line:
                break
            text = line.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            exchange = self.brain.receive(text)
            run_to_end(play(self.brain, exchange, self.port))
        assert self.proc is not None and self.proc.stdin is not None
        self.reason = self.reason or "stdin EOF"
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self.end(self._server_code(), self.reason)
        return 0  # not reached: end() exits


def main(config_path: str, early: ZygoteProcess | None = None) -> None:
    """The launcher's entry: read the configuration, relay, exit with the server's code;
    ``early``: the real server the launcher already started (:func:`zygote.spawn_early`)."""
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    code = FaultRelay(config, early).run()
    sys.stdout.flush()
    os._exit(code)
