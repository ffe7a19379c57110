"""``palace-conformance selftest``: every mutant of the reference bridge must be killed.

Each mutant (:mod:`.mutants`) is the real ``palace_bridge`` with one rule broken, patched inside
the reference host's process. It runs against the scenarios covering the behaviours it breaks
(``--full``: every scenario); it is *killed* when at least one of those runs fails a check. The
unmutated reference runs the same selection as a sanity run: a kill only counts on a run that
passes unmutated, otherwise the "kill" might be a broken scenario. Exit 0 only when every mutant
is killed and the sanity run is green; a surviving mutant means a behaviour the suite cannot
catch, which is exactly what this command exists to find.

The command line lives in :mod:`.selftest_command`; this module is the engine and its reports.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..hosts import REFERENCE_HOST
from .mutants import Mutant
from .results import FAILED, NOT_TESTABLE, PARITY, PASSED, ScenarioResult

if TYPE_CHECKING:
    from ..scenarios.model import Scenario

SELFTEST_FORMAT = 1
DEFAULT_JOBS = 4
DEFAULT_OP_TIMEOUT_MS = 15000  # the runner's default (runner.commands), not imported: light
KILLED, SURVIVED, NOT_RUN = "killed", "survived", "not_run"
Job = tuple["Scenario", str]


@dataclass(frozen=True)
class SelftestOptions:
    jobs: int = DEFAULT_JOBS
    full: bool = False  # every bridge scenario for every mutant instead of its selection
    op_timeout_ms: int = DEFAULT_OP_TIMEOUT_MS
    work_root: Path | None = None
    host_argv: tuple[str, ...] = REFERENCE_HOST


def mutant_argv(mutant: Mutant, host_argv: Sequence[str] = REFERENCE_HOST) -> tuple[str, ...]:
    """The reference host started with ``--mutant NAME`` (applied before ``activate``)."""
    return (*host_argv, "--mutant", mutant.name)


def selection(mutant: Mutant, scenarios: Iterable[Scenario], full: bool = False) -> list[Job]:
    """The (scenario, transport) runs that should kill ``mutant``: every bridge scenario covering
    one of its behaviours, plus its ``also`` list (``full``: every bridge scenario)."""
    chosen = []
    for scenario in scenarios:
        if scenario.subject != "bridge":
            continue  # a mutant of the bridge cannot change what the fake does on its own
        if full or set(scenario.covers) & set(mutant.breaks) or scenario.id in mutant.also:
            chosen.extend((scenario, t) for t in scenario.transports)
    return chosen


def _runs(results: Iterable[ScenarioResult]) -> int:
    return sum(1 for r in results if r.transport != PARITY)


def _key(result: ScenarioResult) -> str:
    return f"{result.scenario}[{result.transport}]"


@dataclass(frozen=True)
class Kill:
    """One run that killed a mutant, with its first failing check."""

    scenario: str
    transport: str
    pointer: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "transport": self.transport,
                "check": f"{self.scenario}[{self.transport}]{self.pointer}",
                "pointer": self.pointer, "message": self.message}


@dataclass
class MutantOutcome:
    """What the selection did to one mutant; ``sanity`` maps run keys to the unmutated status."""

    mutant: Mutant
    results: list[ScenarioResult] = field(default_factory=list)
    sanity: dict[str, str] = field(default_factory=dict)
    duration_ms: float = 0.0

    def counts(self, result: ScenarioResult) -> bool:
        """A failed run kills only when the same run passes on the unmutated reference."""
        return result.status == FAILED and self.sanity.get(_key(result)) == PASSED

    @property
    def kills(self) -> list[Kill]:
        found = []
        for result in self.results:
            if self.counts(result):
                first = result.failures[0]
                found.append(Kill(result.scenario, result.transport, first.pointer,
                                  first.message))
        return found

    @property
    def status(self) -> str:
        if not self.results:
            return NOT_RUN
        return KILLED if self.kills else SURVIVED

    @property
    def why_survived(self) -> str:
        """One line: why no run counts as a kill."""
        if not self.results:
            return "no scenario covers what it breaks"
        runs = len(self.results)
        untestable = sum(1 for r in self.results if r.status == NOT_TESTABLE)
        unproven = sum(1 for r in self.results
                       if r.status == FAILED and not self.counts(r))
        if untestable == runs:
            return f"all {runs} run(s) were not testable (did the mutant host start?)"
        passed = sum(1 for r in self.results if r.status == PASSED)
        parts = [f"{passed} of {runs} run(s) passed"]
        if untestable:
            parts.append(f"{untestable} not testable")
        if unproven:
            parts.append(f"{unproven} failed but fail unmutated too")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        mutant = self.mutant
        return {"name": mutant.name, "breaks": list(mutant.breaks),
                "description": mutant.description,
                "targets": [p.target for p in mutant.patches], "control": mutant.control,
                "status": self.status,
                "why_survived": self.why_survived if self.status != KILLED else None,
                "kills": [k.to_json() for k in self.kills],
                "runs": [{"scenario": r.scenario, "transport": r.transport, "status": r.status,
                          "counts": self.counts(r), "reason": r.reason,
                          "duration_ms": round(r.duration_ms, 1)} for r in self.results],
                "duration_ms": round(self.duration_ms, 1)}


@dataclass
class SelftestResult:
    """The whole selftest: each mutant's outcome and the unmutated sanity runs."""

    outcomes: list[MutantOutcome] = field(default_factory=list)
    sanity: list[ScenarioResult] = field(default_factory=list)
    bridge: str = ""
    started_at: str = ""
    duration_ms: float = 0.0
    full: bool = False
    jobs: int = DEFAULT_JOBS

    @property
    def survivors(self) -> list[MutantOutcome]:
        return [o for o in self.outcomes if o.status != KILLED]

    @property
    def sanity_failures(self) -> list[ScenarioResult]:
        return [r for r in self.sanity if r.status != PASSED and r.status != "not_applicable"]

    @property
    def ok(self) -> bool:
        return bool(self.outcomes) and not self.survivors and not self.sanity_failures

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def runs(self) -> int:
        """Runs executed (parity comparisons are not runs), mutants and sanity together."""
        every = [r for o in self.outcomes for r in o.results] + self.sanity
        return sum(1 for r in every if r.transport != PARITY)

    def to_json(self) -> dict[str, Any]:
        killed = sum(1 for o in self.outcomes if o.status == KILLED)
        return {"format": SELFTEST_FORMAT, "ok": self.ok, "bridge": self.bridge,
                "started_at": self.started_at, "duration_ms": round(self.duration_ms, 1),
                "full": self.full, "jobs": self.jobs,
                "counts": {"mutants": len(self.outcomes), "killed": killed,
                           "survived": len(self.outcomes) - killed, "runs": self.runs,
                           "sanity_runs": _runs(self.sanity)},
                "sanity": {"ok": not self.sanity_failures, "runs": _runs(self.sanity),
                           "failed": [{"scenario": r.scenario, "transport": r.transport,
                                       "status": r.status, "reason": r.reason}
                                      for r in self.sanity_failures]},
                "mutants": [o.to_json() for o in self.outcomes]}


