"""The reference host with one deliberate defect, to prove the runner's checks can fail.

Usage: ``python mutant_host.py MUTATION``:

* ``no-kill-on-timeout``: the bridge forgets a stalled child instead of killing it (STDIO-02);
* ``errors-as-exception``: the host reports every bridge error as kind ``exception``;
* ``http-details``: over HTTP only, tool results carry an extra ``details`` field (a parity gap);
* ``noisy-stdout``: something prints to stdout during an op (must not break the protocol);
* ``late-stop``: ``session_shutdown`` returns at once and the child is stopped (politely) about
  0.8 s later, past the host's shutdown grace: gone soon after, but not when shutdown returns.
* ``no-kill-at-exit``: the bridge's last resort at exit (the atexit hook that SIGKILLs every
  live child's group) is gone, so a host that exits before a stop finishes leaves the child's
  group behind (LIFE-06).
* ``warm-child``: ``session_shutdown`` keeps the child running (warm, for the next session); the
  bridge's exit hook ends it, with its group, when the host exits.
* ``warm-child-leaked``: the same without that exit hook: what the child started outlives the
  host.
* ``per-call-budget``: not a defect for a bridge whose profile says so
  (``claims.respawn_budget: "call"``): each call gets ``MEMPALACE_MCP_MAX_RESPAWNS`` respawns of
  its own, and a spent budget never latches.
* ``per-call-budget-overspent``: the same, one respawn more per call than the budget.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
from typing import Any

from palace_bridge import local
from palace_conformance.hosts import reference


def no_kill_on_timeout() -> None:
    def retire(self: local.LocalEngine, conn: Any, why: str) -> None:
        if conn is self.conn:
            self.policy.on_death(why)
            self.conn = None

    local.LocalEngine._retire = retire  # type: ignore[method-assign]
    reference.DEFAULT_GRACE_MS = 300  # shutdown waits this long for the orphan: keep tests fast


def errors_as_exception() -> None:
    reference.error_payload = lambda exc: {"kind": "exception", "message": str(exc)}


def http_details() -> None:
    original = reference.ReferenceHost.call_tool

    async def call_tool(self: reference.ReferenceHost, request: dict[str, Any]) -> Any:
        result = await original(self, request)
        if os.environ.get("MEMPALACE_REMOTE_URL") and isinstance(result, dict):
            result["details"] = {"transport": "http"}
        return result

    reference.ReferenceHost.call_tool = call_tool  # type: ignore[method-assign]


def noisy_stdout() -> None:
    original = reference.ReferenceHost.hello

    async def hello(self: reference.ReferenceHost, request: dict[str, Any]) -> Any:
        print("noise from the bridge during hello")
        return await original(self, request)

    reference.ReferenceHost.hello = hello  # type: ignore[method-assign]


def late_stop() -> None:
    original = local.LocalEngine.stop
    pending: set[asyncio.Task[None]] = set()

    async def later(self: local.LocalEngine) -> None:
        await asyncio.sleep(0.8)
        await original(self)

    async def stop(self: local.LocalEngine) -> None:
        task = asyncio.get_running_loop().create_task(later(self))
        pending.add(task)
        task.add_done_callback(pending.discard)

    local.LocalEngine.stop = stop  # type: ignore[method-assign]
    reference.DEFAULT_GRACE_MS = 100  # the host's shutdown does not wait for the late stop


def no_kill_at_exit() -> None:
    atexit.unregister(local._kill_leftovers)


def warm_child() -> None:
    async def stop(self: local.LocalEngine) -> None:
        return None  # kept warm across session_shutdown

    local.LocalEngine.stop = stop  # type: ignore[method-assign]
    reference.DEFAULT_GRACE_MS = 100  # the host's shutdown does not wait for it


def warm_child_leaked() -> None:
    warm_child()
    no_kill_at_exit()


def per_call_budget(extra: int = 0) -> None:
    from palace_bridge import respawn

    def no_latch(self: respawn.RespawnPolicy) -> None:
        self.latch_reason = (f"mempalace-mcp respawn budget of this call spent "
                             f"({self.max_respawns} attempt(s))")

    original = local.LocalEngine._ensure_child

    async def ensure_child(self: local.LocalEngine) -> Any:
        self.policy.used = 0  # every call its own budget
        self.policy.max_respawns = self.config.max_respawns + extra
        return await original(self)

    respawn.RespawnPolicy._latch = no_latch  # type: ignore[method-assign]
    local.LocalEngine._ensure_child = ensure_child  # type: ignore[method-assign]


MUTATIONS = {"no-kill-on-timeout": no_kill_on_timeout, "errors-as-exception": errors_as_exception,
             "http-details": http_details, "noisy-stdout": noisy_stdout,
             "late-stop": late_stop, "no-kill-at-exit": no_kill_at_exit,
             "warm-child": warm_child, "warm-child-leaked": warm_child_leaked,
             "per-call-budget": per_call_budget,
             "per-call-budget-overspent": lambda: per_call_budget(extra=1)}

if __name__ == "__main__":
    MUTATIONS[sys.argv[1]]()
    reference.main()
