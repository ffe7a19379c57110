"""Mutant anchors: a triage entry keeps naming its mutant when code above it moves."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mutation.anchors import Anchor, AnchorError, anchor_of, resolve
from mutation.module_map import BRIDGE_DIR
from mutation.report import SURVIVED, TRIAGE_PATH, MutantRecord, Report, TriageError, load_triage

SOURCE = '''"""doc"""
LIMIT = 3


class Box:
    @property
    def size(self) -> int:
        return self.n * 2 if self.n > 0 else 0

    @size.setter
    def size(self, value: int) -> None:
        self.n = value // 2


def outer(x):
    def inner(y):
        return y + 1
    return inner(x) + 1
'''
ABOVE = ("# an unrelated edit above every survivor\nimport os  # noqa\n\n\n"
         "def added():\n    return 0\n\n")


def where(source: str, line: int, text: str, nth: int = 1) -> tuple[int, int]:
    column = -1
    for _ in range(nth):
        column = source.splitlines()[line - 1].index(text, column + 1)
    return line, column


def test_an_anchor_names_the_scope_operator_and_text_and_resolves_back() -> None:
    start = where(SOURCE, 8, "> 0")
    anchor = anchor_of("box.py", SOURCE, "ReplaceComparisonOperator_Gt_Lt", start,
                       (start[0], start[1] + 1))
    # the text is counted as written anywhere in the scope: "-> int" holds the first '>'
    assert str(anchor) == "box.py::Box.size::ReplaceComparisonOperator_Gt_Lt@2::>"
    assert resolve(Anchor.parse(str(anchor)), SOURCE) == start


@pytest.mark.parametrize(("line", "text", "nth", "expected"), [
    (8, "0", 1, "box.py::Box.size::NumberReplacer@1::0"),  # '0' is in the getter twice
    (8, "0", 2, "box.py::Box.size::NumberReplacer@2::0"),
    (8, "2", 1, "box.py::Box.size::NumberReplacer@1::2"),  # property and setter: one scope
    (12, "2", 1, "box.py::Box.size::NumberReplacer@2::2"),
    (17, "1", 1, "box.py::outer.inner::NumberReplacer::1"),
    (18, "1", 1, "box.py::outer::NumberReplacer@2::1"),  # the inner function is in outer
    (2, "3", 1, "box.py::<module>::NumberReplacer::3"),
    (6, "@property", 1, "box.py::Box.size::RemoveDecorator::@property"),  # decorates size
])
def test_scopes_occurrences_and_decorators(line: int, text: str, nth: int,
                                           expected: str) -> None:
    operator = "RemoveDecorator" if text.startswith("@") else "NumberReplacer"
    start = where(SOURCE, line, text, nth)
    anchor = anchor_of("box.py", SOURCE, operator, start, (line, start[1] + len(text)))
    assert str(anchor) == expected
    assert resolve(Anchor.parse(expected), SOURCE) == start


def test_a_multi_line_text_is_its_first_line() -> None:
    source = "def f(a, b):\n    return (a and\n            b)\n"
    anchor = anchor_of("m.py", source, "ReplaceAndWithOr", (2, 11), (3, 13))
    assert str(anchor) == "m.py::f::ReplaceAndWithOr::(a and"


def test_stale_and_ambiguous_anchors_are_refused_in_one_line() -> None:
    with pytest.raises(AnchorError, match=r"stale: m.py has no function or class Gone"):
        resolve(Anchor.parse("m.py::Gone::AddNot::x"), SOURCE)
    with pytest.raises(AnchorError, match=r"stale: Box.size has 2 occurrence\(s\) of '0'"):
        resolve(Anchor.parse("m.py::Box.size::NumberReplacer@3::0"), SOURCE)
    with pytest.raises(AnchorError, match=r"ambiguous: '0' occurs 2 times in Box.size"):
        resolve(Anchor.parse("m.py::Box.size::NumberReplacer::0"), SOURCE)


def test_an_unrelated_edit_above_every_survivor_keeps_its_triage_entry(tmp_path: Path) -> None:
    """Lines (and a new function) added at the top of a copy of every reference module: each
    triaged anchor still resolves, to its old place moved down by the lines added, and a
    survivor recorded at the moved place (its anchor made from the edited source) is found
    in the triage, as the report looks it up."""
    copy = tmp_path / "palace_bridge"
    shutil.copytree(BRIDGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in copy.rglob("*.py"):
        path.write_text(ABOVE + path.read_text(encoding="utf-8"), encoding="utf-8")
    shift = ABOVE.count("\n")
    triage = load_triage(bridge_dir=copy)
    assert len(triage) == len(json.loads(TRIAGE_PATH.read_text(encoding="utf-8"))["survivors"])
    records = []
    for name in triage:
        anchor = Anchor.parse(name)
        before = resolve(anchor, (BRIDGE_DIR / anchor.module).read_text(encoding="utf-8"))
        edited = (copy / anchor.module).read_text(encoding="utf-8")
        line, column = resolve(anchor, edited)
        assert (line, column) == (before[0] + shift, before[1]), name
        again = anchor_of(anchor.module, edited, anchor.operator, (line, column),
                          (line, column + len(anchor.text)))
        records.append(MutantRecord(anchor.module, line, column, anchor.operator, SURVIVED,
                                    anchor=str(again)))
    report = Report(records, {}, triage)
    assert report.untriaged == []


def test_the_tool_refuses_a_triage_entry_whose_code_is_gone(tmp_path: Path) -> None:
    copy = tmp_path / "palace_bridge"
    shutil.copytree(BRIDGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    name = next(iter(load_triage(bridge_dir=BRIDGE_DIR)))
    anchor = Anchor.parse(name)
    path = copy / anchor.module
    path.write_text(path.read_text(encoding="utf-8").replace(anchor.text, "XX"),
                    encoding="utf-8")
    with pytest.raises(TriageError, match=r"^triage.json survivors\[\d+\]: .*: stale: "):
        load_triage(bridge_dir=copy)
