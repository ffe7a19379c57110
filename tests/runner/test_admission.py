"""The suite's admission: a fixed ``--jobs N`` is never exceeded; the default grows from the fixed
default only while the CPUs have time to spare and a run is waiting, falls back under load, lets
runs in in the order they asked, and at its ceiling with idle CPUs backfills with runs from the
order's end. The policy is fed by hand; the gate and the suite run real threads against a meter
the test controls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palace_conformance.runner.execution import admission, cpu_busy, suite
from palace_conformance.runner.execution.admission import FROM_END, IN_ORDER, Gate, Limit
from palace_conformance.runner.execution.cpu_busy import Reading
from palace_conformance.runner.execution.suite import SuiteOptions, run_suite
from palace_conformance.runner.results import ScenarioResult
from palace_conformance.scenarios.model import Scenario

from .support import options, scripted, shipped

# -- the policy ---------------------------------------------------------------------------------

def test_the_limit_starts_at_the_floor_and_grows_only_when_idle_and_a_run_waits() -> None:
    limit = Limit(floor=4, ceiling=6)
    assert limit.value == 4
    assert limit.observe(0.10, waited=False) == 4  # idle, but nobody waited: no reason to grow
    assert limit.observe(0.85, waited=True) == 4  # waited, but the CPUs are not idle enough
    assert limit.observe(None, waited=True) == 4  # unknown: no move
    assert [limit.observe(0.10, waited=True) for _ in range(3)] == [6, 6, 6]


def test_the_further_below_the_mark_the_cpus_were_the_more_runs_are_let_in() -> None:
    limit = Limit(floor=8, ceiling=40)
    assert limit.observe(0.78, waited=True) == 9  # just below the mark: one more
    assert limit.observe(0.40, waited=True) == 13  # half way: about half as many more
    assert limit.observe(0.0, waited=True) == 26  # idle: doubled
    assert limit.observe(0.0, waited=True) == 40  # never past the ceiling


def test_the_limit_falls_back_under_load_and_never_below_the_floor() -> None:
    limit = Limit(floor=2, ceiling=5)
    for _ in range(3):
        limit.observe(0.0, waited=True)
    assert limit.value == 5
    assert [limit.observe(0.99, waited=True) for _ in range(4)] == [4, 3, 2, 2]
    assert limit.observe(0.90, waited=True) == 2  # between the thresholds: it holds


@given(st.integers(1, 8), st.integers(0, 8),
       st.lists(st.tuples(st.one_of(st.none(), st.floats(0, 1)), st.booleans()), max_size=60))
def test_the_limit_stays_within_its_bounds_at_most_doubles_and_falls_by_one(
        floor: int, extra: int, samples: list[tuple[float | None, bool]]) -> None:
    limit = Limit(floor, floor + extra)
    before = limit.value
    for busy, waited in samples:
        after = limit.observe(busy, waited)
        assert floor <= after <= floor + extra
        assert before - 1 <= after <= 2 * before
        if after > before:
            assert waited and busy is not None and busy < limit.grow_below
        if after > before + 1:  # more than one: the CPUs were well below the mark
            assert busy is not None and busy <= limit.grow_below * (1 - 1.5 / before)
        before = after


def test_a_limit_needs_sensible_bounds() -> None:
    with pytest.raises(ValueError, match="floor <= ceiling"):
        Limit(floor=3, ceiling=2)
    with pytest.raises(ValueError, match="backfill >= 0"):
        Limit(floor=2, ceiling=3, backfill=-1)


def test_backfill_only_at_the_ceiling_and_only_on_idle_cpus() -> None:
    limit = Limit(floor=2, ceiling=4, backfill=3)
    assert limit.backfilled(0.0) == 0  # below its ceiling the limit itself grows first
    limit.observe(0.0, waited=True)
    assert limit.value == 4
    assert limit.backfilled(0.0) == 3
    assert limit.backfilled(limit.backfill_below - 0.01) == 3
    assert limit.backfilled(limit.backfill_below) == 0  # busy enough: none
    assert limit.backfilled(None) == 0  # unknown: none
    assert Limit(floor=4, ceiling=4).backfilled(0.0) == 0  # none asked for


# -- the gate -----------------------------------------------------------------------------------

def _hold(gate: Gate, threads: int, hold_s: float,
          order: list[int] | None = None) -> tuple[int, list[bool]]:
    """``threads`` runs through ``gate`` (started here, closed after), each holding its slot
    ``hold_s``: the most in flight at once, and whether each was let in."""
    gate.start()
    try:
        return _through(gate, threads, hold_s, order)
    finally:
        gate.close()


def _through(gate: Gate, threads: int, hold_s: float,
             order: list[int] | None) -> tuple[int, list[bool]]:
    lock = threading.Lock()
    flight = [0, 0]
    admitted: list[bool] = [False] * threads

    def run(index: int) -> None:
        if not gate.enter():
            return
        admitted[index] = True
        with lock:
            if order is not None:
                order.append(index)
            flight[0] += 1
            flight[1] = max(flight[1], flight[0])
        time.sleep(hold_s)
        with lock:
            flight[0] -= 1
        gate.leave()

    workers = []
    for index in range(threads):
        worker = threading.Thread(target=run, args=(index,))
        worker.start()
        workers.append(worker)
        time.sleep(0.005)  # they ask in index order
    for worker in workers:
        worker.join(timeout=30)
    return flight[1], admitted


def _meter(busy: float) -> Callable[[], Reading]:
    """A meter whose CPUs are ``busy`` (a fraction) all the time."""
    ticks = [0.0]

    def read() -> Reading:
        ticks[0] += 100.0
        return Reading(busy=ticks[0] * busy, total=ticks[0])

    return read


def test_a_fixed_gate_never_lets_in_more_than_its_jobs_and_keeps_their_order() -> None:
    order: list[int] = []
    peak, admitted = _hold(Gate(3), 10, 0.05, order)
    assert peak == 3 and all(admitted)
    assert order == sorted(order)


def test_an_adaptive_gate_grows_on_idle_cpus() -> None:
    gate = Gate(2, Limit(2, 6), _meter(0.1), interval_s=0.02)
    peak, admitted = _hold(gate, 12, 0.3)
    assert all(admitted) and peak > 2 and gate.peak <= 6


def test_an_adaptive_gate_on_busy_cpus_keeps_its_floor() -> None:
    gate = Gate(2, Limit(2, 6), _meter(0.99), interval_s=0.02)
    peak, admitted = _hold(gate, 8, 0.15)
    assert all(admitted) and peak == 2 and gate.peak == 2


def test_a_closed_gate_lets_no_waiting_run_in() -> None:
    gate = Gate(1)
    assert gate.enter()
    answers: list[str | None] = []
    waiter = threading.Thread(target=lambda: answers.append(gate.enter()))
    waiter.start()
    time.sleep(0.05)
    assert answers == []  # still waiting for the slot
    gate.close()
    waiter.join(timeout=5)
    assert answers == [None]


def _slots(gate: Gate, threads: int, hold_s: float) -> list[str]:
    """The kind of slot each of ``threads`` workers got, each holding it ``hold_s``."""
    kinds: list[str] = []
    lock = threading.Lock()

    def run() -> None:
        slot = gate.enter()
        if slot is None:
            return
        with lock:
            kinds.append(slot)
        time.sleep(hold_s)
        gate.leave(slot)

    gate.start()
    try:
        workers = [threading.Thread(target=run) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=30)
    finally:
        gate.close()
    return kinds


def test_a_gate_at_its_ceiling_on_idle_cpus_backfills() -> None:
    gate = Gate(2, Limit(2, 2, backfill=3), _meter(0.1), interval_s=0.02)
    kinds = _slots(gate, 12, 0.3)
    assert len(kinds) == 12 and FROM_END in kinds and IN_ORDER in kinds
    assert gate.peak == 2 and gate.backfill_peak == 3


def test_a_gate_on_busy_cpus_never_backfills() -> None:
    gate = Gate(2, Limit(2, 2, backfill=3), _meter(0.7), interval_s=0.02)
    kinds = _slots(gate, 6, 0.15)
    assert kinds == [IN_ORDER] * 6 and gate.backfill_peak == 0


# -- the CPU meter ------------------------------------------------------------------------------

PROC_STAT = """cpu  400 0 200 1200 100 0 0 100 0 0
cpu0 100 0 100 700 50 0 0 50 0 0
cpu1 300 0 100 500 50 0 0 50 0 0
intr 12345
"""


def test_proc_stat_counts_only_the_cpus_this_process_may_use() -> None:
    both = cpu_busy.parse_proc_stat(PROC_STAT, None)
    assert both == Reading(busy=700.0, total=2000.0)  # steal (the 8th field) is busy
    only_one = cpu_busy.parse_proc_stat(PROC_STAT, [1])
    assert only_one == Reading(busy=450.0, total=1000.0)
    assert cpu_busy.parse_proc_stat(PROC_STAT, [7]) is None
    assert cpu_busy.parse_proc_stat("garbage\ncpu0 x y z\n", None) is None


def test_the_busy_fraction_between_two_readings() -> None:
    assert cpu_busy.busy_between(Reading(10, 100), Reading(60, 200)) == 0.5
    assert cpu_busy.busy_between(Reading(10, 100), Reading(10, 100)) is None
    assert cpu_busy.busy_between(Reading(10, 100), Reading(500, 200)) == 1.0


def test_cgroup_quota_and_usage() -> None:
    assert cpu_busy.parse_cgroup_quota("150000 100000\n") == 1.5
    assert cpu_busy.parse_cgroup_quota("max 100000\n") is None
    assert cpu_busy.parse_cgroup_quota("nonsense") is None
    assert cpu_busy.parse_cgroup_usage("usage_usec 2500000\nuser_usec 1\n") == 2.5
    assert cpu_busy.parse_cgroup_usage("user_usec 1\n") is None


def test_a_cpu_quota_is_measured_by_its_cgroup(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """In a container limited to 1.5 CPUs, busy is the cgroup's use against its quota."""
    group = tmp_path / "cg" / "job"
    group.mkdir(parents=True)
    (group / "cpu.max").write_text("150000 100000\n")
    usage = group / "cpu.stat"
    usage.write_text("usage_usec 0\n")
    (tmp_path / "self-cgroup").write_text("0::/job\n")
    monkeypatch.setattr(cpu_busy, "CGROUP_ROOT", str(tmp_path / "cg"))
    now = [100.0]
    meter = cpu_busy.open_meter(str(tmp_path / "no-stat"), str(tmp_path / "self-cgroup"),
                                clock=lambda: now[0])
    assert meter is not None
    before = meter()
    now[0] += 2.0
    usage.write_text("usage_usec 1500000\n")  # 1.5 CPU-s in 2 s of a 1.5-CPU quota: half
    assert before is not None and cpu_busy.busy_between(before, meter()) == pytest.approx(0.5)


