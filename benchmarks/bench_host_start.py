#!/usr/bin/env python3
"""CPU (user+sys) of one Node host start with and without the package bundles, side by side.

Each sample starts the host for ``SPEC`` as the runner does, sends ``hello``, a ``load`` (the
bridge imported and its factory run, under a temporary HOME) and ``exit``, and takes the CPU
the host process used from ``RUSAGE_CHILDREN``; with ``--session``, a scenario-shaped session
on the stdio fake between ``load`` and ``exit`` (the fake's CPU counted too: this tree's fake,
for every variant). Variants alternate within each round, so a loaded machine weighs on both
alike: ``bundles`` (the default argv) and ``files`` (``--no-bundles``: every package loaded from
its own files, as before the bundles); with ``--against TREE``, also ``TREE``'s own host command
(another checkout of the kit, e.g. main in a worktree), so a change to the hosts is measured side
by side with what it changes.

Usage::

    python benchmarks/bench_host_start.py [--rounds 8] [--against TREE] [--session] [SPEC]

``SPEC`` defaults to ``pi-extension:reference/pi/mempalace.ts``.
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
import time
from pathlib import Path

from palace_conformance.fake.shims import install_shim
from palace_conformance.hosts.node import host_command

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {"bundles": [], "files": ["--no-bundles"]}


def _requests(home: str, shims: str | None) -> list[dict[str, object]]:
    """``hello``, ``load``, ``exit``; with ``shims`` (a shim directory: the stdio fake on PATH)
    a session between them, as a scenario's: ``session_start``, a settle, two tool calls and
    ``shutdown``."""
    path = os.environ["PATH"] if shims is None else f"{shims}{os.pathsep}{os.environ['PATH']}"
    env = {"HOME": home, "PATH": path}
    if shims is not None:
        env["PALACE_FAKE_JOURNAL"] = os.path.join(home, "journal.jsonl")
    session: list[dict[str, object]] = [] if shims is None else [
        {"op": "event", "name": "session_start", "payload": {"reason": "startup"}},
        {"op": "settle", "quiet_ms": 100, "max_ms": 5000},
        {"op": "call_tool", "name": "mempalace_status", "args": {}},
        {"op": "call_tool", "name": "mempalace_search", "args": {"query": "hello"}},
        {"op": "shutdown"}]
    ops = [{"op": "hello"}, {"op": "load", "env": env, "cwd": home}, *session, {"op": "exit"}]
    return [{"id": n, **op} for n, op in enumerate(ops, 1)]


def one_start(argv: list[str], shims: str | None = None) -> tuple[float, float]:
    """(CPU s, wall s) of one host start, load (and session) and exit, its children's CPU
    included (the stdio fake's, with ``shims``); raises when a reply is not ok."""
    with tempfile.TemporaryDirectory(prefix="palace-bench-host-") as home:
        requests = _requests(home, shims)
        payload = "".join(json.dumps(r) + "\n" for r in requests)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        done = subprocess.run(argv, input=payload, capture_output=True, text=True, cwd=home,
                              check=False, timeout=120)
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(replies) != len(requests) or not all(r.get("ok") for r in replies):
        raise SystemExit(f"bench_host_start.py: the host failed: {done.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def against_command(tree: Path, spec: str) -> list[str]:
    """The host command ``tree``'s kit builds for ``spec`` (asked of that tree's own code)."""
    code = ("import json, sys; from palace_conformance.hosts.node import host_command; "
            "print(json.dumps(host_command(sys.argv[1])))")
    done = subprocess.run([sys.executable, "-c", code, spec], capture_output=True, text=True,
                          check=False, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(tree / "conformance")})
    if done.returncode != 0:
        raise SystemExit(f"bench_host_start.py: {tree} gave no host command: "
                         f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    command: list[str] = json.loads(done.stdout)
    return command


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?",
                        default=f"pi-extension:{ROOT / 'reference' / 'pi' / 'mempalace.ts'}")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--against", metavar="TREE",
                        help="another checkout of the kit whose host command runs beside")
    parser.add_argument("--session", action="store_true",
                        help="between load and exit, a session on the stdio fake (session_start,"
                             " a settle, two tool calls, shutdown)")
    args = parser.parse_args()
    argv = host_command(args.spec)
    variants = {name: [*argv, *extra] for name, extra in VARIANTS.items()}
    if args.against:
        variants[args.against] = against_command(Path(args.against), args.spec)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    with open("/proc/loadavg") as handle:
        load_before = " ".join(handle.read().split()[:3])
    with tempfile.TemporaryDirectory(prefix="palace-bench-shims-") as shims:
        if args.session:
            install_shim(shims)
        for _ in range(args.rounds):
            for name, command in variants.items():
                samples[name].append(one_start(command, shims if args.session else None))
    with open("/proc/loadavg") as handle:
        load_after = " ".join(handle.read().split()[:3])
    print(f"{args.spec}, {args.rounds} rounds, load {load_before} -> {load_after}")
    for name, rows in samples.items():
        cpus = [cpu for cpu, _ in rows]
        walls = [wall for _, wall in rows]
        print(f"  {name:8} CPU median {statistics.median(cpus) * 1000:4.0f} ms "
              f"(min {min(cpus) * 1000:.0f}), wall median {statistics.median(walls) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
