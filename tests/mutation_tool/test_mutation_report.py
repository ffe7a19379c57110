"""Scores per module and area, survivors with their triage, and the triage file's rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mutation.module_map import BRIDGE_DIR, ModuleMap, load_catalogue_facts, shipped_scenario_ids
from mutation.report import (
    EQUIVALENT,
    INCOMPETENT,
    KILLED,
    NOT_SAMPLED,
    PENDING,
    REPO_ROOT,
    SURVIVED,
    TIMEOUT,
    MutantRecord,
    Report,
    TriageError,
    Verdict,
    load_triage,
)

AREAS = {"a.py": ["STDIO"], "b.py": ["HTTP", "STDIO"]}


def rec(module: str, line: int, status: str, operator: str = "NumberReplacer") -> MutantRecord:
    return MutantRecord(module, line, 4, operator, status, f"--- x\n+++ y\n-line {line}\n")


RECORDS = [rec("a.py", 1, KILLED), rec("a.py", 2, TIMEOUT), rec("a.py", 3, SURVIVED),
           rec("a.py", 4, EQUIVALENT), rec("b.py", 1, KILLED), rec("b.py", 2, SURVIVED),
           rec("b.py", 3, NOT_SAMPLED)]


def test_scores_count_timeouts_as_kills_and_leave_out_equivalents() -> None:
    report = Report(RECORDS, AREAS, {})
    modules = report.by_module()
    assert modules["a.py"].score == pytest.approx(2 / 3)
    assert modules["a.py"].counts[EQUIVALENT] == 1
    assert modules["b.py"].score == pytest.approx(1 / 2)
    assert report.total().score == pytest.approx(3 / 5)


def test_a_survivor_triaged_equivalent_leaves_the_denominator() -> None:
    triage = {"b.py:2:4:NumberReplacer": Verdict("b.py:2:4:NumberReplacer", "equivalent", "r")}
    report = Report(RECORDS, AREAS, triage)
    assert report.by_module()["b.py"].score == 1.0
    assert [r.key for r in report.untriaged] == ["a.py:3:4:NumberReplacer"]


def test_a_survivor_killed_since_counts_as_killed_and_stays_in_the_denominator() -> None:
    key = "b.py:2:4:NumberReplacer"
    triage = {key: Verdict(key, "killed since", "applied by hand: fails", scenario="x.y")}
    report = Report(RECORDS, AREAS, triage)
    b = report.by_module()["b.py"]
    assert b.score == 1.0 and b.killed_since == 1 and b.counts[SURVIVED] == 1
    assert report.total().score == pytest.approx(4 / 5)  # a.py:3 still survives
    assert [r.key for r in report.untriaged] == ["a.py:3:4:NumberReplacer"]
    text = report.markdown()
    assert "killed since by `x.y`: applied by hand: fails" in text
    assert "1 survivor(s) killed since by a newer scenario" in text
    assert report.to_json()["survivors"][1]["triage"]["scenario"] == "x.y"


def test_a_reference_choice_leaves_the_denominator_and_is_counted_apart() -> None:
    key = "b.py:2:4:NumberReplacer"
    test = "tests/bridge/test_x.py::test_bound"
    triage = {key: Verdict(key, "reference choice", "a bound of its own", test=test)}
    report = Report(RECORDS, AREAS, triage)
    b = report.by_module()["b.py"]
    assert b.score == 1.0 and b.reference_choices == 1 and b.equivalent_survivors == 0
    assert report.total().score == pytest.approx(3 / 4)  # a.py:3 still survives
    text = report.markdown()
    assert f"reference choice, killed by `{test}`: a bound of its own" in text
    assert "1 survivor(s) a reference choice" in text
    assert "| b.py | 100.0% | 1 | 0 | 1 | 0 | 0 | 1 |" in text
    assert report.to_json()["modules"]["b.py"]["reference_choices"] == 1
    assert report.to_json()["survivors"][1]["triage"]["test"] == test


def test_a_mutant_counts_in_every_area_of_its_module() -> None:
    areas = Report(RECORDS, AREAS, {}).by_area()
    assert set(areas) == {"HTTP", "STDIO"}
    assert areas["HTTP"].counts[KILLED] == 1 and areas["HTTP"].counts[SURVIVED] == 1
    assert areas["STDIO"].counts[KILLED] == 2 and areas["STDIO"].counts[SURVIVED] == 2
    assert areas["STDIO"].counts[TIMEOUT] == 1


def test_pending_or_incompetent_mutants_of_the_modules_run_are_unjudged() -> None:
    records = [*RECORDS, rec("a.py", 5, PENDING), rec("b.py", 4, INCOMPETENT),
               rec("c.py", 1, PENDING)]
    report = Report(records, AREAS, {})
    assert [r.key for r in report.unjudged(["a.py", "b.py"])] == [
        "a.py:5:4:NumberReplacer", "b.py:4:4:NumberReplacer"]
    assert report.unjudged(["c.py"])[0].key == "c.py:1:4:NumberReplacer"
    assert Report(RECORDS, AREAS, {}).unjudged(["a.py", "b.py"]) == []


def test_nothing_run_has_no_score() -> None:
    assert Report([rec("a.py", 1, NOT_SAMPLED)], AREAS, {}).total().score is None


def test_written_report_lists_survivors_with_diff_and_triage(tmp_path: Path) -> None:
    triage = {"a.py:3:4:NumberReplacer": Verdict("a.py:3:4:NumberReplacer", "not yet killed",
                                                 "one-sided bound", "STDIO-06")}
    as_json, as_md = Report(RECORDS, AREAS, triage, [{"module": "a.py", "scenarios": 3}]).write(
        tmp_path)
    data = json.loads(as_json.read_text())
    assert [s["mutant"] for s in data["survivors"]] == ["a.py:3:4:NumberReplacer",
                                                        "b.py:2:4:NumberReplacer"]
    assert data["survivors"][0]["triage"]["behaviour"] == "STDIO-06"
    assert data["survivors"][1]["triage"] is None
    assert data["modules"]["a.py"]["score"] == pytest.approx(0.6667)
    text = as_md.read_text()
    assert "### `b.py:2:4:NumberReplacer` (line 2)\n\nUNTRIAGED" in text
    assert "not yet killed (STDIO-06): one-sided bound" in text
    assert "-line 3" in text
    assert "| a.py | 66.7% | 1 | 1 | 1 | 0 | 0 |" in text


def write_triage(tmp_path: Path, *entries: dict[str, str]) -> Path:
    path = tmp_path / "triage.json"
    path.write_text(json.dumps({"survivors": list(entries)}), encoding="utf-8")
    return path


@pytest.mark.parametrize(("entry", "message"), [
    ({"mutant": "a.py:1:2:Op", "verdict": "equivalent", "reason": "r"},
     "is not MODULE::SCOPE::OPERATOR::TEXT"),
    ({"mutant": "a.py::f::Op@0::x", "verdict": "equivalent", "reason": "r"}, "1 or more"),
    ({"mutant": "a.py::f::Op::x", "verdict": "maybe", "reason": "r"}, "'verdict' must be"),
    ({"mutant": "a.py::f::Op::x", "verdict": "equivalent", "reason": " "}, "give a 'reason'"),
    ({"mutant": "a.py::f::Op::x", "verdict": "not yet killed", "reason": "r"}, "behaviour ID"),
    ({"mutant": "a.py::f::Op::x", "verdict": "not yet killed", "reason": "r",
      "behaviour": "NOPE-9"}, "behaviour ID"),
    ({"mutant": "a.py::f::Op::x", "verdict": "killed since", "reason": "r"},
     "names the shipped scenario"),
    ({"mutant": "a.py::f::Op::x", "verdict": "killed since", "reason": "r", "scenario": "no.such"},
     "names the shipped scenario"),
    ({"mutant": "a.py::f::Op::x", "verdict": "reference choice", "reason": "r"},
     "names the unit test"),
    ({"mutant": "a.py::f::Op::x", "verdict": "reference choice", "reason": "r",
      "test": "tests/x.py"}, "names the unit test"),
    ({"mutant": "a.py::f::Op::x", "verdict": "reference choice", "reason": "r",
      "test": "tests/no_such_file.py::test_x"}, "does not exist"),
    ({"mutant": "a.py::f::Op::x", "verdict": "reference choice", "reason": "r",
      "test": "tests/mutation_tool/test_mutation_report.py::test_no_such_test"},
     "has no test named"),
])
def test_a_malformed_triage_entry_is_one_line(tmp_path: Path, entry: dict[str, str],
                                              message: str) -> None:
    with pytest.raises(TriageError, match=message):
        load_triage(write_triage(tmp_path, entry), known=["STDIO-06"], scenarios=["x.y"],
                    tests_root=REPO_ROOT)


def test_a_mutant_triaged_twice_is_refused(tmp_path: Path) -> None:
    entry = {"mutant": "a.py::f::Op::x", "verdict": "equivalent", "reason": "r"}
    with pytest.raises(TriageError, match="triaged twice"):
        load_triage(write_triage(tmp_path, entry, entry))


def test_the_shipped_triage_is_valid_and_names_mapped_modules() -> None:
    known, _ = load_catalogue_facts()
    verdicts = load_triage(known=known, scenarios=shipped_scenario_ids(), tests_root=REPO_ROOT,
                           bridge_dir=BRIDGE_DIR)
    mapped = set(ModuleMap.load().modules)
    assert all(key.split("::")[0] in mapped for key in verdicts)


def test_the_triage_matches_a_survivor_by_its_anchor_not_its_line() -> None:
    anchor = "b.py::f::NumberReplacer::2"
    moved = MutantRecord("b.py", 40, 4, "NumberReplacer", SURVIVED, "-x\n+y", anchor=anchor)
    report = Report([moved], AREAS, {anchor: Verdict(anchor, "equivalent", "r")})
    assert report.untriaged == [] and report.total().equivalent_survivors == 1
    assert report.to_json()["survivors"][0]["mutant"] == anchor
    assert f"### `{anchor}` (line 40)" in report.markdown()


def test_a_survivor_judged_without_a_run_says_which_line_no_scenario_reaches() -> None:
    unreached = MutantRecord("a.py", 9, 4, "AddNot", SURVIVED, "-x\n+y",
                             note="no scenario reaches line 9")
    report = Report([unreached, rec("a.py", 3, SURVIVED)], AREAS, {})
    markdown = report.markdown()
    assert "Judged without a run: no scenario reaches line 9." in markdown
    assert markdown.count("Judged without a run") == 1
    notes = [s.get("note") for s in report.to_json()["survivors"]]
    assert notes == [None, "no scenario reaches line 9"]


def test_a_part_run_module_has_a_lower_bound_and_a_whole_one_none() -> None:
    """Killing all of a 22-mutant sample says the module scores at least 89 %, 19 times in 20
    (the Wilson bound); a module whose every mutant ran has an exact score and no bound."""
    sampled = [rec("a.py", line, KILLED) for line in range(1, 23)] + [rec("a.py", 99, NOT_SAMPLED)]
    whole = [rec("b.py", line, KILLED) for line in range(1, 23)]
    report = Report(sampled + whole, AREAS, {})
    modules = report.by_module()
    assert modules["a.py"].score == 1.0 and modules["b.py"].score == 1.0
    assert modules["a.py"].lower_bound == pytest.approx(0.8905, abs=1e-3)
    assert modules["b.py"].lower_bound is None
    half = Report([rec("a.py", 1, KILLED), rec("a.py", 2, SURVIVED), rec("a.py", 3, PENDING)],
                  AREAS, {}).total()
    assert half.lower_bound == pytest.approx(0.1209, abs=1e-3)  # unfinished: a bound too
    data = report.to_json()
    assert data["modules"]["a.py"]["score_lower_95"] == pytest.approx(0.8905, abs=1e-3)
    assert "score_lower_95" not in data["modules"]["b.py"]
    text = report.markdown()
    assert "| a.py | 100.0% | 22 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 1 | 0 | 89.0% |" in text
    assert "| b.py | 100.0% | 22 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | - |" in text
    # an area or the whole: a.py at its bound, b.py at its exact score, by their sizes (23, 22)
    pooled = (23 * modules["a.py"].lower_bound + 22 * 1.0) / 45
    assert data["areas"]["STDIO"]["score_lower_95"] == pytest.approx(pooled, abs=1e-4)
    assert "score_lower_95" not in data["areas"]["HTTP"]  # b.py alone: every mutant ran
    assert data["total"]["score_lower_95"] == pytest.approx(pooled, abs=1e-4)
    assert f"all of them score at least {pooled:.1%}" in text


def test_the_triage_command_checks_the_file_and_counts_its_verdicts(capsys) -> None:
    from mutation.__main__ import main

    assert main(["triage"]) == 0
    out = capsys.readouterr().out
    verdicts = load_triage()
    total = next(line for line in out.splitlines() if line.startswith("| **all** |"))
    counts = [int(cell) for cell in total.strip("|").split("|")[1:]]
    assert counts[-1] == len(verdicts) == sum(counts[:-1])
    assert counts[3] == sum(1 for v in verdicts.values() if v.verdict == "not yet killed")
    assert out.count("not yet killed (") == counts[3]
