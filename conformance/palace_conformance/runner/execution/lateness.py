"""How much the machine delays a bridge, measured through the run: the allowance an upper bound
gets under load (fixtures/README.md, Timing).

A gap's upper bound (``at_least + slack_ms``) is the behaviour's own number plus a declared
slack. Between the two journal records of a gap the bridge wakes up a few times (reading the
answer that starts its wait, its timer, the other side reading what ends it) and does a little
work of its own. On an idle machine that costs a few milliseconds; on a saturated one each wake-up
is late and each millisecond of work takes many, which no fixed slack can both absorb and stay
meaningful. So one probe process per run sleeps :data:`PERIOD_MS` again and again and reports how
late each wake-up was, and every :data:`BURST_EVERY` sleeps it does :data:`BURST_MS` of CPU work
and reports how much longer than that it took. A gap's upper bound gets :data:`WAKEUPS` times the
worst wake-up lateness in its window plus :data:`WORK_MS` of work stretched as the probe's worst
burst near the window was. The lower bound never moves, and on an idle machine the allowance is a
millisecond or two: a bridge that waits four times its backoff still fails
(tests/runner/test_lateness.py). A step's ``elapsed_ms`` upper bound gets the same allowance over
the step's window (``StepRecord.window``, runner/verdict/judge.py): every upper bound on a
duration the runner measures follows the machine alike.

The probe is a process of its own (not a thread of the runner's, which the GIL would delay), on
the same ``CLOCK_MONOTONIC`` as the journal's ``t``; its bursts cost about 2 % of one CPU.
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
#: the probe's CPU burst, every BURST_EVERY sleeps (about 2 % of one CPU)
BURST_MS = 2
BURST_EVERY = 10
#: the bridge's own CPU work in a gap, on an idle machine (parsing an answer, a timer, a request;
#: the pi copy's retry through its client library: 10 ms left it 3 of 5 runs over at load 40)
WORK_MS = 25
#: one record: kind (0 a wake-up, 1 a burst), when it began and ended (monotonic s), how much
#: longer than asked it took (s)
_SAMPLE = struct.Struct("<dddd")
_PROBE = r"""
import struct, sys, time
period, burst, every = float(sys.argv[1]) / 1000.0, float(sys.argv[2]) / 1000.0, int(sys.argv[3])
out = sys.stdout.buffer
pack = struct.Struct("<dddd").pack
count = 0
while True:
    before = time.monotonic()
    time.sleep(period)
    after = time.monotonic()
    record = pack(0.0, before, after, max(0.0, after - before - period))
    count += 1
    if count % every == 0:
        began, cpu = time.monotonic(), time.thread_time()
        while time.thread_time() - cpu < burst:
            pass
        ended = time.monotonic()
        record += pack(1.0, began, ended, max(0.0, (ended - began) - (time.thread_time() - cpu)))
    try:
        out.write(record)
        out.flush()
    except OSError:
        break
"""


#: samples a series keeps (about 33 minutes of wake-ups, 4.8 MB): past it the older half is
#: dropped, so a long run's probe has a cap; a gap is judged when its scenario ends, well
#: inside what is kept, and the run's summary then describes the samples kept
MAX_SAMPLES = 200_000


class _Series:
    """Samples of one kind in time order: when each began and ended, how late it was (s)."""

    def __init__(self) -> None:
        self.began = array("d")
        self.ended = array("d")
        self.late = array("d")

    def add(self, began: float, ended: float, late: float, cap: int = MAX_SAMPLES) -> None:
        if len(self.late) >= cap:
            for column in (self.began, self.ended, self.late):
                del column[:cap // 2]
        self.began.append(began)
        self.ended.append(ended)
        self.late.append(late)

    def worst(self, start: float, end: float) -> float | None:
        """The worst lateness of the samples that overlapped ``start``..``end``; None: none."""
        worst: float | None = None
        for index in range(bisect.bisect_left(self.ended, start), len(self.ended)):
            if self.began[index] > end:
                break
            late = self.late[index]
            worst = late if worst is None else max(worst, late)
        return worst


class TimerProbe:
    """One run's probe: :meth:`start` it, ask :meth:`allowance_ms` for a window, :meth:`stop`."""

    def __init__(self) -> None:
        self._wakes = _Series()
        self._bursts = _Series()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> TimerProbe:
        self._proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _PROBE, str(PERIOD_MS), str(BURST_MS), str(BURST_EVERY)],
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
            for kind, began, ended, late in _SAMPLE.iter_unpack(pending[:whole]):
                if kind:
                    self.add_burst(began, ended, late)
                else:
                    self.add_wake(began, ended, late)
            pending = pending[whole:]

    def add_wake(self, began: float, ended: float, late: float) -> None:
        """A sleep of :data:`PERIOD_MS` from ``began`` that ended ``late`` s after its time."""
        with self._lock:
            self._wakes.add(began, ended, late)

    def add_burst(self, began: float, ended: float, late: float) -> None:
        """A burst of :data:`BURST_MS` of CPU that took ``late`` s longer than that."""
        with self._lock:
            self._bursts.add(began, ended, late)

    def allowance_ms(self, start: float, end: float) -> int:
        """What a timing's upper bound gets for the window ``start``..``end`` (monotonic s):
        :data:`WAKEUPS` times the worst wake-up lateness of the sleeps overlapping it, plus
        :data:`WORK_MS` stretched as the worst burst within a burst's spacing of it was; rounded
        up, 0 when the probe saw nothing of it."""
        spacing = BURST_EVERY * PERIOD_MS / 1000.0
        with self._lock:
            wake = self._wakes.worst(start, end)
            burst = self._bursts.worst(start - spacing, end + spacing)
        wake_ms = WAKEUPS * (wake or 0.0) * 1000.0
        work_ms = WORK_MS * (burst or 0.0) / (BURST_MS / 1000.0)
        return math.ceil(wake_ms + work_ms)

    def summary(self) -> dict[str, Any]:
        """The run's figures: wake-ups and bursts seen, the wake-ups' median, 95th percentile
        and worst lateness, the bursts' worst stretch (wall time over CPU time)."""
        with self._lock:
            lates = sorted(self._wakes.late)
            bursts = max(self._bursts.late, default=0.0)
            burst_count = len(self._bursts.late)
        figures: dict[str, Any] = {"period_ms": PERIOD_MS, "wakeups": WAKEUPS,
                                   "work_ms": WORK_MS, "samples": len(lates),
                                   "bursts": burst_count}
        if not lates:
            return figures

        def at(q: float) -> float:
            return round(lates[min(len(lates) - 1, int(q * len(lates)))] * 1000.0, 1)

        return {**figures, "p50_ms": at(0.5), "p95_ms": at(0.95),
                "max_ms": round(lates[-1] * 1000.0, 1),
                "worst_stretch": round(1 + bursts / (BURST_MS / 1000.0), 1)}

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
