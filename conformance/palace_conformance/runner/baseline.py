"""The expected-failure baseline hook: known failures keep a run green, fixed ones must go.

A baseline is anything with :meth:`Baseline.mark` (is this failing result a known one?) and
:meth:`Baseline.stale` (entries that no longer fail, which turn the run red so the baseline is
kept honest, as the MCP conformance suite does). The file format and its governance (reasons,
owners, expiry) belong to the baseline module built on this hook; :class:`ExpectedFailures` is the
minimal in-memory implementation the runner and its tests use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from .results import FAILURE_STATUSES, BaselineMark, RunResult, ScenarioResult


class BaselineError(Exception):
    """A baseline that cannot be used; one line naming the file, problem and fix."""


class Baseline(Protocol):
    def mark(self, result: ScenarioResult) -> BaselineMark | None:
        """A mark when ``result`` is a failure this baseline expects, else None."""
        ...

    def stale(self, results: Sequence[ScenarioResult]) -> list[str]:
        """Entries whose scenario ran and no longer fails (one line each)."""
        ...


def entry_key(result: ScenarioResult) -> str:
    """How a baseline names a result: ``<scenario>[<transport>]``."""
    return f"{result.scenario}[{result.transport}]"


class ExpectedFailures:
    """A set of ``<scenario>[<transport>]`` keys (or bare scenario ids, for every transport)."""

    def __init__(self, entries: Iterable[str], reason: str = "", source: str = "") -> None:
        self.entries = set(entries)
        self.reason = reason
        self.source = source

    def _listed(self, result: ScenarioResult) -> str | None:
        for key in (entry_key(result), result.scenario):
            if key in self.entries:
                return key
        return None

    def mark(self, result: ScenarioResult) -> BaselineMark | None:
        if result.status in FAILURE_STATUSES and self._listed(result) is not None:
            return BaselineMark("fail", self.reason, self.source)
        return None

    def stale(self, results: Sequence[ScenarioResult]) -> list[str]:
        ran: dict[str, list[ScenarioResult]] = {}
        for result in results:
            key = self._listed(result)
            if key is not None:
                ran.setdefault(key, []).append(result)
        return [f"{key}: passes now; remove it from the baseline"
                for key, hits in sorted(ran.items())
                if all(r.status not in FAILURE_STATUSES for r in hits)]


def apply_baseline(run: RunResult, baseline: Baseline | None) -> RunResult:
    """Mark expected failures and record stale entries; the run's exit code follows."""
    if baseline is None:
        return run
    for result in run.results:
        result.baseline = baseline.mark(result)
    run.stale_baseline = baseline.stale(run.results)
    return run


def load_baseline(path: str | Path) -> Baseline:
    """Read a baseline file. The file format arrives with the baseline module."""
    raise BaselineError(f"--baseline {path}: expected-failure baselines are not available in "
                        "this version yet (run without --baseline)")
