"""Watch a bridge for ``profile init``: one short session per transport against the fake.

The session is a scenario built here (data, never part of the catalogue): load, ``session_start``,
a first prompt (``before_agent_start``), ``list_tools``, one ``call_tool``, ``shutdown``, then
``introspect`` for what the host saw the bridge read, open and start (DRIVER.md
``introspect.observed``). It runs through the runner's own machinery (:func:`run_scenario`: a
private world, the shims on PATH, the HTTP fake with a token), so the bridge meets exactly what a
conformance run gives it. What comes back is boiled down to a :class:`Session`, the input of
:mod:`.derive`; nothing in it holds a variable's value or a file's content.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from palace_conformance import json_pointer
from palace_conformance.contract import TRANSPORTS
from palace_conformance.runner.execution.execute import RunOptions, run_scenario
from palace_conformance.runner.profiling.matching import match_tools
from palace_conformance.runner.results import CORE, NOT_APPLICABLE, NOT_TESTABLE, ScenarioResult
from palace_conformance.runner.verdict.reach import NOTHING_SAID, UNREACHED, diagnostics
from palace_conformance.scenarios.model import Scenario

OBSERVE_TOKEN = "profile-init-observation-token"
SYSTEM_PROMPT = "You are pi."
STATUS_TOOL = "mempalace_status"
SETTLE = {"quiet_ms": 1000, "max_ms": 15000}  # long enough for tools registered late
_SOURCE = Path("<profile init: built-in observation session>")


def observation_data(call_tool: str = STATUS_TOOL) -> dict[str, Any]:
    """The observation session as scenario data; ``call_tool`` is the one tool it calls."""
    return {
        "schema_version": 1,
        "id": "profile-init.observe",
        "title": "profile init: what the bridge reads, starts and registers in a short session",
        "covers": [],
        "level": CORE,
        "transports": list(TRANSPORTS),
        "parity": False,
        "http": {"token": OBSERVE_TOKEN},
        "steps": [
            {"op": "load", "as": "load"},
            {"op": "event", "as": "start", "name": "session_start",
             "payload": {"reason": "startup"}},
            {"op": "settle", "as": "started", **SETTLE},
            {"op": "event", "as": "prompt", "name": "before_agent_start",
             "payload": {"prompt": "hello", "systemPrompt": SYSTEM_PROMPT}},
            {"op": "settle", "as": "prompted", **SETTLE},
            {"op": "list_tools", "as": "tools"},
            {"op": "call_tool", "as": "call", "name": call_tool, "args": {}},
            {"op": "shutdown", "as": "shutdown", "reason": "quit", "grace_ms": 5000},
            {"op": "introspect", "as": "introspect"},
        ],
    }


def observation_scenario(call_tool: str = STATUS_TOOL) -> Scenario:
    return Scenario.from_json(observation_data(call_tool), _SOURCE)


@dataclass
class Session:
    """What one observation session showed (JSON-able: tests build these by hand)."""

    transport: str
    status: str = "observed"  # observed | not_applicable | not_testable
    reason: str = ""
    reached: bool = False  # the fake received a request from the bridge
    tools: dict[str, Any] = field(default_factory=dict)  # registered name -> its schema
    commands: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    called: dict[str, str] = field(default_factory=dict)  # its tool -> the tool the fake saw
    call: str = ""  # the tool the session called
    call_error: str | None = None  # the error kind of that call, None when it answered
    injected: bool = False  # a wake-up came as an injected message
    system_prompt: bool = False  # a wake-up came in the system prompt
    notify: int = 0  # ctx.ui.notify effects
    stderr: int = 0  # stderr lines
    ran: list[list[str]] = field(default_factory=list)  # argv of every pi.exec
    env_reads: list[str] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)  # {path (under HOME), ops}
    spawned: list[dict[str, Any]] = field(default_factory=list)  # {argv, error?}
    observed: bool = False  # the host answered introspect with ``observed``
    listed: bool = True  # the fake saw a tools/list in this session (unknown: assumed)
    envelope: str = ""  # the pointer in the call's result where the palace's text was, if moved
    said: str = ""  # its diagnostics on one line (stderr and notify effects, else host stderr)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Session:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def session_from_result(result: ScenarioResult) -> Session:
    """Boil one run of the observation scenario down to a :class:`Session`."""
    session = Session(result.transport)
    # a bridge that never reached the fake still showed what it looked at and what it said
    unreached = result.status == NOT_TESTABLE and UNREACHED in result.reason
    if result.status in (NOT_APPLICABLE, NOT_TESTABLE) and not unreached:
        session.status, session.reason = result.status, result.reason
        return session
    steps = {step.key: step for step in result.steps}
    said = diagnostics(result.steps, result.host_stderr)
    session.said = "" if said == NOTHING_SAID else said
    # on the session's own transport: a stdio-only bridge spawns its child in the http session too
    session.reached = any(r.get("kind") == "recv" and r.get("transport") == result.transport
                          for r in result.journal)
    loaded = steps["load"].result if "load" in steps else None
    if isinstance(loaded, dict):
        session.commands = [str(c) for c in loaded.get("commands") or ()]
        session.events = [str(e) for e in loaded.get("events") or ()]
    for effect in result.effects:
        kind = effect.get("kind")
        if kind == "tool_registered" and isinstance(effect.get("name"), str):
            session.tools.setdefault(effect["name"], effect.get("parameters"))
        elif kind == "command_registered" and effect.get("name") not in session.commands:
            session.commands.append(str(effect.get("name")))
        elif kind == "notify":
            session.notify += 1
        elif kind == "stderr":
            session.stderr += 1
        elif kind == "injected":
            session.injected = True
        elif kind == "exec" and isinstance(effect.get("argv"), list):
            session.ran.append([str(a) for a in effect["argv"]])
    listed = steps["tools"].result if "tools" in steps else None
    for tool in listed if isinstance(listed, list) else ():
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            session.tools[tool["name"]] = tool.get("parameters")
    prompt = steps["prompt"].result if "prompt" in steps else None
    if isinstance(prompt, dict):
        session.injected = session.injected or bool(prompt.get("messages"))
        shown = prompt.get("system_prompt")
        session.system_prompt = isinstance(shown, str) and shown.strip() != SYSTEM_PROMPT
    call = steps.get("call")
    if call is not None:
        session.call = str(call.request.get("name", ""))
        session.call_error = None if call.ok else str((call.error or {}).get("kind", "failed"))
        seen = {r.get("tool") for r in result.journal[call.journal_start:call.journal_end]
                if r.get("kind") == "recv" and r.get("method") == "tools/call"}
        if len(seen) == 1 and isinstance(next(iter(seen)), str):
            session.called[session.call] = str(next(iter(seen)))
    session.listed = any(r.get("kind") == "recv" and r.get("method") == "tools/list"
                         and r.get("transport") == result.transport for r in result.journal)
    if call is not None and call.ok:
        session.envelope = _envelope(call.result, result.journal[call.journal_start:
                                                                  call.journal_end])
    found = steps["introspect"].result if "introspect" in steps else None
    observed = found.get("observed") if isinstance(found, dict) else None
    if isinstance(observed, dict):
        session.observed = True
        session.env_reads = sorted({str(n) for n in observed.get("env_reads") or ()})
        session.files = [f for f in observed.get("files") or () if isinstance(f, dict)]
        session.spawned = [s for s in observed.get("spawned") or () if isinstance(s, dict)]
    return session


def _envelope(result: Any, records: Sequence[Mapping[str, Any]]) -> str:
    """``/KEY`` when the call's result text is a JSON object holding, at KEY, the text the
    palace answered (or its JSON): the bridge wraps palace results in an envelope."""
    sent = [r.get("message", {}).get("result", {}).get("content") for r in records
            if r.get("kind") == "send" and isinstance(r.get("message"), dict)
            and isinstance(r["message"].get("result"), dict)]
    texts = [str(c[0]["text"]) for c in sent if isinstance(c, list) and c
             and isinstance(c[0], dict) and isinstance(c[0].get("text"), str)]
    content = result.get("content") if isinstance(result, dict) else None
    if not texts or not (isinstance(content, list) and content and isinstance(content[0], dict)
                         and isinstance(content[0].get("text"), str)):
        return ""
    try:
        shown = json.loads(content[0]["text"])
        palace = json.loads(texts[-1])
    except ValueError:
        return ""
    if not isinstance(shown, dict) or shown == palace:
        return ""
    for key, value in shown.items():
        if value == texts[-1] or value == palace:
            return "/" + json_pointer.escape(str(key))
    return ""


def _status_stand_in(session: Session, catalogue: Sequence[Mapping[str, Any]]) -> str | None:
    """The bridge's own name for ``mempalace_status``, when it registered one."""
    matched = match_tools(session.tools, catalogue)
    return next((name for name, target in matched.mapped.items() if target == STATUS_TOOL), None)


