"""The local palace: a supervised ``mempalace-mcp`` child (the seed's hardened default path).

Glue between :class:`~.respawn.RespawnPolicy` (what to do) and :class:`~.stdio.StdioConnection`
(doing it). A stalled request fails with a timeout and its child is killed (SIGTERM, then SIGKILL
after the grace), never retried; the next call respawns after the backoff, redoes the handshake and
runs (STDIO-01/02/05). A crash fails the in-flight calls at once (STDIO-12).

choice: a configured session preamble (``MEMPALACE_SESSION_PREAMBLE``) also runs on every new
child, right after ``tools/list``: each spawn is a new connection, and ADR-044 selects the mode
"first on every connection".
"""

from __future__ import annotations

import asyncio
import atexit
import weakref
from typing import Any

from .clock import SYSTEM_CLOCK, Clock
from .config import BridgeConfig
from .deadlines import Deadline, TimeoutPolicy
from .errors import PalaceConnectionClosed, PalaceError, PalaceTimeout, PalaceUnavailable
from .handshake import check_initialize, initialize_params, list_tools
from .jsonrpc import IdAllocator, Response
from .log import Log
from .respawn import ChildState, Refuse, RespawnPolicy, Spawn, UseCurrent
from .stdio import StdioConnection, Unspawnable
from .tools import ToolSpec

_LIVE: weakref.WeakSet[StdioConnection] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """A host that exits without stop() must not leave palace servers behind."""
    for conn in list(_LIVE):
        conn.kill_now()


class LocalEngine:
    remote = False

    def __init__(self, config: BridgeConfig, env: dict[str, str], log: Log, *,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.env = env
        self.log = log
        self.clock = clock
        self.ids = IdAllocator()
        self.policy = RespawnPolicy(config.max_respawns, config.respawn_backoff_ms)
        self.timeouts = TimeoutPolicy(config.timeout_ms, config.init_timeout_ms)
        self.tools: list[ToolSpec] = []
        self.conn: StdioConnection | None = None
        self.spawned_pids: list[int] = []
        self._lock = asyncio.Lock()
        self._dying: set[asyncio.Task[None]] = set()
        self._dying_conns: set[StdioConnection] = set()
        self._started: bool | None = None
        self.start_error: PalaceError | None = None  # why the first start gave up
        self._preamble = config.preamble

    # -- introspection -------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        return bool(self._started) and self.policy.state not in (ChildState.LATCHED,
                                                                  ChildState.STOPPED)

    @property
    def child_pids(self) -> list[int]:
        pids = []
        for conn in [self.conn, *self._dying_conns]:
            if conn is not None and conn.pid is not None and not conn.exited:
                pids.append(conn.pid)
        return pids

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> bool:
        """First start, tolerant: the same bounded respawn runs before giving up (STDIO-09)."""
        async with self._lock:
            if self._started is not None:
                return self._started
            try:
                await self._ensure_child()
            except PalaceError as exc:
                self._started = False
                self.start_error = exc
                self.log.line(f"mempalace-mcp unavailable ({_why(exc)}); "
                              "continuing without palace tools")
                return False
            self._started = True
            return True

    async def stop(self) -> None:
        async with self._lock:
            self.policy.on_stop()
            conn, self.conn = self.conn, None
            if conn is not None:
                await conn.close(self.config.kill_grace_ms)
                _LIVE.discard(conn)
            await self._await_dying()

    # -- requests --------------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None,
                      timeout_ms: int | None = None) -> Response:
        if self._started is None:
            await self.start()
        if self._started is False:
            raise PalaceUnavailable(f"mempalace-mcp did not start ({self._start_failure()})")
        async with self._lock:
            conn = await self._ensure_child()
        deadline = self.timeouts.for_request(self.clock, timeout_ms)
        try:
            return await conn.request(method, params, deadline)
        except PalaceTimeout:
            self._retire(conn, f"{method} stalled past {deadline.timeout_ms} ms")
            raise
        except PalaceConnectionClosed as exc:
            self._retire(conn, exc.detail)
            raise

    # -- internals -------------------------------------------------------------------------------

    def _start_failure(self) -> str:
        return self.policy.latch_reason or self.policy.last_failure or "see stderr"

    async def _ensure_child(self) -> StdioConnection:
        """A ready child: the current one, or a (re)spawn the policy allows. Holds ``_lock``."""
        conn = self.conn
        if conn is not None and not conn.alive and conn is self.conn:
            self._retire(conn, conn.closed_reason or "mempalace-mcp exited")
        while True:
            decision = self.policy.want_child()
            if isinstance(decision, UseCurrent):
                assert self.conn is not None
                return self.conn
            if isinstance(decision, Refuse):
                raise PalaceUnavailable(decision.why)
            assert isinstance(decision, Spawn)
            await self._await_dying()  # the old child must let go of the palace lock first
            if decision.delay_ms:
                self.log.debug(f"respawn attempt {decision.attempt} in {decision.delay_ms} ms")
                await asyncio.sleep(decision.delay_ms / 1000.0)
            try:
                self.conn = await self._spawn_ready()
            except Unspawnable as exc:
                self.policy.on_unspawnable(exc.detail)
                raise
            except PalaceError as exc:
                self.policy.on_start_failed(_why(exc))
                self.log.debug(f"start attempt {decision.attempt} failed: {_why(exc)}")
                continue
            self.policy.on_ready()
            return self.conn

    async def _spawn_ready(self) -> StdioConnection:
        argv = [self.config.server_command]
        conn = StdioConnection(argv, self.env, ids=self.ids, log=self.log,
                               on_result=self.policy.on_success)
        await conn.spawn()
        _LIVE.add(conn)
        if conn.pid is not None:
            self.spawned_pids.append(conn.pid)
        deadline = self.timeouts.for_handshake(self.clock)
        try:
            await self._handshake(conn, deadline)
        except PalaceError as exc:
            await self._kill(conn, _why(exc))
            raise
        return conn

    async def _handshake(self, conn: StdioConnection, deadline: Deadline) -> None:
        check_initialize(await conn.request("initialize", initialize_params(), deadline))
        await conn.notify("notifications/initialized")
        self.tools = await list_tools(conn.request, deadline, self.log)
        if self._preamble is not None:
            tool, arguments = self._preamble
            response = await conn.request(
                "tools/call", {"name": tool, "arguments": arguments},
                self.timeouts.for_request(self.clock))
            if response.error is not None:
                raise PalaceUnavailable(
                    f"session preamble {tool} failed: {response.error.get('message')}")

    def _retire(self, conn: StdioConnection, why: str) -> None:
        """This child is done for: tell the policy (if it is the current one) and kill it."""
        if conn is self.conn:
            self.policy.on_death(why)
            self.conn = None
        if conn in self._dying_conns:
            return
        self._dying_conns.add(conn)
        task = asyncio.create_task(self._kill(conn, why))
        self._dying.add(task)
        task.add_done_callback(self._dying.discard)

    async def _kill(self, conn: StdioConnection, why: str) -> None:
        self._dying_conns.add(conn)
        try:
            await conn.terminate(self.config.kill_grace_ms, why)
        finally:
            self._dying_conns.discard(conn)
            _LIVE.discard(conn)

    async def _await_dying(self) -> None:
        while self._dying:
            await asyncio.gather(*list(self._dying), return_exceptions=True)


def _why(exc: BaseException) -> str:
    if isinstance(exc, PalaceUnavailable):
        return exc.detail
    return str(exc)
