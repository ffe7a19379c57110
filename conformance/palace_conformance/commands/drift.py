"""``palace-conformance diff`` and ``palace-conformance matrix``: compare bridges.

``diff`` exits 1 on any drift (or a pair it could not compare), 0 when the bridges agree, 2 on a
usage problem; ``matrix`` is a report, not a gate: 0 once written, 2 on a usage problem. Every
usage problem is one line. The engines (:mod:`.diff`, :mod:`.matrix`, :mod:`.sources`) are
imported inside the handlers so other subcommands start fast.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palace_conformance.commands.declare import declare
from palace_conformance.commands.options import add_op_timeout, add_server_options, chosen_server
from palace_conformance.commands.usage import (
    RunUsageError,
    at_least_one,
    directory,
    one_line,
    writable,
    write_text,
)
from palace_conformance.contract import TRANSPORTS
from palace_conformance.runner.jobs import admission_for

if TYPE_CHECKING:
    from palace_conformance.runner.compare.sources import Source


class _AddSource(argparse.Action):
    """``--bridge`` and ``--from`` share one list, so their order on the command line is kept."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from palace_conformance.runner.compare.sources import SourceSpec, parse_from

        found = list(getattr(namespace, "sources", None) or [])
        if self.dest == "bridge":
            spec = SourceSpec("bridge", str(values))
        elif self.dest == "profile":
            spec = SourceSpec("profile", str(values))
        else:
            spec = parse_from(str(values))
        found.append(spec)
        namespace.sources = found


def _selection(args: argparse.Namespace) -> Any:
    from palace_conformance.runner.compare.sources import Selection

    jobs, max_jobs, backfill = admission_for(args.jobs)
    at_least_one("--jobs", jobs)
    at_least_one("--op-timeout-ms", args.op_timeout_ms)
    transports = TRANSPORTS if args.transport == "both" else (args.transport,)
    return Selection(tuple(args.select), transports, jobs, args.op_timeout_ms, args.level,
                     max_jobs=max_jobs, backfill=backfill)


def _command_line(prog: str, args: argparse.Namespace) -> str:
    """The command, rebuilt from what it was given (recorded in the report)."""
    words = ["palace-conformance", prog]
    for spec in getattr(args, "sources", None) or ():
        if spec.kind in ("bridge", "profile"):
            words += [f"--{spec.kind}", spec.value]
        else:
            words += ["--from", f"{spec.label}={spec.value}" if spec.label else spec.value]
    for pattern in args.select:
        words += ["--select", pattern]
    if args.transport != "both":
        words += ["--transport", args.transport]
    if args.level is not None:
        words += ["--level", args.level]
    words += list(args.paths)
    return " ".join(shlex.quote(w) for w in words)


def _save_runs(save_dir: Path | None, sources: Sequence[Source]) -> None:
    """Each source's results as ``DIR/<label>.json``, for a later ``--from`` (no second run)."""
    import json
    import re

    if save_dir is None:
        return
    for source in sources:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", source.label).strip("-") or "bridge"
        write_text(save_dir / f"{name}.json",
                   json.dumps(source.run.to_json(), indent=1, ensure_ascii=False, default=str))


def _diff_checked(args: argparse.Namespace) -> int:
    """Run two bridges on the same scenarios (or read their saved 'run --json' results:
    --from) and print, for every (scenario, transport) where they differ, one line per
    category that diverges (tool results, error kinds, injected context, registrations,
    wire, processes, ...): its first divergent step, the JSON pointer and both values.
    Per-run values (pids, ports, ids, times, temp paths, sessions, tokens) never count;
    UI-only effects only with --include-ui. Only pairs whose verdicts or judged checks
    differ are drift; pairs that differ in their traces alone are counted (--all lists
    them). Not-applicable scenarios are listed apart. With three sources or more, the first
    is compared with each of the others and runs once for all of them. Exit 1 on any drift,
    0 when none, 2 on a usage problem."""
    import json

    from palace_conformance.runner.compare.diff import (
        DIFF_FORMAT,
        compare,
        render_markdown,
        render_text,
    )
    from palace_conformance.runner.compare.sources import collect

    specs = list(getattr(args, "sources", None) or [])
    if len(specs) < 2:
        raise RunUsageError(f"diff compares two bridges or more, got {len(specs)} (give --bridge "
                            "twice, e.g. --bridge reference --bridge pi-mcp, or --from a saved "
                            "'run --json' for either)")
    selection = _selection(args)
    json_path = writable("--json", args.json)
    md_path = writable("--markdown", args.markdown)
    save_dir = directory("--save-runs", args.save_runs)
    with chosen_server(args) as real:  # every source runs (or is read) once, the first shared
        first, *others = collect(specs, replace(selection, real=real), args.paths)
    _save_runs(save_dir, [first, *others])
    reports = [compare(first, other, include_ui=args.include_ui, every_pair=args.every_pair)
               for other in others]
    sys.stdout.write("\n".join(render_text(report) for report in reports))
    if len(reports) > 1:
        drifting = [r.right.label for r in reports if r.exit_code]
        print(f"\n{len(reports)} comparisons against {first.label} (one run of each bridge): "
              + (f"{len(drifting)} with drift or not compared ({', '.join(drifting)})"
                 if drifting else "none drifts"))
    if len(reports) == 1:
        whole: Any = reports[0].to_json()
    else:
        whole = {"format": DIFF_FORMAT, "against": first.label,
                 "reports": [r.to_json() for r in reports],
                 "ok": all(r.exit_code == 0 for r in reports)}
    write_text(json_path, json.dumps(whole, indent=1, ensure_ascii=False, default=str))
    write_text(md_path, "\n".join(render_markdown(report) for report in reports))
    return max(report.exit_code for report in reports)


