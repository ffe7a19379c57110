"""``palace-conformance run``: every scenario against a bridge host; exit 0 only when all passed.

Exit status: 0 green (``not_applicable`` is fine), 1 a failure or a not-testable scenario (unless
a baseline expects it), 2 a usage problem (bad flag, unknown bridge command, a host that cannot
even answer ``hello``, broken scenario files) reported in one line.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shlex
import shutil
import signal
import sys
import threading
from typing import TYPE_CHECKING

from palace_conformance.hosts import REFERENCE_HOST
from palace_conformance.runner.commands.usage import (
    RunUsageError,
    at_least_one,
    directory,
    one_line,
    writable,
)
from palace_conformance.runner.execution.jobs import default_jobs

if TYPE_CHECKING:
    from palace_conformance.scenarios.model import Scenario

PROG = "palace-conformance run"
TRANSPORTS = ("stdio", "http")
DEFAULT_OP_TIMEOUT_MS = 15000  # keep equal to execute.DEFAULT_OP_TIMEOUT_MS (not imported: the
# CLI module is imported by every palace-conformance process, fakes included, so it stays light)


def host_argv(bridge: str) -> tuple[str, ...]:
    """``reference`` or a host command line; the program must exist."""
    if bridge == "reference":
        return REFERENCE_HOST
    node_argv = _node_host(bridge)
    if node_argv is not None:
        return node_argv
    try:
        argv = shlex.split(bridge)
    except ValueError as exc:
        raise RunUsageError(f"--bridge {bridge!r}: {exc} (quote the host command once)") from None
    if not argv:
        raise RunUsageError("--bridge is empty (give 'reference' or a host command)")
    program = argv[0]
    found = (program if os.sep in program and os.access(program, os.X_OK)
             else shutil.which(program) if os.sep not in program else None)
    if found is None:
        raise RunUsageError(f"bridge command {program!r} not found or not executable (give a "
                            "driver host command, e.g. --bridge 'node host.mjs', or --bridge "
                            "reference)")
    return tuple(argv)


def _node_host(bridge: str) -> tuple[str, ...] | None:
    """The Node hosts' specs (``pi-extension:FILE``, ``pi-mcp``, ...), when that module is here."""
    try:
        from palace_conformance.hosts import node
    except ImportError:
        return None
    if not node.is_node_spec(bridge):
        return None
    try:
        return tuple(node.host_command(bridge))
    except (node.HostSpecError, node.NodeHostError) as exc:
        raise RunUsageError(f"--bridge {bridge}: {exc}") from None


