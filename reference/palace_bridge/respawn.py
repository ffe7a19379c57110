"""The local child's life as a state machine: tolerant first start, bounded respawn, the latch.

Seed rules (Self-heal): a dead child (crash or stall-kill) is respawned on the next call, at most
``max_respawns`` times, waiting ``respawn_backoff_ms`` doubled per attempt (1x, 2x, 4x ...). Any
successful JSON-RPC response resets the budget. Once spent, or with ``max_respawns == 0`` after the
first death, the state latches: calls fail fast and nothing is spawned until restart. The very first
start runs the same bounded respawn before giving up. A completed handshake counts as the
successful response that resets the budget. A binary that cannot be spawned at all
latches at once: waiting would not make it appear.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .backoff import exponential_delay_ms


class ChildState(enum.Enum):
    NEW = "new"              # never started
    STARTING = "starting"    # spawned, handshake running
    READY = "ready"          # handshake done, serving calls
    DEAD = "dead"            # crashed, killed after a stall, or failed to start
    LATCHED = "latched"      # no more attempts until restart
    STOPPED = "stopped"      # stop() was called


@dataclass(frozen=True)
class Spawn:
    """Spawn a child after ``delay_ms``; ``attempt`` 0 is the first start, 1.. are respawns."""

    attempt: int
    delay_ms: int


@dataclass(frozen=True)
class UseCurrent:
    """The current child is ready; use it."""


@dataclass(frozen=True)
class Refuse:
    """Do not spawn; fail the caller with ``why``."""

    why: str


Decision = Spawn | UseCurrent | Refuse


class RespawnPolicy:
    """Decides whether a caller gets the current child, a (re)spawn after a delay, or a refusal."""

    def __init__(self, max_respawns: int, backoff_ms: int) -> None:
        if max_respawns < 0 or backoff_ms < 0:
            raise ValueError("max_respawns and backoff_ms must be >= 0")
        self.max_respawns = max_respawns
        self.backoff_ms = backoff_ms
        self.state = ChildState.NEW
        self.used = 0
        self.last_failure = ""
        self.latch_reason = ""

    @property
    def latched(self) -> bool:
        return self.state is ChildState.LATCHED

    def want_child(self) -> Decision:
        """A caller needs a ready child."""
        state = self.state
        if state is ChildState.READY:
            return UseCurrent()
        if state is ChildState.NEW:
            self.state = ChildState.STARTING
            return Spawn(attempt=0, delay_ms=0)
        if state is ChildState.STOPPED:
            return Refuse("the palace client was stopped")
        if state is ChildState.LATCHED:
            return Refuse(self.latch_reason)
        if state is ChildState.STARTING:
            raise RuntimeError("want_child() while a start is in progress; serialise starts")
        # DEAD
        if self.used >= self.max_respawns:
            self._latch()
            return Refuse(self.latch_reason)
        self.used += 1
        self.state = ChildState.STARTING
        return Spawn(attempt=self.used, delay_ms=exponential_delay_ms(self.backoff_ms, self.used))

    def on_ready(self) -> None:
        """The handshake finished on the child just spawned: it answered, so the budget is back."""
        if self.state is ChildState.STARTING:
            self.state = ChildState.READY
            self.used = 0

    def on_start_failed(self, why: str) -> None:
        """The child just spawned exited, stalled past the init timeout, or broke the handshake."""
        if self.state in (ChildState.STARTING, ChildState.READY):
            self.state = ChildState.DEAD
            self.last_failure = why

    def on_death(self, why: str) -> None:
        """A ready child crashed or was killed after a stall."""
        self.on_start_failed(why)

    def on_unspawnable(self, why: str) -> None:
        """The binary cannot be executed at all (not on PATH, not executable): latch now."""
        if self.state is not ChildState.STOPPED:
            self.last_failure = why
            self.latch_reason = why
            self.state = ChildState.LATCHED

    def on_success(self) -> None:
        """Any successful JSON-RPC response: proof of life, the full budget is back (STDIO-07).

        During a start the reset waits for :meth:`on_ready`: a child that answers ``initialize``
        and then dies in the handshake has proved nothing, and counting it would let one call
        respawn forever.
        """
        if self.state is ChildState.READY:
            self.used = 0

    def on_stop(self) -> None:
        self.state = ChildState.STOPPED

    def _latch(self) -> None:
        self.state = ChildState.LATCHED
        last = f" (last failure: {self.last_failure})" if self.last_failure else ""
        if self.max_respawns == 0:
            self.latch_reason = ("mempalace-mcp died and self-heal is off "
                                 f"(MEMPALACE_MCP_MAX_RESPAWNS=0){last}; restart to retry")
        else:
            self.latch_reason = (f"mempalace-mcp respawn budget spent ({self.max_respawns} "
                                 f"attempt(s)){last}; restart to retry")
