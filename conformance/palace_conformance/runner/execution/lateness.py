"""How late the machine wakes a sleeper, measured through the run: the allowance an upper bound
gets under load (fixtures/README.md, Timing).

A gap's upper bound (``at_least + slack_ms``) is the behaviour's own number plus a declared
slack. What the slack must absorb is the bridge's own work and a few wake-ups: the bridge reading
the answer that starts its wait, its timer firing, the fake reading the next request. On an idle
machine each wake-up is late by well under a millisecond; on a saturated one by tens or hundreds,
which no fixed slack can both absorb and stay meaningful. So one probe process per run sleeps
:data:`PERIOD_MS` again and again and reports how late each wake-up was; a gap's upper bound gets
:data:`WAKEUPS` times the worst lateness of the wake-ups during that gap. The lower bound never
moves, and on an idle machine the allowance is a millisecond or two: a bridge that waits four
times its backoff still fails (tests/runner/test_lateness.py).

The probe is a process of its own (not a thread of the runner's, which the GIL would delay), on
the same ``CLOCK_MONOTONIC`` as the journal's ``t``.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import os
import struct
import subprocess
import sys
import threading
from array import array
from typing import IO, Any

#: how long the probe sleeps each time
PERIOD_MS = 10
#: wake-ups a gap between two journal records includes besides the bridge's own wait: the
#: bridge reading what started the wait, its timer, the other side reading what ended it
WAKEUPS = 3
_SAMPLE = struct.Struct("<dd")  # the wake-up's monotonic time, its lateness (s)
_PROBE = r"""
import struct, sys, time
period = float(sys.argv[1]) / 1000.0
out = sys.stdout.buffer
pack = struct.Struct("<dd").pack
while True:
    before = time.monotonic()
    time.sleep(period)
    after = time.monotonic()
    try:
        out.write(pack(after, max(0.0, after - before - period)))
        out.flush()
    except OSError:
        break
"""


class TimerProbe:
    """One run's probe: :meth:`start` it, ask :meth:`allowance_ms` for a window, :meth:`stop`."""

    def __init__(self, period_ms: int = PERIOD_MS, wakeups: int = WAKEUPS) -> None:
        self.period_ms = period_ms
        self.wakeups = wakeups
        self._wakes = array("d")
        self._lates = array("d")
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> TimerProbe:
        self._proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _PROBE, str(self.period_ms)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)
        assert self._proc.stdout is not None
        self._thread = threading.Thread(target=self._pump, args=(self._proc.stdout,),
                                        daemon=True)
        self._thread.start()
        return self

    def _pump(self, stream: IO[bytes]) -> None:
        pending = b""
        while chunk := os.read(stream.fileno(), 4096):
            pending += chunk
            whole = len(pending) - len(pending) % _SAMPLE.size
            for wake, late in _SAMPLE.iter_unpack(pending[:whole]):
                self.add(wake, late)
            pending = pending[whole:]

    def add(self, wake: float, late: float) -> None:
        """One wake-up (``wake`` monotonic s, ``late`` s); what the probe process reports."""
        with self._lock:
            self._wakes.append(wake)
            self._lates.append(late)

    def worst_ms(self, start: float, end: float) -> float | None:
        """The worst lateness (ms) of the probe's sleeps that overlapped ``start``..``end``
        (monotonic seconds); None when no sleep of the probe's covers the window."""
        period = self.period_ms / 1000.0
        with self._lock:
            first = bisect.bisect_left(self._wakes, start)
            worst: float | None = None
            for index in range(first, len(self._wakes)):
                wake, late = self._wakes[index], self._lates[index]
                if wake - late - period > end:  # this sleep began after the window
                    break
                worst = late if worst is None else max(worst, late)
        return None if worst is None else worst * 1000.0

    def allowance_ms(self, start: float, end: float) -> int:
        """What a timing's upper bound gets for the window: :data:`WAKEUPS` times the worst
        lateness in it, rounded up (0 when the probe saw nothing of it)."""
        worst = self.worst_ms(start, end)
        return 0 if worst is None else math.ceil(self.wakeups * worst)

    def summary(self) -> dict[str, Any]:
        """The run's figures: wake-ups seen, their median, 95th percentile and worst lateness."""
        with self._lock:
            lates = sorted(self._lates)
        if not lates:
            return {"period_ms": self.period_ms, "wakeups": self.wakeups, "samples": 0}

        def at(q: float) -> float:
            return round(lates[min(len(lates) - 1, int(q * len(lates)))] * 1000.0, 1)

        return {"period_ms": self.period_ms, "wakeups": self.wakeups, "samples": len(lates),
                "p50_ms": at(0.5), "p95_ms": at(0.95), "max_ms": round(lates[-1] * 1000.0, 1)}

    def stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
        self._proc = None
