"""The typed result model: RunResult -> ScenarioResult per (scenario, transport) -> CheckRecord.

Every report (console table, JSON, JUnit, later Markdown/HTML, repro bundles, baselines) is built
from these objects only, so they hold everything a reader needs to act: which expectation failed,
where it is written in the scenario file (a JSON pointer), what was expected and what was seen,
and the behaviour IDs at stake. ``to_json()`` gives plain JSON data; ``from_json`` reads it back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from palace_conformance.contract import CAPABILITIES_PLACEHOLDER
from palace_conformance.redaction import redact_env as redact_env  # re-exported for the runner

CheckStatus = Literal["pass", "fail"]
ScenarioStatus = Literal["passed", "failed", "not_testable", "not_applicable"]

PASS: CheckStatus = "pass"
FAIL: CheckStatus = "fail"
PASSED: ScenarioStatus = "passed"
FAILED: ScenarioStatus = "failed"
NOT_TESTABLE: ScenarioStatus = "not_testable"
NOT_APPLICABLE: ScenarioStatus = "not_applicable"
#: statuses that make a run red (unless a baseline expects them)
FAILURE_STATUSES: frozenset[str] = frozenset({FAILED, NOT_TESTABLE})
#: a failed or not testable result the baseline expects: counted apart, never blocking
KNOWN_FAILURE = "known_failure"
#: the pseudo-transport of a scenario's cross-transport comparison
PARITY = "parity"
#: conformance levels (``verdict.levels``): a run is judged at core or seed; fake is the fake's own
CORE, SEED, FAKE = "core", "seed", "fake"
_LEVEL_RANK = {CORE: 0, SEED: 1}



@dataclass(frozen=True)
class CheckRecord:
    """One judged expectation.

    ``pointer`` is where the expectation is written in the scenario file (``/steps/3/expect/error/
    kind``, ``/expect/journal/0``); a few records judge things the file implies rather than states:
    ``/steps/N`` (the op itself completed), ``/setup`` (prerequisites) and ``/parity``.
    """

    scenario: str
    transport: str
    pointer: str
    status: CheckStatus
    message: str
    step: str | None = None
    covers: tuple[str, ...] = ()
    expected: Any = None
    got: Any = None
    level: str = SEED  # core, seed or fake: which runs count it (``counts_at``)

    @property
    def id(self) -> str:
        """Stable across runs: ``<scenario>[<transport>]<pointer>``."""
        return f"{self.scenario}[{self.transport}]{self.pointer}"

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "scenario": self.scenario,
                                "transport": self.transport, "pointer": self.pointer,
                                "step": self.step, "status": self.status,
                                "message": self.message, "covers": list(self.covers),
                                "level": self.level}
        if self.expected is not None:
            data["expected"] = self.expected
        if self.got is not None:
            data["got"] = self.got
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CheckRecord:
        return cls(scenario=data["scenario"], transport=data["transport"],
                   pointer=data["pointer"], status=data["status"], message=data["message"],
                   step=data.get("step"), covers=tuple(data.get("covers", ())),
                   expected=data.get("expected"), got=data.get("got"),
                   level=data.get("level", SEED))


@dataclass
class StepRecord:
    """What one step did: the request sent, the reply, its effects and duration.

    ``ran`` is false for a step that never ran (the host died earlier); ``failure`` names a
    host-level failure (deadline, crash, protocol violation) that cut the step short.
    """

    index: int
    key: str
    op: str
    ran: bool = False
    request: dict[str, Any] = field(default_factory=dict)
    ok: bool | None = None
    result: Any = None
    error: dict[str, Any] | None = None
    effects: list[dict[str, Any]] = field(default_factory=list)
    elapsed_ms: float | None = None
    host_ms: float | None = None
    journal_start: int = 0  # index of the first journal record written while the step ran
    journal_end: int = 0  # index past the last one
    failure: str | None = None
    ended_by: str | None = None  # a settle: expectations | quiet | max_ms | error
    #: when the runner began and finished the step (monotonic s, the journal's clock): the
    #: window whose measured machine lateness an ``elapsed_ms`` upper bound gets; the run's
    #: own, not written to results.json (the verdict's text names the allowance it got)
    window: tuple[float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "key": self.key, "op": self.op, "ran": self.ran,
                "request": self.request, "ok": self.ok, "result": self.result,
                "error": self.error, "effects": self.effects, "elapsed_ms": self.elapsed_ms,
                "host_ms": self.host_ms, "journal": [self.journal_start, self.journal_end],
                "failure": self.failure, "ended_by": self.ended_by}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepRecord:
        journal = data.get("journal") or [0, 0]
        return cls(index=data["index"], key=data["key"], op=data["op"], ran=data["ran"],
                   request=dict(data.get("request") or {}), ok=data.get("ok"),
                   result=data.get("result"), error=data.get("error"),
                   effects=list(data.get("effects") or ()), elapsed_ms=data.get("elapsed_ms"),
                   host_ms=data.get("host_ms"), journal_start=journal[0], journal_end=journal[1],
                   failure=data.get("failure"), ended_by=data.get("ended_by"))


@dataclass(frozen=True)
class BaselineMark:
    """A baseline's verdict on one result: this failure is known (``expected: "fail"``)."""

    expected: str = "fail"
    reason: str = ""
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"expected": self.expected, "reason": self.reason, "source": self.source}


