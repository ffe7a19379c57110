"""A run's failing checks and *not testable* results as GitHub annotations: one per failing
check, naming the scenario, its transport, the check's place in the scenario file and what it
found; pointed at the scenario file, the bridge's file or the profile when it lies in the
workspace. Built from the redacted result, and redacted again for this process's secrets."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from palace_conformance.ci.workflow_commands import (
    MAX_ANNOTATIONS,
    command,
    workspace_relative,
)
from palace_conformance.redaction import Redactor, environment_secrets
from palace_conformance.runner.results import NOT_TESTABLE, RunResult, ScenarioResult

#: expected and got are clipped to this many characters each in a message
VALUE_LIMIT = 300


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                            default=str)
    return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT - 1] + "…"


def _title(result: ScenarioResult, where: str, cited: tuple[str, ...] = ()) -> str:
    """Scenario, transport, place, and the behaviours at stake: the check's own citations
    (fixtures/README.md, "Citing behaviours"), else the scenario's."""
    chosen = cited or result.covers
    covers = f" ({', '.join(chosen)})" if chosen else ""
    return f"{result.scenario} [{result.transport}] {where}{covers}"


def _lines(result: ScenarioResult, file: str | None) -> Iterator[str]:
    if result.status == NOT_TESTABLE and not result.failures:
        yield command("error", f"not testable: {result.reason or 'no reason given'}",
                      file=file, title=_title(result, "not testable"))
        return
    for check in result.failures:
        message = check.message
        if check.expected is not None and check.got is not None:
            message += f"\nexpected: {_short(check.expected)}\ngot: {_short(check.got)}"
        if result.status == NOT_TESTABLE:
            message = f"not testable: {message}"
        yield command("error", message, file=file,
                      title=_title(result, check.pointer, check.covers))


def annotation_lines(run: RunResult, *, workspace: str | None, fallback_files: Iterable[str] = (),
                     baseline: str | None = None, limit: int = MAX_ANNOTATIONS) -> list[str]:
    """The workflow command lines for ``run``'s blocking results, at most ``limit`` of them and
    a closing ``::notice::`` counting the rest. ``fallback_files`` (the bridge's file, the
    profile) stand in for a scenario file outside the workspace; a stale baseline entry points
    at the ``baseline`` file."""
    fallback = next((rel for rel in (workspace_relative(f, workspace) for f in fallback_files)
                     if rel), None)
    lines: list[str] = []
    for result in run.results:
        if not result.blocking:
            continue
        lines += _lines(result, workspace_relative(result.path, workspace) or fallback)
    baseline_file = workspace_relative(baseline, workspace) if baseline else None
    lines += [command("error", line, file=baseline_file, title="stale baseline entry")
              for line in run.stale_baseline]
    redactor = Redactor(environment_secrets())
    lines = [redactor.text(line) for line in lines]
    if len(lines) > limit:
        rest = len(lines) - limit
        lines = [*lines[:limit], command("notice", f"{rest} more failing check(s): see the job "
                                         "summary, junit.xml and the report directory")]
    return lines
