"""The run's timer probe: a gap's upper bound gets what the machine's wake-ups lost in its window,
so it holds under load and stays tight on an idle machine; the lower bound never moves."""

from __future__ import annotations

import time
from pathlib import Path

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.execution.lateness import (
    BURST_EVERY,
    BURST_MS,
    PERIOD_MS,
    WAKEUPS,
    WORK_MS,
    TimerProbe,
    _Series,
)
from palace_conformance.runner.results import CheckRecord, RunResult, StepRecord
from palace_conformance.runner.verdict.judge import Observation, judge
from palace_conformance.scenarios.checks import evaluate
from palace_conformance.scenarios.model import Check, Scenario

from .support import options, write_scenario

#: knob.defaults.connect-retries-and-backoff's first retry: 250 ms, with one step of slack
BACKOFF = Check.from_json({"check": "gap", "from": {"kind": "http_response", "status": 401},
                           "to": {"kind": "http_request"},
                           "ms": {"at_least": 250, "slack_ms": 250}})


def probe_with(late_s: float, stretch: float, start: float = 100.0,
               end: float = 102.0) -> TimerProbe:
    """A probe that saw a sleep every period from ``start`` to ``end``, each woken ``late_s``
    late, and a burst every BURST_EVERY sleeps that took ``stretch`` times its CPU time."""
    probe = TimerProbe()
    period, burst = PERIOD_MS / 1000.0, BURST_MS / 1000.0
    now, count = start, 0
    while now < end:
        probe.add_wake(now, now + period + late_s, late_s)
        now += period + late_s
        count += 1
        if count % BURST_EVERY == 0:
            probe.add_burst(now, now + burst * stretch, burst * (stretch - 1))
            now += burst * stretch
    return probe


def retry_after(ms: float) -> list[dict[str, object]]:
    return [{"kind": "http_response", "status": 401, "t": 101.0},
            {"kind": "http_request", "t": 101.0 + ms / 1000.0}]


def test_an_idle_machine_adds_almost_nothing_so_four_times_the_backoff_fails() -> None:
    idle = probe_with(0.0003, 1.05)  # woken 0.3 ms late, work 5 % slower: an idle machine
    allowance = idle.allowance_ms(101.0, 102.0)
    assert allowance == 3  # 3 x 0.3 ms + 25 ms x 0.05, rounded up
    slow = evaluate(BACKOFF, retry_after(1000), lateness=idle.allowance_ms)
    assert not slow.passed
    assert slow.detail == ("1000 ms from record #0 to #1; expected 250..503 ms "
                           "(250 + 250 slack + 3 machine lateness)")
    assert not evaluate(BACKOFF, retry_after(600), lateness=idle.allowance_ms).passed
    assert evaluate(BACKOFF, retry_after(480), lateness=idle.allowance_ms).passed


def test_a_loaded_machine_widens_the_upper_bound_by_what_it_cost_in_the_window() -> None:
    loaded = probe_with(0.002, 4.0)  # load 8 on 2 CPUs: work takes 4x its CPU time
    assert loaded.allowance_ms(101.0, 101.5) == WAKEUPS * 2 + WORK_MS * 3
    late = evaluate(BACKOFF, retry_after(524), lateness=loaded.allowance_ms)
    assert late.passed and "+ 81 machine lateness" in late.detail
    assert not evaluate(BACKOFF, retry_after(524)).passed  # the fixed slack alone: the flake
    assert not evaluate(BACKOFF, retry_after(1000), lateness=loaded.allowance_ms).passed
    early = evaluate(BACKOFF, retry_after(200), lateness=loaded.allowance_ms)
    assert not early.passed  # the lower bound never moves


def test_only_the_samples_near_the_window_count() -> None:
    probe = TimerProbe()
    probe.add_wake(10.0, 10.5, 0.49)  # half a second late, before the window
    probe.add_wake(11.01, 11.02, 0.0)
    probe.add_wake(11.02, 11.04, 0.01)
    probe.add_wake(11.04, 12.5, 1.45)  # began in a window that ends at 11.2
    assert probe.allowance_ms(11.015, 11.03) == 30
    assert probe.allowance_ms(11.015, 11.2) == 3 * 1450
    probe.add_burst(13.0, 13.004, 0.002)  # a 2 ms burst that took 4 ms
    spacing = BURST_EVERY * PERIOD_MS / 1000.0
    assert probe.allowance_ms(13.0 + spacing - 0.001, 13.0 + spacing) == WORK_MS
    assert probe.allowance_ms(13.5, 13.6) == 0  # nothing near it
    assert probe.allowance_ms(20.0, 21.0) == 0


