"""SIGTERM (a CI timeout) ends a run like Ctrl-C, so the runs in flight still clean up, and the
exit status still says which signal it was (130 for SIGINT, 143 for SIGTERM)."""

from __future__ import annotations

import signal


class Terminated(KeyboardInterrupt):
    """A KeyboardInterrupt raised by a signal handler; ``signum`` is that signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def interrupt(signum: int, frame: object) -> None:
    """A SIGTERM handler: raise KeyboardInterrupt where the run is, as Ctrl-C would."""
    raise Terminated(signum)


def exit_status(exc: KeyboardInterrupt) -> int:
    """The shell's convention: 128 plus the signal (Ctrl-C, with no handler of ours: SIGINT)."""
    return 128 + getattr(exc, "signum", signal.SIGINT)
