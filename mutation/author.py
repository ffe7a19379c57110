"""``python -m mutation.author``: the second generator, mutants that err like a bridge author.

    python -m mutation.author list [--module M]...        mutants per module and operator
    python -m mutation.author run [--module M]... [--sample-each N] [--seed S] [--out DIR]
    python -m mutation.author report [--out DIR]
    python -m mutation.author triage                      mutation/triage_author.json checked

The operators are :mod:`mutation.author_ops` (no library: cosmic-ray cannot load an operator of
ours without an installed plugin). Everything else is the first tool's: the scratch copy first on
``PYTHONPATH``, the module's selection (``modules.json``), its line map measured with coverage.py
(``measure``), each mutant judged by the scenario runs that execute its lines with parity kept
(``line_map``), a mutant no run reaches survived without a run, the same triage discipline keyed
by the same kind of anchor (``anchors``; the operator names tell the two files' entries apart)
and the same report per module and per behaviour area (``report``). docs/mutation.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mutation import line_map
from mutation.anchors import AnchorError, anchor_of
from mutation.author_ops import OPERATORS, Mutant, generate
from mutation.command_line import add_run_options, checked_main, command_parser
from mutation.line_map import (
    NO_REACH,
    LineMap,
    ScenarioRun,
    commands,
    mutant_lines,
    one_command,
    statement_spans,
    with_parity,
)
from mutation.measure import MeasureError, measure, measure_shared, missing_coverage
from mutation.module_map import (
    BRIDGE_DIR,
    ROOT,
    ModuleMap,
    selections,
    shipped_scenario_ids,
)
from mutation.report import (
    KILLED,
    NOT_SAMPLED,
    PENDING,
    REPO_ROOT,
    SURVIVED,
    TIMEOUT,
    MutantRecord,
    Report,
    load_runs,
    load_triage,
    print_open,
    save_runs,
)
from mutation.sessions import copy_bridge, scenario_command, start_work

DEFAULT_OUT = ROOT / ".mutation-author"
TRIAGE_PATH = Path(__file__).with_name("triage_author.json")
BASELINE_LIMIT_S = 900.0
RESULTS = "results.json"


def _parser() -> argparse.ArgumentParser:
    parser, sub = command_parser("python -m mutation.author", __doc__)
    listing = sub.add_parser("list", help="count the mutants per module and operator")
    listing.add_argument("--module", action="append", default=[], metavar="M")
    run = sub.add_parser("run", help="judge the mutants by the scenarios covering their lines")
    add_run_options(run, default_out=DEFAULT_OUT, seed=27,
                    module_help="a module of palace_bridge/; repeatable; default: every "
                    "mapped one",
                    out_help="work directory (default .mutation-author/); a second run resumes")
    run.add_argument("--sample-each", type=int, metavar="N",
                     help="run N mutants of each module, the first N of its mutants shuffled "
                          "with --seed (a larger N in the same --out runs only the difference)")
    run.add_argument("--only", action="append", default=[], metavar="KEY",
                     help="run only this mutant (MODULE:LINE:COLUMN:OPERATOR); repeatable")
    run.add_argument("--measure-together", action="store_true",
                     help="measure the line maps of every module to run in one pass over the "
                          "union of their selections (each run once, every module measured; "
                          "no separate baseline), instead of one measurement per module")
    report = sub.add_parser("report", help="write the report of --out")
    report.add_argument("--out", type=Path, default=DEFAULT_OUT)
    sub.add_parser("triage", help="check mutation/triage_author.json against the checkout")
    apply = sub.add_parser("apply", help="write a copy of the bridge holding one mutant, to put "
                                         "first on PYTHONPATH when checking a kill by hand")
    apply.add_argument("key", help="the mutant's key (MODULE:LINE:COLUMN:OPERATOR) or anchor")
    apply.add_argument("--to", type=Path, required=True, metavar="DIR",
                       help="DIR/palace_bridge/ is (re)written")
    return parser


def sample(keys: Sequence[str], size: int, seed: int) -> list[str]:
    """The first ``size`` of ``keys`` shuffled with ``seed``: a larger size keeps the smaller
    one's choice, so a sample grows without running a mutant twice."""
    ordered = sorted(keys)
    random.Random(seed).shuffle(ordered)
    return ordered[:size]


