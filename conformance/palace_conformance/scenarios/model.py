"""Typed view of a scenario file, built only after the file passed the schema and semantic checks.

A runner works with these objects instead of raw dicts, so that every default the format defines
(``parity`` true, ``settle`` 200/5000 ms, ``order`` after the first record...) lives in one place.
Matchers stay plain JSON data: :mod:`.matching` evaluates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palace_conformance.fake.faults import FaultPlan, plan_from_json

SCHEMA_VERSION = 1
#: scenario areas: the lower-cased behaviour areas of BEHAVIOURS.md
AREAS = ("life", "tool", "stdio", "http", "wake", "feed", "diary", "prov", "mail", "knob", "fake")
PLACEHOLDERS = ("FAKE_URL", "FAKE_TOKEN", "TMP")
#: ops the host performs (driver requests); the others (sleep, server, set_env, rpc, http) the
#: runner does
HOST_OPS = frozenset({"load", "event", "call_tool", "call_tools", "command", "settle", "shutdown",
                      "reload", "exit", "cli"})


@dataclass(frozen=True)
class Bounds:
    """A count: ``equals``, or ``at_least`` and/or ``at_most``."""

    equals: int | None = None
    at_least: int | None = None
    at_most: int | None = None

    @classmethod
    def from_json(cls, data: Any) -> Bounds:
        if isinstance(data, int):
            return cls(equals=data)
        return cls(data.get("equals"), data.get("at_least"), data.get("at_most"))

    def admits(self, count: int) -> bool:
        if self.equals is not None:
            return count == self.equals
        low = self.at_least if self.at_least is not None else 0
        return count >= low and (self.at_most is None or count <= self.at_most)

    def describe(self) -> str:
        if self.equals is not None:
            return f"exactly {self.equals}"
        parts = []
        if self.at_least is not None:
            parts.append(f"at least {self.at_least}")
        if self.at_most is not None:
            parts.append(f"at most {self.at_most}")
        return " and ".join(parts)


@dataclass(frozen=True)
class Timing:
    """A duration: a lower bound plus a declared slack (upper bound ``at_least + slack_ms``).

    ``slack_factor`` (``run --slack-factor``) widens only the declared slack, for a slow machine:
    the lower bound is the behaviour's own number and never moves.
    """

    at_least: int
    slack_ms: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Timing:
        return cls(int(data["at_least"]), data.get("slack_ms"))

    @property
    def at_most(self) -> int | None:
        return self.upper(1.0)

    def upper(self, slack_factor: float = 1.0, allowance_ms: int = 0,
              late_ms: int = 0) -> int | None:
        """The upper bound with the slack multiplied by ``slack_factor``, plus the server's own
        ``allowance_ms`` (a real server's stop) and the machine's measured ``late_ms`` (the
        run's timer probe, runner/execution/lateness.py); None: unbounded."""
        if self.slack_ms is None:
            return None
        return self.at_least + round(self.slack_ms * slack_factor) + allowance_ms + late_ms

    def admits(self, ms: float, slack_factor: float = 1.0, allowance_ms: int = 0,
               late_ms: int = 0) -> bool:
        upper = self.upper(slack_factor, allowance_ms, late_ms)
        return ms >= self.at_least and (upper is None or ms <= upper)

    def describe(self, slack_factor: float = 1.0, allowance_ms: int = 0,
                 late_ms: int = 0, allowance: str = "the server's stop") -> str:
        """The bounds in words; ``allowance`` names what ``allowance_ms`` is the server's."""
        upper = self.upper(slack_factor, allowance_ms, late_ms)
        if upper is None:
            return f">= {self.at_least} ms"
        server = f" + {allowance_ms} {allowance}" if allowance_ms else ""
        if late_ms:
            server += f" + {late_ms} machine lateness"
        if slack_factor == 1.0:
            return f"{self.at_least}..{upper} ms ({self.at_least} + {self.slack_ms} slack{server})"
        return (f"{self.at_least}..{upper} ms ({self.at_least} + {self.slack_ms} slack "
                f"x {slack_factor:g}{server})")


@dataclass(frozen=True)
class Check:
    """One assertion over a stream of records (journal or effects); see :mod:`.checks`."""

    kind: str  # sequence | count | absent | order | distinct | gap
    raw: Mapping[str, Any]
    transport: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Check:
        return cls(kind=data["check"], raw=data, transport=data.get("transport"))

    @property
    def bounds(self) -> Bounds:
        return Bounds.from_json(self.raw)

    def applies_to(self, transport: str) -> bool:
        return self.transport is None or self.transport == transport


def _checks(data: Any) -> tuple[Check, ...]:
    return tuple(Check.from_json(c) for c in data or ())


@dataclass(frozen=True)
class ToolsExpect:
    registered: str | tuple[str, ...] | None = None  # "catalogue" | "none" | names
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    schemas: str | None = None
    order: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ToolsExpect | None:
        if data is None:
            return None
        registered = data.get("registered")
        return cls(registered=tuple(registered) if isinstance(registered, list) else registered,
                   includes=tuple(data.get("includes", ())),
                   excludes=tuple(data.get("excludes", ())),
                   schemas=data.get("schemas"), order=data.get("order"))


@dataclass(frozen=True)
class ErrorExpect:
    kind: str | None = None
    code: int | None = None
    message_contains: tuple[str, ...] = ()
    data: Any = None
    has_data: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ErrorExpect | None:
        if data is None:
            return None
        contains = data.get("message_contains", ())
        return cls(kind=data.get("kind"), code=data.get("code"),
                   message_contains=(contains,) if isinstance(contains, str) else tuple(contains),
                   data=data.get("data"), has_data="data" in data)


@dataclass(frozen=True)
class StepExpect:
    ok: bool | None = None
    error: ErrorExpect | None = None
    result: Any = None
    has_result: bool = False
    effects: tuple[Check, ...] = ()
    journal: tuple[Check, ...] = ()
    tools: ToolsExpect | None = None
    elapsed_ms: Timing | None = None
    #: a ``call_tools`` step: one expectation per call (``ok``, ``error``, ``result``), in order
    calls: tuple[StepExpect, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> StepExpect | None:
        if data is None:
            return None
        error = ErrorExpect.from_json(data.get("error"))
        ok = data.get("ok")
        if ok is None and error is not None:
            ok = False  # an expected error implies the op failed
        timing = data.get("elapsed_ms")
        calls = tuple(cls.from_json(call) or cls() for call in data.get("calls") or ())
        return cls(ok=ok, error=error, result=data.get("result"), has_result="result" in data,
                   effects=_checks(data.get("effects")), journal=_checks(data.get("journal")),
                   tools=ToolsExpect.from_json(data.get("tools")),
                   elapsed_ms=Timing.from_json(timing) if timing else None, calls=calls)


@dataclass(frozen=True)
class Step:
    """One driver operation. ``params`` holds the op's own fields (name, args, payload, ...)."""

    index: int
    op: str
    params: Mapping[str, Any]
    label: str | None = None
    transport: str | None = None
    expect: StepExpect | None = None
    timeout_ms: int | None = None

    _COMMON = frozenset({"op", "as", "transport", "expect", "timeout_ms", "comment"})

    @classmethod
    def from_json(cls, index: int, data: Mapping[str, Any]) -> Step:
        params = {k: v for k, v in data.items() if k not in cls._COMMON}
        return cls(index=index, op=data["op"], params=params, label=data.get("as"),
                   transport=data.get("transport"),
                   expect=StepExpect.from_json(data.get("expect")),
                   timeout_ms=data.get("timeout_ms"))

    @property
    def key(self) -> str:
        """The step's name in reports and parity pointers: its label, else its index."""
        return self.label if self.label is not None else str(self.index)

    def applies_to(self, transport: str) -> bool:
        return self.transport is None or self.transport == transport

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools this step calls: a ``call_tool``'s one, each call of a ``call_tools``."""
        if self.op == "call_tool":
            name = self.params.get("name")
            return (name,) if isinstance(name, str) else ()
        if self.op == "call_tools":
            return tuple(call["name"] for call in self.params.get("calls", ())
                         if isinstance(call, Mapping) and isinstance(call.get("name"), str))
        return ()

    @property
    def host_op(self) -> bool:
        """Whether the host performs this step (else the runner does: sleep, server, ...)."""
        return self.op in HOST_OPS

    def driver_request(self) -> dict[str, Any]:
        """The driver request for a host op (without ``id``), the format's defaults filled in."""
        request: dict[str, Any] = {"op": self.op, **self.params}
        if self.op == "settle":
            request.setdefault("quiet_ms", 200)
            request.setdefault("max_ms", 5000)
        elif self.op == "shutdown":
            request.setdefault("reason", "quit")
        elif self.op == "call_tool":
            request.setdefault("args", {})
        elif self.op == "call_tools":
            request["calls"] = [{"args": {}, **call} for call in request.get("calls", ())]
        elif self.op == "command":
            request.setdefault("args", "")
        elif self.op == "event":
            request.setdefault("payload", {})
        if self.timeout_ms is not None:
            request["timeout_ms"] = self.timeout_ms
        return request


@dataclass(frozen=True)
class HttpOptions:
    sessions: bool = False
    token: str | None = None


@dataclass(frozen=True)
class Parity:
    enabled: bool = True
    ignore: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: Any) -> Parity:
        if isinstance(data, bool):
            return cls(enabled=data)
        if isinstance(data, dict):
            return cls(enabled=True, ignore=tuple(data.get("ignore", ())))
        return cls()


@dataclass(frozen=True)
class Palace:
    diary: tuple[Mapping[str, Any], ...] = ()
    drawers: tuple[Mapping[str, Any], ...] = ()
    events: tuple[Mapping[str, Any], ...] = ()
    lock_held: bool = False
    installed: bool = True  # false: no shims on PATH, no fake package on PYTHONPATH
    fresh: bool = False  # state "fresh": no chroma database until the first vector write
    #: with installed false: ${TMP}/bin/mempalace-mcp is an executable file exec refuses
    #: ("missing-interpreter": its #! names none; "not-a-program": no #!, no binary)
    unrunnable: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Palace:
        data = data or {}
        return cls(diary=tuple(data.get("diary", ())), drawers=tuple(data.get("drawers", ())),
                   events=tuple(data.get("events", ())),
                   lock_held=bool(data.get("lock", {}).get("held", False)),
                   installed=bool(data.get("installed", True)),
                   fresh=data.get("state", "initialised") == "fresh",
                   unrunnable=data.get("unrunnable"))

    @property
    def empty(self) -> bool:
        return not (self.diary or self.drawers or self.events)


@dataclass(frozen=True)
class FeedHelper:
    """How the runner's ``mempalace-pi-session`` stand-in behaves."""

    mine_source: str | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    delay_ms: int = 0
    exit_code: int = 0
    stdout_before: tuple[str, ...] = ()
    stdout_after: tuple[str, ...] = ()
    kill_signal: str | None = None
    #: ``fork``: a child of the helper's own (``child_ms``, ``hold_stdout``), or None
    fork: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> FeedHelper:
        data = data or {}
        return cls(mine_source=data.get("mine_source"), files=dict(data.get("files", {})),
                   delay_ms=data.get("delay_ms", 0), exit_code=data.get("exit_code", 0),
                   stdout_before=tuple(data.get("stdout_before", ())),
                   stdout_after=tuple(data.get("stdout_after", ())),
                   kill_signal=data.get("kill_signal"),
                   fork=dict(data["fork"]) if isinstance(data.get("fork"), Mapping) else None)

    def to_config(self) -> dict[str, Any]:
        """What the runner's stand-in reads (``standins.scripted.run_feed``)."""
        return {"mine_source": self.mine_source, "files": dict(self.files),
                "delay_ms": self.delay_ms, "exit_code": self.exit_code,
                "stdout_before": list(self.stdout_before),
                "stdout_after": list(self.stdout_after), "kill_signal": self.kill_signal,
                **({"fork": dict(self.fork)} if self.fork is not None else {})}


@dataclass(frozen=True)
class ProcessesExpect:
    spawned: Bounds | None = None
    signals: Mapping[str, Bounds] = field(default_factory=dict)
    alive_after_shutdown: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ProcessesExpect | None:
        if data is None:
            return None
        spawned = data.get("spawned")
        return cls(spawned=Bounds.from_json(spawned) if spawned is not None else None,
                   signals={k: Bounds.from_json(v) for k, v in data.get("signals", {}).items()},
                   alive_after_shutdown=data.get("alive_after_shutdown"))


@dataclass(frozen=True)
class ScenarioExpect:
    journal: tuple[Check, ...] = ()
    effects: tuple[Check, ...] = ()
    tools: ToolsExpect | None = None
    processes: ProcessesExpect | None = None
    wire_secrets: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ScenarioExpect:
        data = data or {}
        return cls(journal=_checks(data.get("journal")), effects=_checks(data.get("effects")),
                   tools=ToolsExpect.from_json(data.get("tools")),
                   processes=ProcessesExpect.from_json(data.get("processes")),
                   wire_secrets=tuple(data.get("wire_secrets", ())))


@dataclass(frozen=True)
class Scenario:
    """One scenario file, typed. ``raw`` keeps the JSON as read (for placeholders and reports)."""

    path: Path
    id: str
    title: str
    covers: tuple[str, ...]
    transports: tuple[str, ...]
    steps: tuple[Step, ...]
    description: str = ""
    subject: str = "bridge"
    http: HttpOptions = field(default_factory=HttpOptions)
    requires: tuple[str, ...] = ()
    parity: Parity = field(default_factory=Parity)
    env: Mapping[str, str | None] = field(default_factory=dict)
    #: names in ``env`` that only set the pace (``env_pace``); the others are essential
    env_pace: frozenset[str] = frozenset()
    palace: Palace = field(default_factory=Palace)
    feed_helper: FeedHelper = field(default_factory=FeedHelper)
    faults: FaultPlan = field(default_factory=FaultPlan)
    expect: ScenarioExpect = field(default_factory=ScenarioExpect)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]

    @classmethod
    def from_json(cls, data: Mapping[str, Any], path: Path) -> Scenario:
        http = data.get("http") or {}
        return cls(
            path=path, id=data["id"], title=data["title"], covers=tuple(data["covers"]),
            transports=tuple(data["transports"]),
            steps=tuple(Step.from_json(i, s) for i, s in enumerate(data["steps"])),
            description=data.get("description", ""), subject=data.get("subject", "bridge"),
            http=HttpOptions(sessions=bool(http.get("sessions", False)), token=http.get("token")),
            requires=tuple(data.get("requires", ())),
            parity=Parity.from_json(data.get("parity", True)),
            env=dict(data.get("env", {})),
            env_pace=frozenset(data.get("env_pace", ())),
            palace=Palace.from_json(data.get("palace")),
            feed_helper=FeedHelper.from_json((data.get("helpers") or {}).get("feed")),
            faults=plan_from_json(list(data.get("faults", [])), source=f"scenario {data['id']}"),
            expect=ScenarioExpect.from_json(data.get("expect")),
            raw=data,
        )

    def steps_for(self, transport: str) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.applies_to(transport))

    def summary(self) -> dict[str, Any]:
        """The listing entry (``fixtures list --json``)."""
        return {"id": self.id, "area": self.area, "title": self.title, "covers": list(self.covers),
                "transports": list(self.transports), "requires": list(self.requires),
                "subject": self.subject, "path": str(self.path)}
