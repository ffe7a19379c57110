"""The command line of the mutation tools (``python -m mutation``, ``python -m mutation.author``):
one parser shape, where a bad flag is one line naming the problem and where the fix is, not the
usage block."""

from __future__ import annotations

import argparse
from typing import NoReturn


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
