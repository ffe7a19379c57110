"""``python -m mutation``: mutation testing of the reference bridge, judged by the catalogue.

    python -m mutation run [--module M]... [--sample N --seed S] [--out DIR] [--selection S]
    python -m mutation report [--out DIR] [--from DIR]...
                                               the report of every session under DIR (and
                                               of other run directories, combined)
    python -m mutation selections              module → behaviours → scenario count
    python -m mutation triage                  the triage file checked against the checkout,
                                               its verdicts counted per module (Markdown)

Run it from the checkout (tox -e mutation, tox -e mutation-sample). docs/mutation.md says why
cosmic-ray and how to triage a survivor.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mutation import line_map
from mutation.command_line import add_run_options, checked_main, command_parser
from mutation.measure import MeasureError, measure, missing_coverage
from mutation.module_map import (
    BRIDGE_DIR,
    ROOT,
    ModuleMap,
    selections,
    shipped_scenario_ids,
)
from mutation.report import (
    EQUIVALENT,
    NOT_SAMPLED,
    PENDING,
    REPO_ROOT,
    VERDICT_CHOICE,
    VERDICT_EQUIVALENT,
    VERDICT_KILLED,
    VERDICT_OPEN,
    Report,
    load_runs,
    load_triage,
    print_open,
    save_runs,
)
from mutation.sessions import (
    ModuleSession,
    SessionError,
    baseline,
    choose_sample,
    copy_bridge,
    execute,
    execute_selected,
    init,
    mark_equivalents,
    pending_keys,
    records,
    reopen,
    retime,
    scenario_command,
    skip_unsampled,
    start_work,
    unsampled_keys,
)

DEFAULT_OUT = ROOT / ".mutation"
BASELINE_LIMIT_S = 900.0


def _parser() -> argparse.ArgumentParser:
    parser, sub = command_parser("python -m mutation", __doc__)
    run = sub.add_parser("run", help="mutate, run the mapped scenarios per mutant, report")
    add_run_options(run, default_out=DEFAULT_OUT, seed=12,
                    module_help="a module of palace_bridge/ (e.g. backoff.py, "
                    "features/feeding.py); repeatable; default: every mapped module",
                    out_help="work directory: sessions, scratch copy, report (default "
                    ".mutation/); a second run resumes the mutants still pending there")
    run.add_argument("--sample", type=int, metavar="N",
                     help="run only N mutants, chosen with --seed among the selected modules")
    run.add_argument("--selection", choices=("lines", "module"), default="lines",
                     help="which scenarios judge a mutant: 'lines' (default), the module's "
                          "scenario runs that execute the mutant's lines, measured once per "
                          "module with coverage.py; 'module', all of the module's scenarios on "
                          "both transports (the superset, the tool's first design)")
    report = sub.add_parser("report", help="write the report of every session under --out")
    report.add_argument("--out", type=Path, default=DEFAULT_OUT)
    report.add_argument("--from", dest="sources", type=Path, action="append", default=[],
                        metavar="DIR",
                        help="also read the sessions of another run directory (repeatable; "
                             "runs in parallel each have their own): a module's mutants come "
                             "from the first of --out and these, in order, that ran it; the "
                             "combined report is written to --out")
    sub.add_parser("selections", help="print each module's behaviours and scenario count")
    sub.add_parser("triage", help="check mutation/triage.json against the checkout (stale or "
                                  "ambiguous anchors fail) and count its verdicts per module")
    return parser


def _report(out: Path, module_map: ModuleMap, known: Sequence[str],
            sources: Sequence[Path] = ()) -> Report:
    """The report of ``out``'s sessions, and of each module ``out`` did not run, from the first
    of ``sources`` that did (with that directory's run facts)."""
    every = []
    runs: dict[str, dict[str, object]] = {}
    for module in sorted(module_map.modules):
        for directory in (out, *sources):
            session = ModuleSession(module, directory)
            if session.db.exists():
                every += records(session)
                facts = load_runs(directory).get(module)
                if facts is not None:
                    runs[module] = facts | ({"from": str(directory)} if sources else {})
                break
    return Report(every, module_map.areas(known),
                  load_triage(known=known, scenarios=shipped_scenario_ids(),
                              tests_root=REPO_ROOT, bridge_dir=BRIDGE_DIR),
                  [runs[m] | {"module": m} for m in sorted(runs)])


def _run(args: argparse.Namespace, module_map: ModuleMap, known: list[str],
         scenarios: list[Any]) -> int:
    if args.sample is not None and args.sample < 1:
        print("python -m mutation run: --sample must be at least 1", file=sys.stderr)
        return 2
    if args.jobs < 1 or args.timeout_factor <= 0 or args.min_timeout < 0:
        print("python -m mutation run: --jobs must be at least 1, --timeout-factor above 0 and "
              "--min-timeout at least 0", file=sys.stderr)
        return 2
    work = start_work(args, module_map.modules, BRIDGE_DIR)
    out, env, runner, modules = work.out, work.env, work.runner, work.modules
    chosen = selections(module_map)
    sessions = {m: ModuleSession(m, out) for m in modules}
    for module, session in sessions.items():
        command = scenario_command(chosen[module], args.jobs, runner)
        init(session, command, args.min_timeout, env)
        spared = mark_equivalents(session)
        print(f"{module}: {len(chosen[module])} scenario(s); {spared} mutant(s) spared as "
              f"equivalent (annotations); {len(pending_keys(session))} pending")
    if args.sample is not None:
        _sample(args, list(sessions.values()))
    if args.selection == "lines" and any(pending_keys(s) for s in sessions.values()):
        missing = missing_coverage(runner, env)  # before a baseline, not after a measurement
        if missing is not None:
            print(f"python -m mutation run: {missing}; --selection module needs no coverage",
                  file=sys.stderr)
            return 2
    runs = load_runs(out)
    failed_baselines = []
    executed: list[str] = []  # modules whose mutants cosmic-ray ran in this invocation
    for module, session in sessions.items():
        if not pending_keys(session):
            continue
        if args.selection == "module":
            done = _run_module(args, session, chosen[module], runner, env)
        else:
            done = _run_lines(args, session, chosen[module], scenarios, runner, env)
        if done is None:
            failed_baselines.append(module)
            continue
        executed.append(module)
        fact, wall = done
        previous = runs.get(module, {})
        for total in ("mutants_run", "judged_without_run", "scenario_runs_made"):
            if total in fact:
                fact[total] += int(str(previous.get(total, 0)))
        fact["wall_s"] = round(wall + float(str(previous.get("wall_s", 0.0))), 1)
        runs[module] = fact
        save_runs(out, runs)
        print(f"{module}: done in {wall:.0f} s", flush=True)
    copy_bridge(BRIDGE_DIR, out)  # leave no mutant behind, even from an interrupted session
    report = _report(out, module_map, known)
    report.summarise(out, "mutation/triage.json")
    unjudged = report.unjudged(executed)
    for record in unjudged:
        print(f"UNJUDGED mutant {record.key}: {record.status} after its module ran (see "
              f"{ModuleSession(record.module, out).log})")
    return 1 if failed_baselines or report.untriaged or unjudged else 0


def _sample(args: argparse.Namespace, sessions: list[ModuleSession]) -> None:
    """Choose the sample. In a work directory an earlier sample left, the mutants it chose
    (judged or still pending) stay chosen: the same --sample resumes it, a larger one draws only
    the difference, with --seed, among the mutants it left out, so the whole is still a uniform
    draw over the modules' mutants."""
    left_out = {key: (s, job) for s in sessions for key, job in unsampled_keys(s).items()}
    pending = {key for s in sessions for key in pending_keys(s)}
    if not left_out:
        keep = choose_sample(pending, args.sample, args.seed)
        for session in sessions:
            skip_unsampled(session, keep)
        print(f"sample: {len(keep)} of {len(pending)} pending mutant(s), seed {args.seed}")
        return
    judged = sum(1 for s in sessions for r in records(s) if r.status not in (
        PENDING, EQUIVALENT, NOT_SAMPLED))
    chosen = judged + len(pending)
    more = choose_sample(left_out, max(0, args.sample - chosen), args.seed)
    for session in sessions:
        reopen(session, [job for key, (owner, job) in left_out.items()
                         if owner is session and key in more])
    print(f"sample: {chosen} mutant(s) chosen before ({judged} judged, {len(pending)} pending), "
          f"{len(more)} more drawn with seed {args.seed} among the {len(left_out)} left out")


def _run_module(args: argparse.Namespace, session: ModuleSession, chosen: list[str], runner: str,
                env: dict[str, str]) -> tuple[dict[str, Any], float] | None:
    """``--selection module``: every mutant runs the module's whole selection on both
    transports, through ``cosmic-ray exec``. The module's facts for runs.json and the mutants'
    wall time; None when the unmutated selection fails."""
    command = scenario_command(chosen, args.jobs, runner)
    try:
        took = baseline(command, env, BASELINE_LIMIT_S)
    except SessionError as exc:
        print(f"{session.module}: not run: {exc}", file=sys.stderr)
        return None
    timeout = max(args.min_timeout, args.timeout_factor * took)
    retime(session, command, timeout)
    count = len(pending_keys(session))
    print(f"{session.module}: baseline {took:.1f} s, timeout {timeout:.0f} s, running {count} "
          "mutant(s)", flush=True)
    started = time.monotonic()
    execute(session, env)
    wall = time.monotonic() - started
    return {"selection": "module", "scenarios": len(chosen), "baseline_s": round(took, 1),
            "timeout_s": round(timeout), "mutants_run": count}, wall


def _run_lines(args: argparse.Namespace, session: ModuleSession, chosen: list[str],
               scenarios: list[Any], runner: str,
               env: dict[str, str]) -> tuple[dict[str, Any], float] | None:
    """``--selection lines``: the baseline and the module's line map (or the saved one), then
    each mutant against the scenario runs that execute its lines. The module's facts for
    runs.json and the mutants' wall time; None when a run fails unmutated."""
    every = line_map.scenario_runs(scenarios, chosen)
    files = [Path(s.path) for s in scenarios if s.id in set(chosen)]
    stamp = line_map.fingerprint(BRIDGE_DIR, files, chosen)
    now = line_map.parts(BRIDGE_DIR, files, chosen)
    saved = _line_map_file(session)
    found = line_map.load(saved, stamp)
    how = "reused from " + str(saved)
    if found is None:
        why = line_map.stale(saved, stamp, now)
        if why is not None:
            print(f"{session.module}: saved line map is stale ({why}): measuring it again",
                  flush=True)
        print(f"{session.module}: baseline, then {len(every)} scenario run(s) under coverage",
              flush=True)
        try:
            took = baseline(scenario_command(chosen, args.jobs, runner), env, BASELINE_LIMIT_S)
            found = measure(every, session.source, session.work, session.stem, runner, env,
                            args.jobs, BASELINE_LIMIT_S, stamp)
        except (SessionError, MeasureError) as exc:
            print(f"{session.module}: not run: {exc}", file=sys.stderr)
            return None
        found = replace(found, module_s=took, parts=now)
        found.save(saved)
        how = "measured"
    cap = found.timeout(every, args.timeout_factor, args.min_timeout)
    count = len(pending_keys(session))
    print(f"{session.module}: line map {how}: baseline {found.module_s:.1f} s, {len(every)} "
          f"scenario run(s) under coverage in {found.wall_s:.1f} s; timeout per mutant from its "
          f"runs, at most {cap:.0f} s; running {count} mutant(s)", flush=True)
    started = time.monotonic()
    done = execute_selected(session, found, env, args.jobs, runner, args.timeout_factor,
                            args.min_timeout)
    wall = time.monotonic() - started
    print(f"{session.module}: {done.ran} mutant(s) run ({done.scenario_runs} scenario run(s) "
          f"of {done.ran * len(every)} the module selection would make), {done.unreached} "
          "judged survived without a run (no scenario reaches their line)", flush=True)
    return {"selection": "lines", "scenarios": len(chosen), "scenario_runs": len(every),
            "baseline_s": round(found.module_s, 1), "measure_s": round(found.wall_s, 1),
            "timeout_s": round(cap),
            "mutants_run": done.ran, "judged_without_run": done.unreached,
            "scenario_runs_made": done.scenario_runs}, wall


def _line_map_file(session: ModuleSession) -> Path:
    return session.work / "coverage" / f"{session.stem}.json"


def _selections(module_map: ModuleMap, known: list[str]) -> int:
    chosen = selections(module_map)
    for module in sorted(module_map.modules):
        ids = module_map.behaviours(module, known)
        print(f"{module:24} {len(chosen[module]):3} scenario(s)  {' '.join(ids)}")
    for module, why in sorted(module_map.unreached.items()):
        print(f"{module:24}   - unreached: {why}")
    return 0


def _triage(known: list[str]) -> int:
    """The triage file's verdicts per module, as a Markdown table, after every check the run
    makes (anchors resolve in the checkout, IDs, scenarios and tests exist)."""
    verdicts = load_triage(known=known, scenarios=shipped_scenario_ids(), tests_root=REPO_ROOT,
                           bridge_dir=BRIDGE_DIR)
    columns = (VERDICT_EQUIVALENT, VERDICT_KILLED, VERDICT_CHOICE, VERDICT_OPEN)
    counts: dict[str, dict[str, int]] = {}
    for anchor, verdict in verdicts.items():
        module = anchor.split("::")[0]
        counts.setdefault(module, dict.fromkeys(columns, 0))[verdict.verdict] += 1
    print("| module | " + " | ".join(columns) + " | triaged survivors |")
    print("|---" * (len(columns) + 2) + "|")
    for module in sorted(counts):
        row = counts[module]
        print(f"| {module} | " + " | ".join(str(row[c]) for c in columns)
              + f" | {sum(row.values())} |")
    totals = [sum(row[c] for row in counts.values()) for c in columns]
    print("| **all** | " + " | ".join(str(t) for t in totals) + f" | {sum(totals)} |")
    print_open(verdicts)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return checked_main("python -m mutation", _parser(), argv, _dispatch)


def _dispatch(args: argparse.Namespace, module_map: ModuleMap, known: list[str],
              scenarios: list[Any]) -> int:
    if args.command == "selections":
        return _selections(module_map, known)
    if args.command == "triage":
        return _triage(known)
    if args.command == "report":
        missing = [d for d in args.sources if not d.is_dir()]
        if missing:
            print(f"python -m mutation: --from {missing[0]} is not a directory (give a "
                  "run's --out)", file=sys.stderr)
            return 2
        out = args.out.resolve()
        _report(out, module_map, known, [d.resolve() for d in args.sources]).summarise(
            out, "mutation/triage.json")
        return 0
    # a triage file the run's report would refuse stops it before hours of mutants
    load_triage(known=known, scenarios=shipped_scenario_ids(), tests_root=REPO_ROOT,
                bridge_dir=BRIDGE_DIR)
    return _run(args, module_map, known, scenarios)


if __name__ == "__main__":
    sys.exit(main())
