#!/usr/bin/env python3
"""How much of core a profile's honest knobs leave judged, and which core safety behaviour each
judged scenario shows (issue 26: "a bridge that declares every seed knob absent must still be
judged on every core safety behaviour").

Reads a saved ``palace-conformance run --json`` of the bridge (``--from``), or runs the core
catalogue itself (every argument it does not know, ``--transport stdio --jobs 4``, goes to
``run``). Prints the bridge results judged and *not applicable* (those whose reason is a knob
apart), the count that was judged *before* pace values existed (every ``env`` value essential:
a scenario setting any knob the profile says is ``absent``, or ``fixed`` at another value, was
not applicable; ``Profile.translate_env`` on the whole ``env``), and per core safety behaviour
the judged scenarios that cover it, with their verdicts. Exit 1 when a behaviour has none.

Usage::

    python benchmarks/honest_profile.py \\
        --profile tests/ts/extensions/realworld/bare.profile.json --transport stdio --jobs 4
    python benchmarks/honest_profile.py --profile P --from run.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from palace_conformance.runner.profile import load_profile
from palace_conformance.scenarios.loader import scenarios_dir
from palace_conformance.scenarios.model import Scenario

CLI = [sys.executable, "-c",
       "import sys; from palace_conformance.cli import main; sys.exit(main())"]
JUDGED = ("passed", "failed")
#: the core safety behaviours and the behaviour IDs (BEHAVIOURS.md) whose scenarios show them
SAFETY = {
    "bounded calls": ("STDIO-01",),
    "stalled child killed": ("STDIO-02",),
    "no hang on a dead child": ("STDIO-12",),
    "respawn or a clean failure": ("STDIO-05", "STDIO-06", "STDIO-08", "STDIO-09", "TOOL-05"),
    "no orphan": ("LIFE-06",),
    "errors surfaced": ("TOOL-03", "TOOL-04"),
}


def load_run(args: argparse.Namespace, rest: list[str]) -> dict[str, Any]:
    if args.source:
        return dict(json.loads(Path(args.source).read_text()))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        subprocess.run([*CLI, "run", "--profile", args.profile, "--level", "core",
                        "--json", str(out), *rest], stdout=subprocess.DEVNULL, check=False)
        return dict(json.loads(out.read_text()))


def scenario_of(sid: str) -> Scenario:
    from palace_conformance.scenarios.loader import load_scenario
    return load_scenario(scenarios_dir() / sid.split(".", 1)[0] / f"{sid}.json")


def judged_before(profile_path: str, judged: list[dict[str, Any]]) -> int:
    """The judged results a profile still judged with every env value essential."""
    profile = load_profile(Path(profile_path))
    count = 0
    for result in judged:
        env = {k: v for k, v in scenario_of(result["scenario"]).env.items() if v is not None}
        _, why = profile.translate_env(env, own=set(env))
        count += why is None
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", required=True)
    parser.add_argument("--from", dest="source", help="a saved run --json of the bridge")
    args, rest = parser.parse_known_args(argv)
    run = load_run(args, rest)
    results = [r for r in run["results"] if r.get("subject", "bridge") == "bridge"
               and not r["scenario"].startswith("fake.") and r["transport"] != "parity"]
    judged = [r for r in results if r["status"] in JUDGED]
    by_knob = sum(1 for r in results if r["status"] == "not_applicable"
                  and "(essential, not pace)" in (r.get("reason") or ""))
    statuses = Counter(r["status"] for r in results)
    print(f"profile {args.profile}: {len(results)} core results, {len(judged)} judged "
          f"({statuses['passed']} passed, {statuses['failed']} failed), "
          f"{statuses['not_applicable']} not applicable ({by_knob} for a knob the bridge lacks)")
    print(f"judged with every env value essential (before pace values): "
          f"{judged_before(args.profile, judged)}")
    print("\n| core safety behaviour | judged by (verdict) |\n|---|---|")
    missing = []
    for behaviour, ids in SAFETY.items():
        shown = sorted(f"`{r['scenario']}` ({r['status']})" for r in judged
                       if set(ids) & set(r.get("covers", ())))
        missing += [] if shown else [behaviour]
        print(f"| {behaviour} ({', '.join(ids)}) | {', '.join(shown) or 'NONE'} |")
    if missing:
        print(f"not judged: {', '.join(missing)}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
