"""The real-world test bridges' profiles: valid against the bridge profile schema, true to the
bridge they describe, and the planted defects catchable by scenarios that apply under them.

This checks them as data (the runs are in ``test_realworld_verdicts.py``): the schema (plain
jsonschema), that every variable, tool name and entry file a profile names is in the bridge's
source, and that every scenario ``realworld/README.md`` names as catching a planted defect exists
and would run under the profile (transport and capabilities claimed, no ``fixed`` knob
contradicted, only mapped tools called).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from palace_conformance.resources import fixtures_dir, tool_catalogue
from palace_conformance.runner.execution import profile_edges
from palace_conformance.runner.profiling.matching import SEED_KNOBS

REALWORLD = Path(__file__).resolve().parent / "extensions" / "realworld"
BRIDGES = ["pyspawn", "configfile", "knobs", "curated", "agentshapes", "fixedconst", "envelope",
           "twoserver", "officialsdk", "typedsettings", "bare"]
DEFECT_LINE = re.compile(r"^// ([A-Z]+-\d{2}): \S")
BEHAVIOUR_ID = re.compile(r"\b[A-Z]+-\d{2}\b")


def schema_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((fixtures_dir() / "schema" / "bridge-profile.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def profile(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((REALWORLD / f"{name}.profile.json").read_text())
    return loaded


def source(name: str) -> str:
    return (REALWORLD / f"{name}.ts").read_text()


def behaviour_levels() -> dict[str, str]:
    data = json.loads((fixtures_dir() / "behaviours.json").read_text())
    return {b["id"]: b["level"] for b in data["behaviours"]}


def planted_defects(name: str) -> list[str]:
    """The IDs listed under ``// PLANTED DEFECTS:`` in the bridge's header, one per line."""
    lines = source(name).splitlines()
    start = lines.index("// PLANTED DEFECTS:") + 1
    ids = []
    for line in lines[start:]:
        found = DEFECT_LINE.match(line)
        if not found:
            break
        ids.append(found.group(1))
    return ids


def readme_rows(name: str) -> dict[str, list[str]]:
    """The bridge's table in ``realworld/README.md``: defect ID -> scenarios said to catch it."""
    text = (REALWORLD / "README.md").read_text()
    section = text.split(f"\n## {name}.ts\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and (found := BEHAVIOUR_ID.match(cells[0])):
            rows[found.group(0)] = re.findall(r"`([a-z0-9.-]+)`", cells[1])
    return rows


def scenario(scenario_id: str) -> dict[str, Any]:
    [path] = list((fixtures_dir() / "scenarios").glob(f"*/{scenario_id}.json"))
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def why_not_applicable(found: dict[str, Any], bridge: dict[str, Any]) -> list[str]:
    """What would make a profile-aware runner skip this scenario for this bridge ([] = runs)."""
    claimed = set(bridge["claims"]["capabilities"])
    problems = []
    if not set(found["transports"]) & claimed:
        problems.append(f"transports {found['transports']} not claimed")
    if missing := set(found.get("requires", [])) - claimed:
        problems.append(f"requires {sorted(missing)}")
    env = found.get("env", {})
    pace = set(found.get("env_pace", ()))  # dropped for such a bridge, its windows derived
    for seed, knob in bridge.get("knobs", {}).items():
        if seed in pace:
            continue
        if "fixed" in knob and seed in env and env[seed] is not None and \
                str(env[seed]) != str(knob["fixed"]):
            problems.append(f"sets {seed}={env[seed]}; the bridge has it fixed at {knob['fixed']}")
        if "absent" in knob and seed in env:
            problems.append(f"sets {seed}, which the bridge lacks")
    if routes(bridge):
        mapped = {tool for _, tool in routes(bridge)}
        found = copy.deepcopy(found)  # an incidental read runs with a mapped one (docs/profiles.md)
        profile_edges._substitute_incidental_calls(found, mapped)
        for step in found["steps"]:
            if step["op"] == "call_tool" and step["name"] not in mapped and \
                    step.get("expect", {}).get("error", {}).get("kind") != "no_such_tool":
                problems.append(f"calls unmapped {step['name']}")
    return problems


def routes(bridge: dict[str, Any]) -> list[tuple[str, str]]:
    """(bridge tool, catalogue tool) for every entry of ``tools.map`` (a name, an entry with
    fixed arguments, or a list of those)."""
    out = []
    for own, entry in bridge.get("tools", {}).get("map", {}).items():
        for each in entry if isinstance(entry, list) else [entry]:
            out.append((own, each if isinstance(each, str) else each["tool"]))
    return out


@pytest.mark.parametrize("name", BRIDGES)
def test_profile_is_valid_and_names_its_bridge(name: str) -> None:
    found = profile(name)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in schema_validator().iter_errors(found)]
    assert errors == []
    assert found["entry"] == f"pi-extension:{name}.ts"
    assert (REALWORLD / f"{name}.ts").is_file()