def _load_results(out: Path) -> dict[str, dict[str, Any]]:
    try:
        return dict(json.loads((out / RESULTS).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _save_results(out: Path, results: dict[str, dict[str, Any]]) -> None:
    path = out / RESULTS
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _diff(mutant: Mutant, source: str) -> str:
    import difflib

    path = f"reference/palace_bridge/{mutant.module}"
    body = difflib.unified_diff(source.split("\n"), mutant.apply(source).split("\n"),
                                fromfile=f"a/{path}", tofile=f"b/{path}", lineterm="", n=1)
    return "\n".join(body)


def records(out: Path, modules: Sequence[str]) -> list[MutantRecord]:
    """Every mutant of ``modules`` with its status in ``out`` (pending or not sampled when it
    has none), its anchor and its diff in the checkout's source."""
    results = _load_results(out)
    found = []
    for module in modules:
        source = (BRIDGE_DIR / module).read_text(encoding="utf-8")
        for mutant in generate(module, source):
            result = results.get(mutant.key, {})
            status = str(result.get("status", PENDING if result else NOT_SAMPLED))
            try:
                anchor = str(anchor_of(module, source, mutant.operator, mutant.start,
                                       mutant.end))
            except AnchorError:
                anchor = ""
            output = str(result.get("output", ""))
            found.append(MutantRecord(module, mutant.start[0], mutant.start[1], mutant.operator,
                                      status, _diff(mutant, source) if status == SURVIVED else "",
                                      output if output.startswith(NO_REACH) else "", anchor))
    return found


def _triage(known: Sequence[str]) -> dict[str, Any]:
    return load_triage(TRIAGE_PATH, known=known, scenarios=shipped_scenario_ids(),
                       tests_root=REPO_ROOT, bridge_dir=BRIDGE_DIR)


def report(out: Path, module_map: ModuleMap, known: Sequence[str]) -> Report:
    results = _load_results(out)
    ran = sorted({key.split(":")[0] for key in results})
    facts = load_runs(out)
    return Report(records(out, ran), module_map.areas(known), _triage(known),
                  [facts[m] | {"module": m} for m in sorted(facts)])


def _command(argv: Sequence[str] | str, env: dict[str, str], limit_s: float) -> tuple[int, float]:
    """Run a command in its own process group; (exit code, seconds), -9 when it overran
    ``limit_s`` (the whole group is ended)."""
    started = time.monotonic()
    process = subprocess.Popen(argv, env=env, shell=isinstance(argv, str),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        code = process.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        code = -9
    return code, time.monotonic() - started


def _line_map(module: str, out: Path, chosen: list[str], scenarios: list[Any], runner: str,
              env: dict[str, str], jobs: int) -> LineMap:
    every = line_map.scenario_runs(scenarios, chosen)
    files = [Path(s.path) for s in scenarios if s.id in set(chosen)]
    stamp = line_map.fingerprint(BRIDGE_DIR, files, chosen)
    now = line_map.parts(BRIDGE_DIR, files, chosen)
    stem = module.removesuffix(".py").replace("/", ".")
    saved = out / "coverage" / f"{stem}.json"
    found = line_map.load(saved, stamp)
    if found is not None:
        return found
    _say_stale(module, saved, stamp, now)
    argv = scenario_command(chosen, jobs, runner)
    code, took = _command(argv, env, BASELINE_LIMIT_S)
    if code != 0:  # once more: a timing window the machine's load overran (see measure_files)
        code, took = _command(argv, env, BASELINE_LIMIT_S)
    if code != 0:
        raise MeasureError(f"{module}: the unmutated selection fails twice (exit {code})")
    source = out / "src" / "palace_bridge" / module
    found = measure(every, source, out, stem, runner, env, jobs, BASELINE_LIMIT_S, stamp)
    found = replace(found, module_s=took, parts=now)
    found.save(saved)
    return found


def _say_stale(module: str, saved: Path, stamp: str, now: dict[str, str]) -> None:
    """One line when ``module``'s saved line map is stale, saying what changed: it is measured
    again (the results already in the work directory were judged with the old scenarios)."""
    why = line_map.stale(saved, stamp, now)
    if why is not None:
        print(f"{module}: saved line map is stale ({why}): measuring it again", flush=True)


def _judge(module: str, source: str, todo: Sequence[Mutant], found: LineMap, out: Path,
           results: dict[str, dict[str, Any]], args: argparse.Namespace, runner: str,
           env: dict[str, str]) -> None:
    """Each mutant of ``todo`` against the runs reaching its statements; results saved after
    each."""
    every = sorted(found.lines)
    spans = statement_spans(source)
    target = out / "src" / "palace_bridge" / module
    for mutant in todo:
        key = mutant.key
        lines = mutant_lines(spans, mutant.start, mutant.end)
        reaching = with_parity(found.reaching(lines), every)
        if not reaching:
            results[key] = {"status": SURVIVED, "output": f"{NO_REACH} {mutant.start[0]}",
                            "runs": 0, "seconds": 0.0}
        else:
            command = one_command(commands(reaching, every, args.jobs, runner))
            limit = found.timeout(reaching, args.timeout_factor, args.min_timeout)
            target.write_text(mutant.apply(source), encoding="utf-8")
            try:
                code, took = _command(command, env, limit)
            finally:
                target.write_text(source, encoding="utf-8")
            status = TIMEOUT if code == -9 else (SURVIVED if code == 0 else KILLED)
            results[key] = {"status": status, "output": f"exit {code}",
                            "runs": len(reaching), "seconds": round(took, 1)}
        _save_results(out, results)
        print(f"  {key}: {results[key]['status']} ({results[key]['runs']} run(s), "
              f"{results[key]['seconds']} s)", flush=True)


def _shared_maps(modules: Sequence[str], out: Path, chosen: dict[str, list[str]],
                 scenarios: list[Any], runner: str, env: dict[str, str], jobs: int
                 ) -> dict[str, str]:
    """``--measure-together``: the line maps of ``modules`` not measured yet, from one pass of
    the union of their selections under coverage, every module measured in each run; each map
    saved as :func:`_line_map` would find it. The pass is the baseline (every run must pass,
    each retried once); ``module_s`` is the selection's runs' seconds added up. Returns the
    modules left out (a run of their selection failed twice), with the first such error."""
    wanted: dict[str, tuple[list[ScenarioRun], str, Path, dict[str, str]]] = {}
    for module in modules:
        files = [Path(s.path) for s in scenarios if s.id in set(chosen[module])]
        stamp = line_map.fingerprint(BRIDGE_DIR, files, chosen[module])
        saved = out / "coverage" / f"{module.removesuffix('.py').replace('/', '.')}.json"
        if line_map.load(saved, stamp) is None:
            now = line_map.parts(BRIDGE_DIR, files, chosen[module])
            _say_stale(module, saved, stamp, now)
            wanted[module] = (line_map.scenario_runs(scenarios, chosen[module]), stamp, saved,
                              now)
    if not wanted:
        return {}
    every = sorted({run for runs, _, _, _ in wanted.values() for run in runs})
    sources = {m: out / "src" / "palace_bridge" / m for m in wanted}
    print(f"measuring {len(every)} run(s) once for {len(wanted)} module(s)", flush=True)
    started = time.monotonic()
    done, failed = measure_shared(every, list(sources.values()), out, runner, env, jobs,
                                  BASELINE_LIMIT_S)
    wall = time.monotonic() - started
    left_out: dict[str, str] = {}
    for module, (runs, stamp, saved, now) in wanted.items():
        bad = [failed[run] for run in runs if run in failed]
        if bad:
            left_out[module] = bad[0]
            continue
        lines = {run: done[run][0][sources[module]] for run in runs}
        seconds = {run: done[run][1] for run in runs}
        LineMap(fingerprint=stamp, lines=lines, seconds=seconds, wall_s=wall,
                module_s=sum(seconds.values()), parts=now).save(saved)
    return left_out


def stale_notes(out: Path, chosen: dict[str, list[str]], scenarios: list[Any]) -> list[str]:
    """A line for each module of ``out``'s results whose saved line map is stale: its mutants
    were judged with scenarios (or a bridge) other than the checkout's, so a survivor may die
    now ('run' with the same --out measures again and judges only new mutants)."""
    notes = []
    for module in sorted({key.split(":")[0] for key in _load_results(out)}):
        if module not in chosen:
            continue
        files = [Path(s.path) for s in scenarios if s.id in set(chosen[module])]
        saved = out / "coverage" / f"{module.removesuffix('.py').replace('/', '.')}.json"
        why = line_map.stale(saved, line_map.fingerprint(BRIDGE_DIR, files, chosen[module]),
                             line_map.parts(BRIDGE_DIR, files, chosen[module]))
        if why is not None:
            notes.append(f"note: {module}'s results were judged before {why} (its saved line "
                         "map is stale): a survivor may be killed now")
    return notes


def _run(args: argparse.Namespace, module_map: ModuleMap, known: list[str],
         scenarios: list[Any]) -> int:
    work = start_work(args, module_map.modules, BRIDGE_DIR)
    out, env, runner, modules = work.out, work.env, work.runner, work.modules
    chosen = selections(module_map)
    results = _load_results(out)
    runs = load_runs(out)
    failed = []
    plan: dict[str, tuple[str, list[Mutant]]] = {}
    for module in modules:
        source = (BRIDGE_DIR / module).read_text(encoding="utf-8")
        mutants = {m.key: m for m in generate(module, source)}
        keys = list(mutants)
        if args.only:
            keys = [k for k in keys if k in set(args.only)]
        else:  # in the seeded order, so a run cut short is still a uniform sample
            keys = sample(keys, len(keys) if args.sample_each is None else args.sample_each,
                          args.seed)
        todo = [k for k in keys if k not in results]
        print(f"{module}: {len(mutants)} mutant(s), {len(keys)} chosen, {len(todo)} to run",
              flush=True)
        if todo:
            plan[module] = (source, [mutants[k] for k in todo])
    if plan:  # every mutant needs its module's line map: coverage.py, checked before any run
        missing = missing_coverage(runner, env)
        if missing is not None:
            print(f"python -m mutation.author run: {missing}", file=sys.stderr)
            return 2
    left_out = (_shared_maps(list(plan), out, chosen, scenarios, runner, env, args.jobs)
                if args.measure_together else {})
    for module, (source, chosen_mutants) in plan.items():
        started = time.monotonic()
        try:
            if module in left_out:
                raise MeasureError(left_out[module])
            found = _line_map(module, out, chosen[module], scenarios, runner, env, args.jobs)
        except MeasureError as exc:
            print(f"{module}: not run: {exc}", file=sys.stderr)
            failed.append(module)
            continue
        _judge(module, source, chosen_mutants, found, out, results, args, runner, env)
        previous = runs.get(module, {})
        runs[module] = {"selection": "lines", "scenarios": len(chosen[module]),
                        "baseline_s": round(found.module_s, 1),
                        "measure_s": round(found.wall_s, 1),
                        "timeout_s": round(found.timeout(sorted(found.lines), args.timeout_factor,
                                                         args.min_timeout)),
                        "wall_s": round(float(previous.get("wall_s", 0.0))
                                        + time.monotonic() - started, 1)}
        save_runs(out, runs)
    copy_bridge(BRIDGE_DIR, out)
    done = report(out, module_map, known)
    done.summarise(out, "mutation/triage_author.json")
    return 1 if failed or done.untriaged else 0


def _list(module_map: ModuleMap, modules: Sequence[str]) -> int:
    total: Counter[str] = Counter()
    print("| module | mutants | " + " | ".join(OPERATORS) + " |")
    print("|---" * (len(OPERATORS) + 2) + "|")
    for module in modules or sorted(module_map.modules):
        source = (BRIDGE_DIR / module).read_text(encoding="utf-8")
        counts = Counter(m.operator.split("#")[0] for m in generate(module, source))
        total.update(counts)
        print(f"| {module} | {sum(counts.values())} | "
              + " | ".join(str(counts[o]) for o in OPERATORS) + " |")
    print(f"| **all** | {sum(total.values())} | "
          + " | ".join(str(total[o]) for o in OPERATORS) + " |")
    return 0


def _check_triage(known: list[str]) -> int:
    verdicts = _triage(known)
    counts: Counter[str] = Counter(v.verdict for v in verdicts.values())
    print(f"{len(verdicts)} triaged survivor(s): "
          + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    print_open(verdicts)
    return 0


def _apply(wanted: str, to: Path) -> int:
    """Write ``to/palace_bridge`` with the mutant named by ``wanted`` (its key or anchor)."""
    module = wanted.split("::")[0].split(":")[0]
    try:
        source = (BRIDGE_DIR / module).read_text(encoding="utf-8")
    except OSError:
        print(f"python -m mutation.author apply: no module {module!r} in the bridge",
              file=sys.stderr)
        return 2
    for mutant in generate(module, source):
        anchor = str(anchor_of(module, source, mutant.operator, mutant.start, mutant.end))
        if wanted in (mutant.key, anchor):
            target = to / "palace_bridge"
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(BRIDGE_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
            (target / module).write_text(mutant.apply(source), encoding="utf-8")
            print(_diff(mutant, source))
            return 0
    print(f"python -m mutation.author apply: no mutant {wanted!r} (copy the key or anchor from "
          "the report)", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    return checked_main("python -m mutation.author", _parser(), argv, _dispatch)


def _dispatch(args: argparse.Namespace, module_map: ModuleMap, known: list[str],
              scenarios: list[Any]) -> int:
    if args.command == "list":
        return _list(module_map, args.module)
    if args.command == "triage":
        return _check_triage(known)
    if args.command == "apply":
        return _apply(args.key, args.to)
    if args.command == "report":
        report(args.out.resolve(), module_map, known).summarise(
            args.out.resolve(), "mutation/triage_author.json")
        for line in stale_notes(args.out.resolve(), selections(module_map), scenarios):
            print(line, file=sys.stderr)
        return 0
    _triage(known)  # a triage file the report would refuse stops the run first
    return _run(args, module_map, known, scenarios)


if __name__ == "__main__":
    sys.exit(main())
