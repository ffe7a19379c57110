"""A whole run: probe the host once, run every (scenario, transport) in parallel, add parity
results, apply a baseline. Each run is isolated (its own world and host process), so ``jobs``
only trades CPU for wall time."""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from palace_conformance.contract import HARNESS_CAPABILITIES, TRANSPORTS
from palace_conformance.errors import HostError
from palace_conformance.resources import tool_catalogue
from palace_conformance.runner.execution import node_pool
from palace_conformance.runner.execution.admission import IN_ORDER, Gate, Limit
from palace_conformance.runner.execution.cpu_busy import open_meter
from palace_conformance.runner.execution.driver import DriverClient, DriverFailure
from palace_conformance.runner.execution.execute import HELLO_TIMEOUT_MS, RunOptions, run_scenario
from palace_conformance.runner.execution.lateness import TimerProbe
from palace_conformance.runner.execution.order import longest_first
from palace_conformance.runner.execution.translation import translation_for
from palace_conformance.runner.execution.world import claim, clean_stale, scrubbed_environ
from palace_conformance.runner.jobs import default_jobs
from palace_conformance.runner.profiling.detect import detect, needs_detection
from palace_conformance.runner.results import (
    FAILURE_STATUSES,
    FROM_OBSERVATION,
    FROM_PROFILE,
    PARITY,
    HostInfo,
    RunResult,
    ScenarioResult,
)
from palace_conformance.runner.verdict import parity
from palace_conformance.runner.verdict.baseline import Baseline, apply_baseline
from palace_conformance.runner.verdict.reach import UNREACHED_ID, collapse_unreached
from palace_conformance.runner.verdict.startup import startup_note
from palace_conformance.scenarios.model import Scenario

TRANSPORT_ORDER = (*TRANSPORTS, PARITY)


class HostProbeError(HostError):
    """The host could not even answer ``hello``: nothing can be run; one line."""


class Progress(Protocol):
    """Live feedback while a run goes; called from worker threads."""

    def start(self, total: int) -> None: ...

    def begin(self, scenario: Scenario, transport: str) -> None: ...

    def done(self, result: ScenarioResult) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SuiteOptions:
    run: RunOptions
    jobs: int = field(default_factory=default_jobs)
    #: the default's growth (runner/execution/admission.py): above ``jobs``, the runs in flight
    #: may rise to this while the runner's CPUs have time to spare; None: ``jobs`` is fixed
    max_jobs: int | None = None
    #: with ``max_jobs``: runs from the order's end that may start beyond it while the CPUs
    #: are idle (admission.py, backfill)
    backfill: int = 0
    transports: tuple[str, ...] = TRANSPORTS
    baseline: Baseline | None = None
    #: stop starting runs after the first failure no baseline expects (``run -x``)
    exitfirst: bool = False
    #: scenario id -> the only transports to run it on (``run --last-failed``); None: all
    only: Mapping[str, frozenset[str]] | None = None
    #: ``run --max-scenario-seconds``: a scenario the bridge's own pace would lengthen by more
    #: is set aside as *not run: too slow* (never a pass); None: every scenario runs
    max_scenario_seconds: float | None = None
    #: more judges, applied to each result as it finishes (before parity and the baseline):
    #: ``run`` passes the golden traces' (runner/compare/golden.py), which a stage below it
    #: cannot import
    judges: tuple[Callable[[list[ScenarioResult], Sequence[str]], None], ...] = ()
    #: the order runs start in (order.py: the longest first); ``list`` keeps the catalogue's
    order: Callable[[Sequence[tuple[Scenario, str]]], list[tuple[Scenario, str]]] = \
        longest_first


def probe_host(argv: Sequence[str], grace_ms: int = 3000,
               hello_timeout_ms: int = HELLO_TIMEOUT_MS, warm: bool = True) -> HostInfo:
    """Start the host, ask ``hello``, let it go; :class:`HostProbeError` when that fails."""
    with tempfile.TemporaryDirectory(prefix="pc-probe-") as home:
        claim(Path(home))
        env = scrubbed_environ()
        env["HOME"] = home
        client = DriverClient(argv, env=env, cwd=home, grace_ms=grace_ms, warm=warm)
        try:
            client.start()
            hello = client.hello(hello_timeout_ms)
            with contextlib.suppress(DriverFailure):
                client.request("exit", {"timeout_ms": 2000}, deadline_ms=2000)
        except DriverFailure as exc:
            raise HostProbeError(str(exc)) from None
        finally:
            client.close(grace_s=1.0)
    return HostInfo.from_hello(argv, hello)


