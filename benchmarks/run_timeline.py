#!/usr/bin/env python3
"""Where a ``palace-conformance run`` spends its wall time: a timeline of one run.

Why: a run's own report gives only the suite's time (``duration_ms``, host probe to the last
result); ``time`` adds the interpreter's start, the catalogue's loading, the report writing and the
interpreter's end. This runs the command in a child interpreter with timers around each phase and
prints, from process start to exit:

- each phase's start and length (imports, catalogue, golden judges, probe, the runs, parity and
  baseline, summary, reports, the interpreter's end);
- the runs: their sum, the longest, and the *critical path* at ``--jobs N``: the wall the runs
  would take if each started as soon as a worker was free, in the order they were started (the
  longest run's length is its floor);
- the CPU time of the whole process tree (hosts and fakes forked by the warm server included:
  the command runs under a child subreaper, as ``benchmarks/tree_cpu.py``).

Usage::

    python benchmarks/run_timeline.py [--by-kind] [--json FILE] [RUN ARGS ...]   # e.g. -q --jobs 8

``--by-kind`` (root, Linux): the tree's CPU by kind of process (runner, warm server, hosts, HTTP
fakes, the stdio fakes and stand-ins a bridge spawns, ...), from process accounting
(``proc_acct.py``); it turns the machine's accounting on for the run and off after it.

Linux only (the subreaper). Arguments are passed to ``palace-conformance run``.
"""

from __future__ import annotations

import ctypes
import heapq
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import proc_acct

PR_SET_CHILD_SUBREAPER = 36

#: the child: timers around the run's phases, then the CLI's main, events to the file in argv[1]
INNER = r"""
import json, resource, sys, threading, time
T = [("exec", float(sys.argv[2]), time.time())]
OUT = sys.argv[1]
sys.argv = ["palace-conformance", *sys.argv[3:]]
lock = threading.Lock()
RUNS = []

def timed(module, name, label=None):
    original = getattr(module, name)
    def wrapper(*args, **kwargs):
        started, cpu = time.time(), time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            with lock:
                T.append((label or name, started, time.time(), time.thread_time() - cpu))
    setattr(module, name, wrapper)

started = time.time()
from palace_conformance import cli
from palace_conformance.commands import run as run_cmd
from palace_conformance.runner.execution import suite, execute, warm_client
from palace_conformance.scenarios import loader
from palace_conformance.runner.compare import golden
from palace_conformance.runner.reports import console
from palace_conformance.runner import last_failed
T.append(("imports", started, time.time()))
timed(loader, "load_catalogue", "catalogue loaded and validated")
timed(golden, "judges", "golden traces read")
timed(warm_client, "prestart", "warm server started (a thread, beside the above)")
timed(suite, "probe_host", "host probed (hello)")
timed(suite, "_judged_capabilities", "capabilities judged")
timed(suite, "_add_parities", "parity results")
timed(console, "render_summary", "summary printed")
timed(last_failed, "write_record", "--last-failed record written")
timed(run_cmd, "_write_reports", "reports written")

original_suite = suite.run_suite
def run_suite(scenarios, options, progress=None, host=None, runner=execute.run_scenario):
    def one(scenario, transport, *args, **kwargs):
        began, cpu = time.time(), time.thread_time()
        try:
            return runner(scenario, transport, *args, **kwargs)
        finally:
            with lock:
                RUNS.append((scenario.id, transport, began, time.time(),
                             time.thread_time() - cpu))
    started = time.time()
    try:
        return original_suite(scenarios, options, progress=progress, host=host, runner=one)
    finally:
        T.append(("suite (the report's duration)", started, time.time()))
suite.run_suite = run_suite

import os
SPAWNED = {}  # pid -> what the runner started (--by-kind labels processes with it)
import subprocess as _sp
from palace_conformance.runner.execution import warm_client as _wc
_original_start = _wc.start
def _start(argv, **kwargs):
    proc = _original_start(argv, **kwargs)
    entry = _wc.entry_for(argv)
    warm = type(proc).__name__ == "WarmProcess"
    if entry is not None and entry.module != "palace_conformance.cli":
        what = "host: " + entry.module.rsplit(".", 1)[-1]
    elif entry is not None:
        what = "kit CLI: " + " ".join(entry.args[:2])
    else:
        what = "host: " + ("Node" if _np.is_host_argv(argv) else os.path.basename(argv[0]))
    SPAWNED[proc.pid] = what + (" (forked warm)" if warm else " (cold)")
    return proc
_wc.start = _start
from palace_conformance.runner.execution import node_pool as _np
_original_pool_start = _np._start
def _pool_start(argv, startup):
    host = _original_pool_start(argv, startup)
    SPAWNED[host.proc.pid] = "host: Node (pooled)"
    return host
_np._start = _pool_start
_original_popen_init = _sp.Popen.__init__
def _popen_init(self, args, *a, **kw):
    _original_popen_init(self, args, *a, **kw)
    argv = [str(x) for x in (args if isinstance(args, (list, tuple)) else [args])]
    if self.pid not in SPAWNED:
        if any("warm_server" in x for x in argv):
            SPAWNED[self.pid] = "warm server"
        else:
            SPAWNED[self.pid] = "runner's child: " + " ".join(
                [os.path.basename(argv[0])] + [x for x in argv[1:3] if not x.startswith("/")])
_sp.Popen.__init__ = _popen_init

import atexit
def dump():
    T.append(("main returned", main_end, main_end))
    with open(OUT, "w") as handle:
        own = resource.getrusage(resource.RUSAGE_SELF)
        json.dump({"phases": T, "runs": RUNS, "atexit": time.time(),
                   "runner_cpu": own.ru_utime + own.ru_stime, "spawned": SPAWNED,
                   "jobs": getattr(run_cmd, "JOBS_USED", None)}, handle)
main_end = 0.0
atexit.register(dump)
try:
    code = cli.main()
finally:
    main_end = time.time()
sys.exit(code)
"""


