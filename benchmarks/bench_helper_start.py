#!/usr/bin/env python3
"""CPU (user+sys) of one cold start of each helper a bridge spawns, side by side with another tree.

Why: the stdio fake (``mempalace-mcp``), the fake CLI (``mempalace``) and the feed stand-in
(``mempalace-pi-session``) are cold interpreters, about 270 of them in a catalogue run, a third of
its CPU (docs/runner.md, "Where a run's CPU goes"): their pid, group and parent are what process
scenarios judge, so they cannot be forked warm, and what they import is what they cost.

No sample installs anything: the shim directories are installed once per tree (this one, and
with ``--against TREE`` that checkout's, by its own code), then each helper is run as in a
run's simplest case (an ``initialize`` for the fake, ``--version`` for the CLI, ``--prepare``
with no plan for the stand-in) and its CPU read from ``RUSAGE_CHILDREN``. Trees alternate within
each round, so a loaded machine weighs on both alike.

Usage::

    python benchmarks/bench_helper_start.py [--rounds 20] [--against TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}}}) + "\n"
#: helper -> (its arguments, its stdin)
HELPERS = {"mempalace-mcp": ([], INITIALIZE), "mempalace": (["--version"], ""),
           "mempalace-pi-session": (["--prepare"], "")}


def install(tree: Path, directory: Path) -> None:
    """``tree``'s shim directory written into ``directory`` by ``tree``'s own code."""
    code = "import sys; from palace_conformance.fake.shims import install_shim; " \
           "install_shim(sys.argv[1])"
    done = subprocess.run([sys.executable, "-c", code, str(directory)], capture_output=True,
                          text=True, check=False, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(tree / "conformance")})
    if done.returncode != 0:
        raise SystemExit(f"bench_helper_start.py: {tree} installed no shims: "
                         f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")


def one_start(program: Path, args: list[str], stdin: str, home: str) -> float:
    """CPU seconds of one run of ``program``; raises when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([str(program), *args], input=stdin, capture_output=True, text=True,
                          check=False, timeout=60, env={**os.environ, "HOME": home})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"bench_helper_start.py: {program.name} failed ({done.returncode}): "
                         f"{done.stderr.strip()[-300:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--against", metavar="TREE", help="another checkout of the kit")
    args = parser.parse_args()
    trees = {"this tree": ROOT, **({args.against: Path(args.against)} if args.against else {})}
    samples: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="palace-bench-helpers-") as scratch:
        dirs = {}
        for n, (name, tree) in enumerate(trees.items()):
            dirs[name] = Path(scratch) / f"shims{n}"
            install(tree, dirs[name])
        home = str(Path(scratch) / "home")
        os.mkdir(home)
        for _ in range(args.rounds):
            for helper, (helper_args, stdin) in HELPERS.items():
                for name in trees:
                    cpu = one_start(dirs[name] / helper, helper_args, stdin, home)
                    samples.setdefault((helper, name), []).append(cpu)
    print(f"{args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
    for (helper, name), cpus in samples.items():
        print(f"  {helper:22} {name:24} CPU median {statistics.median(cpus) * 1000:5.1f} ms "
              f"(min {min(cpus) * 1000:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
