"""The fidelity script: data (script.json), read into sessions of steps with stable point ids.

A session has a transport (``stdio``: servers started by name on first use; ``http``: one HTTP
server started with the session), a palace state (``fresh``, or ``initialised`` by the script's
``initialise`` steps first) and steps. A step does one thing (its *action* key): ``send`` JSON-RPC
values or ``raw`` lines to a stdio server, ``rpc`` (POST /mcp) or ``http`` (any request) to the
session's HTTP server, ``cli`` (run the ``mempalace`` CLI), ``http_start`` (start another HTTP
server and watch it exit), ``http_stop`` (SIGTERM the session's HTTP server), ``kill``
(SIGKILL), ``term`` (SIGTERM) or ``eof`` a stdio server.
A step with an ``id`` is a point.

The ``tools`` table gives each of the 47 tools a minimal valid call and a wrong-typed one; a
session's ``tool_matrix`` expands it into points ``tools.<tool>.<kind>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from palace_conformance.errors import UntrustedInputError

SCRIPT_FILE = Path(__file__).with_name("script.json")
ACTIONS = ("send", "raw", "rpc", "http", "cli", "http_start", "http_stop", "kill", "eof",
           "term")
HTTP_ACTIONS = ("rpc", "http", "http_stop")  # they talk to the session's own HTTP server
MATRIX_KINDS = ("no-args", "wrong-type", "fresh", "initialised")
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_STDERR = r"^mempalace: |stdin EOF|Writable MCP HTTP startup"


class ScriptError(UntrustedInputError):
    """The script file is not a valid fidelity script; one line naming the problem."""


@dataclass(frozen=True)
class Step:
    id: str | None
    section: str
    action: str
    spec: Any
    proc: str = "A"
    timeout_s: float = DEFAULT_TIMEOUT_S
    stderr_match: str = DEFAULT_STDERR
    full_only: bool = False


@dataclass(frozen=True)
class Session:
    id: str
    transport: str
    palace: str
    steps: tuple[Step, ...]
    token: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    quick: bool = False


@dataclass(frozen=True)
class Script:
    sessions: tuple[Session, ...]

    def point_ids(self) -> list[str]:
        return [step.id for session in self.sessions for step in session.steps if step.id]

    def quick(self) -> Script:
        """The ``--quick`` subset: the sessions the script marks ``quick``, without their steps
        marked ``full_only`` (slow repeats, such as a second CLI run)."""
        return Script(tuple(replace(s, steps=tuple(t for t in s.steps if not t.full_only))
                            for s in self.sessions if s.quick))


def _step(raw: dict[str, Any], section: str, where: str) -> Step:
    actions = [name for name in ACTIONS if name in raw]
    if len(actions) != 1:
        raise ScriptError(f"{where}: a step needs exactly one of {', '.join(ACTIONS)}")
    return Step(id=raw.get("id"), section=raw.get("section", section), action=actions[0],
                spec=raw[actions[0]], proc=raw.get("proc", "A"),
                timeout_s=float(raw.get("timeout_s", DEFAULT_TIMEOUT_S)),
                stderr_match=raw.get("stderr_match", DEFAULT_STDERR),
                full_only=bool(raw.get("full_only")))


def _call(request_id: int, tool: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def tool_matrix(tools: dict[str, Any], kinds: list[str], section: str,
                only: list[str] | None = None, fresh: bool = True) -> list[Step]:
    """Points ``tools.<tool>.<kind>``: ``no-args`` (no arguments at all), ``wrong-type`` (the
    table's wrong-typed arguments), ``fresh``/``initialised`` (the minimal valid call). Valid
    calls of tools marked ``writes`` come last, so every read still sees the palace's state.
    A tool marked ``own_session`` (its calls change the palace for every later call: 3.11's
    ``sync`` half-makes a fresh palace whose directory exists) is left out of a ``fresh``
    session unless ``only`` names it, so a session of its own probes it there."""
    steps: list[Step] = []
    for kind in kinds:
        if kind not in MATRIX_KINDS:
            raise ScriptError(f"tool_matrix kind {kind!r} is not one of {', '.join(MATRIX_KINDS)}")
        names = ([name for name in tools if not (fresh and tools[name].get("own_session"))]
                 if only is None else [name for name in tools if name in only])
        if kind in ("fresh", "initialised"):
            names.sort(key=lambda name: bool(tools[name].get("writes")))
        for name in names:
            entry = tools[name]
            if kind == "no-args" and entry.get("skip_no_args"):
                continue  # the table says why (event_wait would wait its default 60 s)
            arguments = {"no-args": None, "wrong-type": entry.get("wrong")}.get(
                kind, entry.get("minimal", {}))
            short = name.removeprefix("mempalace_")
            steps.append(Step(id=f"tools.{short}.{kind}", section=section, action="send",
                              spec=_call(len(steps) + 1000, name, arguments),
                              timeout_s=float(entry.get("timeout_s", DEFAULT_TIMEOUT_S))))
    return steps


def parse_script(data: dict[str, Any]) -> Script:
    """The script in ``data``; :class:`ScriptError` names the first problem."""
    tools = data.get("tools", {})
    initialise = data.get("initialise", [])
    sessions: list[Session] = []
    for index, raw in enumerate(data.get("sessions", [])):
        where = f"session {raw.get('id', index)!r}"
        section = raw.get("section", raw.get("id", ""))
        if raw.get("transport") not in ("stdio", "http"):
            raise ScriptError(f"{where}: transport must be stdio or http")
        if raw.get("palace", "fresh") not in ("fresh", "initialised"):
            raise ScriptError(f"{where}: palace must be fresh or initialised")
        steps: list[Step] = []
        if raw.get("palace") == "initialised":
            for step in initialise:
                made = _step(step, "setup", where)
                steps.append(Step(f"{raw['id']}.{made.id}" if made.id else None, made.section,
                                  made.action, made.spec, made.proc, made.timeout_s,
                                  made.stderr_match, made.full_only))
        only = raw.get("tool_matrix_tools")
        unknown = [name for name in only or [] if name not in tools]
        if unknown:
            raise ScriptError(f"{where}: tool_matrix_tools names no tool of the table: "
                              f"{unknown[0]}")
        steps += tool_matrix(tools, raw.get("tool_matrix", []), section, only,
                             fresh=raw.get("palace", "fresh") == "fresh")
        steps += [_step(step, section, where) for step in raw.get("steps", [])]
        misplaced = [s.id or s.action for s in steps if s.action in HTTP_ACTIONS
                     and raw["transport"] != "http"]
        if misplaced:
            raise ScriptError(f"{where}: {misplaced[0]} needs the session's HTTP server: "
                              "give the session transport http")
        sessions.append(Session(id=raw["id"], transport=raw["transport"],
                                palace=raw.get("palace", "fresh"), steps=tuple(steps),
                                token=raw.get("token"), env=dict(raw.get("env", {})),
                                quick=bool(raw.get("quick"))))
    script = Script(tuple(sessions))
    ids = script.point_ids()
    duplicates = sorted({point for point in ids if ids.count(point) > 1})
    if duplicates:
        raise ScriptError(f"point ids must be unique; repeated: {', '.join(duplicates[:5])}")
    return script


def load_script(path: Path = SCRIPT_FILE) -> Script:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScriptError(f"cannot read the fidelity script {path}: {exc}") from None
    return parse_script(data)