def test_without_a_quota_proc_stat_is_read_and_nothing_readable_means_no_meter(
        tmp_path: Path) -> None:
    stat_file = tmp_path / "stat"
    stat_file.write_text(PROC_STAT)
    meter = cpu_busy.open_meter(str(stat_file), str(tmp_path / "missing"))
    assert meter is not None and meter() is not None
    assert cpu_busy.open_meter(str(tmp_path / "missing"), str(tmp_path / "missing")) is None


# -- the suite ----------------------------------------------------------------------------------

def _counting_runner(hold_s: float, started: list[tuple[str, str]] | None = None,
                     ) -> tuple[Callable[..., ScenarioResult], list[int]]:
    """A stand-in for run_scenario that holds each run ``hold_s`` and keeps the most in flight
    (and, with ``started``, each run as it starts)."""
    lock = threading.Lock()
    flight = [0, 0]

    def runner(scenario: Scenario, transport: str, *_: object) -> ScenarioResult:
        with lock:
            if started is not None:
                started.append((scenario.id, transport))
            flight[0] += 1
            flight[1] = max(flight[1], flight[0])
        time.sleep(hold_s)
        with lock:
            flight[0] -= 1
        return ScenarioResult(scenario=scenario.id, transport=transport, status="passed")

    return runner, flight


