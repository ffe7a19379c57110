"""Coverage-guided selection: which scenario runs execute which lines of a module.

A mutant can change a run's outcome only if the run executes the mutated code, so a mutant is
judged by the runs (scenario and transport) of its module's selection that execute one of its
statements' lines, unmutated; a mutant no run reaches survives without a run. The map is measured
once per module (:mod:`mutation.measure`) and kept in the work directory under a fingerprint of
what decides it (the bridge's sources, the selection and its scenario files), so a resumed run
reuses it and an edit invalidates it. Pure code: tested without running a scenario.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRANSPORTS = ("stdio", "http")
NO_REACH = "no scenario reaches line"  # the output of a mutant judged without a run
FORMAT = 2


@dataclass(frozen=True, order=True)
class ScenarioRun:
    """One scenario on one transport: the unit the map measures and a mutant's command runs."""

    scenario: str
    transport: str

    @property
    def key(self) -> str:
        return f"{self.scenario}@{self.transport}"

    @classmethod
    def from_key(cls, key: str) -> ScenarioRun:
        scenario, _, transport = key.rpartition("@")
        if not scenario or transport not in TRANSPORTS:
            raise ValueError(f"not SCENARIO@TRANSPORT: {key!r}")
        return cls(scenario, transport)


def scenario_runs(scenarios: Iterable[Any], selected: Iterable[str]) -> list[ScenarioRun]:
    """Every run ``--transport both`` makes of the selected scenarios: each on its transports."""
    wanted = set(selected)
    return sorted(ScenarioRun(s.id, t) for s in scenarios if s.id in wanted
                  for t in s.transports if t in TRANSPORTS)