@dataclass
class ScenarioResult:
    """One scenario on one transport (or ``transport == "parity"``: the comparison of both)."""

    scenario: str
    transport: str
    status: ScenarioStatus
    title: str = ""
    covers: tuple[str, ...] = ()
    path: str = ""
    reason: str = ""  # why not_testable / not_applicable, or the first failure in one line
    checks: list[CheckRecord] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    duration_ms: float = 0.0
    host_stderr: str = ""
    env: dict[str, str | None] = field(default_factory=dict)  # redacted bridge environment
    outcome: dict[str, Any] | None = None  # the normalised outcome (parity, snapshots)
    artifacts: str | None = None  # directory with journal, stderr, result (when kept)
    baseline: BaselineMark | None = None
    level: str = SEED  # the level it was judged at: failures are the checks that count there
    subject: str = "bridge"  # "fake": one of the fake's self-tests, never the bridge's result
    journal: list[dict[str, Any]] = field(default_factory=list, repr=False)  # not serialised

    @property
    def failures(self) -> list[CheckRecord]:
        return [c for c in self.checks if not c.passed and counts_at(c.level, self.level)]

    @property
    def beyond_level(self) -> list[CheckRecord]:
        """Failed checks that do not count at this level (seed conventions in a core run)."""
        return [c for c in self.checks if not c.passed and not counts_at(c.level, self.level)]

    @property
    def blocking(self) -> bool:
        """Whether this result makes the run red: a failure no baseline expects."""
        return self.status in FAILURE_STATUSES and self.baseline is None

    @property
    def effects(self) -> list[dict[str, Any]]:
        return [effect for step in self.steps for effect in step.effects]

    def to_json(self, *, journal: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "scenario": self.scenario, "transport": self.transport, "status": self.status,
            "title": self.title, "covers": list(self.covers), "path": self.path,
            "reason": self.reason, "duration_ms": round(self.duration_ms, 1),
            "checks": [c.to_json() for c in self.checks],
            "steps": [s.to_json() for s in self.steps], "host_stderr": self.host_stderr,
            "env": self.env, "outcome": self.outcome, "artifacts": self.artifacts,
            "baseline": self.baseline.to_json() if self.baseline else None,
            "level": self.level, "subject": self.subject,
        }
        if journal:
            data["journal"] = self.journal
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScenarioResult:
        mark = data.get("baseline")
        return cls(scenario=data["scenario"], transport=data["transport"], status=data["status"],
                   title=data.get("title", ""), covers=tuple(data.get("covers", ())),
                   path=data.get("path", ""), reason=data.get("reason", ""),
                   checks=[CheckRecord.from_json(c) for c in data.get("checks", ())],
                   steps=[StepRecord.from_json(s) for s in data.get("steps", ())],
                   duration_ms=data.get("duration_ms", 0.0),
                   host_stderr=data.get("host_stderr", ""), env=dict(data.get("env") or {}),
                   outcome=data.get("outcome"), artifacts=data.get("artifacts"),
                   baseline=BaselineMark(**mark) if mark else None,
                   level=data.get("level", SEED), subject=data.get("subject", "bridge"),
                   journal=list(data.get("journal") or ()))