# --- running ------------------------------------------------------------------------------------

Report = Callable[[str, "MutantOutcome | None", list[ScenarioResult]], None]


def _with_parity(pairs: Sequence[Job], results: list[ScenarioResult]) -> list[ScenarioResult]:
    """The runs plus a parity result for every scenario that ran on both transports."""
    from . import parity

    by_key = {(r.scenario, r.transport): r for r in results}
    seen: set[str] = set()
    extra = []
    for scenario, _ in pairs:
        if scenario.id in seen:
            continue
        seen.add(scenario.id)
        both = [by_key.get((scenario.id, t)) for t in parity.TRANSPORTS]
        if parity.applies(scenario) and both[0] is not None and both[1] is not None:
            extra.append(parity.compare(scenario, both[0], both[1]))
    return results + extra


class _Groups:
    """Collects finished runs per group and reports a group once its last run is in."""

    def __init__(self, sizes: list[int], done: Callable[[int], None]) -> None:
        self.left = list(sizes)
        self.results: list[list[ScenarioResult]] = [[] for _ in sizes]
        self.done = done
        self.lock = threading.Lock()

    def add(self, group: int, result: ScenarioResult) -> None:
        with self.lock:
            self.results[group].append(result)
            self.left[group] -= 1
            finished = self.left[group] == 0
        if finished:
            self.done(group)


