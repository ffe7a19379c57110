"""cosmic-ray sessions, one per bridge module, on a scratch copy of the bridge.

The bridge is copied under the work directory and put first on ``PYTHONPATH``, so the reference
host the runner starts imports the mutated copy and the checkout is never modified (a killed run
cannot leave a mutant behind). cosmic-ray writes each mutant into the copy, runs the test command
(``palace-conformance run``) with a time limit, and restores the file: with ``--selection
module`` through ``cosmic-ray exec`` over the module's scenarios on both transports, by default
through :func:`execute_selected` over the scenario runs that execute the mutant's lines.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import random
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mutation.anchors import AnchorError, anchor_of
from mutation.equivalence import REASON, annotation_spans, in_annotation
from mutation.line_map import (
    NO_REACH,
    LineMap,
    commands,
    mutant_lines,
    one_command,
    statement_spans,
    with_parity,
)
from mutation.report import (
    EQUIVALENT,
    INCOMPETENT,
    KILLED,
    NOT_SAMPLED,
    PENDING,
    SURVIVED,
    TIMEOUT,
    MutantRecord,
)

NOT_SAMPLED_OUTPUT = "not in the seeded sample"
TIMEOUT_OUTPUT = "timeout"  # what cosmic-ray records as the output of a run it timed out


class SessionError(Exception):
    """cosmic-ray or the unmutated baseline failed; one line."""


@dataclass(frozen=True)
class ModuleSession:
    """Where one module's cosmic-ray session lives under the work directory."""

    module: str  # relative to palace_bridge/, e.g. features/feeding.py
    work: Path

    @property
    def stem(self) -> str:
        return self.module.removesuffix(".py").replace("/", ".")

    @property
    def config(self) -> Path:
        return self.work / "sessions" / f"{self.stem}.toml"

    @property
    def db(self) -> Path:
        return self.work / "sessions" / f"{self.stem}.sqlite"

    @property
    def log(self) -> Path:
        return self.work / "sessions" / f"{self.stem}.log"

    @property
    def source(self) -> Path:
        return self.work / "src" / "palace_bridge" / self.module


def copy_bridge(bridge_dir: Path, work: Path) -> None:
    """A fresh copy of the unmutated bridge under ``work/src`` (no bytecode)."""
    target = work / "src" / "palace_bridge"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(bridge_dir, target, ignore=shutil.ignore_patterns("__pycache__"))


@dataclass(frozen=True)
class WorkRun:
    """What both tools' ``run`` starts from: the work directory (holding a fresh unmutated copy
    of the bridge), the runner's environment and command, and the modules to run."""

    out: Path
    env: dict[str, str]
    runner: str
    modules: list[str]


def start_work(args: Any, mapped: Iterable[str], bridge_dir: Path) -> WorkRun:
    """``args``' modules checked against ``mapped`` (default: every one of them), ``--out``
    made (emptied first with ``--fresh``) and the bridge copied into it."""
    known = sorted(mapped)
    unknown = [m for m in args.module if m not in known]
    if unknown:
        raise SessionError(f"run: unknown module {unknown[0]!r} (see "
                           "'python -m mutation selections' for the mapped ones)")
    out: Path = args.out.resolve()
    if args.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    copy_bridge(bridge_dir, out)
    return WorkRun(out, environment(out), find_runner(), list(args.module) or known)


