"""Mutation scores per module and per behaviour area, survivors with their triage, as JSON and
Markdown. Works on plain :class:`MutantRecord` values, so it is tested without cosmic-ray."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mutation.anchors import Anchor, AnchorError, resolve

KILLED, SURVIVED, TIMEOUT, INCOMPETENT = "killed", "survived", "timeout", "incompetent"
EQUIVALENT, NOT_SAMPLED, PENDING = "equivalent", "not_sampled", "pending"
STATUSES = (KILLED, TIMEOUT, SURVIVED, INCOMPETENT, EQUIVALENT, NOT_SAMPLED, PENDING)
VERDICT_EQUIVALENT, VERDICT_OPEN, VERDICT_KILLED = "equivalent", "not yet killed", "killed since"
VERDICT_CHOICE = "reference choice"
VERDICTS = (VERDICT_EQUIVALENT, VERDICT_OPEN, VERDICT_KILLED, VERDICT_CHOICE)
TRIAGE_PATH = Path(__file__).with_name("triage.json")
REPO_ROOT = Path(__file__).resolve().parent.parent
Z_95 = 1.6449  # one-sided 95 %: the normal quantile the Wilson lower bound uses


def wilson_lower(p: float, n: int) -> float:
    """The one-sided 95 % Wilson lower bound of a proportion ``p`` of ``n`` (n > 0) draws."""
    z2 = Z_95 * Z_95
    spread = Z_95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (p + z2 / (2 * n) - spread) / (1 + z2 / n)


class TriageError(Exception):
    """The triage file cannot be read or an entry is malformed; one line."""


@dataclass(frozen=True)
class MutantRecord:
    """One mutant and what became of it. ``module`` is relative to ``palace_bridge/``."""

    module: str
    line: int
    column: int
    operator: str
    status: str
    diff: str = ""
    note: str = ""  # why it was judged without a run ("no scenario reaches line N"), if it was
    anchor: str = ""  # MODULE::SCOPE::OPERATOR::TEXT (mutation/anchors.py), "" if unknown

    @property
    def key(self) -> str:
        """The mutant in its session: module, position, operator (moves with the lines)."""
        return f"{self.module}:{self.line}:{self.column}:{self.operator}"

    @property
    def name(self) -> str:
        """What the report and the triage file call it: the anchor, stable across edits
        outside its function (the session key when the anchor could not be made)."""
        return self.anchor or self.key


@dataclass(frozen=True)
class Verdict:
    """A survivor's triage: ``equivalent`` (with the reason), ``not yet killed`` (with the
    behaviour ID whose scenarios should catch it), ``killed since`` (with the scenario written
    after the run that kills it, and in ``reason`` how that was seen: the mutant applied by hand,
    the scenario run, failing), or ``reference choice``: the mutant changes only what no rule
    fixes and docs/choices.md leaves to each bridge (a bound of the reference's own), so no
    scenario may pin it; ``test`` names the reference's unit test that kills it instead
    (``tests/...py::test_name``). A later run that kills it makes the entry stale."""

    mutant: str
    verdict: str
    reason: str
    behaviour: str = ""
    scenario: str = ""
    test: str = ""


def load_triage(path: Path = TRIAGE_PATH, known: Iterable[str] | None = None,
                scenarios: Iterable[str] | None = None,
                tests_root: Path | None = None,
                bridge_dir: Path | None = None) -> dict[str, Verdict]:
    """The checked-in triage, by mutant anchor; :class:`TriageError` on a malformed entry.
    ``known`` (behaviour IDs) and ``scenarios`` (scenario IDs), when given, are what entries
    may name; ``tests_root``, when given, is the checkout a ``reference choice``'s test must be
    found in; ``bridge_dir``, when given, the sources every anchor must point into, once
    (stale or ambiguous anchors are refused)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise TriageError(f"cannot read the triage file {path}: {exc}") from None
    known_ids = set(known) if known is not None else None
    scenario_ids = set(scenarios) if scenarios is not None else None
    verdicts: dict[str, Verdict] = {}
    for index, entry in enumerate(data.get("survivors", [])):
        where = f"{path.name} survivors[{index}]"
        verdict = Verdict(str(entry.get("mutant", "")), str(entry.get("verdict", "")),
                          str(entry.get("reason", "")), str(entry.get("behaviour", "")),
                          str(entry.get("scenario", "")), str(entry.get("test", "")))
        try:
            anchor = Anchor.parse(verdict.mutant)
        except AnchorError as exc:
            raise TriageError(f"{where}: 'mutant' {exc}") from None
        if bridge_dir is not None:
            _check_anchor(where, anchor, bridge_dir)
        if verdict.verdict not in VERDICTS:
            raise TriageError(f"{where}: 'verdict' must be one of "
                              + ", ".join(repr(v) for v in VERDICTS))
        if not verdict.reason.strip():
            raise TriageError(f"{where}: give a 'reason'")
        if verdict.verdict == VERDICT_OPEN and (
                not verdict.behaviour or (known_ids is not None
                                          and verdict.behaviour not in known_ids)):
            raise TriageError(f"{where}: a 'not yet killed' survivor names the known "
                              "behaviour ID that should catch it in 'behaviour'")
        if verdict.verdict == VERDICT_KILLED and (
                not verdict.scenario or (scenario_ids is not None
                                         and verdict.scenario not in scenario_ids)):
            raise TriageError(f"{where}: a 'killed since' survivor names the shipped scenario "
                              "that now kills it in 'scenario'")
        if verdict.verdict == VERDICT_CHOICE:
            _check_test(where, verdict.test, tests_root)
        if verdict.mutant in verdicts:
            raise TriageError(f"{where}: {verdict.mutant} is triaged twice")
        verdicts[verdict.mutant] = verdict
    return verdicts


def _check_anchor(where: str, anchor: Anchor, bridge_dir: Path) -> None:
    """The anchor names one place of its module's current source."""
    try:
        source = (bridge_dir / anchor.module).read_text(encoding="utf-8")
    except OSError:
        raise TriageError(f"{where}: stale: {anchor.module} is not a module of "
                          f"{bridge_dir.name}/ now") from None
    try:
        resolve(anchor, source)
    except AnchorError as exc:
        raise TriageError(f"{where}: {exc}") from None


def _check_test(where: str, test: str, root: Path | None) -> None:
    """A ``reference choice`` names ``tests/FILE.py::test_name``, a test function that exists."""
    path, _, name = test.partition("::")
    if not (path.startswith("tests/") and path.endswith(".py") and name.startswith("test_")):
        raise TriageError(f"{where}: a 'reference choice' survivor names the unit test that "
                          "kills it in 'test', as tests/FILE.py::test_name")
    if root is None:
        return
    try:
        source = (root / path).read_text(encoding="utf-8")
    except OSError:
        raise TriageError(f"{where}: the test file {path} does not exist") from None
    if f"def {name}(" not in source:
        raise TriageError(f"{where}: {path} has no test named {name}")


@dataclass
class Tally:
    """Counts by status; the score is killed (timeouts and survivors a later scenario kills
    included) over killed plus survivors, leaving out survivors triaged equivalent and those
    triaged a reference choice (the catalogue must not judge them; counted apart)."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    equivalent_survivors: int = 0
    killed_since: int = 0
    reference_choices: int = 0

    def add(self, record: MutantRecord, verdict: str | None) -> None:
        self.counts[record.status] += 1
        if record.status == SURVIVED and verdict == VERDICT_EQUIVALENT:
            self.equivalent_survivors += 1
        if record.status == SURVIVED and verdict == VERDICT_KILLED:
            self.killed_since += 1
        if record.status == SURVIVED and verdict == VERDICT_CHOICE:
            self.reference_choices += 1

    @property
    def run(self) -> int:
        return sum(self.counts[s] for s in (KILLED, TIMEOUT, SURVIVED, INCOMPETENT))

    @property
    def score(self) -> float | None:
        """Killed share of the non-equivalent mutants that ran; None when none ran."""
        ran = self.counts[KILLED] + self.counts[TIMEOUT]
        judged = (ran + self.counts[SURVIVED] - self.equivalent_survivors
                  - self.reference_choices)
        return (ran + self.killed_since) / judged if judged else None

    @property
    def judged(self) -> int:
        """The mutants run that count in the score: neither equivalent nor a reference choice."""
        ran = self.counts[KILLED] + self.counts[TIMEOUT]
        return ran + self.counts[SURVIVED] - self.equivalent_survivors - self.reference_choices

    @property
    def size(self) -> float:
        """How many of the module's mutants would count in the score were all run: the share
        of the run ones that count, over every mutant the sample drew from."""
        run = self.counts[KILLED] + self.counts[TIMEOUT] + self.counts[SURVIVED]
        whole = run + self.counts[NOT_SAMPLED] + self.counts[PENDING]
        return whole * self.judged / run if run else 0.0

    @property
    def lower_bound(self) -> float | None:
        """Where only some mutants ran (a ``--sample``, an unfinished run), the score is an
        estimate: its one-sided 95 % Wilson lower bound, the value the whole would score at
        least, 19 times in 20, were the mutants run a uniform draw (a seeded sample is; an
        unfinished run, cut in cosmic-ray's order, only roughly). None when every mutant ran
        (the score is exact) or none did."""
        if not (self.counts[NOT_SAMPLED] or self.counts[PENDING]):
            return None
        n, score = self.judged, self.score
        if not n or score is None:
            return None
        return wilson_lower(score, n)

    def to_json(self, lower: float | None = None) -> dict[str, Any]:
        score = self.score
        return {**self.counts, "equivalent_survivors": self.equivalent_survivors,
                "killed_since": self.killed_since, "reference_choices": self.reference_choices,
                "score": None if score is None else round(score, 4),
                **({} if lower is None else {"score_lower_95": round(lower, 4)})}


def pooled_bound(modules: Iterable[Tally]) -> float | None:
    """A lower bound for several modules of which some ran only in part: each such module at its
    own 95 % bound, each whole one at its score, weighted by :attr:`Tally.size`. Conservative
    (every part-run module at its worst at once, which is rarer than 1 in 20), not a joint 95 %
    bound; None when every module ran whole."""
    tallies = [t for t in modules if t.judged]
    if all(t.lower_bound is None for t in tallies):
        return None
    weight = sum(t.size for t in tallies)
    return sum(t.size * (t.lower_bound if t.lower_bound is not None else t.score or 0.0)
               for t in tallies) / weight


@dataclass
class Report:
    """Everything a run found; ``areas`` maps a module to the behaviour areas it implements."""

    records: list[MutantRecord]
    areas: Mapping[str, Sequence[str]]
    triage: Mapping[str, Verdict]
    runs: list[dict[str, Any]] = field(default_factory=list)  # per-module run facts

    def _tally(self, records: Iterable[MutantRecord]) -> Tally:
        tally = Tally()
        for record in records:
            verdict = self.triage.get(record.name)
            tally.add(record, None if verdict is None else verdict.verdict)
        return tally

    def by_module(self) -> dict[str, Tally]:
        modules = sorted({r.module for r in self.records})
        return {m: self._tally(r for r in self.records if r.module == m) for m in modules}

    def by_area(self) -> dict[str, Tally]:
        """A mutant counts in every area its module implements."""
        names = sorted({a for r in self.records for a in self.areas.get(r.module, ())})
        return {a: self._tally(r for r in self.records if a in self.areas.get(r.module, ()))
                for a in names}

    def total(self) -> Tally:
        return self._tally(self.records)

    def bounds(self) -> tuple[dict[str, float | None], dict[str, float | None], float | None]:
        """The 95 % lower bounds of the scores (part-run modules only): per module, per area
        (:func:`pooled_bound` over its modules) and over every module."""
        modules = self.by_module()
        areas = {a: pooled_bound(t for m, t in modules.items() if a in self.areas.get(m, ()))
                 for a in self.by_area()}
        return ({m: t.lower_bound for m, t in modules.items()}, areas,
                pooled_bound(modules.values()))

    @property
    def survivors(self) -> list[MutantRecord]:
        return sorted((r for r in self.records if r.status == SURVIVED),
                      key=lambda r: (r.module, r.line, r.column, r.operator))

    @property
    def untriaged(self) -> list[MutantRecord]:
        return [r for r in self.survivors if r.name not in self.triage]

    def unjudged(self, modules: Iterable[str]) -> list[MutantRecord]:
        """Mutants of ``modules`` still pending or incompetent: after those modules ran, either
        means cosmic-ray did not judge them (the tool broke), so a run fails on any."""
        ran = set(modules)
        return sorted((r for r in self.records
                       if r.module in ran and r.status in (PENDING, INCOMPETENT)),
                      key=lambda r: (r.module, r.line, r.column, r.operator))

    def to_json(self) -> dict[str, Any]:
        module_bounds, area_bounds, total_bound = self.bounds()
        return {
            "format": 1,
            "total": self.total().to_json(total_bound),
            "modules": {m: t.to_json(module_bounds[m]) for m, t in self.by_module().items()},
            "areas": {a: t.to_json(area_bounds[a]) for a, t in self.by_area().items()},
            "runs": self.runs,
            "survivors": [{"mutant": r.name, "module": r.module, "line": r.line,
                           "operator": r.operator, "diff": r.diff,
                           **({"note": r.note} if r.note else {}),
                           "triage": _verdict_json(self.triage.get(r.name))}
                          for r in self.survivors],
        }

    def markdown(self) -> str:
        lines = ["# Mutation report: reference/palace_bridge", ""]
        total = self.total()
        lines.append(f"Score (killed, timed out, or killed since by a newer scenario, over the "
                     f"mutants run that are neither equivalent nor a reference choice): "
                     f"{_percent(total.score)}; " + _counts(total) + ".")
        module_bounds, area_bounds, total_bound = self.bounds()
        if total_bound is not None:
            lines[-1] += (f" Some modules ran only in part: all of them score at least "
                          f"{_percent(total_bound)} (each part-run module at its one-sided 95 % "
                          "Wilson bound, weighted by its size).")
        lines += ["", "## Per module", "", _table_head("module")]
        lines += [_row(m, t, module_bounds[m]) for m, t in self.by_module().items()]
        lines += ["", "## Per behaviour area (a mutant counts in each area of its module)", "",
                  _table_head("area")]
        lines += [_row(a, t, area_bounds[a]) for a, t in self.by_area().items()]
        if self.runs:
            lines += ["", "## Runs", "", "| module | scenarios | baseline s | timeout s | "
                      "wall s |", "|---|---|---|---|---|"]
            lines += [f"| {r['module']} | {r['scenarios']} | {r.get('baseline_s', '-')} | "
                      f"{r.get('timeout_s', '-')} | {r.get('wall_s', '-')} |" for r in self.runs]
        lines += ["", f"## Survivors ({len(self.survivors)}, {len(self.untriaged)} untriaged)",
                  ""]
        for record in self.survivors:
            verdict = self.triage.get(record.name)
            said = ("UNTRIAGED" if verdict is None else
                    f"{verdict.verdict}" + (f" ({verdict.behaviour})" if verdict.behaviour else "")
                    + (f" by `{verdict.scenario}`" if verdict.scenario else "")
                    + (f", killed by `{verdict.test}`" if verdict.test else "")
                    + f": {verdict.reason}")
            lines += [f"### `{record.name}` (line {record.line})", "", said, ""]
            if record.note:
                lines += [f"Judged without a run: {record.note}.", ""]
            lines += ["```diff", record.diff.strip(), "```", ""]
        return "\n".join(lines).rstrip() + "\n"

    def write(self, directory: Path) -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        as_json, as_md = directory / "report.json", directory / "report.md"
        as_json.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        as_md.write_text(self.markdown(), encoding="utf-8")
        return as_json, as_md

    def summarise(self, directory: Path, triage_file: str) -> None:
        """Write the report into ``directory`` and print its tallies, where it went and each
        untriaged survivor (to be added to ``triage_file``)."""
        json_path, md_path = self.write(directory)
        for module, tally in self.by_module().items():
            print(f"  {module}: {tally.to_json()}")
        print(f"total: {self.total().to_json()}")
        print(f"report: {md_path} and {json_path}")
        for record in self.untriaged:
            why = f" ({record.note})" if record.note else ""
            print(f"UNTRIAGED survivor {record.name} (line {record.line}){why} (add it to "
                  f"{triage_file})")


#: each module's run facts (baseline time, scenarios, ...) of a run directory
RUNS_FILE = "runs.json"


def load_runs(out: Path) -> dict[str, dict[str, Any]]:
    """The run facts kept in ``out`` (none when there is no readable file)."""
    try:
        return dict(json.loads((out / RUNS_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def save_runs(out: Path, runs: Mapping[str, Any]) -> None:
    (out / RUNS_FILE).write_text(json.dumps(runs, indent=2) + "\n", encoding="utf-8")


def _verdict_json(verdict: Verdict | None) -> dict[str, str] | None:
    if verdict is None:
        return None
    return {"verdict": verdict.verdict, "reason": verdict.reason, "behaviour": verdict.behaviour,
            **({"scenario": verdict.scenario} if verdict.scenario else {}),
            **({"test": verdict.test} if verdict.test else {})}


def _percent(score: float | None) -> str:
    return "-" if score is None else f"{score:.1%}"


def _counts(tally: Tally) -> str:
    shown = [f"{tally.counts[s]} {s}" for s in STATUSES if tally.counts[s]]
    if tally.equivalent_survivors:
        shown.append(f"{tally.equivalent_survivors} survivor(s) triaged equivalent")
    if tally.killed_since:
        shown.append(f"{tally.killed_since} survivor(s) killed since by a newer scenario")
    if tally.reference_choices:
        shown.append(f"{tally.reference_choices} survivor(s) a reference choice (killed by a "
                     "unit test, left out of the score)")
    return ", ".join(shown) or "nothing run"


def _table_head(first: str) -> str:
    return (f"| {first} | score | killed | timeout | survived | equivalent survivors | "
            "killed since | reference choice | incompetent | equivalent (annotations) | "
            "not sampled | pending | score, 95 % lower bound (part run) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _row(name: str, tally: Tally, lower: float | None) -> str:
    c = tally.counts
    return (f"| {name} | {_percent(tally.score)} | {c[KILLED]} | {c[TIMEOUT]} | {c[SURVIVED]} | "
            f"{tally.equivalent_survivors} | {tally.killed_since} | {tally.reference_choices} | "
            f"{c[INCOMPETENT]} | "
            f"{c[EQUIVALENT]} | "
            f"{c[NOT_SAMPLED]} | {c[PENDING]} | {_percent(lower)} |")


def print_open(verdicts: Mapping[str, Verdict]) -> None:
    """One line per survivor triaged as not yet killed, with the behaviour it names."""
    for anchor, verdict in sorted(verdicts.items()):
        if verdict.verdict == VERDICT_OPEN:
            print(f"not yet killed ({verdict.behaviour}): {anchor}")
