"""The default parallelism follows the CPUs the runner may use, within its bounds."""

from __future__ import annotations

import os

import pytest

from palace_conformance.runner import jobs


@pytest.mark.parametrize(("cpus", "expected"), [(1, 2), (2, 4), (3, 6), (4, 8), (64, 8)])
def test_two_runs_per_usable_cpu_between_the_bounds(monkeypatch: pytest.MonkeyPatch, cpus: int,
                                                    expected: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)), raising=False)
    assert jobs.default_jobs() == expected


def test_without_an_affinity_mask_the_machine_count_is_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert jobs.usable_cpus() == 3 and jobs.default_jobs() == 6