def run_selftest(mutants: Sequence[Mutant], scenarios: Sequence[Scenario],
                 options: SelftestOptions | None = None,
                 report: Report | None = None) -> SelftestResult:
    """Run every mutant on its selection and the unmutated reference on their union.

    ``report(label, outcome, sanity_results)`` is called as each mutant (``outcome``) or the
    sanity run (``outcome`` None) finishes; from worker threads.
    """
    from .execute import RunOptions, run_scenario
    from .suite import probe_host

    options = options or SelftestOptions()
    started = time.monotonic()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    host = probe_host(options.host_argv)  # HostProbeError: nothing can run
    picks = [selection(m, scenarios, options.full) for m in mutants]
    union: dict[tuple[str, str], Job] = {}
    for pairs in picks:
        for scenario, transport in pairs:
            union.setdefault((scenario.id, transport), (scenario, transport))
    sanity_pairs = list(union.values())
    groups: list[tuple[tuple[str, ...], list[Job]]] = [
        (mutant_argv(m, options.host_argv), pairs) for m, pairs in zip(mutants, picks, strict=True)]
    groups.append((tuple(options.host_argv), sanity_pairs))
    outcomes = [MutantOutcome(m) for m in mutants]
    group_started = [0.0] * len(groups)
    final: dict[int, list[ScenarioResult]] = {}

    def finished(group: int) -> None:
        argv_pairs = groups[group][1]
        results = _with_parity(argv_pairs, tracker.results[group])
        final[group] = results
        if group < len(outcomes):
            outcome = outcomes[group]
            outcome.results = results
            outcome.duration_ms = (time.monotonic() - group_started[group]) * 1000.0
            if report is not None:
                report(outcome.mutant.name, outcome, [])
        elif report is not None:
            report("sanity", None, results)

    tracker = _Groups([len(pairs) for _, pairs in groups], finished)
    for index, (_, pairs) in enumerate(groups):
        if not pairs:
            finished(index)

    def one(job: tuple[int, Scenario, str]) -> None:
        group, scenario, transport = job
        if not group_started[group]:
            group_started[group] = time.monotonic()
        run = RunOptions(host_argv=groups[group][0], op_timeout_ms=options.op_timeout_ms,
                         work_root=options.work_root)
        tracker.add(group, run_scenario(scenario, transport, run, host.capabilities))

    jobs = [(g, s, t) for g, (_, pairs) in enumerate(groups) for s, t in pairs]
    pool = ThreadPoolExecutor(max_workers=max(1, options.jobs))
    try:
        list(pool.map(one, jobs))
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # runs in flight clean up after themselves
        raise
    finally:
        pool.shutdown(wait=True)
    sanity = final.get(len(groups) - 1, [])
    statuses = {_key(r): r.status for r in sanity}
    for outcome in outcomes:
        outcome.sanity = statuses
    return SelftestResult(outcomes=outcomes, sanity=sanity,
                          bridge=host.bridge, started_at=stamp,
                          duration_ms=(time.monotonic() - started) * 1000.0, full=options.full,
                          jobs=options.jobs)


# --- reports ------------------------------------------------------------------------------------