def environment(work: Path) -> dict[str, str]:
    """The runner's environment: the scratch copy first on ``PYTHONPATH``."""
    env = dict(os.environ)
    inherited = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([str(work / "src"), *([inherited] if inherited else [])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def scenario_command(scenarios: Sequence[str], jobs: int, runner: str) -> list[str]:
    """``palace-conformance run`` over exactly these scenarios, both transports."""
    argv = [runner, "run", "--bridge", "reference", "--transport", "both", "--jobs", str(jobs)]
    for scenario in scenarios:
        argv += ["--select", scenario]
    return argv


def find_runner() -> str:
    found = shutil.which("palace-conformance", path=str(Path(sys.executable).parent)) or \
        shutil.which("palace-conformance")
    if found is None:
        raise SessionError("palace-conformance is not installed here (pip install -e '.[test]')")
    return found


def cosmic_ray() -> str:
    found = shutil.which("cosmic-ray", path=str(Path(sys.executable).parent)) or \
        shutil.which("cosmic-ray")
    if found is None:
        raise SessionError("cosmic-ray is not installed (pip install -e '.[mutation]', or "
                           "tox -e mutation)")
    return found


def config_text(module_path: Path, command: Sequence[str], timeout_s: float) -> str:
    """A cosmic-ray session config (TOML) for one module."""
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "\n".join([
        "[cosmic-ray]",
        f"module-path = {q(str(module_path))}",
        f"timeout = {float(timeout_s)}",
        "excluded-modules = []",
        f"test-command = {q(shlex.join(command))}",
        "",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "",
    ])


def _cosmic(args: Sequence[str], session: ModuleSession, env: dict[str, str]) -> None:
    with session.log.open("a", encoding="utf-8") as log:
        done = subprocess.run([cosmic_ray(), *args], cwd=session.work, env=env, stdout=log,
                              stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SessionError(f"cosmic-ray {args[0]} failed for {session.module} (exit "
                           f"{done.returncode}); see {session.log}")


def init(session: ModuleSession, command: Sequence[str], timeout_s: float,
         env: dict[str, str]) -> None:
    """Write the session config and let cosmic-ray enumerate the module's mutants."""
    session.config.parent.mkdir(parents=True, exist_ok=True)
    session.config.write_text(config_text(session.source, command, timeout_s), encoding="utf-8")
    if not session.db.exists():
        _cosmic(["init", str(session.config), str(session.db)], session, env)


def retime(session: ModuleSession, command: Sequence[str], timeout_s: float) -> None:
    session.config.write_text(config_text(session.source, command, timeout_s), encoding="utf-8")


def mark_equivalents(session: ModuleSession) -> int:
    """Record the mutants inside unevaluated annotations as skipped, without running them."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans = annotation_spans(session.source.read_text(encoding="utf-8"))
    with use_db(str(session.db), WorkDB.Mode.open) as db:
        spared = [item.job_id for item in db.pending_work_items
                  if in_annotation(spans, tuple(item.mutations[0].start_pos))]
        for job_id in spared:
            db.set_result(job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                             output=f"equivalent: {REASON}"))
    return len(spared)


def pending_keys(session: ModuleSession) -> dict[str, str]:
    """Pending mutants of the session: key → cosmic-ray job id."""
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(session.db), WorkDB.Mode.open) as db:
        keys = _keys(session.module, db.work_items)
        return {keys[item.job_id]: item.job_id for item in db.pending_work_items}


def _keys(module: str, items: Iterable[Any]) -> dict[str, str]:
    """Job id → mutant key. Two mutants of one operator at one place (NumberReplacer's +1 and
    -1) are told apart by ``#2``, ``#3`` ... after the operator, in cosmic-ray's order."""
    ordered = sorted(items, key=lambda item: (str(item.mutations[0].operator_name),
                                              int(item.mutations[0].occurrence)))
    seen: dict[str, int] = {}
    keys = {}
    for item in ordered:
        base = _record(module, item.mutations[0], PENDING).key
        seen[base] = seen.get(base, 0) + 1
        keys[item.job_id] = base if seen[base] == 1 else f"{base}#{seen[base]}"
    return keys


def choose_sample(keys: Iterable[str], size: int, seed: int) -> set[str]:
    """A fixed, seeded choice: the same keys for the same candidates, size and seed."""
    ordered = sorted(keys)
    return set(random.Random(seed).sample(ordered, min(size, len(ordered))))


def unsampled_keys(session: ModuleSession) -> dict[str, str]:
    """Mutants an earlier ``--sample`` left out: key → cosmic-ray job id."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome

    with use_db(str(session.db), WorkDB.Mode.open) as db:
        keys = _keys(session.module, db.work_items)
        return {keys[job_id]: job_id for job_id, result in db.results
                if result.worker_outcome == WorkerOutcome.SKIPPED
                and result.output == NOT_SAMPLED_OUTPUT}


def reopen(session: ModuleSession, job_ids: Iterable[str]) -> None:
    """Put mutants an earlier sample left out back to pending, so a larger sample can draw them.
    cosmic-ray's WorkDB can set a result but not remove one, hence the table itself."""
    ids = list(job_ids)
    with contextlib.closing(sqlite3.connect(session.db)) as db, db:
        db.executemany("DELETE FROM work_results WHERE job_id = ? AND output = ?",
                       [(job_id, NOT_SAMPLED_OUTPUT) for job_id in ids])


def skip_unsampled(session: ModuleSession, keep: set[str]) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    dropped = [job for key, job in pending_keys(session).items() if key not in keep]
    with use_db(str(session.db), WorkDB.Mode.open) as db:
        for job_id in dropped:
            db.set_result(job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                             output=NOT_SAMPLED_OUTPUT))


def baseline(command: Sequence[str], env: dict[str, str], limit_s: float) -> float:
    """Run the module's selection unmutated; its wall time, or :class:`SessionError` when it
    fails (a kill would prove nothing)."""
    started = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=limit_s, check=False)
    except subprocess.TimeoutExpired:
        raise SessionError(f"the unmutated selection took over {limit_s:.0f} s") from None
    if done.returncode != 0:
        tail = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
        raise SessionError(f"the unmutated selection fails: {tail}")
    return time.monotonic() - started


def execute(session: ModuleSession, env: dict[str, str]) -> None:
    """Run every pending mutant of the session, one at a time (cosmic-ray's local distributor)."""
    _cosmic(["exec", str(session.config), str(session.db)], session, env)


@dataclass(frozen=True)
class Selected:
    """How a coverage-guided session went: mutants run, mutants no run reaches (judged
    survived without a run), and the scenario runs made in all."""

    ran: int
    unreached: int
    scenario_runs: int


def execute_selected(session: ModuleSession, line_map: LineMap, env: dict[str, str], jobs: int,
                     runner: str, factor: float, floor: float) -> Selected:
    """Run every pending mutant of the session against only the scenario runs that execute its
    lines (:mod:`mutation.line_map`), one at a time, with cosmic-ray's own apply-run-restore
    (``mutate_and_test``, what its local distributor calls) and a time limit from those runs'
    baseline. A mutant no run reaches is recorded survived, "no scenario reaches line N".
    cosmic-ray starts the command with this process's environment, so ``env`` (the scratch copy
    first on ``PYTHONPATH``) is this process's for the loop."""
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_db import WorkDB, use_db

    source = session.source.read_text(encoding="utf-8")
    spans = statement_spans(source)
    every = sorted(line_map.lines)
    ran = unreached = made = 0
    with use_db(str(session.db), WorkDB.Mode.open) as db, _environ(env), \
            session.log.open("a", encoding="utf-8") as log:
        keys = _keys(session.module, db.work_items)
        for item in list(db.pending_work_items):
            spec = item.mutations[0]
            lines = mutant_lines(spans, tuple(spec.start_pos), tuple(spec.end_pos))
            runs = with_parity(line_map.reaching(lines), every)
            started = time.monotonic()
            if not runs:
                result = unreached_result(source, spec, session.source)
                unreached += 1
            else:
                command = one_command(commands(runs, every, jobs, runner))
                timeout = line_map.timeout(runs, factor, floor)
                result = mutate_and_test(item.mutations, command, timeout)
                ran += 1
                made += len(runs)
            db.set_result(item.job_id, result)
            log.write(f"{keys[item.job_id]}: {len(runs)} scenario run(s), "
                      f"{_status(result)} in {time.monotonic() - started:.1f} s\n")
            log.flush()
    return Selected(ran=ran, unreached=unreached, scenario_runs=made)


def unreached_result(source: str, spec: Any, path: Path) -> Any:
    """The result of a mutant no run reaches: survived without a run, with its diff; or, when
    cosmic-ray cannot write the mutant at all (its ExceptionReplacer fails on a dotted name in a
    tuple, ``except (httpx.HTTPError, OSError)``), incompetent with that reason, as its own
    ``mutate_and_test`` records a mutant it cannot apply, instead of ending the whole run."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    try:
        operator = get_operator(spec.operator_name)(**(spec.operator_args or {}))
        mutated = mutate_code(source, operator, spec.occurrence)
    except Exception as exc:  # cosmic-ray's own bug, not the bridge's: one mutant, not the run
        return WorkResult(worker_outcome=WorkerOutcome.EXCEPTION,
                          output=f"cosmic-ray could not write this mutant: "
                                 f"{type(exc).__name__}: {exc}")
    return WorkResult(worker_outcome=WorkerOutcome.NORMAL, test_outcome=TestOutcome.SURVIVED,
                      output=f"{NO_REACH} {spec.start_pos[0]}", diff=_diff(source, mutated, path))


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _diff(original: str, mutated: str | None, path: Path) -> str:
    """The diff cosmic-ray records for a mutant it runs, for one judged without a run."""
    if mutated is None:
        return ""
    body = difflib.unified_diff(original.split("\n"), mutated.split("\n"), fromfile=f"a/{path}",
                                tofile=f"b/{path}", lineterm="")
    return "\n".join(["--- mutation diff ---", *body])


def records(session: ModuleSession) -> list[MutantRecord]:
    """Every mutant of the session with its status and its anchor in the session's source."""
    from cosmic_ray.work_db import WorkDB, use_db

    found: list[MutantRecord] = []
    try:
        source = session.source.read_text(encoding="utf-8")
    except OSError:
        source = None
    with use_db(str(session.db), WorkDB.Mode.open) as db:
        results = dict(db.results)
        items = list(db.work_items)
        keys = _keys(session.module, items)
        for item in items:
            result = results.get(item.job_id)
            record = _record(session.module, item.mutations[0], _status(result),
                             (result.diff or "") if result is not None else "")
            output = (result.output or "") if result is not None else ""
            operator = keys[item.job_id].rpartition(":")[2]
            found.append(replace(record, operator=operator,
                                 note=output if output.startswith(NO_REACH) else "",
                                 anchor=_anchor(session.module, source, operator, item)))
    return found


def _anchor(module: str, source: str | None, operator: str, item: Any) -> str:
    """The mutant's anchor, or "" when the source is gone or no longer has its position."""
    if source is None:
        return ""
    spec = item.mutations[0]
    try:
        return str(anchor_of(module, source, operator, tuple(spec.start_pos),
                             tuple(spec.end_pos)))
    except AnchorError:
        return ""


def _status(result: object | None) -> str:
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    if result is None:
        return PENDING
    worker = getattr(result, "worker_outcome", None)
    output = getattr(result, "output", None) or ""
    if worker == WorkerOutcome.SKIPPED:
        return EQUIVALENT if output.startswith("equivalent:") else NOT_SAMPLED
    outcome = getattr(result, "test_outcome", None)
    if worker != WorkerOutcome.NORMAL or outcome == TestOutcome.INCOMPETENT:
        return INCOMPETENT
    if outcome == TestOutcome.SURVIVED:
        return SURVIVED
    return TIMEOUT if output == TIMEOUT_OUTPUT else KILLED


def _record(module: str, spec: object, status: str, diff: str = "") -> MutantRecord:
    line, column = spec.start_pos  # type: ignore[attr-defined]
    operator = str(spec.operator_name).rpartition("/")[2]  # type: ignore[attr-defined]
    return MutantRecord(module, int(line), int(column), operator, status, _relative(diff))


def _relative(diff: str) -> str:
    """Diff headers name the scratch copy; show the path in the checkout instead."""
    marker = "/src/palace_bridge/"
    lines = []
    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ")) and marker in line:
            prefix, _, rest = line.partition(marker)
            line = f"{prefix[:4]}reference/palace_bridge/{rest}"
        lines.append(line)
    return "\n".join(lines)
