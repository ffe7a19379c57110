"""The kit's errors: one root, :class:`ConformanceError`, and one branch for each kind of
failure, so the command line turns any of them into one line (never a traceback) and a caller can
catch a whole kind at once.

- :class:`UserError`: a mistake in how the kit was called (flags, paths, names); fix the call.
- :class:`UntrustedInputError`: a fixture, profile, plan, bundle, baseline or result file that does
  not hold what it must; fix the file.
- :class:`HostError`: the host (the bridge under test, its Node host, a script) failed to start
  or answer.
- :class:`PalaceError`: the palace behind the bridge (the fake, the real server, its install)
  failed or is missing.

Every exception class of the kit derives from one of these (or from the root). Leaf module:
imports nothing of the kit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class ConformanceError(Exception):
    """Any error of the kit; its message is the one line to show."""


class UserError(ConformanceError):
    """A mistake in how the kit was called."""


class UntrustedInputError(ConformanceError):
    """An input file (fixture, profile, plan, bundle, baseline, results) that is not valid."""


class HostError(ConformanceError):
    """The host of the bridge under test failed to start or answer."""


class PalaceError(ConformanceError):
    """The palace behind the bridge (fake or real) failed or is missing."""


class RunUsageError(UserError):
    """One line for the user, exit 2 (the runner's commands and their helpers)."""


@contextlib.contextmanager
def as_usage_error(*kinds: type[Exception]) -> Iterator[None]:
    """A ``kinds`` error raised inside becomes a :class:`RunUsageError` of the same line: a file
    or name the user gave that could not be used is their mistake to fix, exit 2."""
    try:
        yield
    except kinds as exc:
        raise RunUsageError(str(exc)) from None


class UsageError(UserError):
    """A mistake in how a command was called (a bad flag, plan or value), already worded with
    the program's name: printed as it is, one line, exit status 2 (the CLI, the stand-ins)."""


class BaselineError(UntrustedInputError, ValueError):
    """A baseline file (a run's expected failures, or the official suite's expected verdicts)
    that cannot be used; one line naming the file or entry, the problem and the fix."""
