"""What a person sees: live progress while runs go, then one table and the failures.

On a terminal this uses rich (a progress bar plus the runs in flight); anywhere else (CI logs,
pipes) it prints one plain line per finished run, so a log can be grepped.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from palace_conformance.contract import TRANSPORTS
from palace_conformance.runner.reports.tally import self_tests_phrase, tally
from palace_conformance.runner.results import (
    FAILED,
    NOT_APPLICABLE,
    NOT_TESTABLE,
    PARITY,
    PASSED,
    RunResult,
    ScenarioResult,
)
from palace_conformance.scenarios.model import Scenario
from palace_conformance.scenarios.server_needs import reason_label

LABELS = {PASSED: "PASS", FAILED: "FAIL", NOT_TESTABLE: "NOT TESTABLE",
          NOT_APPLICABLE: "N/A"}
STYLES = {PASSED: "green", FAILED: "bold red", NOT_TESTABLE: "bold magenta",
          NOT_APPLICABLE: "dim"}


#: width of the status column: "FAIL (expected)" fits
LABEL_WIDTH = 15
#: a message printed in the one-line-per-result console is cut here
LINE_LIMIT = 240


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """``text`` on one line (an HTML error page, a traceback): secrets out (the console's one
    redactor, before the cut, so no prefix of one survives it), whitespace folded, then cut."""
    from palace_conformance.redaction import CONSOLE

    folded = " ".join(CONSOLE.text(text).split())
    return folded if len(folded) <= limit else folded[:limit - 1] + "…"


def label(result: ScenarioResult) -> str:
    text = LABELS.get(result.status, result.status)
    if result.baseline is not None:
        text += " (expected)"
    return text


class PlainProgress:
    """One line per finished run."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()
        self.total = 0
        self.finished = 0

    def start(self, total: int) -> None:
        self.total = total

    def begin(self, scenario: Scenario, transport: str) -> None:
        pass

    def done(self, result: ScenarioResult) -> None:
        with self.lock:
            self.finished += 1
            line = (f"[{self.finished}/{self.total}] {label(result):<{LABEL_WIDTH}} "
                    f"{result.transport:<5} "
                    f"{result.scenario} ({result.duration_ms / 1000:.1f} s)")
            if result.status in (FAILED, NOT_TESTABLE) and result.reason:
                line += f"\n    {one_line(result.reason)}"
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        pass


class RichProgress:
    """A progress bar and the runs in flight (terminal only)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.lock = threading.Lock()
        self.running: list[str] = []
        self.bar = Progress(TextColumn("[bold]running"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.description}"),
                            console=console, transient=True)
        self.task = self.bar.add_task("", total=0)

    def start(self, total: int) -> None:
        self.bar.update(self.task, total=total)
        self.bar.start()

    def _describe(self) -> str:
        shown = self.running[:3]
        more = len(self.running) - len(shown)
        return ", ".join(shown) + (f" +{more}" if more > 0 else "")

    def begin(self, scenario: Scenario, transport: str) -> None:
        with self.lock:
            self.running.append(f"{scenario.id} [{transport}]")
            self.bar.update(self.task, description=self._describe())

    def done(self, result: ScenarioResult) -> None:
        with self.lock:
            name = f"{result.scenario} [{result.transport}]"
            if name in self.running:
                self.running.remove(name)
            style = STYLES.get(result.status, "")
            self.console.print(f"[{style}]{label(result):<{LABEL_WIDTH}}[/] "
                               f"{result.transport:<5} "
                               f"{result.scenario} [dim]({result.duration_ms / 1000:.1f} s)[/]",
                               highlight=False)
            self.bar.update(self.task, advance=1, description=self._describe())

    def close(self) -> None:
        self.bar.stop()


def make_progress(stream: TextIO | None = None) -> PlainProgress | RichProgress:
    stream = stream or sys.stdout
    if stream.isatty():
        return RichProgress(Console(file=stream))
    return PlainProgress(stream)


def _totals(run: RunResult) -> str:
    """The last line: verdict, then the bridge's counts and the self-tests' in the words every
    report uses (reports/tally.py)."""
    parts = [tally(run).phrase()]
    if run.not_run:
        parts.append(f"{len(run.not_run)} not run (stopped after the first failure)")
    if run.too_slow:
        parts.append(f"{len(run.too_slow)} not run: too slow (the bridge's own pace adds more "
                     "than --max-scenario-seconds: "
                     + ", ".join(f"{s} [{t}] +{sec:.0f} s" for s, t, sec in run.too_slow[:5])
                     + (", ..." if len(run.too_slow) > 5 else "") + ")")
    verdict = "OK" if run.ok else "FAILED"
    text = (f"{verdict}: {', '.join(parts)} in {run.duration_ms / 1000:.1f} s, judged at the "
            f"{run.level} level")
    if run.slack_factor != 1.0:
        text += f", every declared slack x {run.slack_factor:g} (--slack-factor)"
    if run.lateness and run.lateness.get("samples"):
        late = run.lateness
        text += (f"; machine lateness: wake-ups p95 {late['p95_ms']:g} ms, worst "
                 f"{late['max_ms']:g} ms, CPU work stretched up to "
                 f"{late.get('worst_stretch', 1):g}x (added to each timing's upper bound)")
    self_tests = self_tests_phrase(run)
    if self_tests:
        text += f"; {self_tests}"
    if run.server != "fake":
        text += f"; against the {run.server} mempalace server"
        if run.server_start:
            text += f"\nbounds that include a palace start get {run.server_start}"
        reasons = not_applicable_by_reason(run)
        if reasons:
            text += "\nnot applicable, by reason: " + "; ".join(
                f"{count} {reason}" for reason, count in reasons)
    if run.nothing_judged:  # above the totals: their line stays the last
        text = nothing_judged_line(run) + "\n" + text
    return text


def nothing_judged_line(run: RunResult) -> str:
    """Why a run judged nothing: its results counted by reason, most frequent first."""
    reasons: Counter[str] = Counter({f"not applicable: {reason}": count
                                     for reason, count in not_applicable_by_reason(run)})
    for result in run.results:
        if result.status == NOT_TESTABLE and result.subject != "fake":
            reasons[result.reason] += 1
    shown = "; ".join(f"{count} {reason}" for reason, count in reasons.most_common(8))
    more = f"; and {len(reasons) - 8} other reason(s)" if len(reasons) > 8 else ""
    return f"nothing judged: no result of the bridge passed or failed; by reason: {shown}{more}"


def not_applicable_by_reason(run: RunResult) -> list[tuple[str, int]]:
    """How many of the bridge's results were not applicable, per reason: the first unmet need
    of a server reason, a host's reason as written; most frequent first."""
    counted: Counter[str] = Counter()
    for result in run.results:
        if result.status != NOT_APPLICABLE or result.subject == "fake":
            continue
        reason = result.reason.removeprefix("Not applicable: ")
        if result.transport == PARITY:
            reason = "parity, a transport not applicable"
        elif " server, " in reason:
            reason = reason_label(reason)
        counted[reason] += 1
    return sorted(counted.items(), key=lambda item: (-item[1], item[0]))


