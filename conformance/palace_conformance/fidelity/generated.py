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
from palace_conformance.fidelity.http_requests import TOKEN, draw_http
from palace_conformance.fidelity.normalise import Rule, load_rules
from palace_conformance.fidelity.run import record_both
from palace_conformance.fidelity.script import SCRIPT_FILE, Script, Session, Step
from palace_conformance.fidelity.sequences import (
    Sequence,
    draw_sequences,
    load_sequences,
    shorter,
)
from palace_conformance.fidelity.strategies import draw_calls

CASES_FILE = Path(__file__).with_name("generated_cases.json")
OPEN_FILE = Path(__file__).with_name("generated_open.json")
BATCH = 40
SHRINK_ROUNDS = 10
SHRINK_CLASSES = 12
#: a sequence's shrinking runs a session per candidate: fewer classes, fewer rounds
SHRINK_SEQUENCE_CLASSES = 6
SHRINK_SEQUENCE_ROUNDS = 6
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
    #: a sequence's point -> (its sequence, the step's label); shrunk: class -> minimal one
    steps: dict[str, tuple[Sequence, str]] = field(default_factory=dict)
    shrunk_sequences: dict[str, Sequence] = field(default_factory=dict)
    #: an HTTP request's point -> the request (differing ones)
    http: dict[str, dict[str, Any]] = field(default_factory=dict)

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
            if points[0] in self.http:
                yield (f"    reproduce: a fresh palace's HTTP server, then "
                       f"{json.dumps(self.http[points[0]], ensure_ascii=False)[:300]}")
                continue
            if points[0] in self.steps:
                seq = self.steps[points[0]][0]
                seq = self.shrunk_sequences.get(name, seq)
                yield (f"    reproduce: {seq.start} palace, then {len(seq.steps)} call(s), the "
                       f"last one differing: " + "; ".join(
                           f"{step.tool.removeprefix('mempalace_')} "
                           f"{json.dumps(step.arguments, ensure_ascii=False)[:120]}"
                           for step in seq.steps))
                continue
            tool, arguments = self.shrunk.get(name, self.calls[points[0]])
            yield (f"    reproduce: initialised palace, then tools/call {tool} "
                   f"{json.dumps(arguments, ensure_ascii=False)[:300]}")
        totals = self.comparison.to_json()["totals"]
        sequences = {id(seq) for seq, _ in self.steps.values()}
        if sequences:
            yield (f"{len(sequences)} stateful sequence(s), {len(self.steps)} of the points "
                   "their steps")
        yield (f"{totals['points']} points compared, {totals['explained']} explained by rules, "
               f"{totals['differences']} differences in {len(self.classes)} class(es), "
               f"{len(self.new_classes())} of them new")
        counts = self.rule_counts()
        if counts:
            yield "explained by rule: " + ", ".join(f"{rule} {n}" for rule, n
                                                    in sorted(counts.items()))

    def reproduce(self, name: str) -> Any:
        """A class's minimal reproduction: a call, or a sequence (its start and steps)."""
        first = self.classes[name][0]
        if first in self.http:
            return self.http[first]
        if first in self.steps:
            return self.shrunk_sequences.get(name, self.steps[first][0]).to_json()
        return list(self.shrunk.get(name, self.calls[first]))

    def to_json(self) -> dict[str, Any]:
        return {**self.comparison.to_json(), "rules_fired": dict(self.rule_counts()),
                "classes": {name: {"points": points,
                                   "open": (known.id if (known := self.open_class(name))
                                            else None),
                                   "reproduce": self.reproduce(name)}
                            for name, points in self.classes.items()},
                "calls": {point: list(call) for point, call in self.calls.items()},
                "sequence_steps": {point: [label, seq.to_json()]
                                   for point, (seq, label) in self.steps.items()}}


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


