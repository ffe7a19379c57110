"""Did-you-mean for what a user types: bridge names, bridge prefixes and command-line flags.

Standard library only (difflib): the command-line parser and the runner's bridge lookup both
use it, and the parser is built in every process."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable, Sequence

#: the bridges --bridge knows by name, and the prefix that takes a file
BRIDGE_NAMES = ("reference", "pi-mcp", "pi-mcp:raw", "pi-mcp:wrapped", "pi-mcp-adapter")
BRIDGE_PREFIXES = ("pi-extension:",)
#: how alike a typo must be to be suggested (difflib's ratio)
CUTOFF = 0.75


def nearest(word: str, choices: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return found[0] if found else None


def bridge(spec: str) -> str | None:
    """What ``--bridge spec`` most likely meant, when it is a typo of a named bridge or of the
    ``pi-extension:`` prefix (``refrence``, ``pi-extensoin:x.ts``); None otherwise."""
    head, colon, rest = spec.partition(":")
    if colon and not any(c.isspace() for c in head):  # a prefix; the file may hold spaces
        prefix = nearest(head + ":", BRIDGE_PREFIXES)
        if prefix is not None and prefix != head + ":":
            return prefix + rest
    if any(c.isspace() for c in spec.strip()):
        return None  # a host command line: its program is the user's own
    named = nearest(spec, BRIDGE_NAMES)
    return named if named is not None and named != spec else None


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def deepest_parser(parser: argparse.ArgumentParser,
                   argv: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub)command parser ``argv`` reached: ``run`` for ``run --sellect x``."""
    current = parser
    for word in argv:
        if word.startswith("-"):
            continue
        below = _subparsers(current).get(word)
        if below is not None:
            current = below
    return current


def unknown_arguments(parser: argparse.ArgumentParser, argv: Sequence[str],
                      extras: Sequence[str]) -> str:
    """One line for arguments no parser took, under the subcommand's own name, with the nearest
    flag of that subcommand for each unknown one."""
    where = deepest_parser(parser, argv)
    flags = [flag for action in where._actions for flag in action.option_strings]
    hints = []
    for extra in extras:
        if not extra.startswith("-"):
            continue
        flag = extra.split("=", 1)[0]
        found = nearest(flag, flags, cutoff=0.6)
        if found is not None:
            hints.append(f"did you mean {found}" + (f" for {flag}" if len(extras) > 1 else ""))
    hint = f" ({'; '.join(hints)}?)" if hints else ""
    return (f"{where.prog}: unrecognized arguments: {' '.join(extras)}{hint} "
            f"(see {where.prog} --help)")
