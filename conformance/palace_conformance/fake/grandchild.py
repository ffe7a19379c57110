"""A grandchild of the bridge: a process the stdio fake starts in its own process group.

Real servers start helpers (an embedding worker, a watcher). A bridge that signals only the child's
pid leaves them running; one that signals the child's process group (LIFE-06: no orphan) ends them.
The grandchild journals ``descendant_start`` (its ``pid``, ``parent``) before the fake goes on, so a
scenario can count it and the runner can probe it; it ignores stdin EOF and its parent's death, and
ends by itself only after its lifetime (a bound on what a bridge that orphans it can leak).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

from palace_conformance.fake.journal import Journal

READY_WAIT_S = 5.0


def spawn_grandchild(journal: Journal, lifetime_ms: int) -> int:
    """Fork the grandchild, wait until it has journaled its start; returns its pid."""
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the grandchild: never returns
        os.close(ready_read)
        _live(journal, ready_write, lifetime_ms)
    os.close(ready_write)
    with contextlib.suppress(OSError):
        if select.select([ready_read], [], [], READY_WAIT_S)[0]:
            os.read(ready_read, 1)
    os.close(ready_read)
    return pid


def _live(journal: Journal, ready: int, lifetime_ms: int) -> None:
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)  # not the fake's handlers: no records of ours
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # hold none of the bridge's pipes open
            os.dup2(devnull, fd)
        own = Journal(journal.path, journal.transport)
        own.record("descendant_start", parent=os.getppid(), lifetime_ms=lifetime_ms)
        os.write(ready, b"1")
        os.close(ready)
        time.sleep(lifetime_ms / 1000.0)
        own.record("descendant_exit", reason="lifetime over")
    finally:
        os._exit(0)