def test_the_schema_rejects_a_profile_that_breaks_it() -> None:
    broken = copy.deepcopy(profile("knobs"))
    broken["knobs"]["MEMPALACE_MCP_TIMEOUT_MS"]["unit"] = "h"
    broken["tools"] = {"map": {"palace_search": "search"}}
    broken["channels"] = {"wakeup": "toast"}
    errors = schema_validator().iter_errors(broken)
    paths = sorted("/".join(map(str, e.absolute_path)) for e in errors)
    assert paths == ["channels/wakeup", "knobs/MEMPALACE_MCP_TIMEOUT_MS",
                     "tools/map/palace_search"]


@pytest.mark.parametrize("name", BRIDGES)
def test_profile_says_what_the_bridge_does(name: str) -> None:
    found, code = profile(name), source(name)
    seed_knobs = (fixtures_dir() / "behaviours.json").read_text()
    digits = code.replace("_", "")
    for seed, knob in found.get("knobs", {}).items():
        assert seed in seed_knobs or seed in SEED_KNOBS, \
            f"{seed} is not one of the seed's variables"
        if "env" in knob:
            variable = knob["env"]
            assert f'"{variable}"' in code or f"process.env.{variable}" in code, \
                f"{name}.ts never reads {variable}"
        if "fixed" in knob:
            assert re.search(rf"\b{knob['fixed']}\b", digits), f"{name}.ts has no {knob['fixed']}"
    catalogue = {t["name"] for t in tool_catalogue()["tools"]}
    for bridge_tool, palace_tool in routes(found):
        assert palace_tool in catalogue
        assert f'name: "{bridge_tool}"' in code or f"{bridge_tool}: {{ palace:" in code
        assert f'"{palace_tool}"' in code, f"{name}.ts never calls {palace_tool}"
    for program in found.get("servers", {}).values():
        assert f'"{program}"' in code, f"{name}.ts never starts {program}"
    for file in found.get("files", []):
        for part in Path(file["path"].removeprefix("${HOME}/")).parts:
            assert f'"{part}"' in code, f"{name}.ts never opens {file['path']}"
    for channel, where in found.get("channels", {}).items():
        marker = {"system_prompt": "systemPrompt:", "notify": ".notify(",
                  "is_error": "isError: true", "throw": "throw "}[where]
        assert marker in code, f"{name}.ts does not use {marker} for {channel}"


@pytest.mark.parametrize("name", BRIDGES)
def test_planted_defects_are_core_and_caught_by_applicable_scenarios(name: str) -> None:
    planted = planted_defects(name)
    levels = behaviour_levels()
    assert 2 <= len(planted) <= 3
    assert {levels.get(behaviour) for behaviour in planted} == {"core"}
    rows = readme_rows(name)
    assert sorted(rows) == sorted(planted), "README and header disagree"
    for behaviour, scenario_ids in rows.items():
        assert scenario_ids, f"{behaviour}: no scenario named"
        for scenario_id in scenario_ids:
            assert why_not_applicable(scenario(scenario_id), profile(name)) == [], scenario_id


def test_applicability_sees_what_a_profile_rules_out() -> None:
    knobs, curated, fixed = profile("knobs"), profile("curated"), profile("fixedconst")
    # its start-up budget is pace there (the backoff is the behaviour): it runs at knobs' 8 s
    assert why_not_applicable(scenario("stdio.respawn.cap-with-backoff"), knobs) == []
    assert why_not_applicable(scenario("stdio.respawn.cap-with-backoff"), fixed) == [
        "sets MEMPALACE_MCP_RESPAWN_BACKOFF_MS=700; the bridge has it fixed at 500"]
    assert why_not_applicable(scenario("wake.fresh-session.inject-once"), knobs) == [
        "requires ['wakeup']"]
    assert why_not_applicable(scenario("life.shutdown.stdio-polite-close"), curated) == [
        "transports ['stdio'] not claimed"]
    assert "calls unmapped mempalace_list_wings" in why_not_applicable(
        scenario("tool.errors.codes-and-data-kept"), curated)


def test_the_fixed_constants_bridge_declares_every_seed_knob_fixed_or_absent() -> None:
    knobs = profile("fixedconst")["knobs"]
    assert sorted(knobs) == sorted(SEED_KNOBS)
    assert all(set(knob) in ({"fixed"}, {"absent"}) for knob in knobs.values())
    assert "process.env" not in source("fixedconst")  # it reads no variable at all
