"""Where ``diff`` and ``matrix`` get their results: a bridge run now, or a saved ``run --json``.

Both commands compare several bridges over the same scenarios, so the selection and transport
filters are applied the same way to a fresh run and to a file, and every source gets a short,
unique label (the column heading, the ``data-bridge`` attribute, the name in a drift report).
"""

from __future__ import annotations

import fnmatch
import json
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from palace_conformance.contract import TRANSPORTS
from palace_conformance.errors import RunUsageError, as_usage_error
from palace_conformance.runner.interrupts import interrupt
from palace_conformance.runner.reports.redact import redacted_run, run_redactor
from palace_conformance.runner.results import PARITY, RunResult
from palace_conformance.runner.selection import (
    check_stray_patterns,
    host_argv,
    load_profile_arg,
    select,
)

if TYPE_CHECKING:
    from palace_conformance.runner.profile import Profile
    from palace_conformance.scenarios.model import Scenario


@dataclass(frozen=True)
class SourceSpec:
    """One ``--bridge SPEC`` or ``--from [LABEL=]FILE``, in command-line order."""

    kind: str  # "bridge" | "file" | "profile"
    value: str
    label: str = ""


@dataclass
class Source:
    """A bridge's results, ready to compare."""

    label: str
    run: RunResult
    origin: str  # the --bridge spec or the file it was read from
    capabilities: tuple[str, ...] = field(default_factory=tuple)
    journals: bool = True  # each result holds the fake's journal (a live run; not a saved one)
    #: the catalogue tools its profile maps (``tools.map``): a curated set; None: no map
    offered: frozenset[str] | None = None


@dataclass(frozen=True)
class Selection:
    """What to run or keep: scenario id globs and transports."""

    patterns: tuple[str, ...] = ()
    transports: tuple[str, ...] = TRANSPORTS
    jobs: int = 2
    op_timeout_ms: int = 15000
    level: str | None = None  # None: core when any source is not the reference, else seed
    #: ``--server real``: a ``RealServerSetup`` every bridge's run shares; None: the fake
    real: Any = None
    #: the default's growth (SuiteOptions.max_jobs); None: ``jobs`` is fixed
    max_jobs: int | None = None
    #: the default's backfill at ``max_jobs`` (SuiteOptions.backfill)
    backfill: int = 0


def bridge_label(spec: str) -> str:
    """A short label: ``pi-extension:mirror.ts`` for a file spec, else the spec itself."""
    if spec.startswith(("pi-extension:", "opencode-plugin:")):
        kind, target = spec.split(":", 1)
        target = target.split("?", 1)[0]
        return f"{kind}:{os.path.basename(target) or target}"
    return spec


def parse_from(value: str) -> SourceSpec:
    """``FILE`` or ``LABEL=FILE`` (the label wins only when the whole value is not a file)."""
    if "=" in value and not Path(value).exists():
        label, path = value.split("=", 1)
        return SourceSpec("file", path, label.strip())
    return SourceSpec("file", value)


