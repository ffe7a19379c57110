"""Where ``diff`` and ``matrix`` get their results: a bridge run now, or a saved ``run --json``.

Both commands compare several bridges over the same scenarios, so the selection and transport
filters are applied the same way to a fresh run and to a file, and every source gets a short,
unique label (the column heading, the ``data-bridge`` attribute, the name in a drift report).
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .commands import RunUsageError, host_argv, select
from .results import PARITY, RunResult


@dataclass(frozen=True)
class SourceSpec:
    """One ``--bridge SPEC`` or ``--from [LABEL=]FILE``, in command-line order."""

    kind: str  # "bridge" | "file"
    value: str
    label: str = ""


@dataclass
class Source:
    """A bridge's results, ready to compare."""

    label: str
    run: RunResult
    origin: str  # the --bridge spec or the file it was read from
    capabilities: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Selection:
    """What to run or keep: scenario id globs and transports."""

    patterns: tuple[str, ...] = ()
    transports: tuple[str, ...] = ("stdio", "http")
    jobs: int = 2
    op_timeout_ms: int = 15000
    baseline: str | None = None


def bridge_label(spec: str) -> str:
    """A short label: ``pi-extension:mirror.ts`` for a file spec, else the spec itself."""
    if spec.startswith("pi-extension:"):
        target = spec.split(":", 1)[1].split("?", 1)[0]
        return f"pi-extension:{os.path.basename(target) or target}"
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


def load_result_file(path: str) -> RunResult:
    """A saved ``palace-conformance run --json`` file; one-line errors."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunUsageError(f"--from {path}: no such file (write one with 'palace-conformance "
                            "run --json FILE')") from None
    except OSError as exc:
        raise RunUsageError(f"--from {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunUsageError(f"--from {path}: not JSON ({exc}); give a 'run --json' file") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise RunUsageError(f"--from {path}: not a 'palace-conformance run --json' result (no "
                            "'results' list)")
    try:
        return RunResult.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise RunUsageError(f"--from {path}: malformed result ({exc!r}); regenerate it with "
                            "'palace-conformance run --json FILE'") from None


def filter_run(run: RunResult, selection: Selection) -> RunResult:
    """Only the selected scenarios and transports (parity kept when both transports are)."""
    keep = set(selection.transports)
    if {"stdio", "http"} <= keep:
        keep.add(PARITY)
    results = [r for r in run.results if r.transport in keep
               and (not selection.patterns
                    or any(fnmatch.fnmatchcase(r.scenario, p) for p in selection.patterns))]
    return RunResult(host=run.host, results=results, started_at=run.started_at,
                     duration_ms=run.duration_ms, stale_baseline=list(run.stale_baseline))


def run_bridge(spec: str, selection: Selection, paths: Sequence[str] = (),
               progress_stream: TextIO | None = None) -> RunResult:
    """Run the selected catalogue against one bridge (the same machinery as ``run``)."""
    from ..scenarios.loader import load_catalogue
    from .baseline import BaselineError, load_baseline
    from .console import make_progress
    from .execute import RunOptions
    from .suite import HostProbeError, SuiteOptions, run_suite

    argv = host_argv(spec)
    baseline = None
    if selection.baseline is not None:
        try:
            baseline = load_baseline(selection.baseline)
        except BaselineError as exc:
            raise RunUsageError(str(exc)) from None
    catalogue = load_catalogue(list(paths) or None)
    if catalogue.problems:
        raise RunUsageError(f"{len(catalogue.problems)} problem(s) in the scenario files, first: "
                            f"{catalogue.problems[0]} (palace-conformance fixtures validate)")
    scenarios = select(catalogue.scenarios, list(selection.patterns))
    if not any(t in s.transports for s in scenarios for t in selection.transports):
        raise RunUsageError(f"none of the selected scenarios runs on "
                            f"{' or '.join(selection.transports)}")
    options = SuiteOptions(run=RunOptions(host_argv=argv, op_timeout_ms=selection.op_timeout_ms),
                           jobs=selection.jobs, transports=selection.transports,
                           baseline=baseline)
    stream = progress_stream or sys.stderr
    print(f"running {bridge_label(spec)} ...", file=stream, flush=True)
    try:
        return run_suite(scenarios, options, progress=make_progress(stream))
    except HostProbeError as exc:
        raise RunUsageError(f"--bridge {spec}: the bridge host failed: {exc}") from None


def collect(specs: Sequence[SourceSpec], selection: Selection, paths: Sequence[str] = (),
            progress_stream: TextIO | None = None) -> list[Source]:
    """Every source's results, in command-line order, labelled uniquely."""
    found: list[tuple[str, RunResult, str]] = []
    for spec in specs:  # files first would be faster to fail, but order is the user's
        if spec.kind == "file":
            run = filter_run(load_result_file(spec.value), selection)
            if not run.results:
                raise RunUsageError(f"--from {spec.value}: no result matches the selection "
                                    "(check --select and --transport)")
            label = spec.label or run.host.bridge or Path(spec.value).stem
            found.append((label, run, spec.value))
        else:
            run = run_bridge(spec.value, selection, paths, progress_stream)
            found.append((spec.label or bridge_label(spec.value), run, spec.value))
    labels = unique_labels([label for label, _, _ in found])
    return [Source(label, run, origin, tuple(run.host.capabilities))
            for label, (_, run, origin) in zip(labels, found, strict=True)]


def check_files(specs: Sequence[SourceSpec]) -> None:
    """Fail fast on a missing ``--from`` file before spending minutes running bridges."""
    for spec in specs:
        if spec.kind == "file":
            load_result_file(spec.value)
