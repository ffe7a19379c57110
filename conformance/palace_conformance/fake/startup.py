"""The ``$startup`` faults, read once for both transports.

A fake process matches its plan against the pseudo-method ``$startup`` when it starts. What that
asks for (fail with a code, ignore SIGTERM, flood stderr or write given text on it, start slowly,
start a grandchild) is decided here; the stdio and HTTP transports only carry it out, each with its
own way of waiting.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from palace_conformance.fake.brain import Brain
from palace_conformance.fake.faults import Fault
from palace_conformance.fake.playback import flood_stderr, write_stderr

GRANDCHILD_LIFETIME_MS = 60000  # bounded, so a bridge that orphans it leaks it only so long


class StartupFaults:
    """What the ``$startup`` faults of one process ask for. A plain class, not a dataclass or a
    NamedTuple: every stdio fake start imports this module, and ``dataclasses`` (with
    ``inspect``, ``ast``, ``dis``) would cost it about 15 ms of CPU, ``typing`` about 4 ms."""

    def __init__(self, *, fail_code: int | None = None, fail_after_ms: int = 0,
                 fail_stderr: str | None = None, ignore_sigterm: bool = False,
                 flood_bytes: tuple[tuple[int, bool], ...] = (),
                 stderr_pieces: tuple[tuple[tuple[str, ...], int], ...] = (), delay_ms: int = 0,
                 grandchild_ms: int | None = None, grandchild_leaves_group: bool = False,
                 grandchild_holds_pipes: bool = False, grandchild_last_words: str | None = None,
                 grandchild_ignores_sigterm: bool = False) -> None:
        self.fail_code = fail_code  # exit with this code instead of serving (``startup_fail``)
        self.fail_after_ms = fail_after_ms  # ... after this long
        self.fail_stderr = fail_stderr  # ... having printed this line
        self.ignore_sigterm = ignore_sigterm
        self.flood_bytes = flood_bytes  # stderr floods (size, invalid_utf8), in order
        self.stderr_pieces = stderr_pieces  # write_stderr (pieces, pause_ms)
        self.delay_ms = delay_ms  # serve only after this long (every ``delay`` added up)
        self.grandchild_ms = grandchild_ms  # start a grandchild living this long
        self.grandchild_leaves_group = grandchild_leaves_group  # ... which calls setsid
        self.grandchild_holds_pipes = grandchild_holds_pipes  # ... and keeps the child's pipes
        self.grandchild_last_words = grandchild_last_words  # ... written when the group is swept
        self.grandchild_ignores_sigterm = grandchild_ignores_sigterm  # ... only SIGKILL ends it

    def record_failure(self, brain: Brain) -> int:
        """Journal the failed start and return its exit code."""
        code = self.fail_code if self.fail_code is not None else 1
        brain.journal.record("process_exit", code=code, reason="fault startup_fail")
        return code


    def start_serving(self, brain: Brain) -> None:
        """What comes after the signal handlers, before the first message is read, on either
        transport: the grandchild, the stderr floods and pieces, then the start-up delay."""
        if self.grandchild_ms is not None:
            from palace_conformance.fake.grandchild import spawn_grandchild

            spawn_grandchild(brain.journal, self.grandchild_ms, self.grandchild_leaves_group,
                             self.grandchild_holds_pipes, self.grandchild_last_words,
                             ignore_sigterm=self.grandchild_ignores_sigterm)
        for size, invalid_utf8 in self.flood_bytes:
            flood_stderr(size, invalid_utf8)
        for pieces, pause_ms in self.stderr_pieces:
            write_stderr(pieces, pause_ms)
        if self.delay_ms:
            time.sleep(self.delay_ms / 1000.0)


def startup_faults(faults: Sequence[Fault]) -> StartupFaults:
    failing = next((f for f in faults if f.action == "startup_fail"), None)
    if failing is not None:
        text = failing.params.get("stderr")
        return StartupFaults(fail_code=int(failing.params.get("code", 1)),
                             fail_after_ms=int(failing.params.get("after_ms", 0)),
                             fail_stderr=str(text) if text else None)
    grandchild = next((f for f in faults if f.action == "spawn_grandchild"), None)
    return StartupFaults(
        ignore_sigterm=any(f.action == "ignore_sigterm" for f in faults),
        flood_bytes=tuple((int(f.params.get("bytes", 1 << 20)),
                           bool(f.params.get("invalid_utf8", False)))
                          for f in faults if f.action == "flood_stderr"),
        stderr_pieces=tuple((tuple(f.params["pieces"]), int(f.params.get("pause_ms") or 0))
                            for f in faults if f.action == "write_stderr"),
        delay_ms=sum(int(f.params.get("ms", 0)) for f in faults if f.action == "delay"),
        grandchild_ms=(None if grandchild is None
                       else int(grandchild.params.get("lifetime_ms", GRANDCHILD_LIFETIME_MS))),
        grandchild_leaves_group=grandchild is not None
        and bool(grandchild.params.get("leave_group", False)),
        grandchild_holds_pipes=grandchild is not None
        and bool(grandchild.params.get("hold_pipes", False)),
        grandchild_last_words=(None if grandchild is None or "last_words" not in grandchild.params
                               else str(grandchild.params["last_words"])),
        grandchild_ignores_sigterm=grandchild is not None
        and bool(grandchild.params.get("ignore_sigterm", False)))
