#!/usr/bin/env python3
"""Wall time and the CPU time of a command's whole process tree.

Why: ``time palace-conformance run`` reports only the runner and the children it reaps itself.
The hosts and HTTP fakes are children of the warm server, which outlives the runner by a moment
and is never reaped by it, so ``time`` shows about 5 s of CPU for a catalogue run that really
uses 25-30 s. This runs the command as a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``):
every orphaned descendant is re-parented here and reaped, so ``RUSAGE_CHILDREN`` counts them all.
Unlike ``/proc/stat``, other jobs on a shared machine do not enter the figure.

Usage::

    python benchmarks/tree_cpu.py palace-conformance run [ARGS ...]
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    if not argv:
        print("tree_cpu.py: name the command to measure, e.g. "
              "python benchmarks/tree_cpu.py palace-conformance run", file=sys.stderr)
        return 2
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("tree_cpu.py: cannot become a child subreaper (Linux only)", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        code = subprocess.run(argv, stdout=subprocess.DEVNULL, check=False).returncode
    except OSError as exc:
        print(f"tree_cpu.py: cannot run {argv[0]!r}: {exc.strerror}", file=sys.stderr)
        return 2
    wall = time.monotonic() - started
    while True:  # orphans (the warm server, its last children) come back here to be reaped
        try:
            os.wait()
        except ChildProcessError:
            break
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    print(f"exit {code}: wall {wall:.1f} s, CPU {cpu:.1f} s (user {usage.ru_utime:.1f}, "
          f"sys {usage.ru_stime:.1f}), {cpu / wall:.2f} CPUs busy on average")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
