"""The palace client a host uses: one façade over the local child or the remote palace.

The transport is picked once, from the environment given to :func:`create_client` (LIFE-03):
``MEMPALACE_REMOTE_URL`` set means the remote palace and never a local child (LIFE-02).
:meth:`PalaceClient.start` never raises: ``False`` means "run without palace tools" (fail-soft for
the local child, fail-closed for the remote palace).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TextIO

from .config import BridgeConfig
from .errors import PalaceError, PalaceToolError, PalaceUnavailable, describe, redact_error
from .jsonrpc import Response
from .log import Log
from .tools import ToolResult, ToolSpec

__all__ = ["PalaceClient", "ToolResult", "ToolSpec", "create_client"]


class Engine(Protocol):
    remote: bool
    tools: list[ToolSpec]
    start_error: PalaceError | None

    @property
    def available(self) -> bool: ...

    @property
    def child_pids(self) -> list[int]: ...

    async def start(self) -> bool: ...

    async def request(self, method: str, params: dict[str, Any] | None,
                      timeout_ms: int | None = None) -> Response: ...

    async def stop(self) -> None: ...


class PalaceClient:
    """MCP client core of the bridge; see the module docstring for the contract."""

    def __init__(self, config: BridgeConfig, engine: Engine, log: Log) -> None:
        self.config = config
        self.engine = engine
        self.log = log
        self._start_lock = asyncio.Lock()
        self._started: bool | None = None
        self._crash: PalaceError | None = None  # an engine start that raised

    @property
    def remote(self) -> bool:
        return self.engine.remote

    @property
    def available(self) -> bool:
        return bool(self._started) and self.engine.available

    @property
    def child_pids(self) -> list[int]:
        return self.engine.child_pids

    async def start(self) -> bool:
        """Handshake including ``tools/list``; ``False`` = unavailable (already logged)."""
        async with self._start_lock:
            if self._started is None:
                try:
                    self._started = await self.engine.start()
                except Exception as exc:  # the host must never see a start failure as a crash
                    self.log.line(f"mempalace-mcp unavailable ({exc}); "
                                  "continuing without palace tools")
                    self._started = False
                    self._crash = PalaceUnavailable(describe(exc))
            return self._started

    @property
    def start_error(self) -> PalaceError | None:
        """Why the palace did not start (None while it did, or was not tried): the last
        connect failure for a remote (a 401 included), the child's for a local one."""
        if self._started is not False:
            return None
        error = self.engine.start_error or self._crash
        return redact_error(error, self.log.secrets) if error is not None else None

    async def tools(self) -> list[ToolSpec]:
        """The tools listed in the last handshake; empty when the palace is unavailable."""
        if not await self.start():
            return []
        return list(self.engine.tools)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *,
                        timeout_ms: int | None = None) -> ToolResult:
        """Run one tool; arguments go out unchanged (TOOL-02).

        Raises :class:`~.errors.PalaceToolError` for a JSON-RPC error (TOOL-04) and other
        :class:`~.errors.PalaceError` subclasses for timeouts, lost connections and the like.
        """
        if not await self.start():
            raise PalaceUnavailable("the palace did not start; no palace tools this session")
        params = {"name": name, "arguments": {} if arguments is None else arguments}
        try:
            response = await self.engine.request("tools/call", params, timeout_ms)
            if response.error is not None:
                raise PalaceToolError(response.error["code"], response.error["message"],
                                      response.error.get("data"), "tools/call")
            return ToolResult.from_wire(response.result)
        except PalaceError as exc:  # the one way out for errors: a server may echo the token
            redact_error(exc, self.log.secrets)
            raise

    async def stop(self) -> None:
        """Shut the transport down; safe to call twice, never raises."""
        try:
            await self.engine.stop()
        except PalaceError as exc:
            self.log.debug(f"stop: {exc}")

    async def __aenter__(self) -> PalaceClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


def create_client(env: Mapping[str, str], *,
                  stderr: TextIO | Callable[[str], None] | None = None) -> PalaceClient:
    """Read the knobs once and pick the transport once (LIFE-03).

    ``stderr`` is a text stream or a callable taking one line. Malformed knobs are *not* reported
    here: whoever loads the bridge prints ``config.warnings`` once (KNOB-02), as the extension and
    the CLI do, so a warning is never shown twice.
    """
    snapshot = dict(env)
    config = BridgeConfig.from_env(snapshot)
    log = Log(stderr, debug=config.debug,
              secrets=(config.remote_token,) if config.remote_token else ())
    engine: Engine
    if config.remote:
        from .remote import RemoteEngine

        engine = RemoteEngine(config, log)
    else:
        from .local import LocalEngine

        engine = LocalEngine(config, snapshot, log)
    return PalaceClient(config, engine, log)
