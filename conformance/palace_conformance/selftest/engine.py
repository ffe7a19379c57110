"""``palace-conformance selftest``: every mutant of the reference bridge must be killed.

Each mutant (:mod:`.mutants`) is the real ``palace_bridge`` with one rule broken, patched inside
the reference host's process. It runs against the scenarios covering the behaviours it breaks
(``--full``: every scenario); it is *killed* when at least one of those runs fails a check. The
unmutated reference runs the same selection as a sanity run: a kill only counts on a run that
passes unmutated, otherwise the "kill" might be a broken scenario. Exit 0 only when every mutant
is killed and the sanity run is green; a surviving mutant means a behaviour the suite cannot
catch, which is exactly what this command exists to find.

The command line lives in :mod:`.command` (light, as every command module must be);
this module is the engine and its reports.
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

from palace_conformance.contract import DEFAULT_OP_TIMEOUT_MS, TRANSPORTS
from palace_conformance.hosts import REFERENCE_HOST
from palace_conformance.runner.execution.execute import RunOptions, run_scenario
from palace_conformance.runner.execution.suite import probe_host
from palace_conformance.runner.jobs import default_jobs
from palace_conformance.runner.results import FAILED, NOT_TESTABLE, PARITY, PASSED, ScenarioResult
from palace_conformance.runner.verdict import parity
from palace_conformance.selftest.mutants import Mutant

if TYPE_CHECKING:
    from palace_conformance.scenarios.model import Scenario

SELFTEST_FORMAT = 1
KILLED, SURVIVED, NOT_RUN = "killed", "survived", "not_run"
Job = tuple["Scenario", str]


@dataclass(frozen=True)
class SelftestOptions:
    jobs: int = field(default_factory=default_jobs)
    full: bool = False  # every bridge scenario for every mutant instead of its selection
    first_kill: bool = False  # skip a mutant's remaining runs once one failed
    op_timeout_ms: int = DEFAULT_OP_TIMEOUT_MS
    work_root: Path | None = None
    host_argv: tuple[str, ...] = REFERENCE_HOST

#: the selftest's host (:mod:`.host`): the reference host with ``--mutant NAME`` applied; named,
#: not imported, since importing it would load the bridge into the runner's process
MUTANT_HOST_MODULE = "palace_conformance.selftest.host"


def mutant_argv(mutant: Mutant, host_argv: Sequence[str] = REFERENCE_HOST) -> tuple[str, ...]:
    """The reference host's argv with the selftest's host in its place, started with
    ``--mutant NAME`` (:mod:`.host` applies it before ``activate``)."""
    base = tuple(host_argv)
    if base[-1:] == (REFERENCE_HOST[-1],):
        base = (*base[:-1], MUTANT_HOST_MODULE)
    return (*base, "--mutant", mutant.name)


def selection(mutant: Mutant, scenarios: Iterable[Scenario], full: bool = False) -> list[Job]:
    """The (scenario, transport) runs that should kill ``mutant``: every bridge scenario covering
    one of its behaviours, plus its ``also`` list (``full``: every bridge scenario)."""
    chosen: list[Job] = []
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
    selected: int = 0  # runs in its selection (parity comparisons not counted)
    skipped: int = 0  # runs not started because an earlier one failed (first_kill)

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
        runs = [r for r in self.results if r.transport != PARITY]
        untestable = sum(1 for r in runs if r.status == NOT_TESTABLE)
        unproven = sum(1 for r in self.results
                       if r.status == FAILED and not self.counts(r))
        if untestable == len(runs):
            return f"all {len(runs)} run(s) were not testable (did the mutant host start?)"
        passed = sum(1 for r in runs if r.status == PASSED)
        parity = [r for r in self.results if r.transport == PARITY]
        parts = [f"{passed} of {len(runs)} run(s) passed"]
        if parity:
            parts[0] += (f" ({sum(1 for r in parity if r.status == PASSED)} of {len(parity)} "
                         "parity comparison(s) equal)")
        if untestable:
            parts.append(f"{untestable} not testable")
        if unproven:
            parts.append(f"{unproven} failed but fail unmutated too")
        if self.skipped:
            parts.append(f"{self.skipped} skipped after the first failure (run without "
                         "--first-kill)")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        mutant = self.mutant
        return {"name": mutant.name, "breaks": list(mutant.breaks),
                "description": mutant.description,
                "targets": [p.target for p in mutant.patches], "control": mutant.control,
                "status": self.status,
                "why_survived": self.why_survived if self.status != KILLED else None,
                "kills": [k.to_json() for k in self.kills],
                "selected": self.selected, "skipped": self.skipped,
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
    first_kill: bool = False
    jobs: int = field(default_factory=default_jobs)

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
                "full": self.full, "first_kill": self.first_kill, "jobs": self.jobs,
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
    by_key = {(r.scenario, r.transport): r for r in results}
    ordered = []
    seen: set[str] = set()
    for scenario, _ in pairs:  # selection order: catalogue order, stdio before http
        if scenario.id in seen:
            continue
        seen.add(scenario.id)
        ordered += [by_key[(scenario.id, t)] for t in TRANSPORTS
                    if (scenario.id, t) in by_key]
        both = [by_key.get((scenario.id, t)) for t in TRANSPORTS]
        if parity.applies(scenario) and both[0] is not None and both[1] is not None:
            ordered.append(parity.compare(scenario, both[0], both[1]))
    return ordered


@dataclass
class _Group:
    """Runs with one host command line: a mutant's selection or the sanity run."""

    argv: tuple[str, ...]
    pairs: list[Job]
    skip_after_failure: bool = False
    results: list[ScenarioResult] = field(default_factory=list)
    left: int = 0
    skipped: int = 0
    started: float = 0.0
    failed: bool = False


