"""Time as an injectable dependency, so the policy can be tested with a clock that never sleeps."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> float:
        """Milliseconds on a monotonic scale (only differences mean anything)."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` in milliseconds (same scale as the fake's journal)."""

    def now_ms(self) -> float:
        return time.monotonic() * 1000.0


class FakeClock:
    """A clock that moves only when told to; policy tests run hundreds of cases in milliseconds."""

    def __init__(self, start_ms: float = 0.0) -> None:
        self._now = start_ms

    def now_ms(self) -> float:
        return self._now

    def advance(self, ms: float) -> None:
        if ms < 0:
            raise ValueError("a monotonic clock cannot go back")
        self._now += ms


SYSTEM_CLOCK = MonotonicClock()
