"""Measure a module's line map: each run of its selection once, unmutated, under coverage.py.

The bridge runs inside the reference host, a process the runner starts (forked from its warm
server, or fresh with ``--cold-start``), so coverage starts in every Python process of the run
through coverage's documented subprocess hook: ``COVERAGE_PROCESS_START`` names a config file
and a ``sitecustomize`` calls ``coverage.process_startup()``. The hook lives in the work
directory (``OUT/coverage/hook``), put first on ``PYTHONPATH`` for these runs only: nothing is
written outside the work directory and the mutants' runs start as before.

coverage 7.10 and later install a ``.pth`` file that does the same when the variable is set;
the hook keeps the measurement independent of that (an older coverage, an install without it),
and ``process_startup`` starts coverage once however often it is called.

Each scenario run is its own ``palace-conformance run --transport T --select ID`` with its own
data files (``parallel``: one per process, forks included), so which run executed a line is
known without a dynamic context (the bridge cannot tell which scenario drives it). Every run
must pass: the measurement is the module's baseline.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mutation.line_map import LineMap, ScenarioRun

HOOK = '''"""Start coverage.py in this process when COVERAGE_PROCESS_START is set (python -m
mutation puts this directory first on PYTHONPATH for its measurement runs only); then run the
sitecustomize this one shadows, if any."""
import os
import sys

if os.environ.get("COVERAGE_PROCESS_START"):
    import coverage

    coverage.process_startup()


def _shadowed() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_shadowed()
'''


class MeasureError(Exception):
    """A scenario run failed or could not be measured unmutated; one line."""


INSTALL = "pip install -e '.[mutation]'"


def interpreter_of(runner: str) -> str | None:
    """The Python that runs ``runner`` (a console script): its ``#!`` line's program, found on
    ``PATH`` for ``#!/usr/bin/env NAME``; None when the file has no such line."""
    try:
        with open(runner, "rb") as script:
            first = script.readline(4096).decode("utf-8", "replace")
    except OSError:
        return None
    words = first[2:].split() if first.startswith("#!") else []
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        return shutil.which(words[0]) if words else None
    return words[0] if words else None


def missing_coverage(runner: str, env: dict[str, str]) -> str | None:
    """Checked before any run (a measurement is many minutes of runs): why coverage.py could
    not measure, in one line naming the fix, or None. It must be importable here (the data is
    read here) and by the runner's interpreter with the runs' environment (the hook starts it
    in every process of a run)."""
    if importlib.util.find_spec("coverage") is None:
        return f"coverage.py is not importable by {sys.executable} ({INSTALL})"
    interpreter = interpreter_of(runner)
    if interpreter is None or os.path.realpath(interpreter) == os.path.realpath(sys.executable):
        return None
    try:
        done = subprocess.run([interpreter, "-c", "import coverage"], env=env,
                              capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot start {interpreter}, the interpreter of {runner}: {exc}"
    if done.returncode != 0:
        return (f"coverage.py is not importable by {interpreter}, the interpreter of {runner} "
                f"({interpreter} -m {INSTALL})")
    return None


def hook_dir(work: Path) -> Path:
    return work / "coverage" / "hook"


def write_hook(work: Path) -> Path:
    """The ``sitecustomize`` that starts coverage, in the work directory."""
    directory = hook_dir(work)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(HOOK, encoding="utf-8")
    return directory


def config_text(data_file: Path, source: Path | str) -> str:
    """coverage's config for one run: data files per process, only ``source`` measured, and no
    warning in a process that never imports it (the fake server, the runner itself)."""
    return "\n".join(["[run]", f"data_file = {data_file}", "parallel = true",
                      f"include = {source}",
                      "disable_warnings = no-data-collected, module-not-imported, "
                      "module-not-measured", ""])


def executed_lines(directory: Path, source: Path) -> frozenset[int]:
    """The lines of ``source`` any process of the run executed (the union of its data files)."""
    from coverage import CoverageData

    found: set[int] = set()
    for path in sorted(directory.glob(".coverage*")):
        data = CoverageData(str(path))
        data.read()
        found.update(data.lines(str(source)) or ())
    return frozenset(found)


def _attempt(run: ScenarioRun, sources: Sequence[Path], include: str, directory: Path,
             runner: str, env: dict[str, str], limit_s: float) -> tuple[dict[Path, frozenset[int]],
                                                                         float]:
    """One run of one scenario under coverage: (lines executed per file of ``sources``, wall
    seconds); :class:`MeasureError` when it fails or overruns ``limit_s``."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    rc = directory / "coveragerc"
    rc.write_text(config_text(directory / ".coverage", include), encoding="utf-8")
    argv = [runner, "run", "--bridge", "reference", "--transport", run.transport, "--jobs", "1",
            "--select", run.scenario]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, env={**env, "COVERAGE_PROCESS_START": str(rc)},
                              capture_output=True, text=True, timeout=limit_s, check=False)
    except subprocess.TimeoutExpired:
        raise MeasureError(f"{run.key} took over {limit_s:.0f} s unmutated") from None
    took = time.monotonic() - started
    if done.returncode != 0:
        tail = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines()
                or ["(no output)"])[-1]
        raise MeasureError(f"{run.key} fails unmutated: {tail}")
    lines = {source: executed_lines(directory, source) for source in sources}
    shutil.rmtree(directory)
    return lines, took


def measure_files(run: ScenarioRun, sources: Sequence[Path], include: str, directory: Path,
                  runner: str, env: dict[str, str], limit_s: float,
                  ) -> tuple[dict[Path, frozenset[int]], float]:
    """:func:`_attempt`, tried a second time when the first fails: a scenario with a timing
    window can fail unmutated on a machine loaded far beyond its slack (issue 27: a feeding run
    at load average 44), and one failure must not cost the module its whole run. A run that
    fails twice is a real failure; the mutants' own runs are never retried."""
    try:
        return _attempt(run, sources, include, directory, runner, env, limit_s)
    except MeasureError:
        try:
            return _attempt(run, sources, include, directory, runner, env, limit_s)
        except MeasureError as exc:
            raise MeasureError(f"{exc} (twice)") from None


def measure_run(run: ScenarioRun, source: Path, directory: Path, runner: str,
                env: dict[str, str], limit_s: float) -> tuple[frozenset[int], float]:
    """One scenario on one transport under coverage, measuring ``source``: (lines executed, wall
    seconds); retried once (:func:`measure_files`)."""
    lines, took = measure_files(run, [source], str(source), directory, runner, env, limit_s)
    return lines[source], took


def _hooked(work: Path, env: dict[str, str]) -> dict[str, str]:
    hook = write_hook(work)
    pythonpath = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": os.pathsep.join([str(hook), *([pythonpath] if pythonpath
                                                                 else [])])}


