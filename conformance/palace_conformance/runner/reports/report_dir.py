"""The reports a run leaves for people: ``summary.md`` and repro bundles under ``--report-dir``,
and a Markdown file wherever ``--markdown`` points. (``results.json`` and ``junit.xml`` are
written by the run command itself, from the same :func:`public_run`.)

Every report but the bundles renders from :func:`public_run`, the run with its secrets replaced
(:mod:`.redact`); bundles redact their own files, with markers numbered per bundle."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from palace_conformance.runner.reports.bundle import shown_path, write_bundles
from palace_conformance.runner.reports.markdown import write_markdown
from palace_conformance.runner.reports.redact import redacted_run, run_redactor
from palace_conformance.runner.results import RunResult
from palace_conformance.scenarios.model import Scenario

SUMMARY = "summary.md"
BUNDLES = "bundles"
RUNS = "runs"
RESULTS = "results.json"
JUNIT = "junit.xml"
#: what a run writes into ``--report-dir``; nothing else there is ever touched
OWN = (RESULTS, JUNIT, SUMMARY, BUNDLES, RUNS)


def clear_previous(report_dir: Path) -> list[str]:
    """Remove what an earlier run left in ``report_dir`` (its own names only, see ``OWN``), so
    the directory holds one run: a stale bundle would replay a failure this run does not have.
    Returns the names removed; ``OSError`` propagates."""
    removed = []
    for name in OWN:
        path = report_dir / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        else:
            continue
        removed.append(name)
    return removed


def public_run(run: RunResult, scenarios: Mapping[str, Scenario],
               environ: Mapping[str, str] | None = None, *, journal: bool = True) -> RunResult:
    """``run`` as a report may show it: every secret of its scenarios and of the runner's
    environment replaced by a marker; without the journals when ``journal`` is false (no report
    of ``run`` shows them)."""
    return redacted_run(run, run_redactor((s.raw for s in scenarios.values()), environ),
                        journal=journal)


def write_reports(run: RunResult, *, scenarios: Mapping[str, Scenario], bridge: str,
                  report_dir: Path | None = None, markdown: Path | None = None,
                  baseline: str | None = None, public: RunResult | None = None) -> list[Path]:
    """Write bundles (failing results only) and the Markdown summaries, these from ``public``
    (default: :func:`public_run`); returns the bundles. ``OSError`` propagates: the caller
    turns it into one line."""
    bundles: list[Path] = []
    shown_bundles = None
    if report_dir is not None:
        target = report_dir / BUNDLES
        bundles = write_bundles(run, scenarios, target, bridge=bridge)
        shown_bundles = shown_path(target) if bundles else None
    for path in (report_dir / SUMMARY if report_dir is not None else None, markdown):
        if path is not None:
            if public is None:
                public = public_run(run, scenarios)
            write_markdown(public, path, bundles=shown_bundles,
                           baseline=os.path.basename(baseline) if baseline else None)
    return bundles
