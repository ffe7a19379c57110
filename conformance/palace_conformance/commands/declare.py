"""One way to declare a subcommand: ``declare(sub, name, summary, handler)``.

The summary is the one line ``palace-conformance --help`` lists; the handler's docstring is the
description the subcommand's own ``--help`` prints (argparse re-wraps it), so what a command
does is written once, where it is done. The handler becomes the parser's ``handler`` default
(cli.py calls it), beside any other defaults given.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any

from palace_conformance.commands.usage import Handler


def declare(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str,
            handler: Handler, **defaults: Any) -> argparse.ArgumentParser:
    """The subcommand ``name`` of ``sub``, described by ``handler``'s docstring."""
    description = inspect.getdoc(handler)
    if not description:
        raise TypeError(f"{handler.__qualname__}: a command's handler needs a docstring (it is "
                        "the command's --help description)")
    parser = sub.add_parser(name, help=summary, description=description)
    parser.set_defaults(handler=handler, **defaults)
    return parser
