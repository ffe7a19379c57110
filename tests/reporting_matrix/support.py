"""Synthetic results for the diff and matrix tests: built the way the runner builds them.

Steps are raw :class:`StepRecord` objects (with pids, ids, times and temp paths in them) and the
outcome is computed by the runner's own normaliser, so a test sees exactly what a real run gives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from palace_conformance.runner.compare.sources import Source
from palace_conformance.runner.results import (
    FAIL,
    PASS,
    BaselineMark,
    CheckRecord,
    HostInfo,
    RunResult,
    ScenarioResult,
    StepRecord,
)
from palace_conformance.runner.verdict import normalise

ALL_CAPS = ("stdio", "http", "wakeup", "feeding", "diary_command", "provenance", "mailbox",
            "session_preamble", "keepalive")
TOOLS = ["mempalace_status", "mempalace_search", "mempalace_diary_read"]


def step(index: int, op: str, key: str | None = None, **fields: Any) -> StepRecord:
    return StepRecord(index=index, key=key if key is not None else str(index), op=op, ran=True,
                      ok=fields.pop("ok", True), **fields)


def registered(*names: str) -> list[dict[str, Any]]:
    return [{"kind": "tool_registered", "name": n, "description": "d", "parameters": {}}
            for n in names]


def wakeup(text: str = "MemPalace wake-up\n{\"total_drawers\": 1}") -> dict[str, Any]:
    return {"messages": [{"custom_type": "mempalace-wakeup", "content": text}]}


def eager_steps(tmp: str = "/tmp/pc-run-a", *, second_prompt: dict[str, Any] | None = None,
                error: dict[str, Any] | None = None, pid: int = 101) -> list[StepRecord]:
    """A bridge that registers its tools and a command at load (like the reference)."""
    return [
        step(0, "load", request={"op": "load"},
             result={"tools": TOOLS, "commands": ["mempalace-diary"],
                     "events": ["session_start", "before_agent_start", "agent_settled"]},
             effects=[*registered(*TOOLS), {"kind": "command_registered",
                                            "name": "mempalace-diary", "description": "d"}],
             elapsed_ms=812.0, host_ms=800.1),
        step(1, "event", request={"op": "event", "name": "session_start"}, result=None),
        step(2, "settle", request={"op": "settle"}, result=None),
        step(3, "event", "first-prompt", request={"op": "event", "name": "before_agent_start"},
             result=wakeup(), effects=[{"kind": "injected", "custom_type": "mempalace-wakeup",
                                        "content": "x"}], elapsed_ms=33.0),
        step(4, "event", "second-prompt", request={"op": "event", "name": "before_agent_start"},
             result=second_prompt or {"messages": []}),
        step(5, "call_tool", "search", request={"op": "call_tool", "name": "mempalace_search"},
             ok=error is None, error=error,
             result=None if error else {"content": [{"type": "text", "text": json.dumps(
                 {"drawer_id": f"d-{pid}", "filed_at": "2026-08-01T09:30:00",
                  "path": f"{tmp}/home/.mempalace/palace", "hits": 2})}], "is_error": False}),
        step(6, "shutdown", request={"op": "shutdown"}, result={"children_alive": 0},
             effects=[{"kind": "stderr", "line": f"child {pid} exited"}]),
        StepRecord(index=-1, key="(teardown)", op="exit", ran=True, ok=True),
    ]


def lazy_steps(tmp: str = "/tmp/pc-run-b", *, command: bool = True,
               **kwargs: Any) -> list[StepRecord]:
    """The same behaviour, but everything registered at session_start (like pi's MCP client);
    ``command=False``: no diary command at all."""
    steps = eager_steps(tmp, **kwargs)
    steps[0].result = {"tools": [], "commands": [], "events": ["session_start"]}
    steps[0].effects = []
    steps[1].effects = registered(*TOOLS) + (
        [{"kind": "command_registered", "name": "mempalace-diary", "description": "d"}]
        if command else [])
    return steps


def result(scenario: str, transport: str, steps: list[StepRecord], *, status: str = "passed",
           tmp: str = "/tmp/pc-run-a", checks: list[CheckRecord] | None = None,
           covers: tuple[str, ...] = ("WAKE-01",), title: str = "",
           baseline: BaselineMark | None = None, reason: str = "") -> ScenarioResult:
    replacements = normalise.replacement_list({"TMP": tmp})
    return ScenarioResult(
        scenario=scenario, transport=transport, status=status, title=title or scenario,
        covers=covers, path=f"fixtures/scenarios/x/{scenario}.json", reason=reason,
        checks=checks if checks is not None else [check(scenario, transport, "/steps/3")],
        steps=steps, env={"HOME": f"{tmp}/home"}, baseline=baseline,
        outcome=normalise.outcome(steps, replacements) if steps else None)


def check(scenario: str, transport: str, pointer: str, status: str = PASS,
          message: str = "ok", step_key: str | None = None) -> CheckRecord:
    return CheckRecord(scenario, transport, pointer, status, message, step=step_key,
                       covers=("WAKE-01",))


def failing(scenario: str, transport: str, pointer: str, message: str,
            step_key: str | None = None) -> CheckRecord:
    return check(scenario, transport, pointer, FAIL, message, step_key)


def not_applicable(scenario: str, transport: str, why: str = "the host does not declare "
                   "wakeup") -> ScenarioResult:
    return ScenarioResult(scenario=scenario, transport=transport, status="not_applicable",
                          title=scenario, covers=("WAKE-01",), reason=f"Not applicable: {why}")


def run(*results: ScenarioResult, bridge: str = "bridge", caps: tuple[str, ...] = ALL_CAPS
        ) -> RunResult:
    return RunResult(host=HostInfo(argv=["x"], protocol=1, impl="x", bridge=bridge,
                                   runtime="test 1", capabilities=caps),
                     results=list(results), started_at="2026-01-01T00:00:00+00:00")


def source(label: str, *results: ScenarioResult, caps: tuple[str, ...] = ALL_CAPS,
           journals: bool = True) -> Source:
    """A bridge's results as ``diff`` gets them: from a live run (``journals``), or a file."""
    return Source(label, run(*results, bridge=label, caps=caps), f"{label}-origin", caps,
                  journals)


def save(path: Path, value: RunResult) -> Path:
    path.write_text(json.dumps(value.to_json()), encoding="utf-8")
    return path