class _Scheduler:
    """One pool for every run; runs may be added while others go (first-kill sanity runs)."""

    def __init__(self, options: SelftestOptions, capabilities: Sequence[str],
                 done: Callable[[int], None],
                 on_failure: Callable[[int, ScenarioResult], None] | None = None) -> None:
        self.options = options
        self.capabilities = capabilities
        self.done = done
        self.on_failure = on_failure
        self.groups: list[_Group] = []
        self.lock = threading.Lock()
        self.pending = 0
        self.idle = threading.Event()
        self.idle.set()
        self.pool = ThreadPoolExecutor(max_workers=max(1, options.jobs))

    def add_group(self, group: _Group) -> int:
        with self.lock:
            self.groups.append(group)
            group.left = len(group.pairs)
            return len(self.groups) - 1

    def submit(self, index: int, position: int) -> None:
        with self.lock:
            self.pending += 1
            self.idle.clear()
        self.pool.submit(self._one, index, position)

    def add_run(self, index: int, pair: Job) -> None:
        """Append ``pair`` to a group that is already running, and schedule it."""
        with self.lock:
            group = self.groups[index]
            group.pairs.append(pair)
            group.left += 1
            position = len(group.pairs) - 1
        self.submit(index, position)

    def _one(self, index: int, position: int) -> None:
        group = self.groups[index]
        scenario, transport = group.pairs[position]
        result = None
        try:
            with self.lock:
                skip = group.skip_after_failure and group.failed
                group.started = group.started or time.monotonic()
            if not skip:
                run = RunOptions(host_argv=group.argv, op_timeout_ms=self.options.op_timeout_ms,
                                 work_root=self.options.work_root)
                result = run_scenario(scenario, transport, run, self.capabilities)
                if result.status == FAILED and self.on_failure is not None:
                    self.on_failure(index, result)  # may add runs: before this one counts down
        finally:
            with self.lock:
                if result is None:
                    group.skipped += 1
                else:
                    group.results.append(result)
                    group.failed = group.failed or result.status == FAILED
                group.left -= 1
                last = group.left == 0
            if last:
                self.done(index)
            with self.lock:
                self.pending -= 1
                if self.pending == 0:
                    self.idle.set()

    def run(self, order: Sequence[tuple[int, int]]) -> None:
        """Submit ``order`` (group, position) and wait until no run is left, added ones too."""
        for index, group in enumerate(self.groups):
            if not group.pairs:
                self.done(index)
        try:
            for index, position in order:
                self.submit(index, position)
            while not self.idle.wait(0.2):
                pass
        except BaseException:
            # Ctrl-C: runs not started are dropped; runs in flight clean up after themselves
            self.pool.shutdown(wait=True, cancel_futures=True)
            raise
        self.pool.shutdown(wait=True)


