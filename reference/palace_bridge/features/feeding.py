"""Automatic transcript feeding: export with a helper, mine through our own client (FEED-*).

The palace is single-writer and a live session holds it through this bridge's own client, so an
outside ``mempalace mine`` would fail. Feeding is therefore split: ``$MEMPALACE_FEED_BIN --prepare``
does every palace-free step and prints ``MINE_SOURCE=<path>``; then ``mempalace_mine`` runs through
the client that already holds the lock. Triggers: ``session_shutdown`` (always) and
``agent_settled`` (at most once per debounce window). Overlapping triggers join one in-flight feed.

choice (no-lost-data vs debounce): the window is charged only by a feed that succeeded (mined, or
nothing to mine). A refused or failed feed leaves it open, so the very next trigger re-exports and
mines again instead of waiting out the window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from ..clock import Clock
from ..config import BridgeConfig
from ..errors import PalaceError, describe
from ..host import Host
from .ports import PalaceCaller, failed
from .provenance import Stamper

SHUTDOWN = "session_shutdown"
SETTLED = "agent_settled"
MINE_PREFIX = "MINE_SOURCE="
PEER_WRITER = -32001
MINE_GUARD_S = 2.0  # slack over the mine timeout, in case the client does not enforce it


class Outcome(Enum):
    MINED = "mined"
    NOTHING = "nothing"  # prepare found nothing worth feeding
    PREPARE_FAILED = "prepare_failed"
    PREPARE_TIMEOUT = "prepare_timeout"
    MINE_REFUSED = "mine_refused"  # -32001: another writer holds the palace
    MINE_FAILED = "mine_failed"

    @property
    def succeeded(self) -> bool:
        return self in (Outcome.MINED, Outcome.NOTHING)


#: the seed's defaults, written once (config.py): a feed set up without a config uses them too
_SEED = BridgeConfig()


@dataclass(frozen=True)
class FeedSettings:
    enabled: bool = _SEED.feed
    bin: str = _SEED.feed_bin
    wing: str = _SEED.feed_wing
    debounce_ms: int = _SEED.feed_debounce_ms
    prepare_timeout_ms: int = _SEED.feed_prepare_timeout_ms
    mine_timeout_ms: int = _SEED.feed_mine_timeout_ms
    remote: bool = _SEED.remote
    ssh_target: str | None = _SEED.ssh_target

    @classmethod
    def from_config(cls, config: BridgeConfig) -> FeedSettings:
        return cls(config.feed, config.feed_bin, config.feed_wing, config.feed_debounce_ms,
                   config.feed_prepare_timeout_ms, config.feed_mine_timeout_ms, config.remote,
                   config.ssh_target)


def mine_source(stdout: str) -> str | None:
    """The path from the last ``MINE_SOURCE=<path>`` line, or None (nothing to feed)."""
    found = None
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith(MINE_PREFIX) and line[len(MINE_PREFIX):].strip():
            found = line[len(MINE_PREFIX):].strip()
    return found


@dataclass
class Feeder:
    settings: FeedSettings
    host: Host
    caller: PalaceCaller
    stamper: Stamper
    clock: Clock
    env: Mapping[str, str] = field(default_factory=dict)
    inflight: asyncio.Task[Outcome] | None = None
    last_fed: float | None = None  # now_ms() when the last successful feed started
    closed: bool = False
    outcomes: list[Outcome] = field(default_factory=list)
    _skip_reported: bool = False

    def _may_feed(self) -> bool:
        if not self.settings.enabled or self.closed:
            return False
        if self.settings.remote and not self.settings.ssh_target:
            if not self._skip_reported:
                self._skip_reported = True
                self.host.stderr("mempalace: feed: skipped: a remote palace cannot read this "
                                 "machine's transcripts; set MEMPALACE_PI_SSH_TARGET to feed")
            return False
        return True

    def _running(self) -> asyncio.Task[Outcome] | None:
        return self.inflight if self.inflight is not None and not self.inflight.done() else None

    def settled(self) -> asyncio.Task[Outcome] | None:
        """``agent_settled``: the feed it starts, or None (disabled, within the window, or one is
        already running, which this trigger thereby joins)."""
        if not self._may_feed() or self._running() is not None:
            return None
        if (self.last_fed is not None
                and self.clock.now_ms() - self.last_fed < self.settings.debounce_ms):
            return None
        return self._start(SETTLED)

    async def shutdown(self) -> Outcome | None:
        """``session_shutdown``: feed (joining one in flight) and wait for it; then stop feeding."""
        if not self._may_feed():
            self.closed = True
            return None
        task = self._running() or self._start(SHUTDOWN)
        self.closed = True
        return await asyncio.shield(task)

    def _start(self, reason: str) -> asyncio.Task[Outcome]:
        self.inflight = asyncio.ensure_future(self._feed(reason, self.clock.now_ms()))
        return self.inflight

    async def _feed(self, reason: str, started: float) -> Outcome:
        outcome = await self._prepare_and_mine(reason)
        self.outcomes.append(outcome)
        if outcome.succeeded:
            self.last_fed = started
        return outcome

    async def _prepare_and_mine(self, reason: str) -> Outcome:
        argv = [self.settings.bin, "--prepare", "--reason", reason, "--wing", self.settings.wing]
        try:
            result = await self.host.exec(argv, timeout_ms=self.settings.prepare_timeout_ms or None,
                                          env=dict(self.env))
        except Exception as exc:  # the host could not run it at all
            self.host.stderr(f"mempalace: feed: could not run {self.settings.bin}: {describe(exc)}")
            return Outcome.PREPARE_FAILED
        if result.killed:
            self.host.stderr(f"mempalace: feed: {self.settings.bin} --prepare killed after "
                             f"{self.settings.prepare_timeout_ms} ms; nothing mined this time")
            return Outcome.PREPARE_TIMEOUT
        if result.code != 0:
            detail = " ".join(result.stderr.split())[:200]
            self.host.stderr(f"mempalace: feed: {self.settings.bin} --prepare exited "
                             f"{result.code}; nothing mined" + (f": {detail}" if detail else ""))
            return Outcome.PREPARE_FAILED
        source = mine_source(result.stdout)
        if source is None:
            return Outcome.NOTHING
        return await self._mine(source)

    async def _mine(self, source: str) -> Outcome:
        arguments = self.stamper.stamp("mempalace_mine", {"source": source,
                                                          "wing": self.settings.wing})
        timeout_ms = self.settings.mine_timeout_ms or None
        try:
            call = self.caller.call_tool("mempalace_mine", arguments, timeout_ms=timeout_ms)
            guard = timeout_ms / 1000 + MINE_GUARD_S if timeout_ms else None
            result = await asyncio.wait_for(call, guard)
        except (PalaceError, TimeoutError) as exc:
            if getattr(exc, "code", None) == PEER_WRITER:
                self.host.stderr("mempalace: feed: mempalace_mine refused: another writer holds "
                                 "the palace (-32001); the next trigger will export and mine again")
                return Outcome.MINE_REFUSED
            why = describe(exc) if isinstance(exc, PalaceError) else f"no answer in {timeout_ms} ms"
            self.host.stderr(f"mempalace: feed: mempalace_mine failed: {why}; the next trigger "
                             "will try again")
            return Outcome.MINE_FAILED
        if failed(result):
            self.host.stderr("mempalace: feed: mempalace_mine did not file the export: "
                             f"{' '.join(result.text.split())[:200]}")
            return Outcome.MINE_FAILED
        return Outcome.MINED
