#!/usr/bin/env python3
"""CPU (user+sys) of one cold start of each helper a bridge spawns, side by side with another tree.

Why: the stdio fake (``mempalace-mcp``), the fake CLI (``mempalace``), the fake's feed stand-in
(``mempalace-pi-session``) and the runner's own stand-in of the same name (what a catalogue run
puts on PATH) are cold interpreters, about 270 of them in a catalogue run, a third of its CPU
(docs/runner.md, "Where a run's CPU goes"): their pid, group and parent are what process
scenarios judge, so they cannot be forked warm, and what they import is what they cost.

No sample installs anything: the shim directories are installed once per tree (this one, and
with ``--against TREE`` that checkout's, by its own code; the runner's stand-ins over a second
one, as a run's world does), then each helper is run as in a run's simplest case (an
``initialize`` for the fake, ``--version`` for the CLI, ``--prepare`` with no plan for the
stand-ins) and its CPU read from ``RUSAGE_CHILDREN``. Trees alternate within each round, so a
loaded machine weighs on both alike. Everything runs as a run's helpers do where bytecode may not
be written beside the sources (``PYTHONDONTWRITEBYTECODE``, Docker's and many CI images): the
installer has a kit cache, the helpers a ``HOME`` of their own without one (``bytecode.py``).

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
#: helper -> (its shim directory: the fake's or the runner's, its program, arguments, stdin)
HELPERS = {"mempalace-mcp": ("fake", "mempalace-mcp", [], INITIALIZE),
           "mempalace": ("fake", "mempalace", ["--version"], ""),
           "mempalace-pi-session": ("fake", "mempalace-pi-session", ["--prepare"], ""),
           "runner's pi-session": ("runner", "mempalace-pi-session", ["--prepare"], "")}
#: what the runner's stand-ins are installed with: a journal beside them, no feed plan
INSTALL = ("import sys; from pathlib import Path; "
           "from palace_conformance.fake.shims import install_shim; install_shim(sys.argv[1])\n"
           "if sys.argv[2] == 'runner':\n"
           "    from palace_conformance.standins import scripted\n"
           "    scripted.install(Path(sys.argv[1]), {'journal': sys.argv[1] + '/journal.jsonl'})")


def install(tree: Path, directory: Path, kind: str, env: dict[str, str]) -> None:
    """``tree``'s shim directory (``kind`` ``runner``: with the runner's stand-ins over it)
    written into ``directory`` by ``tree``'s own code."""
    done = subprocess.run([sys.executable, "-c", INSTALL, str(directory), kind],
                          capture_output=True, text=True, check=False, timeout=120,
                          env={**env, "PYTHONPATH": str(tree / "conformance")})
    if done.returncode != 0:
        raise SystemExit(f"bench_helper_start.py: {tree} installed no shims: "
                         f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")


def one_start(program: Path, args: list[str], stdin: str, env: dict[str, str]) -> float:
    """CPU seconds of one run of ``program``; raises when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([str(program), *args], input=stdin, capture_output=True, text=True,
                          check=False, timeout=60, env=env)
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
        cache, home = Path(scratch) / "cache", Path(scratch) / "home"
        (cache / "palace-conformance").mkdir(parents=True)
        home.mkdir()
        base = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        installer = {**base, "XDG_CACHE_HOME": str(cache)}
        helper_env = {**base, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
        dirs = {}
        for n, (name, tree) in enumerate(trees.items()):
            for kind in ("fake", "runner"):
                dirs[name, kind] = Path(scratch) / f"{kind}{n}"
                install(tree, dirs[name, kind], kind, installer)
        for _ in range(args.rounds):
            for helper, (kind, program, helper_args, stdin) in HELPERS.items():
                for name in trees:
                    cpu = one_start(dirs[name, kind] / program, helper_args, stdin, helper_env)
                    samples.setdefault((helper, name), []).append(cpu)
    print(f"{args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
    for (helper, name), cpus in samples.items():
        print(f"  {helper:22} {name:24} CPU median {statistics.median(cpus) * 1000:5.1f} ms "
              f"(min {min(cpus) * 1000:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
