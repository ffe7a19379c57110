#!/usr/bin/env python3
"""Write the runner's expected run durations (``runner/execution/durations.json``) from a run.

Why: ``palace-conformance run`` starts the longest runs first (``runner/execution/order.py``),
reading how long each took in a reference run. After adding or re-pacing scenarios, refresh it
from a whole-catalogue run of the reference bridge::

    palace-conformance run -q --report-dir /tmp/pc-report
    python benchmarks/durations.py /tmp/pc-report/results.json

Only the order of the figures matters (a loaded machine stretches them all alike), so they are
rounded to 0.1 s. Measure a refresh side by side before keeping it (``python
benchmarks/run_timeline.py -q --level seed`` on both trees, alternating): the order also decides
when the CPU-heavy runs start. On 2026-12-08 a refresh from a ``--jobs 4`` run made the default
run slower, 22.5-24.8 s before and 25.2-26.5 s after, 4 rounds each: the old figures ranked the
``tool.cli.*`` runs (each starts the bridge's CLI, a cold interpreter, several times) among the
longest, so they ran in the first seconds, while the longest runs sleep and the CPUs idle.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from palace_conformance.runner.execution.order import DURATIONS, key


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("durations.py: give one results.json (palace-conformance run --report-dir DIR "
              "writes DIR/results.json)", file=sys.stderr)
        return 2
    try:
        data = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"durations.py: cannot read {argv[0]}: {exc}", file=sys.stderr)
        return 2
    durations = {key(r["scenario"], r["transport"]): round(r["duration_ms"] / 1000.0, 1)
                 for r in data.get("results", ())
                 if r.get("duration_ms") is not None and r.get("transport") != "parity"}
    ordered = dict(sorted(durations.items()))
    DURATIONS.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(ordered)} durations to {DURATIONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
