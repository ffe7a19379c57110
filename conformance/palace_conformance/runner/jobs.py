"""How many runs go in parallel by default.

A run mostly waits (settle and debounce windows, backoffs, a fake's scripted stall), so two runs
per CPU keep the CPUs about half busy: on 2 cores, 4 jobs measured 51 % busy and 8 jobs 81 %, all
green (BENCHMARKS.md). Light on purpose: the CLI imports it for ``--help``.
"""

from __future__ import annotations

import os

MIN_JOBS = 2
MAX_JOBS = 8


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_jobs() -> int:
    """Two runs per usable CPU, from 2 to 8."""
    return max(MIN_JOBS, min(MAX_JOBS, 2 * usable_cpus()))