def observe(host_argv: Sequence[str], catalogue: Sequence[Mapping[str, Any]], *,
            transports: Sequence[str] = TRANSPORTS, op_timeout_ms: int = 15000,
            runner: Callable[..., ScenarioResult] = run_scenario,
            base: RunOptions | None = None, follow_stand_in: bool = True) -> list[Session]:
    """One observation session per transport (in parallel). When the bridge has no
    ``mempalace_status`` but registered its own name for it, that transport's session is run
    again calling that name, so the call path is seen too (unless not ``follow_stand_in``: the
    capabilities do not depend on it). ``base``: a run's own options (its work root, warm
    starts, profile), so that the bridge is watched as the run will start it."""
    if base is None:
        options = RunOptions(host_argv=tuple(host_argv), op_timeout_ms=op_timeout_ms, level=CORE)
    else:
        options = replace(base, host_argv=tuple(host_argv), op_timeout_ms=op_timeout_ms,
                          level=CORE, artifacts=None, detected_capabilities=None)

    def one(transport: str) -> Session:
        session = session_from_result(runner(observation_scenario(), transport, options))
        if follow_stand_in and session.call_error == "no_such_tool":
            stand_in = _status_stand_in(session, catalogue)
            if stand_in is not None:
                session = session_from_result(
                    runner(observation_scenario(stand_in), transport, options))
        return session

    with ThreadPoolExecutor(max_workers=max(1, len(transports))) as pool:
        return list(pool.map(one, transports))


def sessions_json(sessions: Sequence[Session]) -> str:
    """The sessions as JSON (``profile init --observations FILE`` keeps them for review)."""
    return json.dumps([s.to_json() for s in sessions], indent=2) + "\n"
