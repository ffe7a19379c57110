#!/usr/bin/env python3
"""Benchmark loading the shipped scenario catalogue: validated, first cached load, cached.

Why: every ``palace-conformance`` command and every test process loads the catalogue, and
validating 124 files against the JSON Schema took about a second. ``scenarios/cache.py``
remembers clean verdicts across processes.

Usage::

    python benchmarks/bench_catalogue.py [--runs 7] [--json FILE]

Each sample is a fresh interpreter timing ``load_catalogue()`` alone (imports excluded; the
validator is built inside it). The three modes alternate, so machine load hits them alike:

- ``validated``: ``PALACE_CONFORMANCE_NO_CACHE=1``, every file checked (the cold path)
- ``first``: an empty cache directory: every file checked, then the verdicts written
- ``cached``: the cache the ``first`` sample wrote
Prints a Markdown table of medians and ranges.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import time
from palace_conformance.scenarios.loader import load_catalogue
started = time.perf_counter()
catalogue = load_catalogue()
elapsed = time.perf_counter() - started
assert catalogue.ok, catalogue.problems[:3]
print(elapsed, len(catalogue.scenarios))
"""
MODES = ("validated", "first", "cached")


def sample(mode: str, cache_home: Path) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if k != "PALACE_CONFORMANCE_NO_CACHE"}
    env["XDG_CACHE_HOME"] = str(cache_home)
    if mode == "validated":
        env["PALACE_CONFORMANCE_NO_CACHE"] = "1"
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    count = 0
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-catalogue-") as home:
            for mode in MODES:  # "first" fills the cache that "cached" reads
                elapsed, count = sample(mode, Path(home))
                times[mode].append(elapsed)
    print(f"load_catalogue() of {count} scenarios, {args.runs} fresh interpreters per mode\n")
    print("| mode | median | min | max |")
    print("|---|---:|---:|---:|")
    for mode in MODES:
        values = times[mode]
        print(f"| {mode} | {statistics.median(values) * 1000:.0f} ms "
              f"| {min(values) * 1000:.0f} ms | {max(values) * 1000:.0f} ms |")
    if args.json:
        Path(args.json).write_text(json.dumps({"scenarios": count, "seconds": times}, indent=2))


if __name__ == "__main__":
    main()