def _short(text: str, width: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def matrix_lines(result: SelftestResult) -> list[str]:
    """The kill matrix as text: one block per mutant, one line per killing run."""
    width = max((len(o.mutant.name) for o in result.outcomes), default=10)
    lines = [f"{'mutant':<{width}}  {'breaks':<9}  {'verdict':<8}  killed by (first failing check)"]
    for outcome in result.outcomes:
        mutant = outcome.mutant
        head = f"{mutant.name:<{width}}  {','.join(mutant.breaks):<9}  "
        kills = outcome.kills
        if not kills:
            lines.append(f"{head}{outcome.status.upper():<8}  {outcome.why_survived}")
            continue
        pad = " " * len(head)
        for index, kill in enumerate(kills):
            lead = f"{head}{'KILLED':<8}  " if index == 0 else f"{pad}{'':<8}  "
            lines.append(lead + _short(f"{kill.scenario}[{kill.transport}] {kill.pointer}: "
                                       f"{kill.message}"))
    return lines


def summary_line(result: SelftestResult) -> str:
    killed = sum(1 for o in result.outcomes if o.status == KILLED)
    sanity = (f"the unmutated reference passed all {_runs(result.sanity)} sanity run(s)"
              if not result.sanity_failures else
              f"the unmutated reference FAILED {len(result.sanity_failures)} of "
              f"{_runs(result.sanity)} sanity run(s)")
    verdict = "OK" if result.ok else "FAILED"
    return (f"{verdict}: {killed}/{len(result.outcomes)} mutant(s) killed; {sanity}; "
            f"{result.runs} run(s) in {result.duration_ms / 1000:.1f} s")


def render(result: SelftestResult, stream: TextIO | None = None) -> None:
    """The kill matrix, every problem, and the summary line."""
    stream = stream or sys.stdout
    print("", file=stream)
    for line in matrix_lines(result):
        print(line, file=stream)
    for outcome in result.survivors:
        mutant = outcome.mutant
        print(f"SURVIVED: {mutant.name} breaks {', '.join(mutant.breaks)} "
              f"({mutant.description}): {outcome.why_survived}", file=stream)
    for failed in result.sanity_failures:
        print(f"SANITY: unmutated {_key(failed)} {failed.status}: {_short(failed.reason)} "
              "(a kill there proves nothing)", file=stream)
    print(summary_line(result), file=stream, flush=True)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(result: SelftestResult) -> str:
    """The kill matrix as a Markdown report."""
    lines = ["# palace-conformance selftest", "",
             f"{summary_line(result)}.", "",
             f"Bridge: {result.bridge or 'palace_bridge'}; started {result.started_at}; "
             f"{'full catalogue' if result.full else 'selection per mutant'}; "
             f"{result.jobs} job(s).", "",
             "| mutant | breaks | verdict | killed by (first failing check) |",
             "|---|---|---|---|"]
    for outcome in result.outcomes:
        mutant = outcome.mutant
        kills = outcome.kills
        cells = ("<br>".join(_cell(f"`{k.scenario}[{k.transport}]` `{k.pointer}`: "
                                   f"{_short(k.message, 160)}") for k in kills)
                 or _cell(outcome.why_survived))
        lines.append(f"| `{mutant.name}`<br>{_cell(mutant.description)} | "
                     f"{', '.join(mutant.breaks)} | {outcome.status.upper()} | {cells} |")
    if result.sanity_failures:
        lines += ["", "## Sanity failures (unmutated reference)", ""]
        lines += [f"- `{_key(r)}` {r.status}: {_cell(_short(r.reason, 200))}"
                  for r in result.sanity_failures]
    return "\n".join(lines) + "\n"


class Printer:
    """One line per finished mutant (and the sanity run), safe from worker threads."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.count = 0
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, label: str, outcome: MutantOutcome | None,
                 sanity: list[ScenarioResult]) -> None:
        with self.lock:
            self.count += 1
            if outcome is None:
                bad = [r for r in sanity if r.status not in (PASSED, "not_applicable")]
                line = (f"SANITY    {_runs(sanity)} run(s) of the unmutated reference: "
                        f"{'all passed' if not bad else f'{len(bad)} FAILED'}")
            else:
                failed = sum(1 for r in outcome.results
                             if r.status == FAILED and r.transport != PARITY)
                runs = sum(1 for r in outcome.results if r.transport != PARITY)
                line = (f"{'DONE':<9} {label} ({', '.join(outcome.mutant.breaks)}): {failed}/"
                        f"{runs} run(s) failed ({outcome.duration_ms / 1000:.1f} s)")
            print(f"[{self.count}/{self.total}] {line}", file=self.stream, flush=True)
