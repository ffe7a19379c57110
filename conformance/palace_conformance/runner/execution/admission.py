"""How many runs a suite has in flight: a fixed number (``--jobs N``), or by default one that
grows while the runner's CPUs have time to spare.

Why: a run mostly waits (settle windows, backoffs, a fake's stall), but how much CPU the waiting
leaves depends on the bridge and the machine. At a fixed 4 runs per CPU the reference's catalogue
left about 40 % of 2 idle CPUs unused, a TypeScript bridge's run (a Node host per scenario) had
none to spare, and a CI machine shared with other work has less than either. So by default the
limit starts at the fixed default (runner/jobs.py) and is moved by what the CPUs did over the
last window (cpu_busy.py): while they were less than :data:`GROW_BELOW` busy and a run was
waiting for a slot, more runs, as many as the CPUs' distance below that mark says (one just
below it, the limit doubled when they were idle: a catalogue's first seconds are its longest
runs, mostly asleep, and one run a window left the CPUs a third busy for 8 s of a 30 s run);
one fewer (never below the start) while they were more than :data:`SHRINK_ABOVE` busy. A busy
machine therefore runs as before, an idle one overlaps more of the waiting, and no verdict leans
on the extra runs: every upper bound a run judges already follows the machine's measured
lateness (lateness.py).

The limit's ceiling can leave idle CPUs idle: the order starts the longest runs first
(order.py), and those mostly sleep, so a catalogue's first seconds had every slot taken by a
sleeping run and the CPUs 12-60 % busy, while the short runs that would use them waited at the
order's end. So a limit may also *backfill*: in a window that found it at its ceiling with the
CPUs under :data:`BACKFILL_BELOW` busy, up to ``backfill`` more runs start, taken from the
order's end (the shortest). The next window opens none unless it is idle again (a started run
finishes), so a loaded machine never sees them.

:class:`Limit` is the policy, plain code over samples a test feeds by hand; :class:`Gate` is the
threading around it (slots handed out in the order runs asked, a sampler thread).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from palace_conformance.runner.execution.cpu_busy import Reading, busy_between

#: the busy fraction below which one more run is let in (when one is waiting)
GROW_BELOW = 0.80
#: the busy fraction above which the limit falls back by one (to the floor at most)
SHRINK_ABOVE = 0.95
#: the busy fraction below which a limit at its ceiling lets runs from the order's end in
BACKFILL_BELOW = 0.60
#: how often the sampler reads the CPUs and moves the limit
INTERVAL_S = 0.5
#: the two kinds of slot :meth:`Gate.enter` gives: for the next run in the order, or (a
#: backfill) for the last one
IN_ORDER = "in order"
FROM_END = "from the end"


@dataclass
class Limit:
    """The adaptive limit: starts at ``floor`` and moves once a window within [``floor``,
    ``ceiling``]: up by at most its own value, down by one; and up to ``backfill`` slots for
    runs from the order's end in a window that found it at its ceiling with idle CPUs."""

    floor: int
    ceiling: int
    backfill: int = 0
    grow_below: float = GROW_BELOW
    shrink_above: float = SHRINK_ABOVE
    backfill_below: float = BACKFILL_BELOW
    value: int = field(init=False)

    def __post_init__(self) -> None:
        if not 1 <= self.floor <= self.ceiling:
            raise ValueError(f"need 1 <= floor <= ceiling, got {self.floor} and {self.ceiling}")
        if self.backfill < 0:
            raise ValueError(f"need backfill >= 0, got {self.backfill}")
        self.value = self.floor

    def observe(self, busy: float | None, waited: bool) -> int:
        """The limit after a window in which the CPUs were ``busy`` (None: unknown, no move) and
        a run ``waited`` for a slot or not."""
        if busy is None:
            return self.value
        if busy > self.shrink_above and self.value > self.floor:
            self.value -= 1
        elif busy < self.grow_below and waited and self.value < self.ceiling:
            below = (self.grow_below - busy) / self.grow_below  # 0 at the mark, 1 when idle
            self.value = min(self.ceiling, self.value + max(1, round(self.value * below)))
        return self.value

    def backfilled(self, busy: float | None) -> int:
        """Slots for runs from the order's end after a window in which the CPUs were ``busy``
        (call it after :meth:`observe`): ``backfill`` when the limit is at its ceiling and they
        were under ``backfill_below``, else none."""
        if busy is None or self.value < self.ceiling or busy >= self.backfill_below:
            return 0
        return self.backfill


class Gate:
    """Slots for runs: :meth:`enter` blocks until a run may start and says which
    (:data:`IN_ORDER` or, a backfill, :data:`FROM_END`; None once the gate is closed: a Ctrl-C
    drops what has not started), :meth:`leave` frees that slot. Workers are let in in the order
    they asked."""

    def __init__(self, jobs: int, limit: Limit | None = None,
                 meter: Callable[[], Reading | None] | None = None,
                 interval_s: float | None = None) -> None:
        self._limit = limit
        self._allowed = limit.value if limit is not None else max(1, jobs)
        self._meter = meter
        self._interval_s = interval_s  # None: INTERVAL_S, as it is when the sampler starts
        self._cond = threading.Condition()
        self._next_ticket = 0
        self._serving = 0
        self._in_flight = 0
        self._backfill_allowed = 0
        self._backfill_in_flight = 0
        self._waited = False
        self._closed = False
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        #: the highest limit and backfill reached (for tests and tracing)
        self.peak = self._allowed
        self.backfill_peak = 0

    def start(self) -> Gate:
        """Start the sampler when the limit is adaptive and the CPUs can be read."""
        if self._limit is not None and self._meter is not None:
            self._sampler = threading.Thread(target=self._sample, name="palace-admission",
                                             daemon=True)
            self._sampler.start()
        return self

    def enter(self) -> str | None:
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            while not self._closed and (ticket != self._serving or self._full()):
                if ticket == self._serving:
                    self._waited = True
                self._cond.wait()
            if self._closed:
                return None
            self._serving += 1
            self._cond.notify_all()
            if self._in_flight < self._allowed:
                self._in_flight += 1
                return IN_ORDER
            self._backfill_in_flight += 1
            return FROM_END

    def _full(self) -> bool:
        return (self._in_flight >= self._allowed
                and self._backfill_in_flight >= self._backfill_allowed)

    def leave(self, slot: str = IN_ORDER) -> None:
        with self._cond:
            if slot == FROM_END:
                self._backfill_in_flight -= 1
            else:
                self._in_flight -= 1
            self._cond.notify_all()

    def close(self) -> None:
        """Let no more runs in (those waiting get False) and stop the sampler."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=5.0)

    def _sample(self) -> None:
        assert self._limit is not None and self._meter is not None
        interval_s = INTERVAL_S if self._interval_s is None else self._interval_s
        before = self._meter()
        while not self._stop.wait(interval_s):
            after = self._meter()
            busy = busy_between(before, after) if before and after else None
            before = after
            with self._cond:
                waited, self._waited = self._waited, False
                allowed = self._limit.observe(busy, waited or self._next_ticket > self._serving)
                backfill = self._limit.backfilled(busy)
                if (allowed, backfill) != (self._allowed, self._backfill_allowed):
                    self._allowed, self._backfill_allowed = allowed, backfill
                    self.peak = max(self.peak, allowed)
                    self.backfill_peak = max(self.backfill_peak, backfill)
                    self._cond.notify_all()
