"""``fixtures validate`` lists every problem of a file in one pass: the schema's and the semantic
rules' together, without echoing a schema problem as a semantic one."""

from __future__ import annotations

import json
from pathlib import Path

from palace_conformance.scenarios.loader import load_catalogue, scenarios_dir

SHIPPED = scenarios_dir() / "wake" / "wake.palace-down.silent.json"


def test_schema_and_semantic_problems_come_in_one_pass(tmp_path: Path) -> None:
    data = json.loads(SHIPPED.read_text())
    data["title"] = 5                      # schema
    data["steps"][0]["op"] = "nope"        # schema
    data["id"] = "wake.another-name"       # semantic: the id must match the file name
    (tmp_path / SHIPPED.name).write_text(json.dumps(data))
    problems = load_catalogue([tmp_path]).problems
    where = sorted(p.pointer for p in problems)
    assert where == ["/id", "/steps/0/op", "/title"], [str(p) for p in problems]
    assert any("does not match the file name" in p.message for p in problems)


def test_a_semantic_rule_that_cannot_read_a_broken_file_waits_for_the_schema_fix(
        tmp_path: Path) -> None:
    data = json.loads(SHIPPED.read_text())
    data["steps"] = "not a list"
    (tmp_path / SHIPPED.name).write_text(json.dumps(data))
    problems = load_catalogue([tmp_path]).problems
    assert [p.pointer for p in problems] == ["/steps"]
