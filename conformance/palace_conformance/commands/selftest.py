"""``palace-conformance selftest``: the command line around :mod:`.selftest`.

Exit status: 0 every mutant killed and the unmutated reference green on the same runs; 1 a
mutant survived (named, with what it breaks) or the sanity run failed; 2 a usage problem (bad
flag, unknown mutant, broken scenario files, a reference host that cannot start), one line.

Imports nothing heavy at module level: every ``palace-conformance`` process (the HTTP fake and
the lock holder included) builds the whole parser.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import TYPE_CHECKING, TextIO

from palace_conformance.commands.declare import declare
from palace_conformance.commands.options import add_jobs, add_op_timeout
from palace_conformance.commands.usage import (
    RunUsageError,
    as_usage_error,
    at_least_one,
    one_line,
    writable,
    write_text,
)
from palace_conformance.runner.interrupts import interrupt
from palace_conformance.runner.jobs import default_jobs

if TYPE_CHECKING:
    from palace_conformance.selftest.mutants import Mutant

PROG = "palace-conformance selftest"


def chosen(names: list[str]) -> list[Mutant]:
    """The named mutants (controls included), or every catalogue mutant when none is named."""
    from palace_conformance.selftest import mutants

    if not names:
        return list(mutants.MUTANTS)
    picked: list[Mutant] = []
    for name in names:
        with as_usage_error(mutants.MutantError):
            mutant = mutants.find(name)
        if mutant not in picked:
            picked.append(mutant)
    return picked


def _list(stream: TextIO) -> int:
    from palace_conformance.selftest import mutants

    every = (*mutants.MUTANTS, *mutants.CONTROLS)
    width = max(len(m.name) for m in every)
    for mutant in every:
        tag = " (control: must survive)" if mutant.control else ""
        print(f"{mutant.name:<{width}}  {','.join(mutant.breaks):<9}  {mutant.description}{tag}",
              file=stream)
    return 0


def _run_checked(args: argparse.Namespace) -> int:
    """Run mutants of the reference bridge (each the real palace_bridge with one rule
    broken, patched inside the host process) against the scenarios covering what they break,
    and the unmutated reference on the same runs. Exit 0 only when every mutant is killed
    and the unmutated reference passes; 1 when a mutant survives."""
    if args.list:
        return _list(sys.stdout)
    if args.jobs is None:
        args.jobs = default_jobs()
    at_least_one("--jobs", args.jobs)
    at_least_one("--op-timeout-ms", args.op_timeout_ms)
    mutants = chosen(args.mutant)
    json_path = writable("--json", args.json)
    markdown_path = writable("--markdown", args.markdown)
    from palace_conformance.runner.execution.suite import HostProbeError
    from palace_conformance.scenarios.loader import load_catalogue
    from palace_conformance.selftest.engine import (
        Printer,
        SelftestOptions,
        render,
        run_selftest,
        selection,
        to_markdown,
    )

    loaded = load_catalogue(None)
    if loaded.problems:
        for problem in loaded.problems:
            print(f"{PROG}: {problem}", file=sys.stderr)
        raise RunUsageError(f"{len(loaded.problems)} problem(s) in the shipped scenarios "
                                 "(palace-conformance fixtures validate)")
    options = SelftestOptions(jobs=args.jobs, full=args.full, first_kill=args.first_kill,
                              op_timeout_ms=args.op_timeout_ms)
    runs = sum(len(selection(m, loaded.scenarios, args.full)) for m in mutants)
    mode = "".join((" (full catalogue)" if args.full else "",
                    " (first kill only)" if args.first_kill else ""))
    print(f"{PROG}: {len(mutants)} mutant(s), up to {runs} mutant run(s) plus the unmutated "
          f"sanity run, {args.jobs} job(s){mode}", flush=True)
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        result = run_selftest(mutants, loaded.scenarios, options,
                              report=Printer(len(mutants) + 1, sys.stdout))
    except HostProbeError as exc:
        raise RunUsageError(f"the reference host failed: {exc}") from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    render(result)
    outcome = f"the selftest itself {'passed' if result.ok else 'failed'}"
    if json_path is not None:
        write_text(json_path, json.dumps(result.to_json(), indent=1, ensure_ascii=False),
                   outcome=outcome)
    if markdown_path is not None:
        write_text(markdown_path, to_markdown(result), outcome=outcome)
    return result.exit_code


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = declare(sub, "selftest",
                  "prove the suite: every mutant of the reference bridge must be killed",
                  one_line(PROG)(_run_checked))
    cmd.add_argument("--mutant", action="append", default=[], metavar="NAME",
                     help="only this mutant (repeatable; default: all; see --list)")
    cmd.add_argument("--list", action="store_true", help="list the mutants and exit")
    cmd.add_argument("--full", action="store_true",
                     help="run every bridge scenario against every chosen mutant (slow)")
    cmd.add_argument("--first-kill", action="store_true",
                     help="skip a mutant's remaining runs once one fails, and re-run unmutated "
                     "only the runs that failed (about twice as fast; a thinner matrix)")
    add_jobs(cmd)
    add_op_timeout(cmd)
    cmd.add_argument("--json", metavar="FILE", help="write the kill matrix as JSON")
    cmd.add_argument("--markdown", metavar="FILE", help="write the kill matrix as Markdown")
