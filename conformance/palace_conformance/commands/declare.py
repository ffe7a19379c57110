"""One way to declare a subcommand: ``declare(sub, name, summary, handler)``, and a command
that is a group of them: ``declare_group(sub, name, summary, description, dest)``.

The summary is the one line the parent's ``--help`` lists; the handler's docstring is the
description the subcommand's own ``--help`` prints (argparse re-wraps it), so what a command
does is written once, where it is done. The handler becomes the parser's ``handler`` default
(cli.py calls it), beside any other defaults given. A group's sub-commands are required and
parsed by the group's own parser class (the CLI's, whose mistakes are one line).
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any, TypeAlias

from palace_conformance.commands.usage import Handler

#: a command's sub-commands (argparse's class is generic only to type checkers)
SubCommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def declare(sub: SubCommands, name: str, summary: str, handler: Handler, *,
            epilog: str | None = None, **defaults: Any) -> argparse.ArgumentParser:
    """The subcommand ``name`` of ``sub``, described by ``handler``'s docstring; an ``epilog``
    (a syntax table, say) is printed after the options as it is written."""
    description = inspect.getdoc(handler)
    if not description:
        raise TypeError(f"{handler.__qualname__}: a command's handler needs a docstring (it is "
                        "the command's --help description)")
    if epilog is None:
        parser = sub.add_parser(name, help=summary, description=description)
    else:
        parser = sub.add_parser(name, help=summary, description=description, epilog=epilog,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(handler=handler, **defaults)
    return parser


def declare_group(sub: SubCommands, name: str, summary: str, description: str, dest: str,
                  metavar: str = "SUBCOMMAND") -> tuple[argparse.ArgumentParser, SubCommands]:
    """The command ``name`` of ``sub`` whose work is done by its sub-commands (one is
    required), and the place to declare them; ``dest`` names the one chosen."""
    parser = sub.add_parser(name, help=summary, description=description)
    return parser, add_subcommands(parser, dest, metavar)


def add_subcommands(parser: argparse.ArgumentParser, dest: str,
                    metavar: str = "SUBCOMMAND") -> SubCommands:
    """``parser``'s required sub-commands, parsed by the same parser class as ``parser``."""
    subs = parser.add_subparsers(dest=dest, metavar=metavar, parser_class=type(parser))
    subs.required = True
    return subs
