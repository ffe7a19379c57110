"""``palace-conformance run``: every scenario against a bridge host; exit 0 only when all passed.

Exit status: 0 green (``not_applicable`` is fine), 1 a failure or a not-testable scenario (unless
a baseline expects it), 2 a usage problem (bad flag, unknown bridge command, a host that cannot
even answer ``hello``, broken scenario files) reported in one line.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from palace_conformance.commands.declare import declare
from palace_conformance.commands.options import (
    add_jobs,
    add_scenario_paths,
    add_server_options,
    chosen_server,
)
from palace_conformance.commands.usage import (
    RunUsageError,
    at_least_one,
    directory,
    one_line,
    slack_factor,
    writable,
)
from palace_conformance.contract import SHARED_RUN_OPTIONS, TRANSPORTS
from palace_conformance.runner.interrupts import interrupt
from palace_conformance.runner.jobs import admission_for
from palace_conformance.runner.selection import (
    bridge_of,
    check_stray_patterns,
    default_level,
    host_argv,
    load_baseline_arg,
    load_profile_arg,
    parse_shard,
    select,
    select_shard,
)

if TYPE_CHECKING:
    from palace_conformance.runner.execution.suite import Progress, SuiteOptions
    from palace_conformance.runner.results import RunResult
    from palace_conformance.runner.verdict.baseline import BaselineFile
    from palace_conformance.scenarios.model import Scenario

PROG = "palace-conformance run"
STDOUT = "-"  # ``--json -``


def _listing(scenarios: list[Scenario], transports: tuple[str, ...],
             only: Mapping[str, frozenset[str]] | None) -> int:
    """``--list``: what would run, one line per scenario, and no host started."""
    from palace_conformance.runner.execution.suite import plan
    from palace_conformance.runner.reports.tally import plural
    from palace_conformance.runner.verdict.levels import scenario_level

    jobs = plan(scenarios, transports, only)
    shown: dict[str, list[str]] = {}
    for scenario, transport in jobs:
        shown.setdefault(scenario.id, []).append(transport)
    listed = [s for s in scenarios if s.id in shown]
    width = max((len(s.id) for s in listed), default=10)
    for scenario in listed:
        print(f"{scenario.id:<{width}}  {','.join(shown[scenario.id]):<10}  "
              f"{scenario_level(scenario):<4}  covers {', '.join(scenario.covers) or '-'}")
    fake = sum(1 for s in listed if s.subject == "fake")
    self_tests = f" + {plural(fake, 'self-test scenario')}" if fake else ""
    print(f"{plural(len(listed) - fake, 'scenario')}{self_tests}: {plural(len(jobs), 'run')} "
          "(one scenario on one transport each) would run (no host started)", flush=True)
    return 0


def _checked_numbers(args: argparse.Namespace) -> float:
    """The run's counts checked (``--jobs`` defaulted to the machine's), its slack factor read."""
    # the default starts at jobs and grows (and backfills) while the CPUs are idle
    args.jobs, args.max_jobs, args.backfill = admission_for(args.jobs)
    at_least_one("--jobs", args.jobs)
    at_least_one("--op-timeout-ms", args.op_timeout_ms)
    if args.max_scenario_seconds is not None:
        at_least_one("--max-scenario-seconds", args.max_scenario_seconds)
    return slack_factor("--slack-factor", args.slack_factor)


def _run_checked(args: argparse.Namespace) -> int:
    """Run scenario fixtures against a bridge through its driver host (DRIVER.md) and report
    every expectation it departs from. Exit 0 only when everything passed; not-applicable
    scenarios are reported but do not fail the run."""
    from palace_conformance.runner import last_failed
    from palace_conformance.runner.compare import golden
    from palace_conformance.runner.execution import warm_client
    from palace_conformance.runner.execution.execute import RunOptions
    from palace_conformance.runner.execution.suite import SuiteOptions
    from palace_conformance.runner.execution.world import FAKE_PALACE
    from palace_conformance.runner.reports.console import make_progress, render_summary
    from palace_conformance.runner.reports.hints import capability_hints
    from palace_conformance.runner.reports.report_dir import RUNS, clear_previous

    factor = _checked_numbers(args)
    shard = parse_shard(args.shard) if args.shard is not None else None
    profile = load_profile_arg(args.profile)
    args.bridge = bridge_of(args.bridge, profile)
    if args.update_golden:
        _golden_usage(args, profile)
    argv = () if args.list else host_argv(args.bridge)  # --list starts nothing
    json_stdout = args.json == STDOUT
    json_path = None if json_stdout else writable("--json", args.json)
    human = sys.stderr if json_stdout else sys.stdout  # stdout stays pure JSON
    junit_path = writable("--junit", args.junit)
    markdown_path = writable("--markdown", args.markdown)
    baseline = load_baseline_arg(args.baseline)
    report_dir = directory("--report-dir", args.report_dir)
    if not args.cold_start and not args.list:  # the warm server imports while the catalogue is read
        threading.Thread(target=warm_client.prestart, daemon=True).start()
    scenarios, transports, only, record, recorded = _chosen(args, baseline, shard,
                                                            report_dir, human)
    if args.list:
        return _listing(scenarios, transports, only)
    server = contextlib.ExitStack()  # the real server's setup lives as long as the runs
    real = server.enter_context(chosen_server(args))  # first: a missing one clears no reports
    if report_dir is not None:
        try:
            clear_previous(report_dir)
        except OSError as exc:
            server.close()
            raise RunUsageError(f"--report-dir {report_dir}: cannot clear the previous run's "
                                f"reports ({exc.strerror}); choose another directory") from None
    level = args.level or default_level(args.bridge, profile)
    options = SuiteOptions(
        run=RunOptions(host_argv=argv, op_timeout_ms=args.op_timeout_ms,
                       artifacts=report_dir / RUNS if report_dir else None,
                       warm_start=not args.cold_start,
                       level=level,
                       profile=profile, slack_factor=factor,
                       server=real if real is not None else FAKE_PALACE),
        jobs=args.jobs, max_jobs=args.max_jobs, backfill=args.backfill, transports=transports,
        baseline=baseline, exitfirst=args.exitfirst,
        only=only, max_scenario_seconds=args.max_scenario_seconds,
        judges=() if args.update_golden else golden.judges(
            level=level, profile=profile, server="real" if real is not None else "fake"))
    with server:
        run = _run_suite(scenarios, options, progress=None if args.quiet else make_progress(human))
    run.bridge = args.bridge
    run.profile = profile.record() if profile is not None else None
    run.server = args.server
    if real is not None and real.palace_start is not None:
        run.server_start = real.palace_start.describe()
    run.shard = f"{shard[0]}/{shard[1]}" if shard is not None else ""
    run.slack_factor = factor
    render_summary(run, human, quiet=args.quiet)
    if args.update_golden:
        print(golden.update(run.results).line(), file=human, flush=True)
    for hint in capability_hints(run, scenarios):
        print(hint, file=human, flush=True)
    try:
        last_failed.write_record(record, args.bridge, last_failed.updated(recorded or (), run),
                                 args.server)
    except OSError as exc:  # a cache that cannot be written must not fail the run
        print(f"{PROG}: cannot keep the --last-failed record {record}: {exc.strerror or exc}",
              file=sys.stderr, flush=True)
    with _collector_paused():
        _write_reports(args, run, scenarios, report_dir, json_path=json_path,
                       junit_path=junit_path, markdown_path=markdown_path)
    return run.exit_code


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a while: copying, redacting and writing a
    catalogue's results makes millions of short-lived objects, and each batch of them would
    start a collection that walks the whole heap (about a third of the reports' CPU time)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


#: full collections during the runs: one for every this many of the middle generation's (10 by
#: default, which ran 8 in a catalogue run, each walking every finished result and holding the
#: GIL ~0.1 s; at 100, one)
SUITE_FULL_COLLECTION_EVERY = 100


@contextlib.contextmanager
def _full_collections_rarer() -> Iterator[None]:
    """While the runs go on: what is alive when they start (the modules, the catalogue) leaves
    the collector's walks, and full collections are rarer. The young generations are collected
    as before, so a run's short-lived cycles are still freed; all is as it was afterwards."""
    young, middle, full = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young, middle, max(full, SUITE_FULL_COLLECTION_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(young, middle, full)
        gc.unfreeze()


def _golden_usage(args: argparse.Namespace, profile: object) -> None:
    """Golden traces are the reference's, at the seed level, against the fake: refuse any
    other run before it starts, in one line."""
    wrong = ("--bridge reference" if args.bridge != "reference" or profile is not None
             else "--level seed" if args.level not in (None, "seed")
             else "--server fake" if args.server != "fake" else None)
    if wrong is not None:
        raise RunUsageError(f"--update-golden writes the reference bridge's traces at the seed "
                            f"level against the fake: run it with {wrong}")


def _run_suite(scenarios: list[Scenario], options: SuiteOptions,
               progress: Progress | None) -> RunResult:
    """The runs, SIGTERM taken as ^C; a host that fails its probe is one line."""
    from palace_conformance.runner.execution.suite import HostProbeError, run_suite

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with _full_collections_rarer():
            return run_suite(scenarios, options, progress=progress)
    except HostProbeError as exc:
        raise RunUsageError(f"the bridge host failed: {exc}") from None
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted: the runs in flight finished and were cleaned up; no report "
              "written", file=sys.stderr, flush=True)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _chosen(args: argparse.Namespace, baseline: BaselineFile | None,
            shard: tuple[int, int] | None, report_dir: Path | None,
            human: TextIO) -> tuple[list[Scenario], tuple[str, ...],
                                    Mapping[str, frozenset[str]] | None, Path,
                                    set[tuple[str, str]] | None]:
    """The catalogue read and narrowed as the flags say: the scenarios, the transports, what
    ``--last-failed`` re-runs (``only``) and its record (path and what it held)."""
    from palace_conformance.runner import last_failed
    from palace_conformance.scenarios.loader import (
        load_catalogue,
        shipped_roots,
        slow_scenarios_dir,
    )

    check_stray_patterns(list(args.paths), list(args.select))
    roots = list(args.paths) or shipped_roots(slow=False)
    catalogue = load_catalogue([*roots, slow_scenarios_dir()] if args.slow else roots)
    if catalogue.problems:
        for problem in catalogue.problems:
            print(f"{PROG}: {problem}", file=sys.stderr)
        raise RunUsageError(f"{len(catalogue.problems)} problem(s) in the scenario files "
                            "(palace-conformance fixtures validate)")
    transports = TRANSPORTS if args.transport == "both" else (args.transport,)
    scenarios = select(catalogue.scenarios, args.select, args.covers)
    if baseline is not None:  # entries naming these scenarios are not "unknown ids"
        baseline.add_known({s.id: s.transports for s in catalogue.scenarios})
    if not any(t in s.transports for s in scenarios for t in transports):
        raise RunUsageError(f"none of the selected scenarios runs on {args.transport}")
    if shard is not None:
        scenarios = select_shard(scenarios, *shard)
        if not scenarios:
            print(f"--shard {args.shard}: no selected scenario falls in this shard; nothing to "
                  "run", file=human, flush=True)
    record = last_failed.record_path(args.bridge, args.server, report_dir)
    recorded = last_failed.read_record(record, args.bridge, args.server)
    only = None
    if args.last_failed:
        plan = last_failed.rerun(recorded, scenarios,
                                 last_failed.target(args.bridge, args.server), record)
        scenarios, only = plan.scenarios, plan.only
        print(plan.note, file=human, flush=True)
    return scenarios, transports, only, record, recorded


