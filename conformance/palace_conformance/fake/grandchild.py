"""A grandchild of the bridge: a process the stdio fake starts in its own process group.

Real servers start helpers (an embedding worker, a watcher). A bridge that signals only the child's
pid leaves them running; one that signals the child's process group (LIFE-06: no orphan) ends them.
The grandchild journals ``descendant_start`` (its ``pid``, ``parent``) before the fake goes on, so a
scenario can count it and the runner can probe it; it ignores stdin EOF and its parent's death, and
ends by itself only after its lifetime (a bound on what a bridge that orphans it can leak).

Two options make it the grandchild no bridge can end: ``leave_group`` (it calls ``setsid``, so no
signal to the child's group reaches it; ``descendant_start`` says ``left_group: true``, and the
runner does not count it as the bridge's orphan but kills it itself at cleanup) and ``hold_pipes``
(it keeps the child's stdout and stderr open, so they reach end of file only when it ends). With
both, a bridge that waits for the child's pipes to close before a stop or a respawn waits for its
whole lifetime (docs/choices.md, "Ending a local child is bounded at every step"). With both and
``last_words``, it writes that line on the child's stderr when the child's group is swept (a
tripwire grandchild in the group dies), then exits: words that arrive after the sweep.
``ignore_sigterm`` makes it a helper that only SIGKILL ends: a bridge whose SIGTERM to the group
ended the child must still sweep the group with SIGKILL once the child is gone.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

from palace_conformance.fake.journal import Journal

READY_WAIT_S = 5.0


def spawn_grandchild(journal: Journal, lifetime_ms: int, leave_group: bool = False,
                     hold_pipes: bool = False, last_words: str | None = None, *,
                     ignore_sigterm: bool = False) -> int:
    """Fork the grandchild, wait until it has journaled its start; returns its pid.

    With ``last_words`` (a grandchild that left the group and holds the pipes), a second
    grandchild stays in the group as a tripwire: when a signal to the group ends it (the sweep a
    bridge sends once the child exited), the first writes ``last_words`` on the child's stderr and
    exits, so the line arrives after the sweep, and a bridge reads it only if it goes on reading
    the child's stderr after the sweep until it ends.
    """
    if last_words is None:
        return _fork(journal, lifetime_ms, leave_group, hold_pipes, None, None,
                     ignore_sigterm=ignore_sigterm)
    trip_read, trip_write = os.pipe()
    _fork(journal, lifetime_ms, False, False, None, trip_read)  # the tripwire: holds trip_write
    pid = _fork(journal, lifetime_ms, leave_group, hold_pipes, (trip_read, last_words),
                trip_write, ignore_sigterm=ignore_sigterm)
    os.close(trip_read)
    os.close(trip_write)
    return pid


def _fork(journal: Journal, lifetime_ms: int, leave_group: bool, hold_pipes: bool,
          tripwire: tuple[int, str] | None, close_fd: int | None, *,
          ignore_sigterm: bool = False) -> int:
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the grandchild: never returns
        os.close(ready_read)
        if close_fd is not None:
            os.close(close_fd)
        _live(journal, ready_write, lifetime_ms, leave_group, hold_pipes, tripwire,
              ignore_sigterm)
    os.close(ready_write)
    with contextlib.suppress(OSError):
        if select.select([ready_read], [], [], READY_WAIT_S)[0]:
            os.read(ready_read, 1)
    os.close(ready_read)
    return pid


def _live(journal: Journal, ready: int, lifetime_ms: int, leave_group: bool,
          hold_pipes: bool, tripwire: tuple[int, str] | None, ignore_sigterm: bool) -> None:
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)  # not the fake's handlers: no records of ours
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        if ignore_sigterm:  # a helper that must be killed: only SIGKILL ends it
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if leave_group:
            os.setsid()  # a fresh session and group: the bridge's group signals miss it
        devnull = os.open(os.devnull, os.O_RDWR)
        # stdin never: the child's EOF is the bridge's to give. stdout and stderr only when told
        for fd in (0,) if hold_pipes else (0, 1, 2):
            os.dup2(devnull, fd)
        own = Journal(journal.path, journal.transport)
        own.record("descendant_start", parent=os.getppid(), lifetime_ms=lifetime_ms,
                   left_group=leave_group, holds_pipes=hold_pipes,
                   **({"ignores_sigterm": True} if ignore_sigterm else {}),
                   **({"last_words": tripwire[1]} if tripwire is not None else {}))
        os.write(ready, b"1")
        os.close(ready)
        if tripwire is not None:
            wire, words = tripwire
            # the tripwire's end (EOF: every writer gone) or the lifetime, whichever comes first
            if select.select([wire], [], [], lifetime_ms / 1000.0)[0]:
                os.write(2, (words + "\n").encode("utf-8", "replace"))
                own.record("descendant_exit", reason="the group was swept: last words written")
                return
        else:
            time.sleep(lifetime_ms / 1000.0)
        own.record("descendant_exit", reason="lifetime over")
    finally:
        os._exit(0)
