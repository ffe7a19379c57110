"""``fidelity --generated N``: generated single-call sessions, real server and fake side by side.

Calls come from :mod:`palace_conformance.fidelity.strategies` (hypothesis, off each tool's
``inputSchema``); each runs in an initialised palace (the script's ``initialise`` writes),
``BATCH`` calls to a session, against both targets at once, and is compared through the same
rules as the script's points. The fixed regression cases (``generated_cases.json``: shrunk
counterexamples of classes once found) are replayed first, as their own points.

A difference is put in a *class*: the tool and the differing JSON paths, list indices
dropped, so a hundred calls that differ the same way read as one line. Each class's first
counterexample is *shrunk*: keys left out and values simplified while the class still shows,
a round of candidates per session, so the report gives a minimal reproducing session (an
initialised palace, then that one call).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from palace_conformance.fidelity.compare import Comparison, compare_records
from palace_conformance.fidelity.normalise import Rule, load_rules
from palace_conformance.fidelity.run import record_both
from palace_conformance.fidelity.script import SCRIPT_FILE, Script, Session, Step
from palace_conformance.fidelity.strategies import draw_calls

CASES_FILE = Path(__file__).with_name("generated_cases.json")
OPEN_FILE = Path(__file__).with_name("generated_open.json")
BATCH = 40
SHRINK_ROUNDS = 10
SHRINK_CLASSES = 12
#: a class names at most this many differing paths
CLASS_PATHS = 3

Call = tuple[str, dict[str, Any]]


@dataclass
class GeneratedResult:
    """What a generated run found: the comparison, each point's call, the classes."""

    comparison: Comparison
    calls: dict[str, Call]
    classes: dict[str, list[str]] = field(default_factory=dict)  # class -> point ids
    shrunk: dict[str, Call] = field(default_factory=dict)  # class -> minimal call
    known_open: list[OpenClass] = field(default_factory=list)

    def open_class(self, name: str) -> OpenClass | None:
        """The known open class that covers this class, or None (a new class)."""
        return next((known for known in self.known_open if known.covers(name)), None)

    def new_classes(self) -> list[str]:
        return [name for name in self.classes if self.open_class(name) is None]

    def rule_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for verdict in self.comparison.verdicts:
            counts.update(verdict.rules)
        return counts

    def lines(self) -> Iterator[str]:
        """Per class: its count, a counterexample's first differing paths and its minimal
        reproducing session; then the totals, the rules that fired and the classes."""
        verdicts = {v.id: v for v in self.comparison.verdicts}
        for name, points in sorted(self.classes.items(), key=lambda item: -len(item[1])):
            known = self.open_class(name)
            status = f"known open: {known.id}" if known else "NEW"
            yield f"CLASS {name} ({len(points)} point(s), e.g. {points[0]}; {status})"
            for path, real, fake in verdicts[points[0]].diff[:4]:
                yield f"    {path}: real {_short(real)} | fake {_short(fake)}"
            tool, arguments = self.shrunk.get(name, self.calls[points[0]])
            yield (f"    reproduce: initialised palace, then tools/call {tool} "
                   f"{json.dumps(arguments, ensure_ascii=False)[:300]}")
        totals = self.comparison.to_json()["totals"]
        yield (f"{totals['points']} points compared, {totals['explained']} explained by rules, "
               f"{totals['differences']} differences in {len(self.classes)} class(es), "
               f"{len(self.new_classes())} of them new")
        counts = self.rule_counts()
        if counts:
            yield "explained by rule: " + ", ".join(f"{rule} {n}" for rule, n
                                                    in sorted(counts.items()))

    def to_json(self) -> dict[str, Any]:
        return {**self.comparison.to_json(), "rules_fired": dict(self.rule_counts()),
                "classes": {name: {"points": points,
                                   "open": (known.id if (known := self.open_class(name))
                                            else None),
                                   "reproduce": list(self.shrunk.get(name,
                                                                     self.calls[points[0]]))}
                            for name, points in self.classes.items()},
                "calls": {point: list(call) for point, call in self.calls.items()}}


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 90 else text[:89] + "…"


@dataclass(frozen=True)
class OpenClass:
    """A class of difference known and not yet fixed in the fake: the tool, a pattern its
    class names match, and why it is left open (``generated_open.json``)."""

    id: str
    tool: str
    match: re.Pattern[str]
    why: str

    def covers(self, name: str) -> bool:
        tool, _, paths = name.partition(": ")
        return (tool == self.tool.removeprefix("mempalace_")
                and self.match.search(paths) is not None)


def load_open(path: Path = OPEN_FILE) -> list[OpenClass]:
    """The known open classes; a class none of them covers is *new*."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return [OpenClass(entry["id"], entry["tool"], re.compile(entry["match"]), entry["why"])
            for entry in data["open"]]


def load_cases(path: Path = CASES_FILE) -> list[dict[str, Any]]:
    """The fixed regression cases: each a shrunk call, the class it once showed and why."""
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return cases


def _initialise_steps(prefix: str) -> list[Step]:
    data = json.loads(SCRIPT_FILE.read_text(encoding="utf-8"))
    steps = []
    for raw in data["initialise"]:
        steps.append(Step(id=f"{prefix}.{raw['id']}", section="setup", action="send",
                          spec=raw["send"]))
    return steps


def sessions_for(calls: list[tuple[str, Call]], prefix: str, batch: int = BATCH) -> Script:
    """Sessions of ``batch`` calls each (point id, call), every one on an initialised palace."""
    sessions = []
    for start in range(0, len(calls), batch):
        name = f"{prefix}-{start // batch:03d}"
        steps = _initialise_steps(name)
        for offset, (point, (tool, arguments)) in enumerate(calls[start:start + batch]):
            spec = {"jsonrpc": "2.0", "id": 2000 + offset, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}}
            steps.append(Step(id=point, section="generated", action="send", spec=spec,
                              timeout_s=60.0))
        sessions.append(Session(id=name, transport="stdio", palace="initialised",
                                steps=tuple(steps)))
    return Script(tuple(sessions))


def class_of(tool: str, diff: list[tuple[str, Any, Any]]) -> str:
    """A difference's class: the tool and its first differing paths, list indices dropped."""
    paths = sorted({re.sub(r"\[\d+\]", "[]", path) for path, _, _ in diff})
    short = tool.removeprefix("mempalace_")
    return f"{short}: {' '.join(paths[:CLASS_PATHS])}" + (" ..." if len(paths) > CLASS_PATHS
                                                         else "")


