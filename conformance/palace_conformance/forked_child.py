"""A forked child that becomes the program it stands in for, and ends as that program would.

Two pre-imported servers fork rather than exec: the warm server for the kit's own programs
(runner/execution/warm_server.py) and the zygote for the real mempalace (relay/zygote.py). The
child must then use its own descriptors 0-2 and, at its end, do what a fresh interpreter does:
give the same exit code, wait for non-daemon threads, run the atexit functions (``os._exit``
skips them), flush its streams. Standard library only: the zygote imports it under the real
mempalace's Python.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import signal
import sys
import threading
import traceback
from collections.abc import Callable
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
