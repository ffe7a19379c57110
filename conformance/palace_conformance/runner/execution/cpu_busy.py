"""How busy the CPUs this runner may use are: what the suite's admission (admission.py) reads.

Why this and not the load average: the load average lags by a minute and counts waiting tasks,
while a suite's runs start and end within seconds. The kernel's CPU time counters, read twice,
say what fraction of the runner's CPUs did work in between, including work that is not the
run's (another job on a shared CI machine).

Two sources, the narrower first:

- a cgroup v2 CPU quota (``cpu.max`` in the runner's own cgroup, as a container's ``--cpus``
  sets): the cgroup's ``usage_usec`` against the quota, since CPUs outside the quota's reach are
  idle to ``/proc/stat`` but not to this process;
- else ``/proc/stat``: the ``cpuN`` lines of the CPUs in this process's affinity mask, busy being
  everything but ``idle`` and ``iowait`` (``steal`` counts as busy: the CPU was not ours).

Where neither can be read (not Linux, a hardened ``/proc``), :func:`open_meter` returns None and
the suite keeps its fixed number of runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: /proc/stat's fields after the name, in order: user nice system idle iowait irq softirq steal
_IDLE_FIELDS = (3, 4)
_COUNTED_FIELDS = 8
PROC_STAT = "/proc/stat"
CGROUP_ROOT = "/sys/fs/cgroup"


@dataclass(frozen=True)
class Reading:
    """Cumulative CPU time at one moment: how much was busy, out of how much there was."""

    busy: float
    total: float


def busy_between(before: Reading, after: Reading) -> float | None:
    """The busy fraction (0..1) between two readings; None when no time passed between them."""
    total = after.total - before.total
    if total <= 0:
        return None
    return min(1.0, max(0.0, (after.busy - before.busy) / total))


def parse_proc_stat(text: str, cpus: Iterable[int] | None) -> Reading | None:
    """The busy and total ticks of the ``cpuN`` lines whose N is in ``cpus`` (every CPU when
    None); None when the text has none of them."""
    wanted = None if cpus is None else set(cpus)
    busy = total = 0
    seen = False
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit():
            continue
        if wanted is not None and int(name[3:]) not in wanted:
            continue
        try:
            fields = [int(v) for v in rest.split()[:_COUNTED_FIELDS]]
        except ValueError:
            continue
        if len(fields) < 5:
            continue
        line_total = sum(fields)
        total += line_total
        busy += line_total - sum(fields[i] for i in _IDLE_FIELDS)
        seen = True
    return Reading(float(busy), float(total)) if seen else None


def parse_cgroup_quota(cpu_max: str) -> float | None:
    """The CPUs a cgroup v2 ``cpu.max`` grants (``"150000 100000"``: 1.5), None for ``max``."""
    parts = cpu_max.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_cgroup_usage(cpu_stat: str) -> float | None:
    """``usage_usec`` of a cgroup v2 ``cpu.stat``, in seconds."""
    for line in cpu_stat.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            try:
                return int(value) / 1e6
            except ValueError:
                return None
    return None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return None


def _own_cgroup(proc_cgroup: str) -> str | None:
    """This process's cgroup v2 directory, from ``/proc/self/cgroup``'s ``0::PATH`` line."""
    text = _read(proc_cgroup)
    for line in (text or "").splitlines():
        if line.startswith("0::"):
            relative = line[3:].strip().lstrip("/")
            if ".." in relative.split("/"):
                return None
            return os.path.join(CGROUP_ROOT, relative)
    return None


def _affinity() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def open_meter(proc_stat: str = PROC_STAT, proc_cgroup: str = "/proc/self/cgroup",
               clock: Callable[[], float] = time.monotonic) -> Callable[[], Reading | None] | None:
    """A function returning the current :class:`Reading` (None when a read fails), from the
    narrowest source that works here; None when none does."""
    cgroup = _own_cgroup(proc_cgroup)
    quota = parse_cgroup_quota(_read(os.path.join(cgroup, "cpu.max")) or "") if cgroup else None
    if cgroup is not None and quota is not None:
        stat_path = os.path.join(cgroup, "cpu.stat")

        def cgroup_reading() -> Reading | None:
            used = parse_cgroup_usage(_read(stat_path) or "")
            return None if used is None else Reading(used, clock() * quota)

        if cgroup_reading() is not None:
            return cgroup_reading
    cpus = _affinity()

    def proc_reading() -> Reading | None:
        return parse_proc_stat(_read(proc_stat) or "", cpus)

    return proc_reading if proc_reading() is not None else None
