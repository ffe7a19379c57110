"""The bridge as a host plugin: ``await activate(host, env)`` plays pi's ``export default (pi)``.

At load it creates the palace client once (the transport is chosen here, once, LIFE-03), starts
it, and registers every palace tool with its schema unchanged (TOOL-01). When the palace is
unavailable it registers nothing and the host carries on (fail-soft, TOOL-05). Then it wires the
harness features onto pi's events: wake-up, feeding, the diary command, provenance, the mailbox.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .clock import SYSTEM_CLOCK, Clock
from .config import BridgeConfig
from .errors import PalaceError, describe
from .features.diary import DiaryCommand
from .features.feeding import Feeder, FeedSettings
from .features.mailbox import Mailbox
from .features.ports import PalaceCaller
from .features.provenance import Stamper, stamper_for
from .features.wakeup import WakeUp
from .host import (
    AGENT_SETTLED,
    BEFORE_AGENT_START,
    SESSION_SHUTDOWN,
    SESSION_START,
    Host,
    InjectedMessage,
    ToolDefinition,
    ToolExecute,
    ToolOutcome,
)


class ToolSpecLike(Protocol):
    """``palace_bridge.client.ToolSpec`` as the extension reads it."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def input_schema(self) -> dict[str, Any]: ...


class BridgeClient(PalaceCaller, Protocol):
    """The slice of ``palace_bridge.client.PalaceClient`` the extension drives."""

    async def start(self) -> bool: ...

    async def tools(self) -> Sequence[ToolSpecLike]: ...

    async def stop(self) -> None: ...


@dataclass
class Bridge:
    """One loaded bridge: what it registered and the features it runs."""

    host: Host
    config: BridgeConfig
    client: BridgeClient
    stamper: Stamper
    available: bool = False
    tools: list[str] = field(default_factory=list)
    wakeup: WakeUp | None = None
    feeder: Feeder | None = None
    mailbox: Mailbox | None = None
    _tasks: set[asyncio.Future[Any]] = field(default_factory=set)

    def background(self, what: str, work: Awaitable[Any]) -> asyncio.Future[Any]:
        """Run ``work`` without blocking the event; a bug in it becomes one stderr line."""

        async def guarded() -> Any:
            try:
                return await work
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.host.stderr(f"mempalace: {what}: internal error: {describe(exc)}")
                return None

        task = asyncio.ensure_future(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self) -> None:
        """Wait for every background task (tests and the driver's ``settle``)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- event handlers ---------------------------------------------------------------------

    async def on_session_start(self, payload: dict[str, Any]) -> None:
        if self.wakeup is not None:
            self.wakeup.session_start(payload.get("reason"))

    async def on_before_agent_start(self, payload: dict[str, Any]) -> InjectedMessage | None:
        return await self.wakeup.before_agent_start() if self.wakeup is not None else None

    async def on_agent_settled(self, payload: dict[str, Any]) -> None:
        if self.feeder is not None:
            task = self.feeder.settled()
            if task is not None:
                self.background("feed", task)
        if self.mailbox is not None and self.mailbox.due():
            self.background("mailbox", self.mailbox.poll())

    async def on_session_shutdown(self, payload: dict[str, Any]) -> None:
        try:
            if self.feeder is not None:
                await self.feeder.shutdown()
        finally:
            for task in list(self._tasks):
                if not task.done():
                    task.cancel()
            await self.drain()
            with contextlib.suppress(PalaceError):
                await self.client.stop()

    # -- tools ------------------------------------------------------------------------------

    def executor(self, name: str) -> ToolExecute:
        async def execute(call_id: str, params: dict[str, Any]) -> ToolOutcome:
            result = await self.client.call_tool(name, self.stamper.stamp(name, params))
            structured = getattr(result, "structured", None)
            return ToolOutcome(list(result.content),
                               {"structured": structured} if structured is not None else None,
                               bool(result.is_error))

        return execute


async def activate(host: Host, env: Mapping[str, str], *, client: BridgeClient | None = None,
                   clock: Clock = SYSTEM_CLOCK) -> Bridge:
    """Load the bridge into ``host``; never raises for a palace problem (fail-soft)."""
    env = dict(env)  # read once, at load: later changes to the caller's mapping change nothing
    config = BridgeConfig.from_env(env)
    for warning in config.warnings:
        host.stderr(warning)
    if client is None:
        from .client import create_client

        client = create_client(env, stderr=host.stderr)
    bridge = Bridge(host, config, client,
                    stamper_for(config.device, config.shared_palace, config.harness))
    host.on(SESSION_SHUTDOWN, bridge.on_session_shutdown)
    specs: Sequence[ToolSpecLike] = []
    try:
        started = await client.start()
        specs = await client.tools() if started else []
    except PalaceError as exc:
        host.stderr(f"mempalace: {describe(exc)}; continuing without palace tools")
        started, specs = False, []
    if not started:
        return bridge
    bridge.available = True
    for spec in specs:
        host.register_tool(ToolDefinition(name=spec.name, label=spec.name,
                                          description=spec.description or "",
                                          parameters=spec.input_schema,
                                          execute=bridge.executor(spec.name)))
        bridge.tools.append(spec.name)
    _wire_features(bridge, env, clock)
    return bridge


def _wire_features(bridge: Bridge, env: Mapping[str, str], clock: Clock) -> None:
    host, config, client = bridge.host, bridge.config, bridge.client
    if config.shared_palace and config.mailbox:
        bridge.mailbox = Mailbox(client, host, bridge.stamper.writer, config.mailbox_poll_ms, clock)
    bridge.wakeup = WakeUp(client, config.agent_name, bridge.mailbox)
    if config.feed:
        bridge.feeder = Feeder(FeedSettings.from_config(config), host, client, bridge.stamper,
                               clock, env)
    host.register_command(DiaryCommand(host, config.agent_name).definition())
    host.on(SESSION_START, bridge.on_session_start)
    host.on(BEFORE_AGENT_START, bridge.on_before_agent_start)
    host.on(AGENT_SETTLED, bridge.on_agent_settled)