def _union(pair_lists: Iterable[Iterable[Job]]) -> list[Job]:
    union: dict[tuple[str, str], Job] = {}
    for pairs in pair_lists:
        for scenario, transport in pairs:
            union.setdefault((scenario.id, transport), (scenario, transport))
    return list(union.values())


def run_selftest(mutants: Sequence[Mutant], scenarios: Sequence[Scenario],
                 options: SelftestOptions | None = None,
                 report: Report | None = None) -> SelftestResult:
    """Run every mutant on its selection and the unmutated reference as the sanity run.

    Default: each mutant runs its whole selection and the sanity run covers their union.
    ``first_kill``: a mutant's remaining runs are skipped once one fails, and the sanity run
    covers only the runs that failed (scheduled as soon as they fail; a parity failure brings
    both transports): about half the work, and a thinner matrix. ``report(label, outcome,
    sanity_results)`` is called as each mutant (``outcome``) and then the sanity run (``outcome``
    None) finishes; mutants from worker threads.
    """
    options = options or SelftestOptions()
    started = time.monotonic()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    host = probe_host(options.host_argv)  # HostProbeError: nothing can run
    picks = [selection(m, scenarios, options.full) for m in mutants]
    outcomes = [MutantOutcome(m, selected=len(p)) for m, p in zip(mutants, picks, strict=True)]
    sanity = _Group(tuple(options.host_argv), [] if options.first_kill else _union(picks))
    queued = {(s.id, t) for s, t in sanity.pairs}

    def done(index: int) -> None:
        if index >= len(outcomes):
            return  # the sanity group: reported once everything is in
        group, outcome = scheduler.groups[index], outcomes[index]
        outcome.results = _with_parity(group.pairs, group.results)
        outcome.skipped = group.skipped
        outcome.duration_ms = ((time.monotonic() - group.started) * 1000.0
                               if group.started else 0.0)
        if options.first_kill:  # a parity failure is only known now: confirm both runs
            for result in outcome.results:
                if result.transport == PARITY and result.status == FAILED:
                    confirm(index, result)
        if report is not None:
            report(outcome.mutant.name, outcome, [])

    def confirm(index: int, result: ScenarioResult) -> None:
        """first_kill: re-run unmutated what just failed, as soon as it failed."""
        if index >= len(outcomes):
            return
        for scenario, transport in picks[index]:
            if scenario.id == result.scenario and result.transport in (transport, PARITY):
                with scheduler.lock:
                    fresh = (scenario.id, transport) not in queued
                    queued.add((scenario.id, transport))
                if fresh:
                    scheduler.add_run(sanity_index, (scenario, transport))

    scheduler = _Scheduler(options, host.capabilities, done,
                           on_failure=confirm if options.first_kill else None)
    for mutant, pairs in zip(mutants, picks, strict=True):
        scheduler.add_group(_Group(mutant_argv(mutant, options.host_argv), list(pairs),
                                   skip_after_failure=options.first_kill))
    sanity_index = scheduler.add_group(sanity)
    order = [(g, i) for g, group in enumerate(scheduler.groups) for i in range(len(group.pairs))]
    if options.first_kill:  # every mutant's first run, then every second run, ...
        order.sort(key=lambda job: (job[1], job[0]))
    scheduler.run(order)
    finished_sanity = _with_parity(sanity.pairs, sanity.results)
    if report is not None:
        report("sanity", None, finished_sanity)
    statuses: dict[str, str] = {_key(r): r.status for r in finished_sanity}
    for outcome in outcomes:
        outcome.sanity = statuses
    return SelftestResult(outcomes=outcomes, sanity=finished_sanity, bridge=host.bridge,
                          started_at=stamp, duration_ms=(time.monotonic() - started) * 1000.0,
                          full=options.full, first_kill=options.first_kill, jobs=options.jobs)


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
             f"{'full catalogue' if result.full else 'selection per mutant'}"
             f"{', first kill only' if result.first_kill else ''}; "
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
                skipped = f", {outcome.skipped} skipped" if outcome.skipped else ""
                line = (f"{'DONE':<9} {label} ({', '.join(outcome.mutant.breaks)}): {failed}/"
                        f"{runs} run(s) failed{skipped} ({outcome.duration_ms / 1000:.1f} s)")
            print(f"[{self.count}/{self.total}] {line}", file=self.stream, flush=True)