def _write_reports(args: argparse.Namespace, run: RunResult, scenarios: list[Scenario],
                   report_dir: Path | None, *, json_path: Path | None, junit_path: Path | None,
                   markdown_path: Path | None) -> None:
    """Every report the flags ask for, from a copy of the run that holds no secret."""
    from palace_conformance.runner.reports.junit import write_junit
    from palace_conformance.runner.reports.report_dir import (
        JUNIT,
        RESULTS,
        public_run,
        write_reports,
    )

    json_stdout = args.json == STDOUT
    by_id = {s.id: s for s in scenarios}
    reporting = json_stdout or any(t is not None
                                   for t in (json_path, junit_path, markdown_path, report_dir))
    # every report below renders from this copy, which holds no secret (reports/redact.py); none
    # of them shows a journal, so the copy has none (most of a catalogue's text, to redact)
    public = public_run(run, by_id, journal=False) if reporting else run
    targets = [(json_path, "json"), (junit_path, "junit")]
    if report_dir is not None:
        targets += [(report_dir / RESULTS, "json"), (report_dir / JUNIT, "junit")]
    # the whole result model as JSON, made only when a target wants it; one line (20 MB for the
    # catalogue: json's indenting encoder is pure Python, five times the C one's time)
    payload = None
    if json_stdout:
        payload = json.dumps(public.to_json(), ensure_ascii=False, default=str)
        sys.stdout.write(payload + "\n")
        sys.stdout.flush()
    for target, kind in targets:
        if target is None:
            continue
        try:
            if kind == "json":
                if payload is None:
                    payload = json.dumps(public.to_json(), ensure_ascii=False, default=str)
                target.write_text(payload, encoding="utf-8")
            else:
                write_junit(public, target)
        except OSError as exc:
            raise RunUsageError(f"cannot write {target}: {exc.strerror or exc} (the run itself "
                                f"{'passed' if run.ok else 'failed'})") from None
    try:
        write_reports(run, scenarios=by_id, bridge=args.bridge, report_dir=report_dir,
                      markdown=markdown_path, baseline=args.baseline, public=public)
    except OSError as exc:
        raise RunUsageError(f"cannot write the reports: {exc.strerror or exc} "
                            f"({exc.filename or ''}; the run itself "
                            f"{'passed' if run.ok else 'failed'})") from None


