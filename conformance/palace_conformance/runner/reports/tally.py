"""The one vocabulary of counts every report uses (docs/runner.md, "Counting").

A *scenario* is one fixture (one id); a *result* is one verdict on a scenario: on one transport
(stdio, http), or the parity of the two. *Self-tests* are the results of the fake's own
scenarios (``subject: fake``): they run in every run and a failing one fails it, but they are
never counted among the bridge's results. A result is passed, failed, a known failure (a failure
the baseline expects), not testable or not applicable; the five add up to the results. The
console, ``summary.md``, JUnit, ``matrix`` and ``ci`` all say it with :func:`phrase`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from palace_conformance.runner.results import (
    FAILED,
    KNOWN_FAILURE,
    NOT_APPLICABLE,
    NOT_TESTABLE,
    PASSED,
    RunResult,
    ScenarioResult,
)

#: every status, in the order reports list them, with its words
STATUS_WORDS: tuple[tuple[str, str], ...] = (
    (PASSED, "passed"), (FAILED, "failed"), (KNOWN_FAILURE, "known failures"),
    (NOT_TESTABLE, "not testable"), (NOT_APPLICABLE, "not applicable"))


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class Tally:
    """Scenarios, results and results per status of one subject (the bridge, or the fake)."""

    scenarios: int
    results: int
    statuses: dict[str, int]

    def phrase(self, *, every_status: bool = True) -> str:
        """``206 scenarios, 296 results: 290 passed, 0 failed, ...`` (zeros left out unless
        ``every_status``; known failures only when there are some)."""
        parts = [plural(count, "known failure") if status == KNOWN_FAILURE else f"{count} {words}"
                 for status, words in STATUS_WORDS
                 for count in (self.statuses.get(status, 0),)
                 if count or (every_status and status != KNOWN_FAILURE)]
        head = f"{plural(self.scenarios, 'scenario')}, {plural(self.results, 'result')}"
        return f"{head}: {', '.join(parts)}" if parts else head


def tally_results(results: Iterable[ScenarioResult], statuses: dict[str, int]) -> Tally:
    chosen = list(results)
    return Tally(len({r.scenario for r in chosen}), len(chosen), statuses)


def tally(run: RunResult, subject: str = "bridge") -> Tally:
    """The bridge's counts (``subject="fake"``: the self-tests')."""
    return tally_results((r for r in run.results if r.subject == subject), run.counts(subject))


def self_tests_phrase(run: RunResult) -> str:
    """``self-tests (the fake's own, not the bridge's): 15 scenarios, 24 results: 24 passed``;
    empty when the run had none."""
    fake = tally(run, "fake")
    if not fake.results:
        return ""
    return f"self-tests (the fake's own, not the bridge's): {fake.phrase(every_status=False)}"
