"""The default parallelism: several runs per CPU the runner may use (runs mostly wait), capped,
and no more than the available memory holds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from palace_conformance.runner import jobs

PLENTY = 64 * 2**30


@pytest.mark.parametrize(("cpus", "expected"), [(1, 4), (2, 8), (3, 12), (64, 12)])
def test_runs_per_usable_cpu_up_to_the_cap(monkeypatch: pytest.MonkeyPatch, cpus: int,
                                           expected: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(jobs, "available_memory", lambda: PLENTY)
    assert jobs.default_jobs() == expected


def test_without_an_affinity_mask_the_machine_count_is_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert jobs.usable_cpus() == 2 and jobs.default_jobs(memory=PLENTY) == 8


@pytest.mark.parametrize(("memory_mib", "expected"), [(1024, 4), (2048, 8), (100, 2)])
def test_memory_caps_the_runs_and_the_floor_holds(memory_mib: int, expected: int) -> None:
    assert jobs.default_jobs(cpus=4, memory=memory_mib * 2**20) == expected


def test_available_memory_reads_memavailable(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  4000 kB\nMemFree:  100 kB\nMemAvailable:  2048 kB\n")
    assert jobs.available_memory(str(meminfo)) == 2048 * 1024
    meminfo.write_text("MemTotal:  4000 kB\n")
    assert jobs.available_memory(str(meminfo)) is None
    assert jobs.available_memory(str(tmp_path / "missing")) is None
    assert jobs.default_jobs(cpus=2, memory=None) >= jobs.MIN_JOBS


@pytest.mark.parametrize(("cpus", "memory_gib", "expected"),
                         [(1, 64, 8), (2, 64, 16), (8, 64, 16),  # per CPU, up to the cap
                          (2, 8, 8),  # 8 GiB holds 32 runs: 24 for the ceiling, 8 besides
                          (2, 6, 0), (1, 1, 0)])  # nothing beside the ceiling's runs
def test_backfill_per_cpu_capped_and_within_memory_beside_the_ceiling(
        cpus: int, memory_gib: int, expected: int) -> None:
    memory = memory_gib * 2**30
    assert jobs.backfill_slots(cpus, memory) == expected
    assert jobs.adaptive_ceiling(cpus, memory) + expected <= max(
        memory // jobs.MEMORY_PER_RUN, jobs.default_jobs(cpus, memory))


def test_a_given_jobs_is_fixed_and_the_default_reads_the_machine_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []

    def cpus() -> int:
        reads.append("cpus")
        return 2

    def memory() -> int:
        reads.append("memory")
        return PLENTY

    monkeypatch.setattr(jobs, "usable_cpus", cpus)
    monkeypatch.setattr(jobs, "available_memory", memory)
    assert jobs.admission_for(3) == (3, None, 0) and reads == []
    assert jobs.admission_for(None) == (8, 24, 16)
    assert sorted(reads) == ["cpus", "memory"]