def measure_shared(runs: Sequence[ScenarioRun], sources: Sequence[Path], work: Path,
                   runner: str, env: dict[str, str], jobs: int, limit_s: float,
                   ) -> tuple[dict[ScenarioRun, tuple[dict[Path, frozenset[int]], float]],
                              dict[ScenarioRun, str]]:
    """Every run once under coverage, measuring every file of ``sources`` at once, ``jobs`` at a
    time: (lines per file and seconds, by run; the error of each run that failed twice). Many
    modules' selections share most of their runs, so one pass costs a fraction of one
    measurement per module; the caller leaves out the modules a failed run belongs to."""
    env = _hooked(work, env)
    include = ",".join(str(source) for source in sources)
    base = work / "coverage" / "shared"
    done: dict[ScenarioRun, tuple[dict[Path, frozenset[int]], float]] = {}
    failed: dict[ScenarioRun, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {run: pool.submit(measure_files, run, sources, include, base / run.key,
                                    runner, env, limit_s) for run in runs}
        for run, future in futures.items():
            try:
                done[run] = future.result()
            except MeasureError as exc:
                failed[run] = str(exc)
    return done, failed


def measure(runs: Sequence[ScenarioRun], source: Path, work: Path, stem: str, runner: str,
            env: dict[str, str], jobs: int, limit_s: float, fingerprint: str) -> LineMap:
    """Every run of the selection under coverage, ``jobs`` at a time; the module's line map."""
    try:
        import coverage  # noqa: F401  (the hook and executed_lines need it)
    except ImportError:
        raise MeasureError(f"coverage.py is not installed ({INSTALL}, or "
                           "use --selection module)") from None
    measured_env = _hooked(work, env)
    hook = hook_dir(work)
    base = work / "coverage" / stem
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {run: pool.submit(measure_run, run, source, base / run.key, runner,
                                    measured_env, limit_s) for run in runs}
        try:
            results = {run: future.result() for run, future in futures.items()}
        except MeasureError:
            for future in futures.values():
                future.cancel()  # the runs not started yet; the ones running end by their limit
            raise
    wall = time.monotonic() - started
    if runs and not any(lines for lines, _ in results.values()):
        # the module is imported in every run, so its top lines run: the hook did not start
        raise MeasureError(f"no run executed a line of {source.name} under coverage: the "
                           f"coverage hook in {hook} did not start")
    return LineMap(fingerprint=fingerprint, lines={r: lines for r, (lines, _) in results.items()},
                   seconds={r: took for r, (_, took) in results.items()}, wall_s=wall)