#: where the judged capabilities came from (``HostInfo.capabilities_source``)
FROM_HOST = "host"  # the host declared them and knows its bridge (authoritative)
FROM_DEFAULT = CAPABILITIES_PLACEHOLDER  # the host declared a placeholder list
FROM_PROFILE = "profile"  # the profile's ``claims.capabilities``
FROM_OBSERVATION = "observation"  # detected by watching the bridge (runner/profiling/detect.py)


@dataclass
class HostInfo:
    """The host's ``hello`` answer and how it was started; ``capabilities`` are the ones judged,
    ``capabilities_note`` the one line reports print about where they came from."""

    argv: list[str] = field(default_factory=list)
    protocol: int | None = None
    impl: str = ""
    bridge: str = ""
    runtime: str = ""
    capabilities: tuple[str, ...] = ()
    capabilities_source: str = FROM_HOST
    capabilities_note: str = ""

    @classmethod
    def from_hello(cls, argv: Sequence[str], result: Mapping[str, Any]) -> HostInfo:
        caps = result.get("capabilities") or ()
        source = FROM_DEFAULT if result.get("capabilities_source") == FROM_DEFAULT else FROM_HOST
        return cls(argv=list(argv), protocol=result.get("protocol"),
                   impl=str(result.get("impl", "")), bridge=str(result.get("bridge", "")),
                   runtime=str(result.get("runtime", "")),
                   capabilities=tuple(str(c) for c in caps if isinstance(c, str)),
                   capabilities_source=source)

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "argv": self.argv, "protocol": self.protocol, "impl": self.impl,
            "bridge": self.bridge, "runtime": self.runtime,
            "capabilities": list(self.capabilities),
            "capabilities_source": self.capabilities_source}
        if self.capabilities_note:
            found["capabilities_note"] = self.capabilities_note
        return found

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostInfo:
        return cls(argv=list(data.get("argv", ())), protocol=data.get("protocol"),
                   impl=data.get("impl", ""), bridge=data.get("bridge", ""),
                   runtime=data.get("runtime", ""),
                   capabilities=tuple(data.get("capabilities", ())),
                   capabilities_source=str(data.get("capabilities_source", FROM_HOST)),
                   capabilities_note=str(data.get("capabilities_note", "")))


RESULT_FORMAT = 1