def sequence_sessions(sequences: list[tuple[str, Sequence]]) -> tuple[
        list[Session], dict[str, tuple[Sequence, str]]]:
    """One session per sequence (its own world), named by its prefix: the start state's
    steps (the script's ``initialise`` writes; a first search for a half-made palace), then
    the sequence's calls, each a point ``PREFIX.TOOL.LABEL``; and point -> (sequence, label)."""
    sessions, steps_of = [], {}
    for prefix, seq in sequences:
        steps = _initialise_steps(prefix) if seq.start == "initialised" else []
        if seq.start == "half-made":  # 3.11's search makes the palace's directory
            steps.append(Step(id=f"{prefix}.setup.half-make", section="setup", action="send",
                              spec={"jsonrpc": "2.0", "id": 999, "method": "tools/call",
                                    "params": {"name": "mempalace_search",
                                               "arguments": {"query": "x"}}}))
        for offset, step in enumerate(seq.steps):
            point = f"{prefix}.{step.tool.removeprefix('mempalace_')}.{step.label}"
            spec = {"jsonrpc": "2.0", "id": 3000 + offset, "method": "tools/call",
                    "params": {"name": step.tool, "arguments": step.arguments}}
            steps.append(Step(id=point, section="sequence", action="send", spec=spec,
                              timeout_s=60.0))
            steps_of[point] = (seq, step.label)
        sessions.append(Session(id=prefix, transport="stdio", palace=seq.start,
                                steps=tuple(steps)))
    return sessions, steps_of


#: an HTTP session's requests: (session prefix, whether its server wants a token, requests)
HttpBatch = tuple[str, bool, list[dict[str, Any]]]
HTTP_BATCH = 20


def http_sessions(batches: list[HttpBatch]) -> tuple[list[Session], set[str]]:
    """One HTTP session per batch (its own world and server, a token when the batch says so),
    each request a point ``PREFIX.NNN.http``; and the point ids."""
    sessions, points = [], set()
    for prefix, token, requests in batches:
        steps = []
        for index, spec in enumerate(requests):
            point = f"{prefix}.{index:03d}.http"
            steps.append(Step(id=point, section="http", action="http", spec=spec,
                              timeout_s=30.0))
            points.add(point)
        sessions.append(Session(id=prefix, transport="http", palace="fresh", steps=tuple(steps),
                                token=TOKEN if token else None))
    return sessions, points


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
            log: TextIO, jobs: int, rules: list[Rule],
            sequences: list[tuple[str, Sequence]] | None = None,
            http: list[HttpBatch] | None = None) -> Comparison:
    script = sessions_for(calls, prefix)
    extra, steps_of = sequence_sessions(sequences or [])
    served, requested = http_sessions(http or [])
    script = Script(script.sessions + tuple(extra) + tuple(served))
    real, fake = record_both(script, real_python, root / prefix, log, jobs)
    return compare_records(real, fake, rules,
                           {point for point, _ in calls} | set(steps_of) | requested)


