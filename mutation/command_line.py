"""The command line of the mutation tools (``python -m mutation``, ``python -m mutation.author``):
one parser shape, where a bad flag is one line naming the problem and where the fix is, not the
usage block."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from mutation.module_map import MapError, ModuleMap, checked_facts
from mutation.report import TriageError
from mutation.sessions import SessionError


class OneLineParser(argparse.ArgumentParser):
    """Bad flags get one line naming the problem and where the fix is, not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def command_parser(prog: str, doc: str | None) -> tuple[
        argparse.ArgumentParser, argparse._SubParsersAction[argparse.ArgumentParser]]:
    """A tool's parser, described by the first line of its module's ``doc``, and its
    subcommands (one is required)."""
    parser: argparse.ArgumentParser = OneLineParser(prog=prog,
                                                    description=(doc or "").split("\n")[0])
    return parser, parser.add_subparsers(dest="command", required=True)


def add_run_options(run: argparse.ArgumentParser, *, default_out: Path, seed: int,
                    module_help: str, out_help: str) -> None:
    """The options both tools' ``run`` takes: which modules, the work directory (resumed, or
    ``--fresh``), the runner's ``--jobs``, the sample's seed and a mutant's timeout."""
    run.add_argument("--module", action="append", default=[], metavar="M", help=module_help)
    run.add_argument("--out", type=Path, default=default_out, help=out_help)
    run.add_argument("--fresh", action="store_true", help="delete --out first")
    run.add_argument("--jobs", type=int, default=2, help="the runner's --jobs (default 2)")
    run.add_argument("--seed", type=int, default=seed, help=f"the sample's seed (default {seed})")
    run.add_argument("--timeout-factor", type=float, default=3.0,
                     help="a mutant's timeout: this many times the unmutated run (default 3)")
    run.add_argument("--min-timeout", type=float, default=60.0,
                     help="... and never under this many seconds (default 60)")


#: what a tool does with its parsed command line and the checked facts (the module map, the
#: known behaviour IDs, the shipped scenarios)
Dispatch = Callable[[argparse.Namespace, ModuleMap, list[str], list[Any]], int]


def checked_main(prog: str, parser: argparse.ArgumentParser, argv: Sequence[str] | None,
                 dispatch: Dispatch) -> int:
    """Parse ``argv``, check the facts every subcommand rests on, then ``dispatch``: a map,
    triage or session error is one line prefixed with ``prog``, exit 2."""
    args = parser.parse_args(argv)
    try:
        module_map, known, scenarios = checked_facts()
        return dispatch(args, module_map, known, scenarios)
    except (MapError, TriageError, SessionError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
