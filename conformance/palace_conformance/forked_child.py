"""A forked child that becomes the program it stands in for, and ends as that program would.

Two pre-imported servers fork rather than exec: the warm server for the kit's own programs
(runner/execution/warm_server.py) and the zygote for the real mempalace (relay/zygote.py). The
child must then use its own descriptors 0-2 and, at its end, do what a fresh interpreter does:
give the same exit code, wait for non-daemon threads, run the atexit functions (``os._exit``
skips them), flush its streams. The server reaps its children (:func:`ended_children`); the
side that asked for a child holds it as a :class:`ForkedProcess`. Standard library only: the
zygote imports it under the real mempalace's Python.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sized
from typing import Any


def run_as_main(body: Callable[[], Any]) -> int:
    """Run ``body`` as the program's main with fresh standard streams; its return value (or a
    ``SystemExit``'s) is the exit code as Python would give it."""
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True,
                                  errors="backslashreplace")
    try:
        code = exit_code(body())
    except SystemExit as exc:
        code = exit_code(exc.code)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    for thread in threading.enumerate():  # the interpreter waits for non-daemon threads
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def exit_code(value: Any) -> int:
    """The exit status ``sys.exit(value)`` gives: None is 0, an int its low byte, anything
    else printed to stderr and 1."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def ended_children(watched: Sized) -> Iterator[tuple[int, int]]:
    """The server's side: each child that has ended, as ``(pid, exit code)`` (negative for a
    signal, like :class:`subprocess.Popen`), without waiting for the living; while ``watched``
    (the children the server still reports on) is not empty."""
    while watched:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, os.waitstatus_to_exitcode(status)


class ForkedProcess:
    """The side that asked for a child: the part of :class:`subprocess.Popen` the kit uses, for
    a child a server forked on its behalf (not its own child: it cannot wait for it). A subclass
    says how the exit code arrives (:meth:`_exit_status`)."""

    pid: int
    #: what a :class:`subprocess.TimeoutExpired` names
    args: Any

    def _exit_status(self, timeout: float | None) -> int | None:
        """The exit code once it is known, waiting up to ``timeout`` (None: for ever)."""
        raise NotImplementedError

    def poll(self) -> int | None:
        return self._exit_status(0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._exit_status(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