def fingerprint(bridge_dir: Path, scenario_files: Iterable[Path], selected: Sequence[str]) -> str:
    """A hash of what decides the map: every source of the bridge (a caller's edit moves which
    lines of this module run, not only an edit of the module), the selection's ids and their
    scenario files."""
    digest = hashlib.sha256()
    for path in sorted(bridge_dir.rglob("*.py")):
        digest.update(path.relative_to(bridge_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    digest.update("\n".join(sorted(selected)).encode() + b"\0")
    for path in sorted(set(scenario_files)):
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def parts(bridge_dir: Path, scenario_files: Iterable[Path], selected: Sequence[str]
          ) -> dict[str, str]:
    """What :func:`fingerprint` hashes, part by part, to keep with the map: a SHA-256 of each
    bridge source (``bridge/REL``), of each scenario file (``scenario/NAME``) and of the
    selection's ids (``selection``), so a stale map can say what changed since."""
    found = {f"bridge/{path.relative_to(bridge_dir).as_posix()}":
             hashlib.sha256(path.read_bytes()).hexdigest()
             for path in sorted(bridge_dir.rglob("*.py"))}
    found |= {f"scenario/{path.name}": hashlib.sha256(path.read_bytes()).hexdigest()
              for path in sorted(set(scenario_files))}
    found["selection"] = hashlib.sha256("\n".join(sorted(selected)).encode()).hexdigest()
    return found


def _names(keys: Iterable[str], prefix: str) -> str:
    names = sorted(key.removeprefix(prefix) for key in keys)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{len(names)} {prefix.rstrip('/')} file(s) ({shown})"


def changes(saved: Mapping[str, str], now: Mapping[str, str]) -> str:
    """What differs between two :func:`parts`, in a few words: the scenario files and bridge
    sources changed, added or gone (three named each), and whether the selection moved."""
    moved = {key for key in {*saved, *now} if saved.get(key) != now.get(key)}
    said = [_names([k for k in moved if k.startswith(prefix)], prefix)
            for prefix in ("scenario/", "bridge/") if any(k.startswith(prefix) for k in moved)]
    if "selection" in moved:
        said.append("the selection's scenario ids")
    return ", ".join(said) + " changed" if said else "nothing recorded changed"


def stale(path: Path, expected_fingerprint: str, now: Mapping[str, str]) -> str | None:
    """Why the map saved at ``path`` cannot be reused, in one line, or None when there is none
    or it holds: the scenario files, bridge sources or selection that changed since it was
    measured (a map saved before its parts were kept says only that something did)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "it cannot be read"
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return "it is of another format"
    if data.get("fingerprint") == expected_fingerprint:
        return None
    saved = data.get("parts")
    if not isinstance(saved, dict) or not saved:
        return ("the bridge's sources, the selection or its scenario files changed since it "
                "was measured")
    return changes(saved, now)


@dataclass(frozen=True)
class LineMap:
    """What the measurement found for one module: the lines each run executed, each run's wall
    time unmutated under coverage, the wall time of the whole measurement, and ``module_s``, the
    module's whole selection run unmutated without coverage as one command (the first design's
    baseline)."""

    fingerprint: str
    lines: Mapping[ScenarioRun, frozenset[int]]
    seconds: Mapping[ScenarioRun, float]
    wall_s: float
    module_s: float = 0.0
    #: :func:`parts` when measured, so a stale map says what changed (:func:`stale`)
    parts: Mapping[str, str] = field(default_factory=dict)

    def reaching(self, lines: Iterable[int]) -> list[ScenarioRun]:
        """The runs that executed any of ``lines``, sorted."""
        wanted = set(lines)
        return sorted(run for run, executed in self.lines.items() if wanted & executed)

    def timeout(self, runs: Iterable[ScenarioRun], factor: float, floor: float) -> float:
        """A mutant's time limit: ``factor`` times the smaller of two upper bounds of its runs
        unmutated (their measured times added up, each with a runner start of its own and
        coverage's overhead; the whole selection in one command), never under ``floor``. So it
        is never looser than ``--selection module``'s limit, and tighter for a small selection."""
        alone = sum(self.seconds.get(run, 0.0) for run in runs)
        return max(floor, factor * min(alone, self.module_s))

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "fingerprint": self.fingerprint, "wall_s": round(self.wall_s, 2),
                "module_s": round(self.module_s, 2),
                "runs": {run.key: {"seconds": round(self.seconds.get(run, 0.0), 2),
                                   "lines": sorted(self.lines[run])}
                         for run in sorted(self.lines)},
                "parts": dict(sorted(self.parts.items()))}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LineMap:
        runs = {ScenarioRun.from_key(key): value for key, value in data["runs"].items()}
        return cls(fingerprint=str(data["fingerprint"]), wall_s=float(data["wall_s"]),
                   module_s=float(data["module_s"]),
                   lines={run: frozenset(int(n) for n in v["lines"]) for run, v in runs.items()},
                   seconds={run: float(v["seconds"]) for run, v in runs.items()},
                   parts={str(k): str(v) for k, v in dict(data.get("parts") or {}).items()})

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")


def load(path: Path, expected_fingerprint: str) -> LineMap | None:
    """The saved map, or None when there is none, it cannot be read, or its fingerprint differs
    (the bridge or the selection changed since: measure again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or data.get("fingerprint") != expected_fingerprint:
            return None
        return LineMap.from_json(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def statement_spans(source: str) -> list[tuple[int, int]]:
    """(first, last) line of each statement's own code: a simple statement whole, a compound
    one (def, class, if, for, while, with, try, except) from its first decorator to the line
    before its body. Python's line events (and so coverage) may name any line of a statement
    that spans several, so a mutant's line stands for its statement's span."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt | ast.ExceptHandler | ast.match_case):
            continue
        lineno = getattr(node, "lineno", None) or node.pattern.lineno  # type: ignore[union-attr]
        first = min([lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        body = getattr(node, "body", None)
        if isinstance(body, list) and body:
            last = max(lineno, body[0].lineno - 1)
        else:
            last = node.end_lineno or lineno  # type: ignore[union-attr]
        spans.append((first, last))
    return spans


def mutant_lines(spans: Iterable[tuple[int, int]], start: tuple[int, int],
                 end: tuple[int, int]) -> set[int]:
    """The lines whose execution shows the mutated code ran: the spans of the statements that
    overlap the mutant's text (``start`` to ``end``, cosmic-ray's (line, column) positions, the
    end exclusive), or the mutant's own lines when no statement does."""
    first = start[0]
    last = max(first, end[0] if end[1] > 0 else end[0] - 1)
    found: set[int] = set()
    for low, high in spans:
        if low <= last and first <= high:
            found.update(range(low, high + 1))
    return found or set(range(first, last + 1))


def with_parity(runs: Iterable[ScenarioRun], every: Iterable[ScenarioRun]) -> list[ScenarioRun]:
    """``runs`` and, for each of their scenarios, its runs on its other transports: a scenario
    that runs on both is judged on both at once, so its parity comparison (the agent sees the
    same on stdio and HTTP) stays an oracle, as in ``--selection module``. A mutant that only
    one transport executes can still change what that transport shows next to the other."""
    scenarios = {run.scenario for run in runs}
    return sorted({*runs, *(run for run in every if run.scenario in scenarios)})


def commands(runs: Iterable[ScenarioRun], every: Iterable[ScenarioRun], jobs: int,
             runner: str) -> list[list[str]]:
    """``palace-conformance run`` invocations that make exactly ``runs``: the scenarios wanted
    on all the transports they run on in one ``--transport both``, the others per transport."""
    wanted = set(runs)
    transports: dict[str, set[str]] = {}
    for run in every:
        transports.setdefault(run.scenario, set()).add(run.transport)
    whole: list[str] = []
    per: dict[str, list[str]] = {t: [] for t in TRANSPORTS}
    for scenario in sorted({run.scenario for run in wanted}):
        chosen = {run.transport for run in wanted if run.scenario == scenario}
        if chosen >= transports.get(scenario, chosen):
            whole.append(scenario)
        else:
            for transport in sorted(chosen):
                per[transport].append(scenario)
    found = []
    for transport, scenarios in [("both", whole), *per.items()]:
        if scenarios:
            argv = [runner, "run", "--bridge", "reference", "--transport", transport,
                    "--jobs", str(jobs)]
            for scenario in scenarios:
                argv += ["--select", scenario]
            found.append(argv)
    return found


def one_command(invocations: Sequence[Sequence[str]]) -> str:
    """One command line for cosmic-ray (it splits it with shlex): the invocation itself, or
    several joined by ``&&`` under ``sh -c`` (a first failure ends it; a timeout kills the
    group)."""
    if len(invocations) == 1:
        return shlex.join(invocations[0])
    return shlex.join(["sh", "-c", " && ".join(shlex.join(argv) for argv in invocations)])
