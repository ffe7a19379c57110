"""In-memory stand-ins for the palace client, so feature policy is tested without processes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from palace_bridge.host import ExecResult


@dataclass
class FakeResult:
    content: list[dict[str, Any]]
    is_error: bool = False
    structured: Any = None

    @property
    def text(self) -> str:
        return "\n".join(c.get("text", "") for c in self.content if c.get("type") == "text")


def result(payload: Any, is_error: bool = False) -> FakeResult:
    text = payload if isinstance(payload, str) else json.dumps(payload, indent=2)
    return FakeResult([{"type": "text", "text": text}], is_error)


@dataclass
class FakeSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None


Handler = Callable[[dict[str, Any]], Any]


def _default(name: str, args: dict[str, Any]) -> Any:
    if name == "mempalace_status":
        return {"total_drawers": 3, "wings": {"wing_x": 3}, "protocol": "PROTOCOL-TEXT"}
    if name == "mempalace_diary_read":
        return {"agent": args.get("agent_name"), "entries": [
            {"date": "2026-11-30", "topic": "general", "content": "DIARY-ENTRY-TEXT"}]}
    if name == "mempalace_event_list":
        return {"events": [], "count": 0}
    if name == "mempalace_mine":
        return {"success": True, "source": args.get("source"), "wing": args.get("wing")}
    return {"success": True}


@dataclass
class FakeClient:
    """Records every call; ``handlers[name](args)`` returns a payload, a FakeResult, or raises.

    ``gates[name]`` (an asyncio.Event) holds that tool's calls until it is set.
    """

    handlers: dict[str, Handler] = field(default_factory=dict)
    specs: list[FakeSpec] = field(default_factory=list)
    start_ok: bool = True
    calls: list[tuple[str, Any, int | None]] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    started: int = 0
    stopped: int = 0
    remote: bool = False

    @property
    def available(self) -> bool:
        return self.start_ok and self.stopped == 0

    async def start(self) -> bool:
        self.started += 1
        return self.start_ok

    async def tools(self) -> list[FakeSpec]:
        return list(self.specs)

    async def stop(self) -> None:
        self.stopped += 1

    async def call_tool(self, name: str, arguments: Any, *, timeout_ms: int | None = None) -> Any:
        self.calls.append((name, arguments, timeout_ms))
        gate = self.gates.get(name)
        if gate is not None:
            await gate.wait()
        handler = self.handlers.get(name)
        payload = handler(arguments) if handler is not None else _default(name, arguments or {})
        return payload if isinstance(payload, FakeResult) else result(payload)

    def called(self, name: str) -> list[Any]:
        return [args for n, args, _ in self.calls if n == name]


@dataclass
class ScriptedExec:
    """A host ``exec`` that answers from a list of results (the last repeats) and records argv."""

    results: list[ExecResult] = field(default_factory=lambda: [ExecResult(
        "MINE_SOURCE=/staged/export-1.jsonl\n", "", 0)])
    calls: list[dict[str, Any]] = field(default_factory=list)
    gate: asyncio.Event | None = None

    async def __call__(self, argv: list[str], *, timeout_ms: int | None = None,
                       env: Any = None) -> ExecResult:
        self.calls.append({"argv": list(argv), "timeout_ms": timeout_ms, "env": env})
        if self.gate is not None:
            await self.gate.wait()
        return self.results[min(len(self.calls) - 1, len(self.results) - 1)]