SCENARIOS = ("life.handshake.initialize-first", "life.transport.default-stdio-child",
             "tool.args.nested-values-unchanged", "wake.fresh-session.inject-once")


def _suite(tmp_path: Path, jobs: int, max_jobs: int | None, busy: float,
           monkeypatch: pytest.MonkeyPatch, backfill: int = 0,
           started: list[tuple[str, str]] | None = None) -> int:
    monkeypatch.setattr(suite, "open_meter", lambda: _meter(busy))
    monkeypatch.setattr(admission, "INTERVAL_S", 0.02)
    runner, flight = _counting_runner(0.4, started)
    scenarios = [shipped(sid) for sid in SCENARIOS] * 3
    run = run_suite(scenarios, SuiteOptions(run=options(scripted("good", "stdio,http"),
                                                        work_root=tmp_path),
                                            jobs=jobs, max_jobs=max_jobs, backfill=backfill,
                                            judges=(), order=list),
                    runner=runner)
    assert {r.status for r in run.results if r.transport != "parity"} == {"passed"}
    assert len([r for r in run.results if r.transport != "parity"]) == len(_planned())  # each ran
    return flight[1]


def _planned() -> list[tuple[str, str]]:
    """The (scenario, transport) runs :func:`_suite` plans, in their order."""
    scenarios = [shipped(sid) for sid in SCENARIOS] * 3
    return [(scenario.id, transport)
            for scenario, transport in suite.plan(scenarios, ("stdio", "http"), None)]


