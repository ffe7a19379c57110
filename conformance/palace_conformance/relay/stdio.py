"""The stdio relay: stands where the bridge expects its palace, runs the real server, copies every
line both ways unchanged and hands each JSON-RPC message to a callback.

The bridge must not notice the relay: lines go through byte for byte, the server's stderr is
inherited, and when either side ends the other is ended too (the server's process group gets
SIGTERM, then SIGKILL after a grace), so the relay never leaves an orphan nor hangs a bridge.
Raw ``os.read``/``os.write`` on the descriptors, not buffered files: a thread blocked in a
buffered read at interpreter exit can abort the process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from palace_conformance.errors import PalaceError

#: direction of a message: the bridge wrote it to the palace, or the palace to the bridge
TO_PALACE = "to_palace"
FROM_PALACE = "from_palace"
READ_SIZE = 65536


@dataclass(frozen=True)
class Message:
    """One line the relay saw: its direction, when (monotonic seconds), and the parsed JSON
    (``None`` with ``raw`` set when the line was not JSON)."""

    direction: str
    at: float
    message: Any
    raw: str = ""


class RelayError(PalaceError):
    """The server could not be started; the message names the command and the fix."""


#: the longest line kept whole for the draft (the bridge's own cap); a longer one is passed on
#: in pieces as it comes and left out of the draft
LINE_LIMIT = 64 * 1024 * 1024


def pieces(fd: int, limit: int = LINE_LIMIT) -> Iterator[tuple[bytes, bool]]:
    """What ``fd`` sends until EOF, as ``(bytes, whole)``: each line with its newline (a last
    unterminated one too) with ``whole`` true; a line longer than ``limit`` as the pieces it
    came in, ``whole`` false, so it is passed on without being held. Linear: each byte is
    searched for a newline once, and a line is joined once."""
    held: list[bytes] = []
    size = 0
    overlong = False
    while True:
        try:
            chunk = os.read(fd, READ_SIZE)
        except OSError:
            chunk = b""
        if not chunk:
            if held:
                yield b"".join(held), not overlong
            return
        start = 0
        while (cut := chunk.find(b"\n", start)) >= 0:
            part = chunk[start:cut + 1]
            if overlong:
                yield part, False
            else:
                yield b"".join([*held, part]), True
            held, size, overlong = [], 0, False
            start = cut + 1
        rest = chunk[start:]
        if not rest:
            continue
        if overlong:
            yield rest, False
        elif size + len(rest) > limit:
            yield b"".join([*held, rest]), False
            held, size, overlong = [], 0, True
        else:
            held.append(rest)
            size += len(rest)


def lines(fd: int) -> Iterator[bytes]:
    """Every line read from ``fd`` with its newline (a last unterminated one too), until EOF;
    a line over :data:`LINE_LIMIT` comes in pieces (see :func:`pieces`)."""
    for data, _ in pieces(fd):
        yield data


def parse(direction: str, line: bytes) -> Message:
    text = line.decode("utf-8", errors="replace").strip()
    try:
        return Message(direction, time.monotonic(), json.loads(text))
    except ValueError:
        return Message(direction, time.monotonic(), None, text)


def write_all(fd: int, data: bytes) -> bool:
    """Write every byte; ``False`` when the reader is gone."""
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:  # BrokenPipeError included: the other side ended
        return False
    return True


class Relay:
    """One server process and the two copying threads; :meth:`run` returns its exit status."""

    def __init__(self, command: Sequence[str], on_message: Callable[[Message], None], *,
                 grace_s: float = 2.0, env: Mapping[str, str] | None = None,
                 stdin_fd: int = 0, stdout_fd: int = 1) -> None:
        self.command = list(command)
        self.on_message = on_message
        self.grace_s = grace_s
        self.env = dict(env) if env is not None else None
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.ended = threading.Event()
        self.signal_number: int | None = None
        self._lock = threading.Lock()  # on_message is called from both threads

    def _record(self, direction: str, line: bytes) -> None:
        if not line.strip():
            return
        message = parse(direction, line)
        with self._lock:
            self.on_message(message)

    def _up(self, proc: subprocess.Popen[bytes]) -> None:
        """Bridge -> server, until the bridge closes its end or the server stops reading."""
        assert proc.stdin is not None
        server_in = proc.stdin.fileno()
        for line, whole in pieces(self.stdin_fd):
            if whole:
                self._record(TO_PALACE, line)
            if not write_all(server_in, line):
                break
        with contextlib.suppress(OSError):
            proc.stdin.close()
        self.ended.set()

    def _down(self, proc: subprocess.Popen[bytes]) -> None:
        """Server -> bridge, until the server closes its stdout (it exited)."""
        assert proc.stdout is not None
        for line, whole in pieces(proc.stdout.fileno()):
            if whole:
                self._record(FROM_PALACE, line)
            if not write_all(self.stdout_fd, line):
                break
        self.ended.set()

    def _on_signal(self, number: int, _frame: object) -> None:
        self.signal_number = number
        self.ended.set()

    def run(self) -> int:
        try:
            proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    env=self.env, start_new_session=True, bufsize=0)
        except (FileNotFoundError, PermissionError) as exc:
            raise RelayError(f"cannot start the palace {self.command[0]!r} ({exc.strerror}): "
                             "give the real server's command after '--'") from None
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                previous[number] = signal.signal(number, self._on_signal)
        up = threading.Thread(target=self._up, args=(proc,), daemon=True, name="relay-up")
        down = threading.Thread(target=self._down, args=(proc,), daemon=True, name="relay-down")
        up.start()
        down.start()
        try:
            while not self.ended.wait(0.1):
                if proc.poll() is not None and not down.is_alive():
                    break
            # the bridge closed stdin: a server that exits on EOF gets the grace to do so
            with contextlib.suppress(subprocess.TimeoutExpired):
                if self.signal_number is None:
                    proc.wait(self.grace_s)
            end_group(proc, self.grace_s)
            down.join(self.grace_s)  # pass on what the server wrote before it ended
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
        if self.signal_number is not None:
            return 128 + self.signal_number
        code = proc.returncode
        return code if code is not None and code >= 0 else 128 + -(code or 0)


def end_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace_s``; every wait bounded."""
    for number, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, number)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; its group may still hold a grandchild
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return
