"""``fidelity --generated`` against the real mempalace 3.11.0 (tox -e real-palace): the fixed
regression cases agree, and every class of difference a small seeded run finds is one of the
known open classes (``fidelity/generated_open.json``), so a NEW class fails the test."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from palace_conformance.fidelity.generated import load_cases, run_generated

#: two rounds of one call per tool; the seed fixes the calls (for one hypothesis release)
CALLS = 94
#: a few stateful sequences (one session each), CI's sample of --sequences
SEQUENCES = 6
SEED = 29


@pytest.mark.real_palace
@pytest.mark.timeout(900)
def test_generated_sessions_show_no_new_class_of_difference(tmp_path: Path) -> None:
    out = io.StringIO()
    result = run_generated(None, CALLS, SEED, shrink_classes=0, sequences=SEQUENCES,
                           json_out=str(tmp_path / "generated.json"), out=out,
                           log=io.StringIO())
    report = out.getvalue()
    verdicts = {verdict.id: verdict for verdict in result.comparison.verdicts}
    cases = [f"gen.case.{case['id']}" for case in load_cases()]
    steps = len(result.steps)
    assert steps >= SEQUENCES * 3  # every sequence has 3 or more steps, each a point
    assert len(verdicts) == CALLS + len(cases) + steps, report
    # the classes fixed in the fake stay fixed: every regression case and sequence agrees
    assert [point for point in cases if verdicts[point].status == "different"] == [], report
    assert [point for point in result.steps if point.startswith("seq.case.")
            and verdicts[point].status == "different"] == [], report
    # and anything else that differs is a class known and declared open, with its reason
    assert result.new_classes() == [], report
    written = json.loads((tmp_path / "generated.json").read_text())
    assert written["totals"]["points"] == len(verdicts)
    assert all(entry["open"] for entry in written["classes"].values())