def plan(scenarios: Sequence[Scenario], transports: Sequence[str],
         only: Mapping[str, frozenset[str]] | None = None) -> list[tuple[Scenario, str]]:
    """Every (scenario, transport) to run, in catalogue order; ``only`` narrows a scenario's
    transports (a scenario it does not name runs on all of them)."""
    return [(s, t) for s in scenarios for t in s.transports
            if t in transports and (only is None or s.id not in only or t in only[s.id])]


def _stops(result: ScenarioResult, baseline: Baseline | None) -> bool:
    """Whether ``-x`` stops here: a failure or not-testable result no baseline expects."""
    return result.status in FAILURE_STATUSES and (baseline is None
                                                  or baseline.mark(result) is None)


def _order(result: ScenarioResult) -> tuple[str, int]:
    transport = result.transport
    rank = TRANSPORT_ORDER.index(transport) if transport in TRANSPORT_ORDER else 99
    return result.scenario, rank


def _judged_capabilities(host: HostInfo, options: SuiteOptions) -> RunOptions:
    """The capabilities the run judges, set on ``host``: the profile's claim, else what the
    bridge showed when the host's list is a placeholder (the run options then carry them, as a
    profile would), else the host's own."""
    run_options = options.run
    profile = run_options.profile
    claimed = translation_for(profile).claimed_capabilities
    # the harness's own (result_parts) are always the host's word: never claimed nor observed
    harness = [c for c in HARNESS_CAPABILITIES if c in (host.capabilities or ())]
    if claimed is not None:
        host.capabilities = (*claimed, *harness)  # what the profile claims is what is judged
        host.capabilities_source = FROM_PROFILE
    elif needs_detection(host, profile):  # a placeholder list: judge what the bridge showed
        found = detect(host, run_options, options.transports)
        host.capabilities, host.capabilities_note = (*found.capabilities, *harness), found.note
        host.capabilities_source = FROM_OBSERVATION
        # what it showed, as a profile says, unless a profile was given
        run_options = replace(run_options, detected_capabilities=found.capabilities,
                              profile=found.judged_profile(profile))
    return run_options


def _add_parities(scenarios: Sequence[Scenario], results: list[ScenarioResult],
                  not_run: list[tuple[str, str]], started: set[tuple[str, str]],
                  level: str) -> None:
    """Each parity result (both transports' results compared) added to ``results``; a parity
    one of whose transports was planned but not started added to ``not_run``."""
    by_key = {(r.scenario, r.transport): r for r in results}
    for scenario in scenarios:
        pair = [by_key.get((scenario.id, t)) for t in TRANSPORTS]
        if not parity.applies(scenario):
            continue
        if pair[0] is not None and pair[1] is not None:
            results.append(parity.compare(scenario, pair[0], pair[1], level))
        elif all((scenario.id, t) in started for t in TRANSPORTS):
            not_run.append((scenario.id, PARITY))  # one of its transports was not started