def _add_outputs(run: argparse.ArgumentParser) -> None:
    """``run``'s options for what it prints and writes."""
    run.add_argument("--list", action="store_true",
                     help="print what would run (scenario, transports, level, covers) and exit "
                     "0 without starting a host")
    run.add_argument("-q", "--quiet", action="store_true",
                     help="no line per result and no table: only the failures and the totals")
    run.add_argument("--json", metavar="FILE",
                     help="write the full result model as JSON ('-': to stdout, and the human "
                     "output to stderr)")
    run.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    run.add_argument("--markdown", metavar="FILE",
                     help="write a Markdown summary (for a pull request comment)")
    run.add_argument("--report-dir", metavar="DIR",
                     help="keep every run's journal, host stderr and result, plus "
                     "results.json, junit.xml, summary.md and a repro bundle per failure "
                     "(bundles/<scenario>--<transport>/), under DIR; the --last-failed "
                     "record is kept there too")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = declare(sub, "run", "run scenarios against a bridge host", one_line(PROG)(_run_checked))
    add_scenario_paths(run)
    run.add_argument("--profile", metavar="FILE",
                     help="a bridge profile (JSON or TOML, docs/profiles.md): how the bridge "
                     "starts, its own knob and tool names, settings files, channels; its entry "
                     "is the bridge unless --bridge is given")
    run.add_argument("--bridge", default=None, metavar="reference|COMMAND",
                     help="'reference' (the Python reference bridge, the default without a "
                     "--profile), a Node host "
                     "spec (pi-extension:FILE, pi-mcp, pi-mcp:wrapped, pi-mcp-adapter; see "
                     "'palace-conformance hosts'), or the host command to start, e.g. "
                     "'node host.mjs'")
    for name, spec in SHARED_RUN_OPTIONS.items():
        run.add_argument(f"--{name}", **spec)
    add_jobs(run, grows=True)
    run.add_argument("--cold-start", action="store_true",
                     help="start every reference host and HTTP fake as a fresh interpreter "
                     "(slower); by default they are forked from a warm server that imported "
                     "them once (docs/runner.md)")
    run.add_argument("--slow", action="store_true",
                     help="also run the slow tier (fixtures/slow/): scenarios that wait out a "
                     "seed default of 30 s or more, e.g. the 60 s request timeout; minutes, not "
                     "seconds (docs/choices.md)")
    run.add_argument("--update-golden", action="store_true",
                     help="write the golden traces (fixtures/golden/) of the scenarios run from "
                     "this run of the reference bridge, at the seed level, against the fake; "
                     "review the change with 'git diff fixtures/golden' (fixtures/README.md)")
    run.add_argument("--max-scenario-seconds", type=int, default=None, metavar="N",
                     help="set aside as 'not run: too slow' (never a pass; the run fails) a "
                          "scenario that the bridge's own pace (a profile's fixed or absent "
                          "knob in place of a pace value, fixtures/README.md) would lengthen by "
                          "more than N seconds")
    run.add_argument("--slack-factor", default="1", metavar="F",
                     help="multiply every declared timing slack (a fixture's slack_ms) by F >= 1 "
                     "for a slow or loaded machine; lower bounds never move, and the factor is "
                     "recorded in the results (default 1)")
    run.add_argument("--covers", action="append", default=[], metavar="ID",
                     help="only scenarios covering this behaviour ID (e.g. STDIO-05) or any ID "
                     "of this area (e.g. STDIO); repeatable (fixtures/behaviours.json)")
    run.add_argument("--shard", metavar="K/N",
                     help="run only shard K of N (1 <= K <= N): a stable split by scenario id "
                     "for N CI jobs; join their --json results with 'palace-conformance merge'")
    run.add_argument("--last-failed", "--lf", dest="last_failed", action="store_true",
                     help="re-run only the results that failed or were not testable in the "
                     "last run against this bridge (everything, said in one line, when there "
                     "is no record)")
    run.add_argument("-x", "--exitfirst", action="store_true",
                     help="start no new run after the first failed or not-testable result "
                     "(runs in flight finish; the rest are reported as not run)")
    _add_outputs(run)
    add_server_options(run)
