"""The order runs start in: the longest first.

A catalogue run is many short runs and a few long ones on ``--jobs`` workers. Started in
catalogue order, a long run that comes late starts when the others are nearly done and the run
waits for it alone (the tail); started first, the long runs overlap the short ones and the run
ends close to ``max(longest run, total / jobs)``, the least any order can do (longest processing
time first, LPT scheduling).

How long a run takes is read from ``durations.json`` beside this module: each (scenario,
transport)'s wall time in seconds from a reference run of the catalogue (``python
benchmarks/durations.py REPORT/results.json`` writes it). A run it does not name (a new
scenario, a user's own fixture) counts as the median. The order changes only when runs start:
each run is isolated, so no verdict depends on it.

The default ``--jobs`` takes runs from the order's other end too: while its limit is at its
ceiling and the CPUs idle (the first runs sleep), extra slots take the shortest runs
(admission.py, backfill).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TypeVar

from palace_conformance.scenarios.model import Scenario

DURATIONS = Path(__file__).with_name("durations.json")
Job = TypeVar("Job", bound=tuple[Scenario, str])


def key(scenario_id: str, transport: str) -> str:
    """How ``durations.json`` names a run: ``<scenario>[<transport>]``."""
    return f"{scenario_id}[{transport}]"


@cache
def expected_durations(path: Path = DURATIONS) -> Mapping[str, float]:
    """Each run's expected wall time in seconds; empty when the file is missing or unreadable
    (the catalogue order then stands)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)}


def longest_first(jobs: Sequence[Job],
                  durations: Mapping[str, float] | None = None) -> list[Job]:
    """``jobs`` ordered by expected wall time, the longest first; runs with no figure count as
    the median, and equal ones keep their order (the catalogue's)."""
    durations = expected_durations() if durations is None else durations
    if not durations:
        return list(jobs)
    median = statistics.median(durations.values())
    return sorted(jobs, key=lambda job: -durations.get(key(job[0].id, job[1]), median))
