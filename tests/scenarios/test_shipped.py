"""The shipped catalogue: every scenario valid, schemas sound, data files consistent."""

from __future__ import annotations

import json
from pathlib import Path

from jsonschema import Draft202012Validator

from palace_conformance.fake.faults import ACTIONS, STARTUP_ACTIONS
from palace_conformance.resources import fixtures_dir
from palace_conformance.scenarios.behaviours import load_behaviours
from palace_conformance.scenarios.model import AREAS
from palace_conformance.scenarios.palace_state import initial_state
from palace_conformance.scenarios.schema import FAULT_PLAN_SCHEMA, SCENARIO_SCHEMA, load_schema

from .shipped import catalogue


def test_every_shipped_scenario_is_valid() -> None:
    loaded = catalogue()
    assert [str(p) for p in loaded.problems] == []
    assert len(loaded.scenarios) >= 12
    assert len(loaded.files) == len(loaded.scenarios)
    areas = {s.area for s in loaded.scenarios}
    assert len(areas) >= 8 and areas <= set(AREAS)


def test_every_scenario_lives_at_area_slash_id() -> None:
    for scenario in catalogue().scenarios:
        assert scenario.path.parent.name == scenario.area
        assert scenario.path.name == f"{scenario.id}.json"


def test_every_scenario_asserts_something() -> None:
    """A scenario with no expectation at all could never fail."""
    for scenario in catalogue().scenarios:
        step_expectations = [s.expect for s in scenario.steps if s.expect is not None]
        whole = scenario.expect
        assert step_expectations or whole.journal or whole.effects or whole.processes, scenario.id


def test_schemas_are_valid_2020_12() -> None:
    for name in (SCENARIO_SCHEMA, FAULT_PLAN_SCHEMA):
        schema = load_schema(name)
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["description"]


def test_fault_plan_schema_follows_the_fake() -> None:
    """Each action's parameter list in the schema is exactly the fake's ACTIONS table."""
    fault = load_schema(FAULT_PLAN_SCHEMA)["$defs"]["fault"]
    assert fault["properties"]["action"]["enum"] == list(ACTIONS)
    per_action = {rule["if"]["properties"]["action"]["const"]: rule["then"]
                  for rule in fault["allOf"] if "const" in rule["if"].get("properties", {})
                  .get("action", {})}
    assert set(per_action) == set(ACTIONS)
    for action, (transports, params) in ACTIONS.items():
        allowed = set(per_action[action]["propertyNames"]["enum"])
        assert allowed == {"id", "on", "times", "action", *params}, action
        assert fault["x-actions"][action]["transports"] == sorted(transports)
    startup_rule = fault["allOf"][0]["then"]["properties"]["action"]["enum"]
    assert set(startup_rule) == STARTUP_ACTIONS


def test_behaviours_json_is_well_formed() -> None:
    path = fixtures_dir() / "behaviours.json"
    data = json.loads(path.read_text())
    behaviours = load_behaviours(path)
    assert len(behaviours) == len(data["behaviours"]) >= 60
    assert {b.area for b in behaviours} == set(data["areas"])
    assert {b.area.lower() for b in behaviours} == set(AREAS)
    assert all("\n" not in b.title and b.title for b in behaviours)


def test_behaviours_markdown_reads_the_same(tmp_path: Path) -> None:
    behaviours = load_behaviours()
    text = "# Behaviours\n\n## LIFE: x\n" + "".join(f"- {b.id} {b.title}\n" for b in behaviours)
    md = tmp_path / "BEHAVIOURS.md"
    md.write_text(text)
    assert load_behaviours(md) == behaviours


def test_palace_blocks_seed_the_fake() -> None:
    seeded = [s for s in catalogue().scenarios if not s.palace.empty]
    assert seeded
    for scenario in seeded:
        state = initial_state(scenario.palace)
        assert len(state["events"]) == len(scenario.palace.events)
        assert len(state["drawers"]) == len(scenario.palace.drawers) + len(scenario.palace.diary)
        assert [e["seq"] for e in state["events"]] == list(range(1, len(state["events"]) + 1))


def test_readme_documents_every_op_check_and_operator() -> None:
    readme = (fixtures_dir() / "README.md").read_text()
    schema = load_schema(SCENARIO_SCHEMA)
    for op in schema["$defs"]["step"]["properties"]["op"]["enum"]:
        assert f"`{op}`" in readme, op
    for check in schema["$defs"]["check"]["properties"]["check"]["enum"]:
        assert f"`{check}`" in readme, check
    for operator in schema["$defs"]["matcher"]["then"]["properties"]:
        assert f"`{operator}`" in readme, operator


def test_every_behaviour_has_a_level_and_fake_ids_are_the_fakes() -> None:
    from palace_conformance.scenarios.behaviours import LEVELS, load_behaviours

    behaviours = load_behaviours()
    assert {b.level for b in behaviours} == set(LEVELS)
    assert all((b.level == "fake") == (b.area == "FAKE") for b in behaviours)
    core = {b.id for b in behaviours if b.level == "core"}
    # the safety rules any bridge must keep: bounded waits, no hang on a dead child, fail-closed
    # remote mode, intact arguments and errors, token safety
    assert {"STDIO-01", "STDIO-02", "STDIO-12", "LIFE-02", "TOOL-02", "TOOL-04", "HTTP-01"} <= core


def test_a_behaviours_file_with_an_unknown_level_is_refused_in_one_line(tmp_path) -> None:
    import json

    import pytest

    from palace_conformance.scenarios.behaviours import BehavioursError, load_behaviours

    listing = tmp_path / "b.json"
    entry = {"id": "LIFE-01", "title": "t", "level": "gold"}
    listing.write_text(json.dumps({"behaviours": [entry]}))
    with pytest.raises(BehavioursError, match="'level' is one of core, seed, fake"):
        load_behaviours(listing)
    listing.write_text(json.dumps({"behaviours": [{"id": "LIFE-01", "title": "t"}]}))
    assert load_behaviours(listing)[0].level == "seed"
