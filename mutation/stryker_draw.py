"""A seeded random draw of a TypeScript copy's StrykerJS mutants, judged by the catalogue.

``python -m mutation.stryker --copy pi --draw 60 --seed 28`` lists every mutant Stryker makes of the
copy (``mutation/stryker_list.mjs``, the copy's own pinned instrumenter), draws 60 of them uniformly
with the seed, and runs Stryker once over the drawn mutants' exact ranges. The state lives in
``reference/COPY/reports/draw/``: ``draw.json`` (the seed and the drawn mutants, each with its
anchor and key), ``journal.jsonl`` (each verdict as Stryker gives it, written by the
``palace-journal`` reporter, ``mutation/stryker_journal.mjs``), ``unmutated-failures.jsonl`` (a
failure that repeated without the mutant: no kill, the mutant is not judged). Run again, the
same draw resumes: killed mutants are replayed from the journal, the rest run. A larger
``--draw`` with the same seed adds mutants to the draw (one shuffle, a longer prefix), so it grows
without running a mutant twice (docs/mutation.md, "Drawn samples").
"""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mutation.report import wilson_lower

ROOT = Path(__file__).resolve().parents[1]
LISTER = ROOT / "mutation" / "stryker_list.mjs"
JOURNAL_PLUGIN = ROOT / "mutation" / "stryker_journal.mjs"
KILLED = ("Killed", "Timeout")
#: a drawn mutant's limit: the draw skips Stryker's dry run (each kill is checked on the unmutated
#: copy instead), so Stryker's timeout is this alone; the runner bounds each scenario itself
TIMEOUT_MS = 15 * 60 * 1000
#: every timing slack of a draw's runs multiplied by this (``run --slack-factor``): on the shared
#: machine at load 50 an unmutated retry step overran its 250 + 250 ms window three times running
SLACK_FACTOR = "3"


class DrawError(Exception):
    """A problem that stops the draw, said in one line."""


def mutant_key(m: Mapping[str, Any]) -> str:
    """FILE:LINE:COL-LINE:COL:MUTATOR:REPLACEMENT, as the palace-journal reporter writes it."""
    s, e = m["start"], m["end"]
    return (f"{m['file']}:{s['line']}:{s['column']}-{e['line']}:{e['column']}:"
            f"{m['mutator']}:{m['replacement']}")


def mutate_range(m: Mapping[str, Any]) -> str:
    """Stryker's ``--mutate`` range of exactly the mutant's node (lines 1-based, columns 0-based)
    """
    s, e = m["start"], m["end"]
    return f"{m['file']}:{s['line']}:{s['column']}-{e['line']}:{e['column']}"