def _failure_lines(run: RunResult) -> list[str]:
    lines = []
    for result in run.results:
        if result.status not in (FAILED, NOT_TESTABLE):
            continue
        tag = " (expected by the baseline)" if result.baseline is not None else ""
        lines.append(f"{result.scenario} [{result.transport}]{tag} covers "
                     f"{', '.join(result.covers) or '-'}:")
        if result.status == NOT_TESTABLE:  # why it could not be judged: the one thing to fix
            lines.append(f"  not testable: {one_line(result.reason or 'no reason recorded')}")
        for check in result.failures:
            where = f" step {check.step}" if check.step is not None else ""
            lines.append(f"  {check.pointer}{where}: {one_line(check.message)}")
        if result.status == NOT_TESTABLE and not result.failures and result.reason:
            lines.append(f"  {one_line(result.reason)}")  # why: the only thing to say
    lines.extend(f"stale baseline entry: {line}" for line in run.stale_baseline)
    return lines


def _rows(run: RunResult) -> list[tuple[str, dict[str, ScenarioResult]]]:
    rows: dict[str, dict[str, ScenarioResult]] = {}
    for result in run.results:
        rows.setdefault(result.scenario, {})[result.transport] = result
    return list(rows.items())


def render_summary(run: RunResult, stream: TextIO | None = None, *, quiet: bool = False) -> None:
    """The final table (one row per scenario), the failing checks, and the totals line;
    ``quiet`` (``run -q``) leaves the table out."""
    stream = stream or sys.stdout
    columns: Sequence[str] = (*TRANSPORTS, PARITY)
    if quiet:
        if run.start_note:
            print(run.start_note, file=stream)
        for line in _failure_lines(run):
            print(line, file=stream)
        print(_totals(run), file=stream, flush=True)
        return
    if stream.isatty():
        console = Console(file=stream)
        table = Table(title=f"palace-conformance: {run.host.impl or 'host'} "
                      f"({run.host.bridge or ' '.join(run.host.argv)})")
        table.add_column("scenario")
        for column in columns:
            table.add_column(column)
        table.add_column("s", justify="right")
        for scenario, cells in _rows(run):
            shown = []
            for column in columns:
                result = cells.get(column)
                shown.append(f"[{STYLES.get(result.status, '')}]{label(result)}[/]"
                             if result is not None else "")
            seconds = sum(r.duration_ms for r in cells.values()) / 1000
            table.add_row(scenario, *shown, f"{seconds:.1f}")
        console.print(table)
        if run.host.capabilities_note:
            console.print(run.host.capabilities_note, markup=False, highlight=False)
        if run.start_note:
            console.print(run.start_note, markup=False, highlight=False)
        for line in _failure_lines(run):
            console.print(line, markup=False, highlight=False)
        console.print(_totals(run), style="bold green" if run.ok else "bold red",
                      highlight=False)
        return
    print(f"palace-conformance: {run.host.impl or 'host'} "
          f"({run.host.bridge or ' '.join(run.host.argv)})", file=stream)
    if run.host.capabilities_note:
        print(run.host.capabilities_note, file=stream)
    if run.start_note:
        print(run.start_note, file=stream)
    width = max((len(s) for s, _ in _rows(run)), default=10)
    w = LABEL_WIDTH
    print(f"{'scenario':<{width}}  {'stdio':<{w}}  {'http':<{w}}  {'parity':<{w}}", file=stream)
    for scenario, cells in _rows(run):
        shown = [label(cells[c]) if c in cells else "-" for c in columns]
        print(f"{scenario:<{width}}  {shown[0]:<{w}}  {shown[1]:<{w}}  {shown[2]:<{w}}",
              file=stream)
    for line in _failure_lines(run):
        print(line, file=stream)
    print(_totals(run), file=stream, flush=True)