def simpler(arguments: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Arguments one step simpler: a key left out, or a value made smaller."""
    for key in arguments:
        yield {k: v for k, v in arguments.items() if k != key}
    for key, value in arguments.items():
        for smaller in _smaller(value):
            yield {**arguments, key: smaller}


def _smaller(value: Any) -> Iterator[Any]:
    if isinstance(value, str):
        if len(value) > 8:
            yield value[:8]
        if value.strip() != value and value.strip():
            yield value.strip()
        if value not in ("", "x"):
            yield "x"
    elif isinstance(value, list) and value:
        yield value[:1] if len(value) > 1 else []
        for index, item in enumerate(value):
            for smaller in _smaller(item):
                yield [*value[:index], smaller, *value[index + 1:]]
    elif isinstance(value, dict) and value:
        yield {}
        for key in value:
            yield {k: v for k, v in value.items() if k != key}
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and value not in (0, 1):
        yield 1


def _record(calls: list[tuple[str, Call]], prefix: str, real_python: str | None, root: Path,
            log: TextIO, jobs: int, rules: list[Rule]) -> Comparison:
    script = sessions_for(calls, prefix)
    real, fake = record_both(script, real_python, root / prefix, log, jobs)
    return compare_records(real, fake, rules, {point for point, _ in calls})


def shrink(found: dict[str, Call], real_python: str | None, root: Path, log: TextIO,
           jobs: int, rules: list[Rule]) -> dict[str, Call]:
    """Each class's counterexample made minimal: per round, every one-step simplification of
    every class's current call runs (one batch of sessions for all classes); the first that
    still shows its class becomes the new call. Stops when no class gets simpler."""
    current = dict(found)
    for round_no in range(SHRINK_ROUNDS):
        candidates: list[tuple[str, Call]] = []
        owners: dict[str, str] = {}
        for index, (name, (tool, arguments)) in enumerate(sorted(current.items())):
            for offset, smaller in enumerate(simpler(arguments)):
                point = f"shrink.{round_no}.{index}.{offset}"
                candidates.append((point, (tool, smaller)))
                owners[point] = name
        if not candidates:
            break
        comparison = _record(candidates, f"shrink{round_no}", real_python, root, log, jobs,
                             rules)
        improved: set[str] = set()
        calls = dict(candidates)
        for verdict in comparison.differences:
            name = owners[verdict.id]
            tool = calls[verdict.id][0]
            if name not in improved and class_of(tool, verdict.diff) == name:
                current[name] = calls[verdict.id]
                improved.add(name)
        if not improved:
            break
    return current


def run_generated(real_python: str | None, count: int, seed: int, *,
                  json_out: str | None = None, keep: str | None = None, jobs: int = 2,
                  shrink_classes: int = SHRINK_CLASSES, out: TextIO = sys.stdout,
                  log: TextIO = sys.stderr) -> GeneratedResult:
    """The regression cases, then ``count`` generated calls from ``seed``, against both
    targets; every difference classed and each class's counterexample shrunk."""
    rules = load_rules()
    calls: list[tuple[str, Call]] = [
        (f"gen.case.{case['id']}", (case["tool"], case["arguments"])) for case in load_cases()]
    calls += [(f"gen.{seed}.{index:05d}.{tool.removeprefix('mempalace_')}", (tool, arguments))
              for index, (tool, arguments) in enumerate(draw_calls(count, seed))]
    print(f"fidelity --generated: {len(calls)} call(s) (seed {seed}), "
          f"{(len(calls) + BATCH - 1) // BATCH} session(s) per target", file=log, flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="palace-fidelity-gen-") as scratch:
        root = Path(keep).absolute() if keep else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        comparison = _record(calls, "gen", real_python, root, log, jobs, rules)
        by_point = dict(calls)
        result = GeneratedResult(comparison, by_point, known_open=load_open())
        for verdict in comparison.differences:
            tool = by_point[verdict.id][0]
            result.classes.setdefault(class_of(tool, verdict.diff), []).append(verdict.id)
        firsts = {name: by_point[points[0]] for name, points
                  in sorted(result.classes.items(), key=lambda item: -len(item[1]))
                  [:shrink_classes]}
        if firsts:
            result.shrunk = shrink(firsts, real_python, root, log, jobs, rules)
    for line in result.lines():
        print(line, file=out)
    print(f"(generated run, {time.monotonic() - started:.1f} s wall time)", file=log)
    if json_out:
        Path(json_out).write_text(json.dumps({**result.to_json(), "seed": seed,
                                              "count": count}, indent=1, ensure_ascii=False),
                                  encoding="utf-8")
    return result