def run_suite(scenarios: Sequence[Scenario], options: SuiteOptions,
              progress: Progress | None = None,
              host: HostInfo | None = None,
              runner: Callable[..., ScenarioResult] = run_scenario) -> RunResult:
    """Run everything; ``host`` skips the probe when the caller already has the hello."""
    started = time.monotonic()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    clean_stale()  # what a runner killed with SIGKILL left in the temp dir
    host = host or probe_host(options.run.host_argv, options.run.grace_ms,
                              options.run.hello_timeout_ms, options.run.warm_start)
    jobs = options.order(plan(scenarios, options.transports, options.only))
    if progress is not None:
        progress.start(len(jobs))
    stop = threading.Event()  # set by -x: runs not started yet are not started

    too_slow: list[tuple[str, str, float]] = []

    def one(job: tuple[Scenario, str]) -> ScenarioResult | None:
        """Run ``job`` in the slot its worker holds."""
        scenario, transport = job
        if stop.is_set():
            return None
        if options.max_scenario_seconds is not None:
            added = _added_seconds(scenario, run_options)
            if added > options.max_scenario_seconds:
                too_slow.append((scenario.id, transport, added))
                return None
        if progress is not None:
            progress.begin(scenario, transport)
        result = runner(scenario, transport, run_options, capabilities)
        for more in options.judges:  # here, in the worker: it overlaps the other runs' waits
            more([result], capabilities)
        if options.exitfirst and _stops(result, options.baseline):
            stop.set()
        if progress is not None:
            progress.done(result)
        return result

    run_options = _judged_capabilities(host, options)
    capabilities = host.capabilities
    probe = _start_probe()
    if probe is not None:
        run_options = replace(run_options, lateness=probe)
    gate = _gate(options)
    try:
        finished = _in_parallel(jobs, one, options, gate)
    finally:
        if probe is not None:
            probe.stop()
        if progress is not None:
            progress.close()
    results = [r for r in finished if r is not None]
    slow = {(sid, t) for sid, t, _ in too_slow}
    not_run = [(s.id, t) for (s, t), r in zip(jobs, finished, strict=True)
               if r is None and (s.id, t) not in slow]
    planned = {(s.id, t) for s, t in jobs}
    # a transport the bridge never reached is one not-testable line, not a result per scenario
    before_collapse = results
    results = collapse_unreached(results, {s.id: s for s in scenarios}, options.transports)
    note = startup_note(results, before_collapse,
                        {str(t["name"]) for t in tool_catalogue()["tools"]},
                        options.run.profile is not None, host.capabilities_note)
    unreached = {r.transport for r in results if r.scenario == UNREACHED_ID}
    if not unreached:
        _add_parities(scenarios, results, not_run, planned - slow, options.run.level)
    results.sort(key=_order)
    not_run.sort(key=lambda key: (key[0], TRANSPORT_ORDER.index(key[1])))
    run = RunResult(host=host, results=results, started_at=stamp,
                    duration_ms=(time.monotonic() - started) * 1000.0, level=options.run.level,
                    not_run=not_run, too_slow=sorted(too_slow), start_note=note,
                    lateness=probe.summary() if probe is not None else None)
    return apply_baseline(run, options.baseline)


def _in_parallel(jobs: Sequence[tuple[Scenario, str]],
                 one: Callable[[tuple[Scenario, str]], ScenarioResult | None],
                 options: SuiteOptions, gate: Gate) -> list[ScenarioResult | None]:
    """``one`` over every job, each in a slot of ``gate``: a slot in order takes the next job,
    a backfill slot the last one (admission.py); the gate is closed after. The results are in
    ``jobs``' order, None for a job not run."""
    pending = deque(enumerate(jobs))
    taking = threading.Lock()
    finished: list[ScenarioResult | None] = [None] * len(jobs)

    def worker() -> None:
        while (slot := gate.enter()) is not None:
            try:
                with taking:
                    if not pending:
                        return
                    index, job = pending.popleft() if slot == IN_ORDER else pending.pop()
                finished[index] = one(job)
            finally:
                gate.leave(slot)

    workers = min(max(1, options.jobs, options.max_jobs or 0) + options.backfill,
                  max(1, len(jobs)))
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        # Node hosts wait started (node_pool), a couple for the workers to take from
        with node_pool.session(size=min(2, options.jobs)):
            running = [pool.submit(worker) for _ in range(workers)]
            # a worker that raised (the runner's own error) ends the suite at once
            for each in wait(running, return_when=FIRST_EXCEPTION).done:
                each.result()
            for each in running:
                each.result()
        return finished
    finally:
        # on Ctrl-C, runs not started yet are dropped (those waiting for a slot too: the gate
        # closes first); runs in flight finish (each has deadlines) so that their processes are
        # cleaned up. After every job there is nothing left to drop.
        gate.close()
        pool.shutdown(wait=True, cancel_futures=True)


def _gate(options: SuiteOptions) -> Gate:
    """The suite's slots: ``jobs`` of them, or with ``max_jobs`` a limit that grows from ``jobs``
    (and backfills at ``max_jobs``) while the CPUs have time to spare; fixed when they cannot
    be read."""
    if options.max_jobs is not None and (options.max_jobs > options.jobs or options.backfill):
        meter = open_meter()
        if meter is not None:
            limit = Limit(options.jobs, options.max_jobs, options.backfill)
            return Gate(options.jobs, limit, meter).start()
    return Gate(options.jobs)


def _start_probe() -> TimerProbe | None:
    """The run's timer probe (execution/lateness.py); None when it cannot start (the run then
    judges every upper bound with its declared slack alone)."""
    try:
        return TimerProbe().start()
    except OSError:
        return None


def _added_seconds(scenario: Scenario, options: RunOptions) -> float:
    """How much longer the bridge's own pace makes ``scenario``: its longer sleeps, plus its
    longer waits (each widened window once); 0 without a profile or a pace value it lacks."""
    paced = translation_for(options.profile, scenario.subject).paced(scenario)
    return (paced.sleep_extra_ms + paced.deadline_extra_ms) / 1000.0

