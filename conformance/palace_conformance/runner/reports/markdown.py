"""A Markdown summary of a run, for pull requests (a CI job posts ``summary.md`` as a comment or
appends it to ``$GITHUB_STEP_SUMMARY``).

Short on purpose: a verdict line, the totals, one table row per failing check (where it is
written, expected versus got, the behaviours at stake), the baseline's state, then the
not-applicable list and the slowest runs folded away. Everything comes from the
:class:`~.results.RunResult`, so a saved ``--json`` file renders the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from palace_conformance.runner.reports.tally import STATUS_WORDS, self_tests_phrase, tally
from palace_conformance.runner.results import (
    NOT_APPLICABLE,
    NOT_TESTABLE,
    PARITY,
    CheckRecord,
    RunResult,
    ScenarioResult,
)
from palace_conformance.runner.verdict.baseline import line_kind

MAX_ROWS = 50  # failing checks shown; the rest are counted
CELL_LIMIT = 100  # characters per value cell
SLOWEST = 5


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", " ")


def _clip(text: str, limit: int = CELL_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _code(text: str, limit: int = CELL_LIMIT) -> str:
    """Inline code when the text allows it (no backtick), else escaped plain text."""
    clipped = _clip(" ".join(text.split()), limit)
    if "`" in clipped:
        return _escape(clipped)
    return "`" + clipped.replace("|", "\\|") + "`"


def _value(value: Any) -> str:
    return _code(json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": ")))


def _text(text: str, limit: int = CELL_LIMIT) -> str:
    return _escape(_clip(" ".join(text.split()), limit))


def _covers(covers: tuple[str, ...]) -> str:
    return ", ".join(covers) or "-"


def _check_cells(check: CheckRecord) -> tuple[str, str]:
    """(expected, got): the recorded values when there are both, else the check's message. A
    bare scalar ``got`` (``false`` for an ``ok``, a duration) drops what the message says about
    it (the error's kind and text, the unit), so the message stands in for it."""
    if check.expected is not None and check.got is not None:
        if isinstance(check.got, dict | list | str):
            return _value(check.expected), _value(check.got)
        return _value(check.expected), _text(check.message)
    expected = _value(check.expected) if check.expected is not None else "-"
    return expected, _text(check.message)


def _where(check: CheckRecord) -> str:
    where = _code(check.pointer)
    if check.step is not None:
        where += f" (step {_code(check.step, 40)})"
    return where


def _header(run: RunResult) -> list[str]:
    counts = run.counts()
    blocking = len(run.failed())
    problems = len(run.stale_baseline)
    if run.ok:
        verdict = "✅ palace-conformance: passed"
    else:
        parts = []
        if blocking:
            parts.append(f"{blocking} failing result{'s' if blocking != 1 else ''}")
        if problems:
            parts.append(f"{problems} baseline problem{'s' if problems != 1 else ''}")
        if run.not_run:
            parts.append(f"{len(run.not_run)} not run")
        if run.too_slow:
            parts.append(f"{len(run.too_slow)} not run: too slow")
        verdict = "❌ palace-conformance: " + ", ".join(parts)
    host = run.host
    who = host.impl or "host"
    if host.bridge:
        who += f" · {host.bridge}"
    lines = [f"## {verdict}", ""]
    meta = [f"**Bridge:** {_text(who, 80)}"]
    if run.started_at:
        meta.append(f"started {run.started_at}")
    meta.append(f"{run.duration_ms / 1000:.1f} s")
    if run.slack_factor != 1.0:
        meta.append(f"every declared slack x {run.slack_factor:g} (`--slack-factor`)")
    lines += [" · ".join(meta), ""]
    if host.capabilities_note:
        lines += [f"**Capabilities:** {_text(host.capabilities_note, 400)}", ""]
    if run.start_note:
        lines += [f"**Start-up:** {_text(run.start_note.removeprefix('start-up: '), 600)}", ""]
    bridge = tally(run)
    lines += ["| scenarios | results | " + " | ".join(w for _, w in STATUS_WORDS)
              + " | baseline problems |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|",
              f"| {bridge.scenarios} | {bridge.results} | "
              + " | ".join(str(counts[status]) for status, _ in STATUS_WORDS)
              + f" | {problems} |", ""]
    self_tests = self_tests_phrase(run)
    if self_tests:
        lines += [self_tests[0].upper() + self_tests[1:] + ".", ""]
    if run.not_run:
        lines += [f"**Not run:** {len(run.not_run)} result(s): the run stopped after the first "
                  "failure (`-x`).", ""]
    if run.too_slow:
        lines += [f"**Not run, too slow:** {len(run.too_slow)} result(s): the bridge's own pace "
                  "would add more than `--max-scenario-seconds` to each.", ""]
    return lines


def _failures(run: RunResult, bundles: str | None) -> list[str]:
    failed = run.failed()
    if not failed:
        return []
    # a not-testable result says why in its own row, before any check it failed
    rows: list[tuple[ScenarioResult, CheckRecord | None]] = [
        row for result in failed
        for row in ([(result, None)] if result.status == NOT_TESTABLE else [])
        + [(result, check) for check in result.failures]]
    lines = ["### Failures", "",
             "| Scenario | Transport | Check | Expected | Got | Behaviours |",
             "|---|---|---|---|---|---|"]
    for result, check in rows[:MAX_ROWS]:
        if check is None:
            lines.append(f"| {_code(result.scenario)} | {result.transport} | not testable | - "
                         f"| {_text(result.reason or 'no reason recorded')} "
                         f"| {_covers(result.covers)} |")
            continue
        expected, got = _check_cells(check)
        lines.append(f"| {_code(result.scenario)} | {result.transport} | {_where(check)} "
                     f"| {expected} | {got} | {_covers(check.covers or result.covers)} |")
    if len(rows) > MAX_ROWS:
        lines.append("")
        lines.append(f"…and {len(rows) - MAX_ROWS} more failing check(s): see results.json.")
    lines.append("")
    if bundles:
        example = failed[0]
        lines += [f"Repro bundles: `{bundles}/<scenario>--<transport>/`, e.g. "
                  f"`palace-conformance replay {bundles}/{example.scenario}--"
                  f"{example.transport}` (add `--bridge reference` to compare).", ""]
    return lines


def _known(result: ScenarioResult) -> str:
    first = result.failures[0] if result.failures else None
    what = f"{_code(first.pointer)}: {_text(first.message, 80)}" if first else _text(
        result.reason, 80)
    reason = result.baseline.reason if result.baseline is not None else ""
    return (f"- {_code(result.scenario)} [{result.transport}]: {what}"
            + (f" (baseline: {_text(reason, 100)})" if reason else ""))


def _baseline(run: RunResult, baseline: str | None) -> list[str]:
    known = [r for r in run.results if r.baseline is not None]
    if not known and not run.stale_baseline and baseline is None:
        return []
    title = f"### Baseline ({_code(baseline, 60)})" if baseline else "### Baseline"
    lines = [title, ""]
    groups: dict[str, list[str]] = {"stale": [], "unknown": [], "expired": []}
    for line in run.stale_baseline:
        groups[line_kind(line)].append(line)
    lines.append(f"**Known failures ({len(known)})**" + (":" if known else ": none"))
    if known:
        lines += ["", *[_known(r) for r in known]]
    lines.append("")
    for kind, label in (("stale", "Stale entries (they pass now: remove them)"),
                        ("unknown", "Entries for unknown scenario ids"),
                        ("expired", "Expired entries (their failures count again)")):
        entries = groups[kind]
        if entries:
            lines += [f"**{label} ({len(entries)})**:", ""]
            lines += [f"- {_text(line, 200)}" for line in entries]
            lines.append("")
    return lines


def _not_applicable(run: RunResult) -> list[str]:
    skipped = [r for r in run.results if r.status == NOT_APPLICABLE]
    if not skipped:
        return []
    lines = [f"<details><summary>Not applicable ({len(skipped)})</summary>", "",
             "| Scenario | Transport | Why |", "|---|---|---|"]
    for result in skipped:
        why = result.reason.removeprefix("Not applicable: ")
        lines.append(f"| {_code(result.scenario)} | {result.transport} | {_text(why)} |")
    return [*lines, "", "</details>", ""]


def _timing(run: RunResult) -> list[str]:
    runs = [r for r in run.results if r.transport != PARITY and r.status != NOT_APPLICABLE]
    if not runs:
        return []
    busy = sum(r.duration_ms for r in runs) / 1000
    slowest = sorted(runs, key=lambda r: r.duration_ms, reverse=True)[:SLOWEST]
    lines = [f"<details><summary>Timing: {len(runs)} run(s), {busy:.1f} s of runs in "
             f"{run.duration_ms / 1000:.1f} s</summary>", "",
             "| Scenario | Transport | Seconds |", "|---|---|---:|"]
    lines += [f"| {_code(r.scenario)} | {r.transport} | {r.duration_ms / 1000:.1f} |"
              for r in slowest]
    return [*lines, "", "</details>", ""]


def render_markdown(run: RunResult, *, bundles: str | None = None,
                    baseline: str | None = None) -> str:
    """The summary; ``bundles`` is the bundles directory as the reader should type it,
    ``baseline`` the baseline file's name (both optional)."""
    lines = [*_header(run), *_failures(run, bundles), *_baseline(run, baseline),
             *_not_applicable(run), *_timing(run)]
    return "\n".join(lines).rstrip() + "\n"


def write_markdown(run: RunResult, path: str | Path, **options: Any) -> None:
    Path(path).write_text(render_markdown(run, **options), encoding="utf-8")