def test_the_probe_process_reports_wake_ups_on_the_journals_clock() -> None:
    probe = TimerProbe().start()
    try:
        start = time.monotonic()
        deadline = start + 30
        while probe.summary()["bursts"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        end = time.monotonic()
    finally:
        probe.stop()
    summary = probe.summary()
    assert summary["samples"] >= 5
    assert summary["max_ms"] >= summary["p95_ms"] >= summary["p50_ms"] >= 0
    # the same CLOCK_MONOTONIC as the journal: its sleeps fall in the window
    assert any(start <= t <= end for t in probe._wakes.ended)
    probe.stop()  # twice is harmless


def test_the_run_keeps_the_figures_in_its_results() -> None:
    figures = {"period_ms": 10, "wakeups": 3, "work_ms": 10, "samples": 4, "bursts": 1,
               "p50_ms": 0.2, "p95_ms": 1.0, "max_ms": 3.5, "worst_stretch": 1.2}
    assert RunResult.from_json(RunResult(lateness=figures).to_json()).lateness == figures
    assert RunResult.from_json({}).lateness is None


def test_a_series_keeps_at_most_its_cap_and_drops_the_oldest() -> None:
    series = _Series()
    for second in range(10):
        series.add(float(second), second + 0.01, second / 1000.0, cap=4)
    assert len(series.late) <= 4
    assert series.worst(8.0, 9.5) == 0.009  # the newest samples are kept
    assert series.worst(0.0, 1.0) is None  # the oldest were dropped


# --- a step's elapsed_ms: the runner measures it too, so its upper bound gets the same allowance

#: a step bounded like the retry above: 250 ms and one step of slack
TIMED = Scenario.from_json({
    "schema_version": 1, "id": "life.timed.step", "title": "t", "covers": [],
    "transports": ["stdio"],
    "steps": [{"op": "call_tool", "name": "mempalace_status", "args": {},
               "expect": {"elapsed_ms": {"at_least": 250, "slack_ms": 250}}}]},
    Path("x.json"))


def _elapsed(ms: float, probe: TimerProbe | None,
             window: tuple[float, float] | None = (101.0, 101.0)) -> CheckRecord:
    """The elapsed_ms verdict of TIMED's step, which took ``ms`` from 101.0 s on."""
    span = None if window is None else (window[0], window[0] + ms / 1000.0)
    step = StepRecord(index=0, key="0", op="call_tool", ran=True, ok=True, elapsed_ms=ms,
                      window=span)
    observation = Observation(scenario=TIMED, transport="stdio", steps=[step], journal=[],
                              lateness=probe.allowance_ms if probe is not None else None)
    return next(r for r in judge(observation) if r.pointer == "/steps/0/expect/elapsed_ms")


def test_a_steps_elapsed_ms_gets_the_lateness_of_its_window_as_a_gap_does() -> None:
    loaded = probe_with(0.002, 4.0)  # the loaded machine above: 81 ms over this window
    late = _elapsed(524, loaded)
    assert late.passed and late.message == ("took 524 ms; expected 250..581 ms "
                                           "(250 + 250 slack + 81 machine lateness)")
    assert not _elapsed(524, None).passed  # the fixed slack alone: the flake
    assert not _elapsed(524, loaded, window=None).passed  # no window (a report read back)
    assert not _elapsed(1000, loaded).passed
    early = _elapsed(200, loaded)
    assert not early.passed and "250..581 ms" in early.message  # the lower bound never moves
    idle = _elapsed(600, probe_with(0.0003, 1.05))
    assert not idle.passed and "250..503 ms" in idle.message  # an idle machine: 3 ms


def test_an_unbounded_duration_asks_the_probe_nothing() -> None:
    asked: list[tuple[float, float]] = []

    def lateness(start: float, end: float) -> int:
        asked.append((start, end))
        return 0

    unbounded = Scenario.from_json({
        "schema_version": 1, "id": "life.timed.step", "title": "t", "covers": [],
        "transports": ["stdio"],
        "steps": [{"op": "call_tool", "name": "mempalace_status", "args": {},
                   "expect": {"elapsed_ms": {"at_least": 250}}}]}, Path("x.json"))
    step = StepRecord(index=0, key="0", op="call_tool", ran=True, ok=True, elapsed_ms=5000.0,
                      window=(101.0, 106.0))
    verdict = next(r for r in judge(Observation(scenario=unbounded, transport="stdio",
                                                steps=[step], journal=[], lateness=lateness))
                   if r.pointer == "/steps/0/expect/elapsed_ms")
    assert verdict.passed and asked == []


def test_the_runner_gives_every_step_the_window_it_measured(tmp_path: Path) -> None:
    asked: list[tuple[float, float]] = []

    class Loaded(TimerProbe):
        def allowance_ms(self, start: float, end: float) -> int:
            asked.append((start, end))
            return 1000

    scenario = write_scenario(tmp_path, {
        "id": "life.timed.sleep", "transports": ["stdio"],
        "steps": [{"op": "load", "expect": {"ok": True}},
                  {"op": "sleep", "ms": 300,
                   "expect": {"elapsed_ms": {"at_least": 300, "slack_ms": 0}}},
                  {"op": "shutdown", "reason": "quit"}]})
    before = time.monotonic()
    result = run_scenario(scenario, "stdio", options(work_root=tmp_path / "w",
                                                     lateness=Loaded()))
    slept = next(s for s in result.steps if s.op == "sleep")
    assert slept.window is not None and before <= slept.window[0]
    assert slept.window[1] - slept.window[0] >= (slept.elapsed_ms or 0) / 1000.0 >= 0.3
    assert slept.window in asked
    verdict = next(c for c in result.checks if c.pointer == "/steps/1/expect/elapsed_ms")
    assert verdict.passed and "+ 1000 machine lateness" in verdict.message
