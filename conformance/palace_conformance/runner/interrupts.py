"""SIGTERM (a CI timeout) ends a run like Ctrl-C, so the runs in flight still clean up."""

from __future__ import annotations


def interrupt(signum: int, frame: object) -> None:
    """A SIGTERM handler: raise KeyboardInterrupt where the run is, as Ctrl-C would."""
    raise KeyboardInterrupt
