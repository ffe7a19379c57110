"""How many runs go in parallel by default.

A run mostly waits (settle and debounce windows, backoffs, a fake's scripted stall), so the
default is several runs per CPU: :data:`RUNS_PER_CPU`, capped at :data:`MAX_JOBS` (past it the
slowest timing windows start to stretch on a loaded machine) and by the memory available (each
run holds a host, a fake and the bridge's children: :data:`MEMORY_PER_RUN` is budgeted for a
Node host's). That is where a suite starts; without ``--jobs`` it may grow, while the CPUs have
time to spare, up to :func:`adaptive_ceiling`, and while they are idle at that ceiling, start
up to :func:`backfill_slots` of the shortest runs besides (runner/execution/admission.py).
Measured figures and the command: docs/runner.md. Light on purpose: the CLI imports it for
``--help``.
"""

from __future__ import annotations

import os

MIN_JOBS = 2
#: on 2 CPUs, 296 results: --jobs 4 130.7 s, 8 68.3 s, 12 52.3 s, all green, with the machine
#: already saturated by other work (load 16-20); at 16 four timing windows overran, and at 10 one
#: verdict moved in benchmarks/verdict_stability.py where 8 held (docs/runner.md)
RUNS_PER_CPU = 4
MAX_JOBS = 12
#: how far an idle machine lets the default grow: runs per CPU, and at most
#: (on 2 idle CPUs the reference's catalogue stops gaining at about 14)
ADAPTIVE_PER_CPU = 12
ADAPTIVE_MAX_JOBS = 24
#: runs from the order's end let in beyond the ceiling while the CPUs are idle: per CPU, and at
#: most (on 2 idle CPUs 16 took the reference's catalogue from 23.2-24.5 s to 22.3-22.8 s;
#: 24 gained no more)
BACKFILL_PER_CPU = 8
BACKFILL_MAX = 16
#: what one run may hold resident: the reference run measured ~30-60 MiB (host and fake forked
#: from the warm server); a Node host with pi's packages is the larger case
MEMORY_PER_RUN = 256 * 2**20


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def available_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """Bytes the kernel says new work can use without swapping (MemAvailable), or None."""
    try:
        with open(meminfo, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_jobs(cpus: int | None = None, memory: int | None = None) -> int:
    """:data:`RUNS_PER_CPU` runs per usable CPU, at most :data:`MAX_JOBS` and as many as the
    available memory holds at :data:`MEMORY_PER_RUN` each, never below :data:`MIN_JOBS`."""
    cpus = usable_cpus() if cpus is None else cpus
    memory = available_memory() if memory is None else memory
    return max(MIN_JOBS, _within(RUNS_PER_CPU * cpus, MAX_JOBS, memory))


def adaptive_ceiling(cpus: int | None = None, memory: int | None = None) -> int:
    """How far the default may grow: :data:`ADAPTIVE_PER_CPU` runs per usable CPU, at most
    :data:`ADAPTIVE_MAX_JOBS` and what the available memory holds, never below
    :func:`default_jobs` (where it starts)."""
    cpus = usable_cpus() if cpus is None else cpus
    memory = available_memory() if memory is None else memory
    return max(default_jobs(cpus, memory),
               _within(ADAPTIVE_PER_CPU * cpus, ADAPTIVE_MAX_JOBS, memory))


def backfill_slots(cpus: int | None = None, memory: int | None = None) -> int:
    """How many of the shortest runs may start beyond :func:`adaptive_ceiling` while the CPUs
    are idle: :data:`BACKFILL_PER_CPU` per usable CPU, at most :data:`BACKFILL_MAX`, and what
    the available memory holds beside the ceiling's runs."""
    cpus = usable_cpus() if cpus is None else cpus
    memory = available_memory() if memory is None else memory
    ceiling = adaptive_ceiling(cpus, memory)
    together = _within(ceiling + BACKFILL_PER_CPU * cpus, ceiling + BACKFILL_MAX, memory)
    return max(0, together - ceiling)


def admission_for(given: int | None) -> tuple[int, int | None, int]:
    """``(jobs, max_jobs, backfill)`` for a ``--jobs`` flag: a given number is fixed (no growth,
    no backfill); without one, :func:`default_jobs`, :func:`adaptive_ceiling` and
    :func:`backfill_slots`, from one reading of the CPUs and memory."""
    if given is not None:
        return given, None, 0
    cpus, memory = usable_cpus(), available_memory()
    return (default_jobs(cpus, memory), adaptive_ceiling(cpus, memory),
            backfill_slots(cpus, memory))


def _within(jobs: int, cap: int, memory: int | None) -> int:
    """``jobs``, at most ``cap`` and what ``memory`` (None: unknown) holds at
    :data:`MEMORY_PER_RUN` a run."""
    jobs = min(jobs, cap)
    return jobs if memory is None else min(jobs, memory // MEMORY_PER_RUN)
