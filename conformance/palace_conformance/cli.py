"""``palace-conformance``: the command line. Each area adds its own subcommands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn, cast

from palace_conformance import __version__
from palace_conformance.commands import fake as fake_commands
from palace_conformance.commands import fixtures as fixture_commands
from palace_conformance.commands import hosts as hosts_commands
from palace_conformance.commands import record as record_commands
from palace_conformance.commands import reports as report_commands
from palace_conformance.commands import run as run_commands
from palace_conformance.errors import ConformanceError, UserError
from palace_conformance.errors import UsageError as UsageError
from palace_conformance.runner.interrupts import exit_status


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        raise UsageError(f"{self.prog}: {message} (see --help)")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """As argparse's, but an unknown flag is named under its subcommand with the nearest
        flag of that subcommand (argparse names only the top-level program)."""
        argv = list(sys.argv[1:] if args is None else args)
        parsed, extras = self.parse_known_args(argv, namespace)
        if extras:
            from palace_conformance.suggest import unknown_arguments

            raise UsageError(unknown_arguments(self, argv, extras))
        return parsed


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="palace-conformance",
        description="Conformance kit for MemPalace bridges: fixtures, a fault-injecting fake "
        "MemPalace server, and a runner.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # every command's parser is a _Parser; the commands only need an ArgumentParser of it
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser))
    sub.required = True
    fake_commands.add_commands(sub)
    fixture_commands.add_commands(sub)
    hosts_commands.add_commands(sub)
    run_commands.add_commands(sub)
    report_commands.add_commands(sub)
    from palace_conformance.commands import (
        selftest as selftest_command,  # light: engine loads later
    )

    selftest_command.add_commands(sub)
    from palace_conformance.commands import drift as drift_commands  # light, like selftest

    drift_commands.add_commands(sub)
    from palace_conformance.commands import profile as profile_commands  # light, too

    profile_commands.add_commands(sub)
    from palace_conformance.commands import merge as merge_commands  # light, too

    merge_commands.add_commands(sub)
    record_commands.add_commands(sub)
    from palace_conformance.commands import official as official_commands  # light, too

    official_commands.add_commands(sub)
    from palace_conformance.commands import fidelity as fidelity_command  # light, like selftest

    fidelity_command.add_commands(sub)
    from palace_conformance.commands import ci as ci_command  # light, like selftest

    ci_command.add_commands(sub)
    return parser


#: the commands whose console output passes through the one redactor (redaction.CONSOLE): all
#: but those whose stdout is a protocol stream (the fake, record's stdio relay) or raw tool output
REDACTED_COMMANDS = frozenset({"run", "replay", "baseline", "selftest", "diff", "matrix",
                               "profile", "merge", "fixtures", "fidelity", "official"})


#: a parser built ahead of time (:func:`prebuild`), taken by the next :func:`main` of this process
_PREBUILT: list[argparse.ArgumentParser] = []


def prebuild() -> None:
    """Build the parser now for the next :func:`main` of this process to take. The warm server
    calls it before it forks: building costs ~10 ms of CPU (every command's options), which each
    forked CLI (an HTTP fake, a lock holder) then does not pay (docs/runner.md, "Where a run's
    CPU goes")."""
    _PREBUILT[:] = [build_parser()]


def main(argv: Sequence[str] | None = None) -> None:
    parser = _PREBUILT.pop() if _PREBUILT else build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "command", None) in REDACTED_COMMANDS:
            from palace_conformance.redaction import CONSOLE

            CONSOLE.install()
        code = args.handler(args)
    except UsageError as exc:  # worded with the program's name already
        print(exc, file=sys.stderr)
        code = 2
    except ConformanceError as exc:  # any other kit error a command let through: one line too
        print(f"palace-conformance: {exc}", file=sys.stderr)
        code = 2 if isinstance(exc, UserError) else 1
    except KeyboardInterrupt as exc:
        code = exit_status(exc)
    except BrokenPipeError:  # `... | head` closed the pipe: what it wanted was printed
        _quiet_stdout()
        code = 141  # 128 + SIGPIPE, as a shell tool killed by the signal would report
    sys.exit(code)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":  # `python -m palace_conformance.cli`, as the helpers and docs run it
    main()
