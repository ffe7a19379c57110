#!/usr/bin/env python3
"""Does any verdict move with machine load? Run the catalogue N times with the CPUs saturated.

Why: CI machines are shared and slow, and a verdict that depends on load is a flake a bridge
author cannot act on. This is a script, not a timed test: it starts a saturating background
load (``stress-ng --cpu N`` when installed, otherwise N busy Python processes), runs
``palace-conformance run --json`` N times under it, and reports every result whose status was
not the same in every run, with the reasons it gave. Exit 0 when every verdict held, 1 when one
moved, 2 on a usage error.

Usage::

    python benchmarks/verdict_stability.py --runs 20 --select 'feed.*' --select 'mail.steer.*'
    python benchmarks/verdict_stability.py --runs 10            # the whole catalogue
    python benchmarks/verdict_stability.py --runs 3 --load 0    # no background load

Every argument it does not know (``--bridge``, ``--profile``, ``--select``, ``--jobs``,
``--transport``, ``--level``, paths) is passed to ``run`` unchanged.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

#: the kit's command, from the interpreter running this script
CLI = [sys.executable, "-c",
       "import sys; from palace_conformance.cli import main; sys.exit(main())"]
BURN = "import itertools\nfor _ in itertools.count(): pass\n"


def start_load(workers: int) -> list[subprocess.Popen[bytes]]:
    """``workers`` CPU burners; stress-ng when the machine has it (one process, N workers)."""
    if workers <= 0:
        return []
    if shutil.which("stress-ng"):
        return [subprocess.Popen(["stress-ng", "--cpu", str(workers), "--quiet"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)]
    return [subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
            for _ in range(workers)]


def stop_load(burners: list[subprocess.Popen[bytes]]) -> None:
    for burner in burners:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(burner.pid, signal.SIGKILL)
        burner.wait(timeout=10)


def one_run(run_args: list[str], report: Path) -> dict[tuple[str, str], tuple[str, str]] | None:
    """(scenario, transport) -> (status, reason) for one ``palace-conformance run``; None when
    it wrote no readable report."""
    command = [*CLI, "run", "--json", str(report),
               *run_args]
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # said, and counted as a run whose verdicts all moved
        print(f"verdict_stability.py: the run wrote no readable report ({exc}); run it by hand "
              f"to see why: {' '.join(command)}", flush=True)
        return None
    return {(r["scenario"], r["transport"]): (r["status"], r.get("reason", ""))
            for r in data.get("results", ())}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="how many runs (default 10)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2,
                        help="background CPU burners (default: one per CPU; 0 for none)")
    options, run_args = parser.parse_known_args(argv)
    if options.runs < 2:
        parser.error("--runs must be at least 2 to compare verdicts")
    burners = start_load(options.load)
    verdicts: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    durations = []
    unreadable = 0  # runs without a report: nothing was compared, so nothing may be called stable
    try:
        with tempfile.TemporaryDirectory(prefix="verdict-stability-") as scratch:
            for index in range(options.runs):
                started = time.monotonic()
                found = one_run(run_args, Path(scratch) / f"run-{index}.json")
                durations.append(time.monotonic() - started)
                unreadable += found is None
                results = found or {}
                for key, verdict in results.items():
                    verdicts[key].append(verdict)
                moved = sum(1 for v in verdicts.values() if len({s for s, _ in v}) > 1)
                print(f"run {index + 1}/{options.runs}: {len(results)} results, "
                      f"{durations[-1]:.1f} s; moved so far: {moved}", flush=True)
    finally:
        stop_load(burners)
    moved = {key: v for key, v in verdicts.items()
             if len({s for s, _ in v}) > 1 or len(v) != options.runs}
    load = (f"stress-ng --cpu {options.load}" if options.load and shutil.which("stress-ng")
            else f"{options.load} busy Python processes")
    print(f"\n{options.runs} runs under {load}, {len(verdicts)} results each; "
          f"median run {sorted(durations)[len(durations) // 2]:.1f} s")
    if unreadable:
        print(f"{unreadable} of {options.runs} runs wrote no readable report: nothing to call "
              "stable (a --json of yours overrides the script's; leave it out)")
        return 1
    if not moved:
        held: dict[str, int] = defaultdict(int)
        for seen in verdicts.values():
            held[seen[0][0]] += 1
        print("every verdict was the same in every run: "
              + ", ".join(f"{n} {status}" for status, n in sorted(held.items())))
        return 0
    print(f"{len(moved)} verdicts moved:")
    for (scenario, transport), seen in sorted(moved.items()):
        counts: dict[str, int] = defaultdict(int)
        for status, _ in seen:
            counts[status] += 1
        reasons = sorted({reason for status, reason in seen if status != "passed" and reason})
        print(f"  {scenario} [{transport}]: "
              + ", ".join(f"{status} x{n}" for status, n in sorted(counts.items()))
              + (f" (missing in {options.runs - len(seen)} runs)" if len(seen) != options.runs
                 else "")
              + (f"; {reasons[0][:160]}" if reasons else ""))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