def list_mutants(node: str, folder: Path, files: Sequence[str]) -> list[dict[str, Any]]:
    """Every mutant Stryker's instrumenter makes of ``files``, with its anchor and key."""
    done = subprocess.run([node, str(LISTER), str(folder), *files], cwd=folder, capture_output=True,
                          text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise DrawError(f"listing the mutants failed: {done.stderr.strip()[-400:]}")
    mutants: list[dict[str, Any]] = json.loads(done.stdout)
    for m in mutants:
        m["key"] = mutant_key(m)
    return mutants


def draw(mutants: Sequence[Mapping[str, Any]], size: int, seed: int) -> list[dict[str, Any]]:
    """The first ``size`` of the mutants shuffled with ``seed`` (sorted by anchor first, so the
    order does not depend on the lister's): a larger size extends a smaller one's draw."""
    ordered = sorted(mutants, key=lambda m: str(m["anchor"]))
    random.Random(seed).shuffle(ordered)
    return [dict(m) for m in ordered[:size]]


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _during(moment: str, verdict: Mapping[str, Any]) -> bool:
    """Whether ``moment`` falls in the run that gave ``verdict`` (its end less its duration)."""
    end = datetime.fromisoformat(str(verdict["at"]).replace("Z", "+00:00"))
    start = end - timedelta(milliseconds=float(verdict.get("duration") or 0) + 1000)
    return start <= datetime.fromisoformat(moment.replace("Z", "+00:00")) <= end


def read_journal(state: Path) -> dict[str, dict[str, Any]]:
    """The latest verdict of each drawn mutant (by key). A survivor whose run had a failure that
    repeated on the unmutated copy (``unmutated-failures.jsonl``) during the run that gave that
    verdict is ``UnmutatedFailure``: not judged."""
    latest: dict[str, dict[str, Any]] = {}
    for record in _records(state / "journal.jsonl"):
        latest[record["key"]] = record
    for failure in _records(state / "unmutated-failures.jsonl"):
        verdict = latest.get(failure["key"])
        if verdict and verdict["status"] == "Survived" and _during(failure["at"], verdict):
            latest[failure["key"]] = {**verdict, "status": "UnmutatedFailure"}
    return latest


def prepare(state: Path, mutants: list[dict[str, Any]], size: int, seed: int,
            fresh: bool) -> list[dict[str, Any]]:
    """Write ``draw.json`` for this draw (refusing another seed's state unless ``fresh``), and
    return the drawn mutants."""
    state.mkdir(parents=True, exist_ok=True)
    previous = state / "draw.json"
    if fresh:
        for name in ("draw.json", "journal.jsonl", "unmutated-failures.jsonl", "plan.json"):
            (state / name).unlink(missing_ok=True)
    elif previous.exists():
        old = json.loads(previous.read_text())
        if old["seed"] != seed:
            raise DrawError(f"{state} holds a draw with seed {old['seed']}: pass --seed "
                            f"{old['seed']} to grow it, or --fresh to start over")
        size = max(size, len(old["mutants"]))
    drawn = draw(mutants, size, seed)
    previous.write_text(json.dumps({"seed": seed, "total": len(mutants),
                                    "per_file": dict(Counter(m["file"] for m in mutants)),
                                    "mutants": drawn}, indent=1))
    return drawn


def pending_ranges(drawn: Sequence[Mapping[str, Any]], journal: Mapping[str, Any],
                   equivalent: Mapping[str, str] | None = None) -> list[str]:
    """The ``--mutate`` ranges of the drawn mutants not yet killed (survivors run again, but not
    those triaged equivalent)."""
    settled = set(equivalent or {})
    ranges = {mutate_range(m) for m in drawn
              if journal.get(str(m["key"]), {}).get("status") not in KILLED
              and not (journal.get(str(m["key"]), {}).get("status") == "Survived"
                       and m["anchor"] in settled)}
    return sorted(ranges)


def killed_lower_bound(killed: int, n: int) -> float | None:
    """The one-sided 95 % Wilson lower bound of killed / n (None when nothing was judged)."""
    return wilson_lower(killed / n, n) if n else None


@dataclass
class Row:
    """One file's, area's or the copy's counts over a draw."""

    total: int = 0
    drawn: int = 0
    killed: int = 0
    timeout: int = 0
    survived: int = 0
    equivalent: int = 0
    pending: int = 0
    broken: int = 0

    @property
    def counted(self) -> int:
        return self.killed + self.timeout + self.survived

    def cells(self) -> list[str]:
        n = self.counted
        score = f"{100 * (self.killed + self.timeout) / n:.1f} %" if n else "-"
        low = killed_lower_bound(self.killed + self.timeout, n) if self.drawn < self.total else None
        bound = "-" if low is None else f"{100 * low:.1f} %"
        return [f"{self.drawn} of {self.total}", str(self.killed), str(self.timeout),
                str(self.survived), str(self.equivalent), str(self.pending + self.broken), score,
                bound]


def tally(drawn: Sequence[Mapping[str, Any]], journal: Mapping[str, Mapping[str, Any]],
          equivalent: Mapping[str, str], per_file_total: Mapping[str, int],
          areas: Mapping[str, Sequence[str]]) -> tuple[dict[str, Row], dict[str, Row], Row,
                                                        list[dict[str, Any]]]:
    """Rows per file, per area and for the copy, and the untriaged survivors. A survivor triaged
    equivalent leaves the score (its count is shown); one still untriaged counts as survived."""
    files: dict[str, Row] = defaultdict(Row)
    by_area: dict[str, Row] = defaultdict(Row)
    total = Row(total=sum(per_file_total.values()))
    for file, count in per_file_total.items():
        files[file].total = count
    untriaged = []
    for m in drawn:
        status = journal.get(str(m["key"]), {}).get("status")
        field = {"Killed": "killed", "Timeout": "timeout", "Survived": "survived",
                 None: "pending"}.get(status, "broken")
        if field == "survived" and m["anchor"] in equivalent:
            field = "equivalent"
        elif field == "survived":
            untriaged.append(dict(m))
        file_areas = {b.split("-")[0] for b in areas.get(str(m["file"]), [])}
        for row in [files[str(m["file"])], total, *(by_area[a] for a in sorted(file_areas))]:
            row.drawn += 1
            setattr(row, field, getattr(row, field) + 1)
    for file, count in per_file_total.items():
        for a in {b.split("-")[0] for b in areas.get(file, [])}:
            by_area[a].total += count
    return dict(files), dict(by_area), total, untriaged


HEADER = ["| {what} | drawn | killed | timeout | survived | equivalent | not judged | score | "
          "95 % lower bound |", "|---|---|---|---|---|---|---|---|---|"]


def markdown(files: Mapping[str, Row], by_area: Mapping[str, Row], total: Row) -> list[str]:
    """The per-file table with the copy's total, then the per-area table."""
    out = [HEADER[0].format(what="file"), HEADER[1]]
    out += [f"| {name} | " + " | ".join(row.cells()) + " |"
            for name, row in sorted(files.items()) if row.drawn]
    out.append("| **all** | " + " | ".join(total.cells()) + " |")
    out += ["", HEADER[0].format(what="area"), HEADER[1]]
    out += [f"| {name} | " + " | ".join(row.cells()) + " |"
            for name, row in sorted(by_area.items())]
    return out