def unique_labels(labels: Sequence[str]) -> list[str]:
    """``a``, ``a``, ``b`` -> ``a``, ``a#2``, ``b``: columns must be told apart."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return out


RESULT_MAX_BYTES = 1024 * 1024 * 1024  # a whole catalogue's results, journals included


def load_result_file(path: str, flag: str = "--from") -> RunResult:
    """A saved ``palace-conformance run --json`` file; one-line errors starting ``flag PATH``
    (just ``PATH`` when ``flag`` is empty)."""
    from palace_conformance import untrusted_file as untrusted

    where, data = untrusted.named_json(
        path, flag=flag, what="result", max_bytes=RESULT_MAX_BYTES, error=RunUsageError,
        unreadable="{problem} (write one with 'palace-conformance run --json FILE')",
        unparsable="not a JSON report ({problem}); give a 'run --json' file")
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise RunUsageError(f"{where}: not a 'palace-conformance run --json' result (no "
                            "'results' list)")
    try:
        run = RunResult.from_json(data)
        why = result_problem(run)
        if why is None:  # everything a report reads must be readable, not only what was parsed
            json.dumps(run.to_json(journal=True), default=str)
            run.counts()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        why = untrusted.short(repr(exc), 160)
    if why is not None:
        raise RunUsageError(f"{where}: malformed result ({why}); regenerate it with "
                            "'palace-conformance run --json FILE'")
    return run


def result_problem(run: RunResult) -> str | None:
    """What a saved result holds that no run writes (None when nothing): the fields every
    report reads, each of the type a run gives it."""
    from palace_conformance.runner.results import (
        FAILED,
        NOT_APPLICABLE,
        NOT_TESTABLE,
        PASSED,
    )

    for index, result in enumerate(run.results):
        at = f"results[{index}]"
        for name in ("scenario", "transport", "title", "reason", "path", "host_stderr",
                     "level", "subject"):
            if not isinstance(getattr(result, name), str):
                return f"{at}.{name} is not a string"
        if result.status not in (PASSED, FAILED, NOT_TESTABLE, NOT_APPLICABLE):
            return f"{at}.status {str(result.status)[:40]!r} is not a result status"
        duration = result.duration_ms
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            return f"{at}.duration_ms is not a number"
        if not all(isinstance(c, str) for c in result.covers):
            return f"{at}.covers holds a non-string"
        for check in result.checks:
            if not isinstance(check.message, str) or not isinstance(check.pointer, str):
                return f"{at}.checks holds a check without a string message and pointer"
    return None


def filter_run(run: RunResult, selection: Selection) -> RunResult:
    """Only the selected scenarios and transports (parity kept when both transports are)."""
    keep = set(selection.transports)
    if set(TRANSPORTS) <= keep:
        keep.add(PARITY)
    results = [r for r in run.results if r.transport in keep
               and (not selection.patterns
                    or any(fnmatch.fnmatchcase(r.scenario, p) for p in selection.patterns))]
    return RunResult(host=run.host, results=results, started_at=run.started_at,
                     duration_ms=run.duration_ms, stale_baseline=list(run.stale_baseline),
                     profile=run.profile)


def _offered_by_record(run: RunResult) -> frozenset[str] | None:
    """The curated tool set a saved run was judged with (its profile's map), or None."""
    offered = (run.profile or {}).get("offered")
    return frozenset(offered) or None if isinstance(offered, list) else None


def unrecorded_profile(run: RunResult) -> str | None:
    """Why a saved run cannot be compared as it was judged: its results show a profile at work
    (``/profile`` notes: a map, servers, a retry set aside) and the file does not record which
    (written before results kept it). None when it records one, or shows none."""
    if run.profile is not None:
        return None
    if any(c.pointer.startswith("/profile") for r in run.results for c in r.checks):
        return ("it was judged with a profile the file does not record (written by an older "
                "kit); run it again with 'palace-conformance run --profile FILE --json FILE'")
    return None


def plan_runs(selection: Selection, paths: Sequence[str] = ()) -> tuple[Scenario, ...]:
    """The selected scenarios; every problem is a one-line usage error."""
    from palace_conformance.scenarios.loader import load_catalogue

    check_stray_patterns(list(paths), list(selection.patterns))
    catalogue = load_catalogue(list(paths) or None)
    if catalogue.problems:
        raise RunUsageError(f"{len(catalogue.problems)} problem(s) in the scenario files, first: "
                            f"{catalogue.problems[0]} (palace-conformance fixtures validate)")
    scenarios = select(catalogue.scenarios, list(selection.patterns))
    if not any(t in s.transports for s in scenarios for t in selection.transports):
        raise RunUsageError(f"none of the selected scenarios runs on "
                            f"{' or '.join(selection.transports)}")
    return tuple(scenarios)


def run_bridge(spec: str, argv: Sequence[str], scenarios: Sequence[Scenario],
               selection: Selection, progress_stream: TextIO | None = None,
               profile: Profile | None = None, level: str = "seed") -> RunResult:
    """Run the planned scenarios against one bridge (the same machinery as ``run``)."""
    from palace_conformance.runner.compare import golden
    from palace_conformance.runner.execution.execute import RunOptions
    from palace_conformance.runner.execution.suite import HostProbeError, SuiteOptions, run_suite
    from palace_conformance.runner.execution.world import FAKE_PALACE
    from palace_conformance.runner.reports.console import make_progress

    options = SuiteOptions(run=RunOptions(host_argv=tuple(argv),
                                          op_timeout_ms=selection.op_timeout_ms,
                                          level=level, profile=profile,
                                          server=selection.real if selection.real is not None
                                          else FAKE_PALACE),
                           jobs=selection.jobs, max_jobs=selection.max_jobs,
                           backfill=selection.backfill, transports=selection.transports,
                           judges=golden.judges(level=level, profile=profile,
                                                server="fake" if selection.real is None
                                                else "real"))
    stream = progress_stream or sys.stderr
    print(f"running {bridge_label(spec)} ...", file=stream, flush=True)
    previous = signal.signal(signal.SIGTERM, interrupt)  # like run: a CI timeout cleans up
    try:
        run = run_suite(scenarios, options, progress=make_progress(stream))
        run.server = "real" if selection.real is not None else "fake"
        run.profile = profile.record() if profile is not None else None
        return run
    except HostProbeError as exc:
        raise RunUsageError(f"--bridge {spec}: the bridge host failed: {exc}") from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def collect(specs: Sequence[SourceSpec], selection: Selection, paths: Sequence[str] = (),
            progress_stream: TextIO | None = None) -> list[Source]:
    """Every source's results, in command-line order, labelled uniquely.

    Files are read, bridge commands resolved and scenarios selected before any bridge runs, so
    a typo in the last argument costs no minutes of running the first."""
    files: dict[int, RunResult] = {}
    argvs: dict[int, tuple[str, ...]] = {}
    profiles: dict[int, Profile] = {}
    for index, spec in enumerate(specs):
        if spec.kind == "file":
            saved = load_result_file(spec.value)
            why = unrecorded_profile(saved)
            if why is not None:
                raise RunUsageError(f"--from {spec.value}: {why}")
            files[index] = filter_run(saved, selection)
            if not files[index].results:
                raise RunUsageError(f"--from {spec.value}: no result matches the selection "
                                    "(check --select and --transport)")
        elif spec.kind == "profile":
            profile = load_profile_arg(spec.value)
            assert profile is not None
            profiles[index] = profile
            argvs[index] = host_argv(profile.bridge)
        else:
            argvs[index] = host_argv(spec.value)
    level = selection.level or ("seed" if all(
        s.kind == "bridge" and s.value == "reference" for s in specs if s.kind != "file")
        else "core")
    scenarios = plan_runs(selection, paths) if argvs else ()
    found: list[tuple[str, RunResult, str]] = []
    for index, spec in enumerate(specs):
        if index in files:
            run = files[index]
            label = spec.label or run.host.bridge or Path(spec.value).stem
        elif index in profiles:
            run = run_bridge(profiles[index].bridge, argvs[index], scenarios, selection,
                             progress_stream, profiles[index], level)
            label = spec.label or profiles[index].name
        else:
            run = run_bridge(spec.value, argvs[index], scenarios, selection, progress_stream,
                             level=level)
            label = spec.label or bridge_label(spec.value)
        found.append((label, run, spec.value))
    # every report of diff and matrix renders from these: secrets out (reports/redact.py)
    redactor = run_redactor(s.raw for s in scenarios)
    found = [(label, redacted_run(run, redactor), origin) for label, run, origin in found]
    labels = unique_labels([label for label, _, _ in found])
    journals = [index not in files or any(r.journal for r in files[index].results)
                for index in range(len(specs))]
    offered = [frozenset(r.tool for r in profiles[i].tool_routes) or None
               if i in profiles else _offered_by_record(files[i]) if i in files else None
               for i in range(len(specs))]
    return [Source(label, run, origin, tuple(run.host.capabilities), kept, tools)
            for label, (_, run, origin), kept, tools
            in zip(labels, found, journals, offered, strict=True)]


def load_baselines(values: Sequence[str]) -> dict[str | None, Any]:
    """``--baseline [LABEL=]FILE`` values: label (None: every bridge) -> loaded baseline."""
    from palace_conformance.runner.verdict.baseline import BaselineError, load_baseline

    found: dict[str | None, Any] = {}
    for value in values:
        label: str | None = None
        path = value
        if "=" in value and not Path(value).exists():
            label, path = value.split("=", 1)
        if label in found:
            raise RunUsageError(f"--baseline {value}: a second baseline for "
                                f"{label or 'every bridge'} (give one per bridge)")
        with as_usage_error(BaselineError):
            found[label] = load_baseline(path)
    return found


def apply_baselines(sources: Sequence[Source], baselines: dict[str | None, Any]) -> None:
    """Mark each source's known failures with its own baseline (or the one for every bridge);
    a labelled baseline whose label names no column is a usage error."""
    from palace_conformance.runner.verdict.baseline import apply_baseline

    labels = {s.label for s in sources}
    unknown = [label for label in baselines if label is not None and label not in labels]
    if unknown:
        raise RunUsageError(f"--baseline {unknown[0]}=...: no bridge is labelled {unknown[0]!r} "
                            f"(labels: {', '.join(sorted(labels))})")
    for source in sources:
        chosen = baselines.get(source.label, baselines.get(None))
        if chosen is not None:
            apply_baseline(source.run, chosen)
