#!/usr/bin/env python3
"""Where a catalogue run's time goes, per step kind, from a ``palace-conformance run --json`` file.

Why: a run mostly waits (settle windows, sleeps, scripted stalls), and which waits end on their
event and which run their whole window decides how long the catalogue takes. This sums each
step kind's duration over every run and, for settles, counts what ended them (``ended_by``:
``expectations`` held, ``quiet`` window over, ``max_ms`` reached; a report written before
``ended_by`` existed is classified from the duration against ``quiet_ms``).

Usage::

    palace-conformance run --json run.json && python benchmarks/waits.py run.json [more.json ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any


def kind_of(step: dict[str, Any]) -> str:
    """``event:NAME``, ``server:ACTION``, ``settle:QUIET_MS`` or the op."""
    request = step.get("request") or {}
    op = str(step.get("op"))
    if op == "event":
        return f"event:{request.get('name')}"
    if op == "server":
        return f"server:{request.get('action')}"
    if op == "settle":
        return f"settle:{request.get('quiet_ms', 200)}"
    return op


def ended_by(step: dict[str, Any]) -> str:
    """What ended a settle, from the report or (older reports) guessed from its duration."""
    if step.get("ended_by"):
        return str(step["ended_by"])
    request = step.get("request") or {}
    took = step.get("host_ms") or step.get("elapsed_ms") or 0.0
    return "max_ms (guessed)" if took >= float(request.get("max_ms", 5000)) else "quiet (guessed)"


def breakdown(report: dict[str, Any]) -> str:
    """A Markdown table: per step kind, count, total and mean seconds, and what ended settles."""
    total: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    ends: dict[str, Counter[str]] = defaultdict(Counter)
    runs = steps = 0.0
    for result in report.get("results", []):
        if result.get("transport") == "parity":
            continue
        runs += float(result.get("duration_ms") or 0.0)
        for step in result.get("steps") or []:
            kind = kind_of(step)
            took = float(step.get("elapsed_ms") or 0.0)
            total[kind] += took
            count[kind] += 1
            steps += took
            if step.get("op") == "settle":
                ends[kind][ended_by(step)] += 1
    lines = [f"runs add up to {runs / 1000:.1f} s; steps {steps / 1000:.1f} s, "
             f"set-up, judging and teardown {(runs - steps) / 1000:.1f} s", "",
             "| step kind | n | total s | mean ms | ended by |", "|---|---|---|---|---|"]
    for kind in sorted(total, key=lambda k: -total[k]):
        why = ", ".join(f"{k} {v}" for k, v in ends[kind].most_common())
        lines.append(f"| {kind} | {count[kind]} | {total[kind] / 1000:.1f} | "
                     f"{total[kind] / count[kind]:.0f} | {why} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path,
                        help="--json files of palace-conformance run")
    args = parser.parse_args(argv)
    for path in args.reports:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"waits.py: cannot read {path}: {exc}; pass a --json report of "
                  "palace-conformance run", file=sys.stderr)
            return 2
        print(f"## {path}\n\n{breakdown(report)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
