"""How the runner's subcommands report a user's mistake: one line naming the problem and the fix,
exit status 2, never a traceback. Light on purpose: the CLI builds every parser in every process.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path

from palace_conformance.errors import RunUsageError, as_usage_error

__all__ = ["Handler", "RunUsageError", "as_usage_error", "at_least_one", "directory", "one_line",
           "slack_factor", "writable", "write_text"]

Handler = Callable[[argparse.Namespace], int]


def one_line(prog: str) -> Callable[[Handler], Handler]:
    """Wrap a handler: a :class:`RunUsageError` becomes ``prog: message`` on stderr, exit 2."""

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def run(args: argparse.Namespace) -> int:
            try:
                return handler(args)
            except RunUsageError as exc:
                print(f"{prog}: {exc}", file=sys.stderr)
                return 2

        return run

    return wrap


def at_least_one(flag: str, value: int) -> None:
    if value < 1:
        raise RunUsageError(f"{flag} {value}: give 1 or more")


def slack_factor(flag: str, text: str) -> float:
    """A ``--slack-factor``: a finite number >= 1 (a factor below 1 would tighten the declared
    slack the fixture's author chose for a loaded machine)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 1.0 or value == float("inf"):
        raise RunUsageError(f"{flag} {text}: give a number >= 1 (e.g. 2 doubles every declared "
                            "slack on a slow machine)")
    return value


def writable(flag: str, path: str | None) -> Path | None:
    """``path`` as a Path, when its directory exists (checked before a long run, not after)."""
    if path is None:
        return None
    target = Path(path)
    if not target.parent.resolve().is_dir():
        raise RunUsageError(f"{flag} {path}: directory {target.parent} does not exist "
                            "(create it first)")
    return target


def directory(flag: str, path: str | None) -> Path | None:
    """``path`` made (with its parents) if needed; one line when that is not possible."""
    if path is None:
        return None
    target = Path(path)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunUsageError(f"{flag} {path}: {exc.strerror or exc} (pick a writable "
                            "directory)") from None
    return target


def write_text(target: Path | None, text: str, *, outcome: str = "") -> None:
    """Write a report; a failure is one line (``outcome`` says how the run itself went)."""
    if target is None:
        return
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RunUsageError(f"cannot write {target}: {exc.strerror or exc}"
                            + (f" ({outcome})" if outcome else "")) from None
