"""The CPU of a process tree by kind of process, from Linux process accounting (``acct(2)``).

Why: the whole tree's CPU (``RUSAGE_CHILDREN`` under a subreaper, ``tree_cpu.py``) says how much,
not where. The kernel writes one record per process as it exits (``struct acct_v3``: pid, parent,
user and system time, flags, ``comm``) into a file named by ``acct(2)``; reading it back and
keeping the descendants of one process gives every process of the tree, even those a bridge
reaped itself, with what it cost.

Limits: root only (``CAP_SYS_PACCT``), and one accounting file per machine at a time (another
tool turning accounting on or off during the run loses records: the table's total is printed
beside the exact one, compare them). Times are in 1/100 s, truncated per process: a process of
55 ms shows 50 ms; :func:`table` adds half a tick per process and field as the expected
correction. ``comm`` is the program's file name (a script's own name, not its interpreter's),
15 bytes at most; a forked child that did not exec keeps its parent's (flag ``AFORK``).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime,
#: etime (float), 8 comp_t (utime stime mem io rw minflt majflt swaps), comm[16]
RECORD = struct.Struct("=BBHIIIIIIf8H16s")
AFORK = 0x01
AHZ = 100
HALF_TICK = 0.5 / AHZ


@dataclass(frozen=True)
class Proc:
    """One exited process."""

    pid: int
    ppid: int
    comm: str
    forked: bool  # forked and never exec'd: comm is its parent's
    user: float
    system: float


def _comp_t(value: int) -> float:
    """A ``comp_t`` (13-bit mantissa, 3-bit base-8 exponent) in seconds."""
    return float((value & 0x1FFF) << (3 * (value >> 13))) / AHZ


def start(path: str) -> None:
    """Turn process accounting on into ``path`` (created empty)."""
    with open(path, "wb"):
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(path.encode()) != 0:
        raise OSError(ctypes.get_errno(), f"acct({path}): {os.strerror(ctypes.get_errno())}")


def stop() -> None:
    """Turn process accounting off."""
    ctypes.CDLL(None, use_errno=True).acct(None)


def read(path: str) -> list[Proc]:
    """Every record in an accounting file."""
    with open(path, "rb") as handle:
        data = handle.read()
    procs = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        if fields[1] != 3:
            continue
        procs.append(Proc(pid=fields[6], ppid=fields[7],
                          comm=fields[18].split(b"\0", 1)[0].decode(errors="replace"),
                          forked=bool(fields[0] & AFORK),
                          user=_comp_t(fields[10]), system=_comp_t(fields[11])))
    return procs


def descendants(procs: Iterable[Proc], root: int) -> list[Proc]:
    """The records of ``root``'s descendants (parents as each was at its exit; the subreaper
    that ran ``root`` adopts orphans, so they stay in the tree)."""
    by_pid = {p.pid: p for p in procs}
    inside: dict[int, bool] = {root: True}

    def within(pid: int) -> bool:
        seen = []
        while pid not in inside:
            seen.append(pid)
            parent = by_pid.get(pid)
            if parent is None or parent.ppid in seen or parent.ppid <= 1:
                inside.update(dict.fromkeys(seen, False))
                return False
            pid = parent.ppid
        verdict = inside[pid]
        inside.update(dict.fromkeys(seen, verdict))
        return verdict

    return [p for p in by_pid.values() if p.pid != root and within(p.pid)]


def kinds(procs: list[Proc],
          label: Callable[[Proc, dict[int, Proc]], str]) -> dict[str, list[Proc]]:
    """Group processes by ``label(proc, by_pid)``."""
    by_pid = {p.pid: p for p in procs}
    groups: dict[str, list[Proc]] = defaultdict(list)
    for proc in procs:
        groups[label(proc, by_pid)].append(proc)
    return groups


def table(groups: dict[str, list[Proc]], exact: float | None = None) -> str:
    """A Markdown table: kind, processes, user, sys, CPU (+ half a tick a field), per process."""
    rows = []
    for kind, procs in groups.items():
        user = sum(p.user for p in procs)
        system = sum(p.system for p in procs)
        cpu = user + system + 2 * HALF_TICK * len(procs)
        rows.append((cpu, kind, len(procs), user, system))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    lines = ["| kind | processes | user (s) | sys (s) | CPU (s) | share | ms a process |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for cpu, kind, count, user, system in rows:
        lines.append(f"| {kind} | {count} | {user:.1f} | {system:.1f} | {cpu:.1f} | "
                     f"{cpu / total:.0%} | {1000 * cpu / count:.0f} |")
    lines.append(f"| all | {sum(r[2] for r in rows)} | {sum(r[3] for r in rows):.1f} | "
                 f"{sum(r[4] for r in rows):.1f} | {total:.1f} | 100% | |")
    if exact is not None:
        lines.append(f"\n(the tree's exact CPU, getrusage: {exact:.1f} s; the table's total "
                     f"with half a tick a process and field: {total:.1f} s)")
    return "\n".join(lines)