@dataclass
class RunResult:
    """A whole ``palace-conformance run``: the host, every scenario result, the baseline verdict."""

    host: HostInfo = field(default_factory=HostInfo)
    results: list[ScenarioResult] = field(default_factory=list)
    started_at: str = ""
    duration_ms: float = 0.0
    stale_baseline: list[str] = field(default_factory=list)  # entries that no longer fail
    level: str = SEED  # judged at core (what any bridge must do) or seed (its conventions too)
    #: (scenario, transport) runs planned but never started (``run -x`` stopped after a failure)
    not_run: list[tuple[str, str]] = field(default_factory=list)
    #: (scenario, transport, seconds) set aside as *not run: too slow*: the bridge's own pace
    #: (``execution/pace.py``) would add that much, over ``run --max-scenario-seconds``
    too_slow: list[tuple[str, str, float]] = field(default_factory=list)
    bridge: str = ""  # the ``--bridge`` spec it ran against (how ``merge`` tells runs apart)
    shard: str = ""  # ``K/N`` when the run was one shard of a split catalogue (``run --shard``)
    slack_factor: float = 1.0  # ``run --slack-factor``: every declared slack was multiplied by it
    server: str = "fake"  # the palace behind the bridge (``run --server``)
    #: ``run --server real``: the real server's start as measured at the run's beginning, the
    #: allowance of the bounds that include a palace start (``real/start_time.py``); "" otherwise
    server_start: str = ""
    #: the profile it was judged with (``run --profile``): ``name``, ``path`` and ``offered``
    #: (the catalogue tools its ``tools.map`` offers, sorted; None without a map), so ``diff
    #: --from`` compares a saved run as the profile did; None: no profile
    profile: dict[str, Any] | None = None
    #: the bridge's own start-up words and the next step, when its palace tools were missing or
    #: a transport was never reached (``verdict/startup.py``); "" otherwise
    start_note: str = ""
    #: the run's timer probe (``execution/lateness.py``): how late the machine woke a sleeper
    #: (``samples``, ``p50_ms``, ``p95_ms``, ``max_ms``), whose worst in a gap's window, times
    #: ``wakeups``, that gap's upper bound got; None when no probe ran
    lateness: dict[str, Any] | None = None

    def counts(self, subject: str = "bridge") -> dict[str, int]:
        """Statuses of the bridge's results (``subject="fake"``: of the fake's self-tests); a
        failure the baseline expects is a ``known_failure``, not ``failed`` nor ``not_testable``,
        so the five add up to the results (docs/runner.md, "Counting")."""
        counts = {PASSED: 0, FAILED: 0, KNOWN_FAILURE: 0, NOT_TESTABLE: 0, NOT_APPLICABLE: 0}
        for result in self.results:
            if result.subject != subject:
                continue
            if result.status in FAILURE_STATUSES and result.baseline is not None:
                counts[KNOWN_FAILURE] += 1
            else:
                counts[result.status] += 1
        return counts

    @property
    def ok(self) -> bool:
        """Green: nothing failed that a baseline does not expect, no stale baseline entry, every
        planned run ran (a run not started is never a pass), and something was judged."""
        return (not any(r.blocking for r in self.results) and not self.stale_baseline
                and not self.not_run and not self.too_slow and not self.nothing_judged)

    @property
    def nothing_judged(self) -> bool:
        """The bridge had results, and not one verdict among them (every one not applicable or
        not testable): a gate that judged nothing is never green."""
        bridge = [r for r in self.results if r.subject != "fake"]
        return bool(bridge) and not any(r.status in (PASSED, FAILED) for r in bridge)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def failed(self) -> list[ScenarioResult]:
        return [r for r in self.results if r.blocking]

    def by_id(self, scenario: str, transport: str) -> ScenarioResult | None:
        return next((r for r in self.results
                     if r.scenario == scenario and r.transport == transport), None)

    def to_json(self, *, journal: bool = False) -> dict[str, Any]:
        return {"format": RESULT_FORMAT, "host": self.host.to_json(),
                "started_at": self.started_at, "duration_ms": round(self.duration_ms, 1),
                "level": self.level, "ok": self.ok, "counts": self.counts(),
                "fake_counts": self.counts("fake"), "stale_baseline": self.stale_baseline,
                "not_run": [{"scenario": s, "transport": t} for s, t in self.not_run],
                "too_slow": [{"scenario": s, "transport": t, "seconds": seconds}
                             for s, t, seconds in self.too_slow],
                "bridge": self.bridge, "shard": self.shard, "slack_factor": self.slack_factor,
                "server": self.server, "server_start": self.server_start,
                "profile": self.profile, "start_note": self.start_note,
                "lateness": self.lateness,
                "results": [r.to_json(journal=journal) for r in self.results]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunResult:
        return cls(host=HostInfo.from_json(data.get("host") or {}),
                   results=[ScenarioResult.from_json(r) for r in data.get("results", ())],
                   started_at=data.get("started_at", ""),
                   duration_ms=data.get("duration_ms", 0.0),
                   stale_baseline=list(data.get("stale_baseline", ())),
                   level=data.get("level", SEED),
                   not_run=[(n["scenario"], n["transport"]) for n in data.get("not_run", ())],
                   too_slow=[(n["scenario"], n["transport"], float(n["seconds"]))
                             for n in data.get("too_slow", ())],
                   bridge=str(data.get("bridge") or ""), shard=str(data.get("shard") or ""),
                   slack_factor=float(data.get("slack_factor", 1.0)),
                   server=str(data.get("server") or "fake"),
                   server_start=str(data.get("server_start") or ""),
                   profile=_profile_record(data.get("profile")),
                   start_note=str(data.get("start_note") or ""),
                   lateness=data.get("lateness"))


def _profile_record(value: Any) -> dict[str, Any] | None:
    """A saved run's profile record, kept only in the shape a run writes (untrusted input)."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    offered = value.get("offered")
    tools = ([t for t in offered if isinstance(t, str)] if isinstance(offered, list) else None)
    return {"name": value["name"], "path": str(value.get("path") or ""), "offered": tools}


def counts_at(check_level: str, run_level: str) -> bool:
    """Whether a check of ``check_level`` counts in a run judged at ``run_level``: core checks
    always, seed checks only at seed, the fake's own checks always."""
    return check_level == FAKE or _LEVEL_RANK.get(check_level, 1) <= _LEVEL_RANK[run_level]


def scenario_status(checks: Iterable[CheckRecord], level: str = SEED) -> ScenarioStatus:
    return FAILED if any(not c.passed and counts_at(c.level, level) for c in checks) else PASSED
