"""StrykerJS over the pi copy (``python -m mutation.stryker``): the file → behaviour map is complete
and selects scenarios, and the report judge counts what Stryker found and flags what it must."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mutation.module_map import load_catalogue_facts
from mutation.stryker import (
    AREAS,
    COPIES,
    StrykerError,
    equivalents,
    judge,
    shared_sources,
    source_path,
)


def _areas(path: Path = AREAS) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _selects(entry: str, covers: list[str]) -> bool:
    return entry in covers if "-" in entry else any(c.startswith(f"{entry}-") for c in covers)


@pytest.mark.parametrize("name", sorted(COPIES))
def test_every_source_file_of_the_copy_is_mapped_or_unreached(name: str) -> None:
    copy = COPIES[name].folder
    areas = _areas(COPIES[name].areas)
    sources = sorted([*(str(p.relative_to(copy)) for p in [copy / "mempalace.ts",
                                                            *(copy / "src").rglob("*.ts")]),
                      *shared_sources()])
    mapped, unreached = set(areas["files"]), set(areas["unreached"])
    assert mapped & unreached == set()
    assert sorted(mapped | unreached) == sources, f"{copy}/stryker/areas.json is out of date"
    assert all(areas["unreached"][f].strip() for f in unreached), "an unreached file needs a reason"


@pytest.mark.parametrize("name", sorted(COPIES))
def test_every_mapped_file_selects_bridge_scenarios_by_known_behaviours(name: str) -> None:
    known, scenarios = load_catalogue_facts()
    areas = {k.split("-")[0] for k in known}
    bridge = [list(s.covers) for s in scenarios if getattr(s, "subject", "bridge") == "bridge"]
    for file, entries in _areas(COPIES[name].areas)["files"].items():
        assert entries, f"{file}: no behaviours"
        unknown = [e for e in entries if e not in known and e not in areas]
        assert unknown == [], f"{file}: unknown behaviours {unknown}"
        assert any(_selects(e, c) for e in entries for c in bridge), f"{file}: selects nothing"


@pytest.mark.parametrize("name", sorted(COPIES))
def test_each_copy_s_sample_names_a_line_of_a_mapped_file(name: str) -> None:
    copy = COPIES[name]
    file, _, lines = copy.sample.partition(":")
    first = int(lines.split("-")[0])
    assert file in _areas(copy.areas)["files"]
    assert 1 <= first <= len(source_path(copy.folder, file).read_text().splitlines())


def _mutant(line: int, status: str, replacement: str = "true") -> dict[str, Any]:
    return {"mutatorName": "ConditionalExpression", "replacement": replacement, "status": status,
            "location": {"start": {"line": line, "column": 9}, "end": {"line": line, "column": 20}},
            "statusReason": "why"}


ANCHOR = "seed-policy/provenance.ts::Stamper.stamp::ConditionalExpression::this.active=>true"


def test_judge_scores_per_file_and_area_and_flags_untriaged_survivors() -> None:
    report = {"files": {"seed-policy/provenance.ts": {"mutants": [
        _mutant(41, "Killed"), _mutant(42, "Timeout"), _mutant(43, "Survived"),
        _mutant(44, "Survived", "false"), _mutant(45, "RuntimeError")]}}}
    triage = {"equivalent": [{"mutant": ANCHOR, "reason": "test"}]}
    anchors = {"seed-policy/provenance.ts:43:8-43:19:ConditionalExpression:true": ANCHOR}
    lines, problems = judge(report, _areas(), triage, anchors)
    assert "| seed-policy/provenance.ts | 5 | 2 | 1 | 1 | 1 | 66.7 % |" in lines
    assert "| PROV | 5 | 2 | 1 | 1 | 1 | 66.7 % |" in lines
    assert len(problems) == 2
    assert problems[0].startswith("UNTRIAGED survivor seed-policy/provenance.ts:44 (line 44)")
    assert "RuntimeError" in problems[1]


def test_a_triage_entry_naming_no_mutant_of_the_copy_is_refused() -> None:
    triage = {"equivalent": [{"mutant": ANCHOR, "reason": "test"}]}
    assert equivalents(triage, [ANCHOR, "other"]) == {ANCHOR: "test"}
    with pytest.raises(StrykerError, match="stale triage entry"):
        equivalents(triage, ["other"])


@pytest.mark.parametrize("name", sorted(COPIES))
def test_the_shipped_triage_file_names_anchors_with_reasons(name: str) -> None:
    copy = COPIES[name]
    triage = json.loads(copy.triage.read_text())
    for entry in triage["equivalent"]:
        file, scope, mutator, change = entry["mutant"].split("::", 3)
        assert source_path(copy.folder, file).exists() and scope and mutator and "=>" in change
        assert entry["reason"].strip()


def test_check_exits_1_on_an_untriaged_survivor_and_2_on_an_unreadable_report(
        tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from mutation import stryker

    monkeypatch.setattr(stryker, "_anchors", lambda copy: {})
    report = tmp_path / "mutation.json"
    report.write_text(json.dumps({"files": {"seed-policy/diary.ts": {"mutants": [
        _mutant(3, "Killed"), _mutant(4, "Survived")]}}}))
    assert stryker.main(["--check", str(report)]) == 1
    out = capsys.readouterr().out
    assert "| DIARY | 2 | 1 | 0 | 1 | 0 | 50.0 % |" in out
    assert "PROBLEM UNTRIAGED survivor seed-policy/diary.ts:4" in out
    assert stryker.main(["--check", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mutation.stryker: cannot read Stryker report") and "\n" not in err


def test_the_shared_policy_is_mapped_in_both_copies_and_found_in_the_checkout() -> None:
    shared = shared_sources()
    assert "seed-policy/feeding.ts" in shared and "seed-policy/provenance.ts" in shared
    for copy in COPIES.values():
        mapped = set(_areas(copy.areas)["files"])
        assert set(shared) <= mapped
        assert all(source_path(copy.folder, f).is_file() for f in shared)
