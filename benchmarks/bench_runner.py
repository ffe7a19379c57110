#!/usr/bin/env python3
"""Benchmark the runner's per-run overhead: warm starts against cold ones, side by side.

Why: every (scenario, transport) run starts a host and, over HTTP, a fake. Started cold, each is a
fresh interpreter importing the bridge, httpx, jsonschema or the fake (0.2-0.5 s of CPU), which
made the catalogue run CPU-bound on 2 cores. ``runner/execution/warm_client.py`` forks them from a
warm server.

Usage::

    python benchmarks/bench_runner.py [--runs 20] [--catalogue] [--jobs N ...] [--json FILE]

Host start is spawn -> ``hello`` answered; HTTP fake start is spawn -> its ready file written.
Cold and warm samples alternate, so machine load hits both alike. ``--catalogue`` also times the
whole default catalogue (``palace-conformance run``) cold and warm at each ``--jobs`` value and
samples how busy the CPUs were. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from palace_conformance.hosts import REFERENCE_HOST
from palace_conformance.runner.execution import warm_client
from palace_conformance.runner.execution.driver import DriverClient
from palace_conformance.runner.execution.world import scrubbed_environ

CONFORMANCE = Path(sys.executable).parent / "palace-conformance"


def env_for(home: Path) -> dict[str, str]:
    env = scrubbed_environ()
    env["HOME"] = str(home)
    return env


def host_start(home: Path, warm_start: bool) -> float:
    started = time.perf_counter()
    with DriverClient(REFERENCE_HOST, env=env_for(home), cwd=home, warm=warm_start) as host:
        host.hello()
        elapsed = time.perf_counter() - started
        host.request("exit", {"timeout_ms": 2000}, deadline_ms=2000)
    return elapsed


def fake_start(home: Path, warm_start: bool) -> float:
    ready = home / "ready.json"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-c", warm_client.LAUNCH, "fake", "http", "--port", "0", "--ready-file",
            str(ready)]
    started = time.perf_counter()
    proc = warm_client.start(argv, warm=warm_start, env=env_for(home), cwd=home,
                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
    try:
        while not ready.exists():
            if proc.poll() is not None:
                raise SystemExit(f"the HTTP fake exited {proc.returncode}")
            time.sleep(0.002)
        return time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait(5)


def side_by_side(measure: Any, runs: int) -> dict[str, float]:
    samples: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        home = Path(tmp)
        measure(home, True)  # the warm server's own start is not a sample
        measure(home, False)
        for _ in range(runs):
            for warm_start in (False, True):
                samples[warm_start].append(measure(home, warm_start))
    cold, hot = statistics.median(samples[False]), statistics.median(samples[True])
    return {"cold_ms": cold * 1000, "warm_ms": hot * 1000, "ratio": hot / cold}


def cpu_times() -> tuple[int, int]:
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(x) for x in handle.readline().split()[1:9]]
    return sum(fields), fields[3] + fields[4]


def catalogue(jobs: int, cold: bool) -> dict[str, Any]:
    argv = [str(CONFORMANCE), "run", "--jobs", str(jobs)] + (["--cold-start"] if cold else [])
    total0, idle0 = cpu_times()
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    total1, idle1 = cpu_times()
    busy = 1 - (idle1 - idle0) / max(1, total1 - total0)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return {"jobs": jobs, "cold": cold, "wall_s": wall, "cpu_busy": busy, "exit": done.returncode,
            "summary": last}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--catalogue", action="store_true",
                        help="also time the whole catalogue, cold and warm")
    parser.add_argument("--jobs", type=int, action="append", default=[],
                        help="--jobs values for --catalogue (default: 2 and 4)")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    results: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                               "host_start": side_by_side(host_start, args.runs),
                               "http_fake_start": side_by_side(fake_start, args.runs)}
    print("| measure | cold (median) | warm (median) | warm / cold |")
    print("|---|---|---|---|")
    for key, label in (("host_start", "reference host: spawn -> hello answered"),
                       ("http_fake_start", "HTTP fake: spawn -> listening")):
        row = results[key]
        print(f"| {label} | {row['cold_ms']:.0f} ms | {row['warm_ms']:.0f} ms | "
              f"{row['ratio']:.2f} |")
    if args.catalogue:
        runs = [catalogue(jobs, cold) for jobs in (args.jobs or [2, 4]) for cold in (True, False)]
        results["catalogue"] = runs
        print("\n| catalogue run | wall | CPUs busy | result |")
        print("|---|---|---|---|")
        for run in runs:
            print(f"| `--jobs {run['jobs']}` {'cold' if run['cold'] else 'warm'} | "
                  f"{run['wall_s']:.1f} s | {run['cpu_busy']:.0%} | {run['summary']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
