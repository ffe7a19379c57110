"""Request deadlines: per-request and handshake budgets, where ``0`` means "wait forever".

Plain code over a :class:`~.clock.Clock`. The transports ask a :class:`Deadline` how long they may
still wait; they never compute time themselves, so the rules are tested without sleeping.

choice: progress notifications do not extend a deadline. The seed's timeout exists because a
wedged palace must not hang the host; a palace that drips progress forever is still wedged.
"""

from __future__ import annotations

from dataclasses import dataclass

from .clock import Clock

#: a message no caller waits on (a notification, an answer to a server's request) gets the request
#: budget, at least MESSAGE_MIN_MS (a busy server still gets a fair chance to take a cancel notice)
#: and at most MESSAGE_MAX_MS; finite even when timeouts are disabled: nobody is there to give up
MESSAGE_MIN_MS = 1000
MESSAGE_MAX_MS = 5000


@dataclass(frozen=True)
class Deadline:
    """A point in time a request must finish by; ``timeout_ms == 0`` disables it (STDIO-04)."""

    clock: Clock
    started_ms: float
    timeout_ms: int

    @classmethod
    def start(cls, clock: Clock, timeout_ms: int) -> Deadline:
        if timeout_ms < 0:
            raise ValueError("timeout_ms must be >= 0 (0 disables the deadline)")
        return cls(clock, clock.now_ms(), timeout_ms)

    @property
    def enabled(self) -> bool:
        return self.timeout_ms > 0

    @property
    def due_ms(self) -> float | None:
        return self.started_ms + self.timeout_ms if self.enabled else None

    def remaining_ms(self) -> float | None:
        """Milliseconds left (never negative), or ``None`` when there is no deadline."""
        due = self.due_ms
        if due is None:
            return None
        return max(0.0, due - self.clock.now_ms())

    def remaining_s(self) -> float | None:
        left = self.remaining_ms()
        return None if left is None else left / 1000.0

    def expired(self) -> bool:
        due = self.due_ms
        return due is not None and self.clock.now_ms() >= due

    def elapsed_ms(self) -> float:
        return self.clock.now_ms() - self.started_ms


@dataclass(frozen=True)
class TimeoutPolicy:
    """Which budget a request gets: the handshake has its own, longer one (STDIO-03)."""

    request_timeout_ms: int
    init_timeout_ms: int

    def for_request(self, clock: Clock, override_ms: int | None = None) -> Deadline:
        """A tool call or other post-handshake request; ``override_ms`` replaces the knob."""
        timeout = self.request_timeout_ms if override_ms is None else override_ms
        return Deadline.start(clock, timeout)

    def for_handshake(self, clock: Clock) -> Deadline:
        """One budget for ``initialize`` + ``tools/list`` (all pages) together."""
        return Deadline.start(clock, self.init_timeout_ms)

    def for_message(self, clock: Clock) -> Deadline:
        """A POST nobody waits on (a cancel notice, an answer to a server's ``ping``): always
        finite, so a server that never answers one cannot keep a task, a connection or the
        process alive."""
        budget = self.request_timeout_ms or MESSAGE_MAX_MS
        return Deadline.start(clock, min(max(budget, MESSAGE_MIN_MS), MESSAGE_MAX_MS))


@dataclass(frozen=True)
class ReapBudget:
    """How long each wait in a child's ending may take, so that ending one is bounded end to end.

    A child that exits can still leave its pipes open: anything it started holds them, and a
    grandchild that called ``setsid`` is out of reach of the group kill. So no step waits for a
    pipe without a bound: ``drain_ms`` after the exit, a pipe still open is abandoned and closed.
    """

    grace_ms: int              # stdin closed or SIGTERM sent, before the next step
    after_kill_ms: int = 2000  # SIGKILL sent, for the exit status
    drain_ms: int = 1000       # exit seen, for the stdout reader and the stderr drain to reach EOF
