"""Fault plans: data that says which message to break, how, and how often.

A fault is ``{"id", "on": {method, tool, nth, every, transport}, "times", "action", ...params}``.
The brain counts matching messages across every process of a scenario (through the shared
journal), so "the 2nd ``tools/call`` of ``mempalace_search``" means the 2nd one the palace ever
saw, even when the first went to a child that has since been killed and respawned.

The compact ``--fault`` syntax is ``ACTION[@TARGET][#NTH][xTIMES][,every=N][,key=value...]``; see
:data:`COMPACT_HELP`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from functools import cache

from palace_conformance.errors import UntrustedInputError
from palace_conformance.resources import CATALOGUES, tool_catalogue

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any

PLAN_SCHEMA_VERSION = 1
STARTUP = "$startup"

#: action -> (transports it applies to, allowed parameters)
ACTIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # transport-neutral: applied by the brain's playback
    "stall": (frozenset({"stdio", "http"}), frozenset({"ms"})),
    "delay": (frozenset({"stdio", "http"}), frozenset({"ms"})),
    "drip_progress": (frozenset({"stdio", "http"}), frozenset({"interval_ms", "count", "then"})),
    "exit": (frozenset({"stdio", "http"}), frozenset({"code", "when", "stderr", "stderr_bytes"})),
    "error": (frozenset({"stdio", "http"}), frozenset({"code", "message", "data"})),
    "result": (frozenset({"stdio", "http"}), frozenset({"result"})),
    "garbage": (frozenset({"stdio", "http"}), frozenset({"text"})),
    "partial_line": (frozenset({"stdio", "http"}), frozenset({"then", "code"})),
    "oversized": (frozenset({"stdio", "http"}), frozenset({"bytes"})),
    "wrong_id": (frozenset({"stdio", "http"}), frozenset({"reply_id"})),
    "retype_id": (frozenset({"stdio", "http"}), frozenset({"then"})),
    "negotiate_version": (frozenset({"stdio", "http"}), frozenset({"version"})),
    "duplicate_response": (frozenset({"stdio", "http"}), frozenset()),
    "server_request": (frozenset({"stdio", "http"}), frozenset({"method", "params"})),
    "notify": (frozenset({"stdio", "http"}), frozenset({"method", "params"})),
    "flood_stderr": (frozenset({"stdio", "http"}), frozenset({"bytes", "invalid_utf8"})),
    "write_stderr": (frozenset({"stdio", "http"}), frozenset({"pieces", "pause_ms"})),
    "lock_held": (frozenset({"stdio", "http"}), frozenset({"pid", "argv"})),
    # process level (on.method == "$startup")
    "startup_fail": (frozenset({"stdio", "http"}), frozenset({"code", "stderr", "after_ms"})),
    "ignore_sigterm": (frozenset({"stdio", "http"}), frozenset()),
    # stdio only: the HTTP fake is the runner's process, not one the bridge must end
    "spawn_grandchild": (frozenset({"stdio"}),
                         frozenset({"lifetime_ms", "leave_group", "hold_pipes", "last_words",
                                    "ignore_sigterm"})),
    # HTTP only: applied by the HTTP transport
    "http_status": (frozenset({"http"}), frozenset({"status", "headers", "body", "content_type"})),
    "answer_status": (frozenset({"http"}), frozenset({"status"})),
    "reset": (frozenset({"http"}), frozenset({"after_bytes"})),
    "sse": (
        frozenset({"http"}),
        frozenset({"event_delay_ms", "keepalives", "close_without_response", "priming_id",
                   "retry_ms", "decoy_event", "garbage_event", "line_ending", "chunk_bytes",
                   "unknown_fields", "resume_status", "no_retry", "invalid_utf8"}),
    ),
    "accept_202": (frozenset({"http"}), frozenset()),
    "content_type": (frozenset({"http"}), frozenset({"value"})),
    "forget_session": (frozenset({"http"}), frozenset({"ms"})),
    "rotate_token": (frozenset({"http"}), frozenset({"token"})),
}

#: what an sse fault's ``decoy_event`` may be: an event type, one token (never "message")
SSE_EVENT_TYPE = r"[A-Za-z][A-Za-z0-9_.-]*"
#: what an sse fault's ``line_ending`` may be: the three the SSE standard accepts, or all three
#: mixed in one stream (which it accepts too)
SSE_LINE_ENDINGS = ("lf", "crlf", "cr", "mixed")
#: statuses whose response has no body (RFC 9110): an sse ``resume_status`` cannot be one
NO_BODY_STATUSES = frozenset({204, 205, 304})
RESERVED = frozenset({"id", "on", "times", "action"})  # fault keys that are not parameters
EVERY = "every"  # the compact syntax's one key=value that is not a parameter: it goes to on.every
STARTUP_ACTIONS = frozenset({"startup_fail", "ignore_sigterm", "flood_stderr", "write_stderr",
                             "delay", "spawn_grandchild"})
HTTP_ACTIONS = frozenset(
    {"http_status", "answer_status", "reset", "sse", "accept_202", "content_type",
     "forget_session", "rotate_token"}
)

COMPACT_HELP = """\
Fault syntax: ACTION[@TARGET][#NTH][xTIMES][,every=N][,key=value...]
  TARGET  a tool name (mempalace_*, implies tools/call), a JSON-RPC method, '$startup'
          (the process start) or '*' (any message); default '*'. A tool outside the
          catalogue, a method the fake does not serve, or an action this fake's transport
          cannot carry is refused (it would never fire)
  NTH     fire from the NTH matching message on (1-based, counted across respawns); default 1
  TIMES   how many times it fires; a number or '*' (forever); default 1, or '*' with every=N
  every=N fire only on matching messages N, 2N, 3N... (counted like NTH; NTH still says
          from which one on); any action. Without it, the firings are consecutive
  values  parsed as JSON when they parse, else taken as text
Examples:
  stall@mempalace_search                    never answer the first search
  stall@mempalace_search#2,ms=500           hold the second search 500 ms, then drop it
  delay@initialize,ms=2000                  a slow start: answer initialize after 2 s
  exit@tools/call,code=75,when=before_reply crash on the first tool call
  startup_fail@$startupx2,code=1,stderr=palace is held by PID 42
  ignore_sigterm@$startup                   survive SIGTERM (only SIGKILL ends it)
  http_status@tools/call,status=404         answer 404 (session forgotten) once
  answer_status@mempalace_search,status=203 the real answer, with status 203
  forget_session@tools/call,every=5         lose the session on every 5th tool call
  forget_session@mempalace_search,ms=800    hold the search 800 ms on its live session, then
                                            lose the session and answer 404
  exit@mempalace_searchx2,every=3           crash on the 3rd and the 6th search only
  reset@mempalace_status,after_bytes=10     cut the connection mid-response
  sse@mempalace_status,decoy_event=error    first an 'error' event carrying a decoy answer
  sse@mempalace_status,garbage_event={oops  first a 'message' event whose data is not JSON
                                            (same id, other result), then the real one
  sse@mempalace_status,line_ending=crlf,chunk_bytes=1
                                            lines end in CRLF, and each event goes out one
                                            byte per write (a CR and its LF in two reads)
  sse@mempalace_status,unknown_fields=true  each event ends with 'Event:' and 'Data:'
                                            lines, fields a client must ignore
  sse@mempalace_search,close_without_response=true,priming_id=e1,resume_status=500
                                            close the stream after its priming event; the
                                            GET that resumes it gets the replayed answer as
                                            an event stream, with status 500
  retype_id@mempalace_search                first a decoy answer whose id is the other JSON
                                            type (1 -> "1"), then the real one
  negotiate_version@initialize,version=2025-03-26   settle on an older version than offered
  flood_stderr@$startup,bytes=4096,invalid_utf8=true   stderr bytes that are not UTF-8
  write_stderr@$startup,pieces=["key=abcd\\n"]   write that text on stderr; in a plan, several
                                            pieces ("key=ab", "cd\\n": a spec's commas split
                                            it) are written in turn, pause_ms apart, so a
                                            reader gets the text in parts
  spawn_grandchild@$startup                 start a grandchild in the child's process group
  spawn_grandchild@$startup,leave_group=true,hold_pipes=true
                                            one that calls setsid (out of the group's reach)
                                            and keeps the child's stdout and stderr open
  spawn_grandchild@$startup,leave_group=true,hold_pipes=true,last_words=bye
                                            ... that writes 'bye' on the child's stderr when
                                            the child's group is swept (a tripwire in it dies)
  exit@mempalace_status,stderr_bytes=524288,stderr=last words
                                            crash after a stderr burst ending in that line,
                                            still in the pipe when the child is gone
Actions: """ + ", ".join(sorted(ACTIONS))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class FakeSetupError(UntrustedInputError, ValueError):
    """The fake cannot start as configured (plan, fault spec, state or journal file); one line."""


class FaultPlanError(FakeSetupError):
    """A fault plan or --fault spec that cannot be used; the message says what to fix."""


class _Value:
    """Equality and repr from ``__slots__``: a dataclass without importing ``dataclasses``
    (its ``inspect`` import alone is a fifth of the fake's cold start)."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class Match(_Value):
    """Which messages a fault watches. Treat as immutable."""

    __slots__ = ("every", "method", "nth", "tool", "transport")

    def __init__(self, method: str = "*", tool: str | None = None, nth: int = 1,
                 transport: str | None = None, every: int = 1) -> None:
        self.method = method
        self.tool = tool
        self.nth = nth
        self.transport = transport
        self.every = every  # only occurrences that are multiples of this (1: all of them)

    def selects(self, method: str | None, tool: str | None, transport: str) -> bool:
        if self.transport is not None and self.transport != transport:
            return False
        if self.method != "*" and self.method != method:
            return False
        return not (self.tool is not None and self.tool != tool)


class Fault(_Value):
    """One fault: what it watches (``on``), what it does (``action`` + ``params``), how often."""

    __slots__ = ("action", "id", "on", "params", "times")

    def __init__(self, id: str, on: Match, action: str, times: int | None = 1,
                 params: dict[str, Any] | None = None) -> None:
        self.id = id
        self.on = on
        self.action = action
        self.times = times
        self.params: dict[str, Any] = dict(params or {})

    def fires_at(self, occurrence: int) -> bool:
        """Whether the ``occurrence``-th matching message (1-based) triggers this fault: from the
        ``nth`` on, a multiple of ``every``, and within the first ``times`` such firings."""
        every = self.on.every
        if occurrence < self.on.nth or occurrence % every:
            return False
        firing = occurrence // every - (self.on.nth - 1) // every  # this one is the firing-th
        return self.times is None or firing <= self.times

    def to_json(self) -> dict[str, Any]:
        on: dict[str, Any] = {"method": self.on.method, "nth": self.on.nth}
        if self.on.every != 1:
            on["every"] = self.on.every
        if self.on.tool is not None:
            on["tool"] = self.on.tool
        if self.on.transport is not None:
            on["transport"] = self.on.transport
        return {"id": self.id, "on": on, "times": self.times, "action": self.action, **self.params}


class FaultPlan(_Value):
    """An ordered list of faults, as loaded from a plan file and ``--fault`` specs."""

    __slots__ = ("faults",)

    def __init__(self, faults: list[Fault] | None = None) -> None:
        self.faults: list[Fault] = list(faults or [])

    __hash__ = None  # type: ignore[assignment]  # mutable

    def for_transport(self, transport: str) -> FaultPlan:
        return FaultPlan([f for f in self.faults if transport in ACTIONS[f.action][0]
                          and (f.on.transport is None or f.on.transport == transport)])

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": PLAN_SCHEMA_VERSION, "faults": [f.to_json() for f in self.faults]}


def fault_from_json(data: Any, index: int, where: str | None = None) -> Fault:
    """One fault from plan JSON; ``where`` names it in errors (default: its place in the plan)."""
    compact = where is not None
    where = where or f"fault #{index + 1}"
    if not isinstance(data, dict):
        raise FaultPlanError(f"{where}: expected an object, got {type(data).__name__}")
    action = data.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        raise FaultPlanError(
            f"{where}: unknown action {_shown(str(action))}; "
            f"use one of: {', '.join(sorted(ACTIONS))}"
        )
    fid = data.get("id", f"fault-{index + 1}")
    if not isinstance(fid, str) or not fid:
        raise FaultPlanError(f"{where}: 'id' must be a non-empty string")
    if not compact:
        where = f"{where} ({fid})"
    on_data = data.get("on", {})
    if not isinstance(on_data, dict):
        raise FaultPlanError(f"{where}: 'on' must be an object")
    unknown_on = set(on_data) - {"method", "tool", "nth", "every", "transport"}
    if unknown_on:
        raise FaultPlanError(f"{where}: unknown key(s) in 'on': {sorted(unknown_on)}")
    tool = on_data.get("tool")
    method = on_data.get("method", "tools/call" if tool else "*")
    nth = on_data.get("nth", 1)
    every = on_data.get("every", 1)
    transport = on_data.get("transport")
    if not isinstance(method, str):
        raise FaultPlanError(f"{where}: 'on.method' must be a string")
    if tool is not None and (not isinstance(tool, str) or method not in ("tools/call", "*")):
        raise FaultPlanError(f"{where}: 'on.tool' needs method tools/call")
    if not isinstance(nth, int) or isinstance(nth, bool) or nth < 1:
        raise FaultPlanError(f"{where}: 'on.nth' must be an integer >= 1")
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise FaultPlanError(f"{where}: '{'every' if compact else 'on.every'}' must be an integer "
                             f">= 1 (5: the 5th, 10th, 15th... matching message), not "
                             f"{json.dumps(every)}")
    if transport not in (None, "stdio", "http"):
        raise FaultPlanError(f"{where}: 'on.transport' must be stdio or http")
    times = data.get("times", None if "every" in on_data else 1)  # every=N: forever unless capped
    if times is not None and (not isinstance(times, int) or isinstance(times, bool) or times < 1):
        raise FaultPlanError(f"{where}: 'times' must be an integer >= 1 or null (forever)")
    params = {k: v for k, v in data.items() if k not in RESERVED}
    allowed = ACTIONS[action][1]
    unknown = set(params) - allowed
    if EVERY in unknown:
        raise FaultPlanError(f"{where}: 'every' says which messages, so it goes in 'on' "
                             "(\"on\": {\"every\": N})")
    if unknown:
        raise FaultPlanError(
            f"{where}: action {action!r} takes {sorted(allowed) or 'no parameters'}, "
            f"not {sorted(unknown)}"
        )
    if method == STARTUP and action not in STARTUP_ACTIONS:
        raise FaultPlanError(
            f"{where}: action {action!r} cannot fire at $startup; "
            f"use one of {sorted(STARTUP_ACTIONS)}"
        )
    if action in {"startup_fail", "ignore_sigterm", "spawn_grandchild"} and method != STARTUP:
        raise FaultPlanError(f"{where}: {action!r} fires only with on.method '$startup'")
    _check_params(action, params, where)
    return Fault(
        id=fid,
        on=Match(method=method, tool=tool, nth=nth, transport=transport, every=every),
        action=action,
        times=times,
        params=params,
    )


#: the methods a fault can match: what the fake answers, "*" (any) and "$startup"
MATCHABLE_METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call", "*", STARTUP})


@cache
def known_tools() -> frozenset[str]:
    """Every tool name of the full and the light catalogue (a fault may target either)."""
    return frozenset(t["name"] for name in CATALOGUES for t in tool_catalogue(name)["tools"])


def _nearest(word: str, choices: Iterable[str]) -> str:
    import difflib  # only for a bad plan: not on every fake's start

    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_targets(fault: Fault, where: str) -> None:
    """A fault a person typed (``--fault``, a plan file, the control API) must be able to fire:
    its method is one the fake serves and its tool is in a catalogue. (A scenario's faults are
    checked by the scenario loader against the scenario's own catalogue, with JSON pointers.)"""
    method, tool = fault.on.method, fault.on.tool
    if method not in MATCHABLE_METHODS and not method.startswith("notifications/"):
        raise FaultPlanError(f"{where}: the fake serves no method {_shown(str(method))}"
                             f"{_nearest(method, MATCHABLE_METHODS)}; a fault on it would never "
                             f"fire (use one of {', '.join(sorted(MATCHABLE_METHODS))}, or a "
                             "notifications/... method)")
    if tool is not None and tool != "*" and tool not in known_tools():
        raise FaultPlanError(f"{where}: no tool {_shown(str(tool))} in mempalace 3.11.0's catalogue"
                             f"{_nearest(tool, known_tools())}; a fault on it would never fire")


def check_transport(fault: Fault, transport: str, where: str) -> None:
    """A fault typed for one fake must be able to fire on its transport."""
    if fault.on.transport not in (None, transport):
        raise FaultPlanError(f"{where}: 'on.transport' is {fault.on.transport}, but this fake "
                             f"serves {transport}; it would never fire")
    if transport not in ACTIONS[fault.action][0]:
        raise FaultPlanError(f"{where}: action {fault.action!r} fires only over "
                             f"{', '.join(sorted(ACTIONS[fault.action][0]))}, and this fake "
                             f"serves {transport}")


def _check_params(action: str, params: dict[str, Any], where: str) -> None:
    """Every parameter of one fault checked, in this order; the first problem is raised."""
    _check_numbers(action, params, where)
    _check_shapes(action, params, where)
    _check_http(action, params, where)


def _check_numbers(action: str, params: dict[str, Any], where: str) -> None:
    """Integers within their limits, exit codes, HTTP statuses, JSON-RPC error codes."""
    def need_int(name: str, minimum: int = 0) -> None:
        value = params.get(name)
        if value is None:
            return
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise FaultPlanError(f"{where}: {name!r} must be an integer >= {minimum}")
        ceiling = MAX_MS if name.endswith("ms") else MAX_COUNT
        if value > ceiling:
            raise FaultPlanError(f"{where}: {name!r} is over its limit {ceiling} "
                                 "(a fault that could never fire within a run)")

    for name in INTEGER_PARAMS:
        need_int(name, 1 if name == "chunk_bytes" else 0)  # a write of 0 bytes sends nothing
    if action in {"exit", "startup_fail", "partial_line"}:
        need_int("code")
        if isinstance(params.get("code"), int) and params["code"] > 255:
            raise FaultPlanError(f"{where}: 'code' is a process exit status, 0 to 255")
    if action == "http_status":
        status = params.get("status")
        if not isinstance(status, int) or not 100 <= status <= 599:
            raise FaultPlanError(f"{where}: http_status needs 'status' between 100 and 599")
    if action == "answer_status":
        status = params.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 200 <= status <= 399:
            raise FaultPlanError(f"{where}: answer_status needs 'status' between 200 and 399 "
                                 "(an error status is http_status)")
    code = params.get("code")
    if action == "error" and (not isinstance(code, int) or isinstance(code, bool)):
        # JSON Schema and every other language: a boolean is not an integer
        raise FaultPlanError(f"{where}: error needs an integer 'code' (e.g. -32001), "
                             f"not {json.dumps(code)}")


def _check_shapes(action: str, params: dict[str, Any], where: str) -> None:
    """Methods, versions, stderr pieces, the grandchild's flags, what follows a fault."""
    if action in {"server_request", "notify"} and not isinstance(params.get("method"), str):
        raise FaultPlanError(f"{where}: {action} needs a 'method' string")
    if action == "exit" and params.get("when", "before_reply") not in (
        "before_reply", "after_reply"
    ):
        raise FaultPlanError(f"{where}: exit 'when' must be before_reply or after_reply")
    if action in {"drip_progress"} and params.get("then", "reply") not in ("reply", "stall"):
        raise FaultPlanError(f"{where}: drip_progress 'then' must be reply or stall")
    if action == "retype_id" and params.get("then", "reply") not in ("reply", "stall"):
        raise FaultPlanError(f"{where}: retype_id 'then' must be reply or stall")
    if action == "negotiate_version" and not isinstance(params.get("version"), str):
        raise FaultPlanError(f"{where}: negotiate_version needs a 'version' string, "
                             "e.g. 2025-03-26")
    pieces = params.get("pieces")
    if action == "write_stderr" and not (isinstance(pieces, list) and pieces
                                         and all(isinstance(p, str) and p for p in pieces)):
        raise FaultPlanError(f"{where}: write_stderr needs 'pieces', a non-empty list of "
                             f"non-empty strings (written in order, e.g. [\"key=ab\", \"cd\\n\"]), "
                             f"not {json.dumps(pieces)}")
    if action == "flood_stderr" and not isinstance(params.get("invalid_utf8", False), bool):
        raise FaultPlanError(f"{where}: flood_stderr 'invalid_utf8' must be true or false")
    for flag in ("leave_group", "hold_pipes", "ignore_sigterm"):
        if action == "spawn_grandchild" and not isinstance(params.get(flag, False), bool):
            raise FaultPlanError(f"{where}: spawn_grandchild {flag!r} must be true or false")
    if action == "spawn_grandchild" and "last_words" in params and not (
            isinstance(params["last_words"], str) and params.get("leave_group") is True
            and params.get("hold_pipes") is True):
        raise FaultPlanError(f"{where}: spawn_grandchild 'last_words' is a string, and needs "
                             "leave_group: true and hold_pipes: true (who else could write it)")
    if action == "exit" and not isinstance(params.get("stderr", ""), str):
        raise FaultPlanError(f"{where}: exit 'stderr' must be a string (the last line written)")
    if action == "partial_line" and params.get("then", "exit") not in ("exit", "stall"):
        raise FaultPlanError(f"{where}: partial_line 'then' must be exit or stall")


def _check_http(action: str, params: dict[str, Any], where: str) -> None:
    """The SSE knobs and the rotated token."""
    decoy = params.get("decoy_event")
    if action == "sse" and decoy is not None and (
        not isinstance(decoy, str) or not re.fullmatch(SSE_EVENT_TYPE, decoy) or decoy == "message"
    ):
        raise FaultPlanError(f"{where}: sse 'decoy_event' must be an SSE event type other than "
                             f"message (a letter, then letters, digits, '_', '.', '-'), e.g. "
                             f"error, not {json.dumps(decoy)}")
    garbage = params.get("garbage_event")
    if action == "sse" and garbage is not None and (
            not isinstance(garbage, str) or not garbage.strip() or _is_json(garbage)):
        raise FaultPlanError(f"{where}: sse 'garbage_event' must be text that is not JSON "
                             f"(the data of a message event no parser can read), e.g. "
                             f"'{{not json', not {json.dumps(garbage)}")
    if action == "sse" and params.get("line_ending") not in (None, *SSE_LINE_ENDINGS):
        raise FaultPlanError(f"{where}: sse 'line_ending' must be lf, crlf, cr or mixed, not "
                             f"{json.dumps(params['line_ending'])}")
    for flag in ("unknown_fields", "no_retry", "invalid_utf8"):
        if action == "sse" and not isinstance(params.get(flag, False), (bool, type(None))):
            raise FaultPlanError(f"{where}: sse '{flag}' must be true or false")
    if action == "sse" and params.get("no_retry") is True and (
            params.get("priming_id") is None or params.get("retry_ms") is not None):
        raise FaultPlanError(f"{where}: sse 'no_retry' leaves the retry field out of the priming "
                             "event: it needs a 'priming_id' and no 'retry_ms'")
    resume = params.get("resume_status")
    if action == "sse" and resume is not None and (
            not isinstance(resume, int) or isinstance(resume, bool) or not 200 <= resume <= 599
            or resume in NO_BODY_STATUSES):
        raise FaultPlanError(f"{where}: sse 'resume_status' must be an HTTP status from 200 to "
                             f"599 that carries a body (not 204, 205 or 304): the resuming GET "
                             f"gets it with the replayed stream, not {json.dumps(resume)}")
    if action == "rotate_token" and not isinstance(params.get("token"), str):
        raise FaultPlanError(f"{where}: rotate_token needs a 'token' string")


def plan_from_json(data: Any, source: str = "fault plan") -> FaultPlan:
    if isinstance(data, list):
        data = {"schema_version": PLAN_SCHEMA_VERSION, "faults": data}
    if not isinstance(data, dict):
        raise FaultPlanError(f"{source}: expected an object with 'faults'")
    version = data.get("schema_version", PLAN_SCHEMA_VERSION)
    if not isinstance(version, int) or version > PLAN_SCHEMA_VERSION:
        raise FaultPlanError(
            f"{source}: schema_version {version!r} is newer than this fake understands "
            f"({PLAN_SCHEMA_VERSION}); upgrade palace-conformance"
        )
    faults = data.get("faults", [])
    if not isinstance(faults, list):
        raise FaultPlanError(f"{source}: 'faults' must be a list")
    plan = FaultPlan([fault_from_json(f, i) for i, f in enumerate(faults)])
    ids = [f.id for f in plan.faults]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise FaultPlanError(f"{source}: duplicate fault id(s) {dupes}; give each fault its own id")
    return plan


def load_plan(path: str | os.PathLike[str]) -> FaultPlan:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise FaultPlanError(f"cannot read fault plan {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FaultPlanError(
            f"fault plan {path} is not UTF-8 text; write the plan as JSON"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FaultPlanError(
            f"fault plan {path} is not JSON (line {exc.lineno}: {exc.msg})"
        ) from None
    plan = plan_from_json(data, source=f"fault plan {path}")
    for fault in plan.faults:
        check_targets(fault, f"fault plan {path} ({fault.id})")
    return plan


#: a count (``#NTH``, ``xTIMES``) is at most this many ASCII digits: no fault needs more, and a
#: longer one would reach ``int()``'s digit limit
_COUNT_DIGITS = 9


#: how much of a refused --fault spec an error line repeats (a 5000-character spec stays one line)
SHOWN_SPEC = 80
#: a fault's durations and sizes beyond which it could never fire within a run (a day, 2**31):
#: larger values are typos, and would overflow the fake's sleeps
MAX_MS = 86_400_000
MAX_COUNT = 2**31
#: the non-negative integer parameters: a duration (``*ms``) up to MAX_MS, else up to MAX_COUNT
INTEGER_PARAMS = ("ms", "interval_ms", "count", "bytes", "after_bytes", "after_ms",
                  "event_delay_ms", "keepalives", "lifetime_ms", "retry_ms", "stderr_bytes",
                  "chunk_bytes", "pause_ms")


def _shown(spec: str) -> str:
    """``spec`` as an error line quotes it: repr'd, cut to :data:`SHOWN_SPEC` characters."""
    return repr(spec if len(spec) <= SHOWN_SPEC else spec[:SHOWN_SPEC] + "…")


def _count(text: str) -> int | None:
    """``text`` as a count when it is 1 to :data:`_COUNT_DIGITS` ASCII digits, else None
    (``str.isdigit`` also says yes to ``'²'`` and an Arabic-Indic one)."""
    if text.isascii() and text.isdigit() and len(text) <= _COUNT_DIGITS:
        return int(text)
    return None


def _parse_value(text: str, key: str, spec: str) -> Any:
    """A ``key=value`` value: JSON when it parses, the text itself otherwise; JSON nested
    past the decoder's recursion limit, or a number past ``int()``'s digit limit, is refused."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
    except (RecursionError, ValueError):
        raise FaultPlanError(f"--fault {_shown(spec)}: the value of {key!r} is nested too "
                             "deeply or is too long a number; write a --plan file for that"
                             ) from None


def parse_compact(spec: str, index: int = 0) -> Fault:
    """Parse ``ACTION[@TARGET][#NTH][xTIMES][,every=N][,key=value...]`` into a :class:`Fault`."""
    head, _, rest = spec.partition(",")
    params: dict[str, Any] = {}
    if rest:
        # values may contain commas only when they come last (e.g. stderr text)
        parts = rest.split(",")
        key = None
        for part in parts:
            if "=" in part:
                raw_key, _, value = part.partition("=")
                key = raw_key.strip()
                params[key] = value
            elif key is not None:
                params[key] += "," + part
            else:
                raise FaultPlanError(
                    f"--fault {_shown(spec)}: expected key=value after ',', got {_shown(part)}"
                )
        params = {k: _parse_value(v, k, spec) for k, v in params.items()}
    times: int | None = None if EVERY in params else 1  # every=N: forever unless xTIMES
    if "x" in head.rsplit("#", 1)[-1] or ("#" not in head and "x" in head.rsplit("@", 1)[-1]):
        base, _, times_text = head.rpartition("x")
        if times_text == "*":
            times = None
        elif times_text.isdigit():
            counted = _count(times_text)
            if counted is None or counted < 1:
                raise FaultPlanError(f"--fault {_shown(spec)}: 'x' must be followed by a "
                                     "number >= 1 or '*' (forever)")
            times = counted
        else:
            base = head  # an 'x' that belongs to a name: times keeps its default
        if base != head:
            head = base
    nth = 1
    if "#" in head:
        head, _, nth_text = head.rpartition("#")
        counted = _count(nth_text)
        if counted is None or counted < 1:
            raise FaultPlanError(f"--fault {_shown(spec)}: '#' must be followed by a number >= 1")
        nth = counted
    action, _, target = head.partition("@")
    on: dict[str, Any] = {"nth": nth}
    if EVERY in params:
        on["every"] = params.pop(EVERY)
    if target.startswith("mempalace_"):
        on["method"] = "tools/call"
        on["tool"] = target
    elif target:
        on["method"] = target
    data: dict[str, Any] = {
        **{k: v for k, v in params.items() if k not in RESERVED},
        "id": f"cli-{index + 1}-{action}",
        "on": on,
        "times": times,
        "action": action,
    }
    reserved = sorted(RESERVED & set(params))
    if reserved:
        raise FaultPlanError(f"--fault {_shown(spec)}: {', '.join(reserved)} cannot be set with "
                             "key=value; write a --plan file for that")
    fault = fault_from_json(data, index, where=f"--fault {_shown(spec)}")
    check_targets(fault, f"--fault {_shown(spec)}")
    return fault