def shrink_sequences(found: dict[str, tuple[Sequence, str]], real_python: str | None,
                     root: Path, log: TextIO, jobs: int,
                     rules: list[Rule]) -> dict[str, Sequence]:
    """Each class's sequence made minimal: per round, every one-step-shorter sequence of
    every class (:func:`shorter`) runs; the first whose kept step still shows its class
    becomes the new sequence. Stops when no class gets shorter."""
    current = {name: seq for name, (seq, _) in found.items()}
    labels = {name: label for name, (_, label) in found.items()}
    for round_no in range(SHRINK_SEQUENCE_ROUNDS):
        candidates: list[tuple[str, Sequence]] = []
        owners: dict[str, tuple[str, Sequence]] = {}
        for index, (name, seq) in enumerate(sorted(current.items())):
            for offset, smaller in enumerate(shorter(seq, labels[name])):
                prefix = f"shrinkseq{round_no}-{index:02d}-{offset:02d}"
                candidates.append((prefix, smaller))
                tool = next(s.tool for s in smaller.steps if s.label == labels[name])
                point = f"{prefix}.{tool.removeprefix('mempalace_')}.{labels[name]}"
                owners[point] = (name, smaller)
        if not candidates:
            break
        comparison = _record([], f"shrinkseq{round_no}", real_python, root, log, jobs, rules,
                             candidates)
        improved: set[str] = set()
        for verdict in sorted(comparison.differences, key=lambda v: v.id):
            if verdict.id not in owners:
                continue
            name, smaller = owners[verdict.id]
            tool = "mempalace_" + verdict.id.split(".")[-2]
            if name not in improved and class_of(tool, verdict.diff) == name:
                current[name] = smaller
                improved.add(name)
        if not improved:
            break
    return current


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
                  shrink_classes: int = SHRINK_CLASSES, sequences: int = 0, http: int = 0,
                  out: TextIO = sys.stdout, log: TextIO = sys.stderr) -> GeneratedResult:
    """The regression cases and sequences, then ``count`` generated calls and ``sequences``
    stateful sequences from ``seed``, against both targets; every difference classed and
    each class's counterexample shrunk."""
    rules = load_rules()
    calls: list[tuple[str, Call]] = [
        (f"gen.case.{case['id']}", (case["tool"], case["arguments"])) for case in load_cases()]
    calls += [(f"gen.{seed}.{index:05d}.{tool.removeprefix('mempalace_')}", (tool, arguments))
              for index, (tool, arguments) in enumerate(draw_calls(count, seed))]
    seqs: list[tuple[str, Sequence]] = [
        (f"seq.case.{case['id']}", Sequence.from_json(case)) for case in load_sequences()]
    seqs += [(f"seq.{seed}.{index:05d}", seq)
             for index, seq in enumerate(draw_sequences(sequences, seed))]
    batches: list[HttpBatch] = [(f"http.{seed}.{index:03d}", token, requests) for index,
                                (token, requests) in enumerate(draw_http(http, seed, HTTP_BATCH))]
    print(f"fidelity --generated: {len(calls)} call(s), {len(seqs)} sequence(s) and {http} "
          f"HTTP request(s) (seed {seed}), "
          f"{(len(calls) + BATCH - 1) // BATCH + len(seqs) + len(batches)} session(s) per "
          "target", file=log, flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="palace-fidelity-gen-") as scratch:
        root = Path(keep).absolute() if keep else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        comparison = _record(calls, "gen", real_python, root, log, jobs, rules, seqs, batches)
        by_point = dict(calls)
        requests = {f"{prefix}.{index:03d}.http": spec for prefix, _, specs in batches
                    for index, spec in enumerate(specs)}
        _, steps_of = sequence_sessions(seqs)
        result = GeneratedResult(comparison, by_point, known_open=load_open(), steps=steps_of)
        for verdict in comparison.differences:
            if verdict.id in requests:
                result.http[verdict.id] = requests[verdict.id]
                tool = "http"
            else:
                tool = (by_point[verdict.id][0] if verdict.id in by_point
                        else "mempalace_" + verdict.id.split(".")[-2])
            result.classes.setdefault(class_of(tool, verdict.diff), []).append(verdict.id)
        ranked = sorted(result.classes.items(), key=lambda item: -len(item[1]))
        firsts = {name: by_point[points[0]] for name, points in ranked[:shrink_classes]
                  if points[0] in by_point}
        if firsts:
            result.shrunk = shrink(firsts, real_python, root, log, jobs, rules)
        seq_firsts = dict([(name, steps_of[points[0]]) for name, points in ranked
                           if points[0] in steps_of][:min(shrink_classes,
                                                          SHRINK_SEQUENCE_CLASSES)])
        if seq_firsts:
            result.shrunk_sequences = shrink_sequences(seq_firsts, real_python, root, log,
                                                       jobs, rules)
    for line in result.lines():
        print(line, file=out)
    print(f"(generated run, {time.monotonic() - started:.1f} s wall time)", file=log)
    if json_out:
        Path(json_out).write_text(json.dumps({**result.to_json(), "seed": seed,
                                              "count": count, "sequences": sequences,
                                              "http": http},
                                             indent=1, ensure_ascii=False),
                                  encoding="utf-8")
    return result