def critical_path(runs: list[dict[str, Any]], jobs: int) -> float:
    """The wall of these runs on ``jobs`` workers, each started when one is free, in the order
    they started: what the suite would take with no other cost."""
    free = [0.0] * jobs
    for run in sorted(runs, key=lambda r: r["start"]):
        heapq.heappush(free, heapq.heappop(free) + run["length"])
    return max(free)


def main(argv: list[str]) -> int:
    json_out = None
    by_kind = False
    while argv[:1] in (["--json"], ["--by-kind"]):
        if argv[0] == "--by-kind":
            by_kind, argv = True, argv[1:]
        else:
            json_out, argv = argv[1], argv[2:]
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("run_timeline.py: cannot become a child subreaper (Linux only)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="pc-timeline-") as tmp:
        events = os.path.join(tmp, "events.json")
        accounting = os.path.join(tmp, "acct")
        if by_kind:
            try:
                proc_acct.start(accounting)
            except OSError as exc:
                print(f"run_timeline.py: --by-kind needs process accounting (root, Linux): "
                      f"{exc.strerror}", file=sys.stderr)
                return 2
        t0 = time.time()
        try:
            child = subprocess.Popen([sys.executable, "-c", INNER, events, repr(t0), "run",
                                      *argv], stdout=subprocess.DEVNULL)
            code = child.wait()
            exited = time.time()
            while True:  # the warm server and its last children come back here to be reaped
                try:
                    os.wait()
                except ChildProcessError:
                    break
            reaped = time.time()
        finally:
            if by_kind:
                proc_acct.stop()
        with open(events, encoding="utf-8") as handle:
            data = json.load(handle)
        if by_kind:
            kinds = _by_kind(accounting, child.pid, data.get("spawned", {}))
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    # (name, at, length, the CPU of the thread that ran it: None where not measured)
    phases = [(name, a - t0, b - a, rest[0] if rest else None)
              for name, a, b, *rest in data["phases"]]
    phases.append(("atexit handlers start", data["atexit"] - t0, 0.0, None))
    phases.append(("process exited", exited - t0, 0.0, None))
    phases.append(("warm server and children reaped", reaped - t0, 0.0, None))
    runs = [{"scenario": s, "transport": t, "start": a - t0, "length": b - a, "cpu": c}
            for s, t, a, b, c in data["runs"]]
    jobs = _jobs(argv)
    first = min((r["start"] for r in runs), default=0.0)
    last = max((r["start"] + r["length"] for r in runs), default=0.0)
    total = sum(r["length"] for r in runs)
    longest = sorted(runs, key=lambda r: -r["length"])[:5]
    print(f"exit {code}: wall {exited - t0:.1f} s, CPU {usage.ru_utime + usage.ru_stime:.1f} s "
          f"(user {usage.ru_utime:.1f}, sys {usage.ru_stime:.1f}), load "
          f"{Path('/proc/loadavg').read_text().split()[0]}; the runner process alone "
          f"{data.get('runner_cpu', 0.0):.1f} s")
    print("| at (s) | phase | length (s) | its thread's CPU (s) |\n|---:|---|---:|---:|")
    for name, at, length, cpu in sorted(phases, key=lambda p: p[1]):
        print(f"| {at:.2f} | {name} | {length:.2f} | {'' if cpu is None else f'{cpu:.2f}'} |")
    print(f"\nthe runner's worker threads, running the runs (driving, judging, copying): CPU "
          f"{sum(r['cpu'] for r in runs):.1f} s; the runner's other threads (hosts' output "
          f"pumps, the timer probe, the main thread's phases above): the rest of its "
          f"{data.get('runner_cpu', 0.0):.1f} s")
    print(f"\nruns: {len(runs)}, first started at {first:.2f} s, last ended at {last:.2f} s; "
          f"sum {total:.1f} s (/{jobs} jobs = {total / jobs:.1f} s); critical path at {jobs} "
          f"jobs in start order {critical_path(runs, jobs):.1f} s; longest:")
    for run in longest:
        print(f"  {run['length']:.1f} s  {run['scenario']} [{run['transport']}] "
              f"(started {run['start']:.1f} s)")
    if by_kind:
        print("\nCPU by kind of process (Linux process accounting):\n")
        print(proc_acct.table(kinds, usage.ru_utime + usage.ru_stime))
    if json_out:
        with open(json_out, "w", encoding="utf-8") as handle:
            json.dump({"exit": code, "wall": exited - t0, "phases": phases, "runs": runs,
                       "runner_cpu": data.get("runner_cpu"),
                       "cpu": usage.ru_utime + usage.ru_stime, "jobs": jobs}, handle, indent=1)
    return code


#: comm (15 bytes at most) of the programs a bridge finds on its PATH -> what they are
SHIM_KINDS = {"mempalace-mcp": "stdio fake (mempalace-mcp shim)",
              "mempalace-light": "stdio fake (mempalace-light-mcp shim)",
              "mempalace": "CLI stand-in (mempalace)",
              "mempalace-pi-se": "feed stand-in (mempalace-pi-session)"}


def _by_kind(path: str, runner: int, spawned: dict[str, str]) -> dict[str, list[proc_acct.Proc]]:
    """The run's processes (the runner's descendants and itself) grouped by what they are."""
    procs = proc_acct.read(path)
    named = {int(pid): what for pid, what in spawned.items()}
    tree = proc_acct.descendants(procs, os.getpid())  # orphans come back here: keep them

    def label(proc: proc_acct.Proc, by_pid: dict[int, proc_acct.Proc]) -> str:
        if proc.pid == runner:
            return "runner"
        if proc.pid in named:
            return named[proc.pid]
        if not proc.forked and proc.comm in SHIM_KINDS:
            return SHIM_KINDS[proc.comm]
        parent = by_pid.get(proc.ppid)
        above = label(parent, by_pid) if parent is not None else "orphan"
        return f"{'fork' if proc.forked else proc.comm} under {above.split(' under ')[-1]}"

    return proc_acct.kinds(tree, label)


def _jobs(argv: list[str]) -> int:
    for index, arg in enumerate(argv):
        if arg == "--jobs" and index + 1 < len(argv):
            return int(argv[index + 1])
        if arg.startswith("--jobs="):
            return int(arg.split("=", 1)[1])
    from palace_conformance.runner.jobs import default_jobs

    return default_jobs()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
