"""The run's timer probe: a gap's upper bound gets what the machine's wake-ups lost in its window,
so it holds under load and stays tight on an idle machine; the lower bound never moves."""

from __future__ import annotations

import time

from palace_conformance.runner.execution.lateness import PERIOD_MS, WAKEUPS, TimerProbe
from palace_conformance.runner.results import RunResult
from palace_conformance.scenarios.checks import evaluate
from palace_conformance.scenarios.model import Check

#: knob.defaults.connect-retries-and-backoff's first retry: 250 ms, with one step of slack
BACKOFF = Check.from_json({"check": "gap", "from": {"kind": "http_response", "status": 401},
                           "to": {"kind": "http_request"},
                           "ms": {"at_least": 250, "slack_ms": 250}})


def probe_with(late_s: float, start: float = 100.0, end: float = 102.0) -> TimerProbe:
    """A probe that saw a wake-up every period from ``start`` to ``end``, each ``late_s`` late."""
    probe = TimerProbe()
    period = PERIOD_MS / 1000.0
    wake = start
    while wake < end:
        wake += period + late_s
        probe.add(wake, late_s)
    return probe


def retry_after(ms: float) -> list[dict[str, object]]:
    return [{"kind": "http_response", "status": 401, "t": 101.0},
            {"kind": "http_request", "t": 101.0 + ms / 1000.0}]


def test_an_idle_machine_adds_almost_nothing_so_four_times_the_backoff_fails() -> None:
    idle = probe_with(0.0003)  # 0.3 ms late per wake-up: an idle machine
    assert idle.allowance_ms(101.0, 102.0) == 1
    slow = evaluate(BACKOFF, retry_after(1000), lateness=idle.allowance_ms)
    assert not slow.passed
    assert slow.detail == ("1000 ms from record #0 to #1; expected 250..501 ms "
                           "(250 + 250 slack + 1 machine lateness)")
    assert not evaluate(BACKOFF, retry_after(600), lateness=idle.allowance_ms).passed
    assert evaluate(BACKOFF, retry_after(480), lateness=idle.allowance_ms).passed


def test_a_loaded_machine_widens_the_upper_bound_by_its_lateness_in_the_window() -> None:
    loaded = probe_with(0.02)  # 20 ms late per wake-up: the load of the failure it fixes
    assert loaded.allowance_ms(101.0, 101.5) == WAKEUPS * 20
    late = evaluate(BACKOFF, retry_after(524), lateness=loaded.allowance_ms)
    assert late.passed and "+ 60 machine lateness" in late.detail
    assert not evaluate(BACKOFF, retry_after(524)).passed  # the fixed slack alone: the flake
    assert not evaluate(BACKOFF, retry_after(1000), lateness=loaded.allowance_ms).passed
    early = evaluate(BACKOFF, retry_after(200), lateness=loaded.allowance_ms)
    assert not early.passed  # the lower bound never moves


def test_only_the_sleeps_overlapping_the_window_count() -> None:
    probe = TimerProbe()
    probe.add(10.0, 0.0)
    probe.add(10.5, 0.49)  # slept 10.0..10.5: half a second late, before the window
    probe.add(11.02, 0.01)
    probe.add(11.04, 0.01)
    probe.add(12.5, 1.45)  # slept 11.04..12.5: overlaps a window that ends at 11.2
    assert probe.worst_ms(11.01, 11.03) is not None
    assert round(probe.worst_ms(11.01, 11.03) or 0) == 10
    assert round(probe.worst_ms(11.01, 11.2) or 0) == 1450
    assert probe.worst_ms(20.0, 21.0) is None and probe.allowance_ms(20.0, 21.0) == 0


def test_the_probe_process_reports_wake_ups_on_the_journals_clock() -> None:
    probe = TimerProbe().start()
    try:
        start = time.monotonic()
        deadline = start + 30
        while probe.summary()["samples"] < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        end = time.monotonic()
    finally:
        probe.stop()
    summary = probe.summary()
    assert summary["samples"] >= 5
    assert summary["max_ms"] >= summary["p95_ms"] >= summary["p50_ms"] >= 0
    assert probe.worst_ms(start, end) is not None  # the same CLOCK_MONOTONIC as the journal
    probe.stop()  # twice is harmless


def test_the_run_keeps_the_figures_in_its_results() -> None:
    figures = {"period_ms": 10, "wakeups": 3, "samples": 4, "p50_ms": 0.2, "p95_ms": 1.0,
               "max_ms": 3.5}
    assert RunResult.from_json(RunResult(lateness=figures).to_json()).lateness == figures
    assert RunResult.from_json({}).lateness is None