def test_the_suite_keeps_a_fixed_jobs_even_on_idle_cpus(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _suite(tmp_path, 2, None, 0.0, monkeypatch) == 2


def test_the_suite_default_grows_on_idle_cpus_and_not_on_busy_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _suite(tmp_path, 2, 8, 0.0, monkeypatch) > 2
    assert _suite(tmp_path, 2, 8, 1.0, monkeypatch) == 2


def test_the_suite_backfills_idle_cpus_with_the_runs_at_the_orders_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[str, str]] = []
    peak = _suite(tmp_path, 2, 2, 0.0, monkeypatch, backfill=2, started=started)
    assert 2 < peak <= 4
    planned = _planned()
    # the last run planned started before the middle of the order had
    assert started.index(planned[-1]) < len(planned) // 2
    assert sorted(started) == sorted(planned)  # each run once


def test_the_suite_on_busy_cpus_starts_runs_in_their_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[str, str]] = []
    assert _suite(tmp_path, 2, 2, 0.7, monkeypatch, backfill=2, started=started) == 2
    assert started == _planned()


def test_a_runners_own_error_ends_the_suite_and_is_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite, "open_meter", lambda: _meter(0.0))
    calls: list[str] = []

    def runner(scenario: Scenario, transport: str, *_: object) -> ScenarioResult:
        calls.append(scenario.id)
        if len(calls) == 3:
            raise RuntimeError("the runner broke")
        time.sleep(0.2)  # the rest would need about 1.2 s: the error ends the suite long before
        return ScenarioResult(scenario=scenario.id, transport=transport, status="passed")

    scenarios = [shipped(sid) for sid in SCENARIOS] * 5
    with pytest.raises(RuntimeError, match="the runner broke"):
        run_suite(scenarios, SuiteOptions(run=options(scripted("good", "stdio,http"),
                                                      work_root=tmp_path),
                                          jobs=2, max_jobs=4, backfill=2, judges=()),
                  runner=runner)
    assert len(calls) < len(scenarios) * 2  # the rest never started


# -- the commands -------------------------------------------------------------------------------

def test_run_grows_by_default_and_keeps_a_given_jobs_fixed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    from palace_conformance.cli import main
    from palace_conformance.commands import run as run_command
    from palace_conformance.runner import jobs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(jobs, "usable_cpus", lambda: 2)
    monkeypatch.setattr(jobs, "available_memory", lambda: 64 * 2**30)
    seen: list[tuple[int, int | None, int]] = []

    def capture(scenarios: list[Scenario], options: SuiteOptions, progress: object) -> object:
        seen.append((options.jobs, options.max_jobs, options.backfill))
        raise KeyboardInterrupt

    monkeypatch.setattr(run_command, "_run_suite", capture)
    host = " ".join(scripted("good", "stdio"))
    for jobs_flag in ((), ("--jobs", "3")):
        with pytest.raises((SystemExit, KeyboardInterrupt)):
            main(["run", "-q", "--bridge", host, "--select", "life.handshake.*", *jobs_flag])
    capsys.readouterr()
    assert seen == [(8, 24, 16), (3, None, 0)]


def test_diff_and_matrix_take_the_same_default_and_keep_a_given_jobs_fixed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from palace_conformance.commands import drift
    from palace_conformance.runner import jobs

    monkeypatch.setattr(jobs, "usable_cpus", lambda: 2)
    monkeypatch.setattr(jobs, "available_memory", lambda: 64 * 2**30)
    chosen: list[tuple[int, int | None, int]] = []
    for named in (None, 3):
        args = argparse.Namespace(jobs=named, select=[], transport="both", op_timeout_ms=15000,
                                  level=None)
        selection = drift._selection(args)
        chosen.append((selection.jobs, selection.max_jobs, selection.backfill))
    assert chosen == [(8, 24, 16), (3, None, 0)]
