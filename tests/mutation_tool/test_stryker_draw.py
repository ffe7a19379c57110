"""A seeded draw of a TypeScript copy's StrykerJS mutants (``python -m mutation.stryker --draw N``):
it grows without redrawing, resumes from its journal, and scores with a Wilson lower bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mutation import stryker_draw as sd
from mutation.report import Z_95


def _mutant(i: int, file: str = "src/a.ts") -> dict[str, Any]:
    m: dict[str, Any] = {"anchor": f"{file}::f::StringLiteral::\"x{i}\"=>\"\"", "file": file,
                         "start": {"line": i + 1, "column": 2}, "end": {"line": i + 1, "column": 6},
                         "mutator": "StringLiteral", "replacement": '""'}
    m["key"] = sd.mutant_key(m)
    return m


MUTANTS = [_mutant(i) for i in range(30)] + [_mutant(i, "src/b.ts") for i in range(10)]


def test_a_larger_draw_extends_a_smaller_one_and_ignores_the_listing_order() -> None:
    small, large = sd.draw(MUTANTS, 5, 28), sd.draw(list(reversed(MUTANTS)), 12, 28)
    assert [m["key"] for m in large[:5]] == [m["key"] for m in small]
    assert len({m["key"] for m in large}) == 12
    assert [m["key"] for m in sd.draw(MUTANTS, 5, 29)] != [m["key"] for m in small]


def test_key_and_range_are_what_the_reporter_and_stryker_s_mutate_read() -> None:
    m = _mutant(3)
    assert m["key"] == 'src/a.ts:4:2-4:6:StringLiteral:""'
    assert sd.mutate_range(m) == "src/a.ts:4:2-4:6"


def test_a_draw_resumes_and_grows_but_refuses_another_seed(tmp_path: Path) -> None:
    first = sd.prepare(tmp_path, MUTANTS, 4, 28, fresh=False)
    (tmp_path / "journal.jsonl").write_text(json.dumps(
        {"key": first[0]["key"], "status": "Killed", "at": "t1"}) + "\n" + json.dumps(
        {"key": first[1]["key"], "status": "Survived", "at": "t1"}) + "\n")
    again = sd.prepare(tmp_path, MUTANTS, 2, 28, fresh=False)  # never shrinks
    assert [m["key"] for m in again] == [m["key"] for m in first]
    pending = sd.pending_ranges(again, sd.read_journal(tmp_path))
    assert sd.mutate_range(first[0]) not in pending  # killed: replayed, not run
    assert sd.mutate_range(first[1]) in pending      # a survivor runs again
    assert len(sd.prepare(tmp_path, MUTANTS, 8, 28, fresh=False)) == 8
    with pytest.raises(sd.DrawError, match="seed 28"):
        sd.prepare(tmp_path, MUTANTS, 8, 5, fresh=False)
    assert len(sd.prepare(tmp_path, MUTANTS, 3, 5, fresh=True)) == 3
    assert not (tmp_path / "journal.jsonl").exists()


def test_a_survivor_failing_on_the_unmutated_copy_too_is_not_judged(tmp_path: Path) -> None:
    (tmp_path / "journal.jsonl").write_text(
        json.dumps({"key": "k", "status": "Survived", "at": "2026-12-06T21:00:02Z",
                    "duration": 60000}) + "\n")
    (tmp_path / "unmutated-failures.jsonl").write_text(
        json.dumps({"key": "k", "at": "2026-12-06T21:00:01Z"}) + "\n")
    assert sd.read_journal(tmp_path)["k"]["status"] == "UnmutatedFailure"
    # a later run of the same mutant that survived is a survivor again
    with (tmp_path / "journal.jsonl").open("a") as journal:
        journal.write(json.dumps({"key": "k", "status": "Survived", "at": "2026-12-06T22:00:00Z",
                                  "duration": 60000}) + "\n")
    assert sd.read_journal(tmp_path)["k"]["status"] == "Survived"


def test_tally_scores_after_triage_with_the_wilson_bound() -> None:
    drawn = sd.draw(MUTANTS, 10, 28)
    journal = {m["key"]: {"status": "Killed"} for m in drawn[:7]}
    journal[drawn[7]["key"]] = {"status": "Timeout"}
    journal[drawn[8]["key"]] = {"status": "Survived"}
    journal[drawn[9]["key"]] = {"status": "Survived"}
    equivalent = {drawn[9]["anchor"]: "no run can tell"}
    files, areas, total, untriaged = sd.tally(drawn, journal, equivalent,
                                              {"src/a.ts": 30, "src/b.ts": 10},
                                              {"src/a.ts": ["PROV-01"], "src/b.ts": ["PROV"]})
    assert (total.killed, total.timeout, total.survived, total.equivalent) == (7, 1, 1, 1)
    assert [m["key"] for m in untriaged] == [drawn[8]["key"]]
    cells = total.cells()
    assert cells[0] == "10 of 40" and cells[6] == "88.9 %"
    low = sd.killed_lower_bound(8, 9)
    assert low is not None and 0.6 < low < 0.889 and cells[7] == f"{100 * low:.1f} %"
    assert areas["PROV"].total == 40 and sum(r.drawn for r in files.values()) == 10
    assert sd.killed_lower_bound(0, 0) is None
    assert sd.killed_lower_bound(50, 50) == pytest.approx(50 / (50 + Z_95 ** 2))