def select(scenarios: list[Scenario], patterns: list[str]) -> list[Scenario]:
    if not patterns:
        return scenarios
    chosen = [s for s in scenarios if any(fnmatch.fnmatchcase(s.id, p) for p in patterns)]
    if not chosen:
        raise RunUsageError(f"no scenario id matches --select {' '.join(patterns)} "
                            "(see palace-conformance fixtures list)")
    return chosen


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM (a CI timeout) ends the run like Ctrl-C: runs in flight still clean up."""
    raise KeyboardInterrupt


def _run_checked(args: argparse.Namespace) -> int:
    from palace_conformance.runner.execution import warm_client
    from palace_conformance.runner.execution.execute import RunOptions
    from palace_conformance.runner.execution.suite import HostProbeError, SuiteOptions, run_suite
    from palace_conformance.runner.reports.console import make_progress, render_summary
    from palace_conformance.runner.reports.junit import write_junit
    from palace_conformance.runner.reports.report_dir import write_reports
    from palace_conformance.runner.verdict.baseline import BaselineError, load_baseline
    from palace_conformance.scenarios.loader import load_catalogue

    if args.jobs is None:
        args.jobs = default_jobs()
    at_least_one("--jobs", args.jobs)
    at_least_one("--op-timeout-ms", args.op_timeout_ms)
    argv = host_argv(args.bridge)
    json_path = writable("--json", args.json)
    junit_path = writable("--junit", args.junit)
    markdown_path = writable("--markdown", args.markdown)
    baseline = None
    if args.baseline is not None:
        try:
            baseline = load_baseline(args.baseline)
        except BaselineError as exc:
            raise RunUsageError(str(exc)) from None
    report_dir = directory("--report-dir", args.report_dir)
    if not args.cold_start:  # the warm server imports while the catalogue is read and checked
        threading.Thread(target=warm_client.prestart, daemon=True).start()
    catalogue = load_catalogue(args.paths or None)
    if catalogue.problems:
        for problem in catalogue.problems:
            print(f"{PROG}: {problem}", file=sys.stderr)
        raise RunUsageError(f"{len(catalogue.problems)} problem(s) in the scenario files "
                            "(palace-conformance fixtures validate)")
    transports = TRANSPORTS if args.transport == "both" else (args.transport,)
    scenarios = select(catalogue.scenarios, args.select)
    if baseline is not None:  # entries naming these scenarios are not "unknown ids"
        baseline.add_known({s.id: s.transports for s in catalogue.scenarios})
    if not any(t in s.transports for s in scenarios for t in transports):
        raise RunUsageError(f"none of the selected scenarios runs on {args.transport}")
    options = SuiteOptions(
        run=RunOptions(host_argv=argv, op_timeout_ms=args.op_timeout_ms,
                       artifacts=report_dir / "runs" if report_dir else None,
                       warm_start=not args.cold_start),
        jobs=args.jobs, transports=transports, baseline=baseline)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        run = run_suite(scenarios, options, progress=make_progress())
    except HostProbeError as exc:
        raise RunUsageError(f"the bridge host failed: {exc}") from None
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted: the runs in flight finished and were cleaned up; no report "
              "written", file=sys.stderr, flush=True)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    render_summary(run)
    targets = [(json_path, "json"), (junit_path, "junit")]
    if report_dir is not None:
        targets += [(report_dir / "results.json", "json"), (report_dir / "junit.xml", "junit")]
    payload = None  # the whole result model as JSON: made only when a target wants it (~0.5 s)
    for target, kind in targets:
        if target is None:
            continue
        try:
            if kind == "json":
                if payload is None:
                    payload = json.dumps(run.to_json(), indent=1, ensure_ascii=False, default=str)
                target.write_text(payload, encoding="utf-8")
            else:
                write_junit(run, target)
        except OSError as exc:
            raise RunUsageError(f"cannot write {target}: {exc.strerror or exc} (the run itself "
                                f"{'passed' if run.ok else 'failed'})") from None
    try:
        write_reports(run, scenarios={s.id: s for s in scenarios}, bridge=args.bridge,
                      report_dir=report_dir, markdown=markdown_path, baseline=args.baseline)
    except OSError as exc:
        raise RunUsageError(f"cannot write the reports: {exc.strerror or exc} "
                            f"({exc.filename or ''}; the run itself "
                            f"{'passed' if run.ok else 'failed'})") from None
    return run.exit_code


def add_commands(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run", help="run scenarios against a bridge host",
        description="Run scenario fixtures against a bridge through its driver host (DRIVER.md) "
        "and report every expectation it departs from. Exit 0 only when everything passed; "
        "not-applicable scenarios are reported but do not fail the run.")
    run.add_argument("paths", nargs="*", metavar="PATH",
                     help="scenario files or directories (default: the shipped scenarios)")
    run.add_argument("--bridge", default="reference", metavar="reference|COMMAND",
                     help="'reference' (the Python reference bridge, default), a Node host "
                     "spec (pi-extension:FILE, pi-mcp, pi-mcp:wrapped, pi-mcp-adapter; see "
                     "'palace-conformance hosts'), or the host command to start, e.g. "
                     "'node host.mjs'")
    run.add_argument("--transport", choices=("stdio", "http", "both"), default="both",
                     help="which transports to run (default both)")
    run.add_argument("--select", action="append", default=[], metavar="PATTERN",
                     help="only scenario ids matching this glob (e.g. 'stdio.*'); repeatable")
    run.add_argument("--jobs", type=int, default=None, metavar="N",
                     help="runs in parallel (default: two per CPU, 2 to 8; here "
                     f"{default_jobs()}); every run is isolated")
    run.add_argument("--cold-start", action="store_true",
                     help="start every reference host and HTTP fake as a fresh interpreter "
                     "(slower); by default they are forked from a warm server that imported "
                     "them once (docs/runner.md)")
    run.add_argument("--op-timeout-ms", type=int, default=DEFAULT_OP_TIMEOUT_MS, metavar="MS",
                     help="an op's deadline when its step sets no timeout_ms "
                     f"(default {DEFAULT_OP_TIMEOUT_MS})")
    run.add_argument("--baseline", metavar="FILE",
                     help="expected-failure baseline (docs/baselines.md): listed failures pass "
                     "as known; stale, unknown or expired entries fail the run")
    run.add_argument("--json", metavar="FILE", help="write the full result model as JSON")
    run.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    run.add_argument("--markdown", metavar="FILE",
                     help="write a Markdown summary (for a pull request comment)")
    run.add_argument("--report-dir", metavar="DIR",
                     help="keep every run's journal, host stderr and result, plus "
                     "results.json, junit.xml, summary.md and a repro bundle per failure "
                     "(bundles/<scenario>--<transport>/), under DIR")
    run.set_defaults(handler=one_line(PROG)(_run_checked))