def _matrix_checked(args: argparse.Namespace) -> int:
    """Run several bridges (or read their saved 'run --json' results) and write a bridges x
    scenarios matrix: pass / fail / known failure / not applicable / not testable per
    transport, grouped by area, with the behaviour IDs and a drill-down into every red cell.
    Exit 0 once written (a report, not a gate), 2 on a usage problem."""
    from palace_conformance.runner.compare.matrix import build, render_html, render_markdown
    from palace_conformance.runner.compare.sources import apply_baselines, collect, load_baselines

    specs = list(getattr(args, "sources", None) or [])
    if not specs:
        raise RunUsageError("no bridge given (add --bridge SPEC or --from RESULT.json, once per "
                            "bridge)")
    if args.markdown is None and args.html is None:
        raise RunUsageError("nothing to write (give --markdown FILE and/or --html FILE)")
    selection = _selection(args)
    md_path = writable("--markdown", args.markdown)
    html_path = writable("--html", args.html)
    save_dir = directory("--save-runs", args.save_runs)
    baselines = load_baselines(args.baseline)
    with chosen_server(args) as real:
        sources = collect(specs, replace(selection, real=real), args.paths)
    apply_baselines(sources, baselines)
    _save_runs(save_dir, sources)
    matrix = build(sources, command=_command_line("matrix", args))
    write_text(md_path, render_markdown(matrix))
    write_text(html_path, render_html(matrix))
    for index, column in enumerate(matrix.columns):  # run's words (docs/runner.md, Counting)
        fake = matrix.tally(index, "fake")
        print(f"{column.label}: {matrix.tally(index).phrase(every_status=False)}"
              + (f"; self-tests: {fake.phrase(every_status=False)}" if fake.results else ""))
    for target in (md_path, html_path):
        if target is not None:
            print(f"wrote {target}")
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="scenario files or directories (default: the shipped scenarios)")
    parser.add_argument("--bridge", action=_AddSource, metavar="SPEC",
                        help="a bridge to run: 'reference', a Node host spec (pi-extension:FILE, "
                        "pi-mcp, pi-mcp:wrapped, pi-mcp-adapter) or a host command; repeatable")
    parser.add_argument("--profile", action=_AddSource, metavar="FILE",
                        help="run the bridge a profile describes, as the profile says "
                        "(docs/profiles.md); repeatable, in order with --bridge and --from")
    parser.add_argument("--level", choices=("core", "seed"), default=None,
                        help="the level every bridge run is judged at (default: seed when "
                        "every bridge is the reference, else core)")
    parser.add_argument("--from", dest="from_", action=_AddSource, metavar="[LABEL=]FILE",
                        help="a saved 'palace-conformance run --json' result instead of a run; "
                        "repeatable")
    parser.add_argument("--select", action="append", default=[], metavar="PATTERN",
                        help="only scenario ids matching this glob; repeatable")
    parser.add_argument("--transport", choices=(*TRANSPORTS, "both"), default="both",
                        help="which transports (default both)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="runs in parallel per bridge, a fixed number (default: as run, "
                        "4 per CPU, 2 to 12, growing while the CPUs are idle; the bridges run "
                        "one after the other)")
    parser.add_argument("--save-runs", metavar="DIR",
                        help="also keep each bridge's results as DIR/<label>.json, so a later "
                        "diff or matrix reads them with --from instead of running them again")
    add_server_options(parser)
    add_op_timeout(parser)


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    diff = declare(sub, "diff", "show where two bridges' normalised traces part",
                   one_line("palace-conformance diff")(_diff_checked), sources=[])
    _common(diff)
    diff.add_argument("--json", metavar="FILE", help="write the drift report as JSON")
    diff.add_argument("--markdown", metavar="FILE", help="write the drift report as Markdown")
    diff.add_argument("--include-ui", action="store_true",
                      help="also compare UI-only effects (notify: toasts, start-up banners); "
                      "left out by default, and the report names what was left out")
    diff.add_argument("--all", action="store_true", dest="every_pair",
                      help="also list the pairs whose verdicts and checks agree but whose "
                      "traces differ (counted, not listed, by default)")

    matrix = declare(sub, "matrix", "bridges x scenarios report (Markdown and/or one HTML page)",
                     one_line("palace-conformance matrix")(_matrix_checked), sources=[])
    _common(matrix)
    matrix.add_argument("--markdown", metavar="FILE", help="write the matrix as Markdown")
    matrix.add_argument("--html", metavar="FILE", help="write the matrix as one HTML page")
    matrix.add_argument("--baseline", action="append", default=[], metavar="[LABEL=]FILE",
                        help="expected-failure baseline (docs/baselines.md) for the bridge "
                        "labelled LABEL, or for every bridge; its failures show as known "
                        "failures; repeatable")

