"""Mutants of LIFE: start-up, the handshake, tool listing and shutdown."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from palace_conformance.selftest.mutants.model import Mutant
from palace_conformance.selftest.mutants.patching import (
    LOCAL,
    REMOTE,
    STDIO,
    answers_later,
    mutant,
)


class _FallbackEngine:
    """A remote engine that falls back to a local child when the remote palace is down."""

    remote = True

    def __init__(self, primary: Any, local: Any) -> None:
        self.primary = primary
        self.local = local
        self.active = primary

    @property
    def tools(self) -> Any:
        return self.active.tools

    @property
    def available(self) -> bool:
        return bool(self.active.available)

    @property
    def child_pids(self) -> list[int]:
        return list(self.local.child_pids)

    @property
    def spawned_pids(self) -> list[int]:
        return list(self.local.spawned_pids)

    async def start(self) -> bool:
        if await self.primary.start():
            return True
        self.active = self.local
        return bool(await self.local.start())

    async def request(self, method: str, params: Any, timeout_ms: int | None = None) -> Any:
        return await self.active.request(method, params, timeout_ms)

    async def stop(self) -> None:
        await self.primary.stop()
        await self.local.stop()


def _local_fallback(original: Any) -> Any:
    def create_client(env: Mapping[str, str], *, stderr: Any = None) -> Any:
        client = original(env, stderr=stderr)
        if client.engine.remote:
            from palace_bridge.local import LocalEngine

            local = LocalEngine(client.config, dict(env), client.log)
            client.engine = _FallbackEngine(client.engine, local)
        return client

    return create_client


def _timeout_reread(original: Any) -> Any:
    def for_request(self: Any, clock: Any, override_ms: int | None = None) -> Any:
        raw = os.environ.get("MEMPALACE_MCP_TIMEOUT_MS", "").strip()
        if override_ms is None and raw.isdigit():
            override_ms = int(raw)  # the knob read again, after load
        return original(self, clock, override_ms)

    return for_request


def _first_page_only(original: Any) -> Any:
    async def list_tools(send: Any, deadline: Any, log: Any) -> Any:
        async def one_page(method: str, params: Any, budget: Any) -> Any:
            response = await send(method, params, budget)
            if isinstance(response.result, dict):
                response.result.pop("nextCursor", None)
            return response

        return await original(one_page, deadline, log)

    return list_tools


def _stop_signals_first(original: Any) -> Any:
    async def _close(self: Any, grace_ms: int) -> None:
        await self._terminate(grace_ms, "stopped")  # SIGTERM straight away, stdin never closed

    return _close


def _leader_only_signalled(original: Any) -> Any:
    import contextlib

    def _signal_group(self: Any, sig: Any) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.proc.pid, sig)  # the child alone: what it started lives on

    return _signal_group




def _reload_keeps_child(original: Any) -> Any:
    async def on_session_shutdown(self: Any, payload: dict[str, Any]) -> None:
        if payload.get("reason") == "reload":
            return  # "the module is about to come back": the old instance's child is left running
        await original(self, payload)

    return on_session_shutdown


def _no_kill_at_exit(original: Any) -> Any:
    def kill_now(self: Any) -> None:
        """The host's exit SIGKILLs nothing: a child its stop had not ended yet lives on."""

    return kill_now


#: patches made by the shared makers (patching.py)
_no_delete = answers_later(None)


MUTANTS: tuple[Mutant, ...] = (
    # LIFE
    mutant("life-remote-falls-back-to-local", "LIFE-02",
       "an unreachable remote palace makes the bridge start a local child instead",
       ("palace_bridge.client:create_client", _local_fallback)),
    mutant("life-timeout-reread-after-load", "LIFE-03",
       "the request timeout is read from the live environment on every call",
       ("palace_bridge.deadlines:TimeoutPolicy.for_request", _timeout_reread)),
    mutant("life-tools-list-first-page-only", "LIFE-04",
       "tools/list stops after the first page, ignoring nextCursor",
       (f"{LOCAL}:list_tools", _first_page_only), (f"{REMOTE}:list_tools", _first_page_only)),
    mutant("life-stop-signals-instead-of-closing", "LIFE-06",
       "stop sends SIGTERM at once instead of closing stdin and waiting",
       (f"{STDIO}:StdioConnection._close", _stop_signals_first)),
    mutant("life-child-signalled-not-its-group", "LIFE-06",
       "signals go to the child's pid only, so a grandchild it started outlives shutdown",
       (f"{STDIO}:StdioConnection._signal_group", _leader_only_signalled)),
    mutant("life-no-delete-at-shutdown", "LIFE-06",
       "shutdown never sends the DELETE for a held HTTP session",
       ("palace_bridge.http:HttpTransport.delete", _no_delete)),
    mutant("life-reload-leaks-child", "LIFE-06",
       "session_shutdown with reason reload is ignored: the replaced instance's child lives on",
       ("palace_bridge.extension:Bridge.on_session_shutdown", _reload_keeps_child)),
    mutant("life-no-kill-at-exit", "LIFE-06",
       "a host that exits before a stop finished leaves the child and its group running (the "
       "last resort at exit kills nothing)",
       (f"{STDIO}:StdioConnection.kill_now", _no_kill_at_exit)),
)
