"""``cli`` steps: the bridge's command-line program as the subject (fixtures/README.md, "The CLI
as a subject"). The loader holds such a scenario to CLI steps and to ``requires: ["cli"]``, the
driver request carries the arguments, and the dimension table derives ``subject.cli``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from palace_conformance.scenarios import dimensions
from palace_conformance.scenarios.loader import load_catalogue, load_scenario, scenarios_dir

from .test_loader import write

CLI: dict[str, Any] = {
    "schema_version": 1,
    "id": "tool.cli.sample",
    "title": "palace-bridge tools prints the catalogue",
    "covers": ["TOOL-01"],
    "level": "seed",
    "requires": ["cli"],
    "transports": ["stdio"],
    "steps": [
        {"op": "cli", "as": "tools", "args": ["tools"], "stdin": "",
         "expect": {"result": {"exit_code": 0, "stderr": ""}}},
        {"op": "sleep", "ms": 10},
    ],
}


def problems(tmp_path: Path, data: dict[str, Any]) -> list[str]:
    write(tmp_path, data)
    return [str(p) for p in load_catalogue([tmp_path]).problems]


def test_a_cli_scenario_loads_without_a_load_step(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, CLI))
    [step, _] = scenario.steps
    assert step.host_op and step.driver_request() == {"op": "cli", "args": ["tools"],
                                                         "stdin": ""}
    assert "subject.cli" in dimensions.scenario_cells(scenario, dimensions.load_vocabulary())


def test_a_cli_scenario_must_require_the_capability(tmp_path: Path) -> None:
    data = copy.deepcopy(CLI)
    del data["requires"]
    [line] = problems(tmp_path, data)
    assert "/requires" in line and "capability 'cli'" in line and 'add "cli"' in line


def test_a_cli_scenario_loads_no_bridge(tmp_path: Path) -> None:
    data = copy.deepcopy(CLI)
    data["steps"].insert(0, {"op": "load"})
    [line] = problems(tmp_path, data)
    assert "/steps/0/op" in line and "op 'load' in a scenario of 'cli' steps" in line


def test_cli_args_are_strings(tmp_path: Path) -> None:
    data = copy.deepcopy(CLI)
    data["steps"][0]["args"] = "tools"
    [line] = problems(tmp_path, data)
    assert "/steps/0/args" in line


def test_the_shipped_cli_scenarios_need_the_capability_and_cover_exit_codes() -> None:
    shipped = [load_scenario(path) for path in sorted(scenarios_dir().glob("*/*.cli.*.json"))]
    assert len(shipped) >= 7
    assert all("cli" in s.requires and all(x.op in ("cli", "sleep", "server") for x in s.steps)
               for s in shipped)
    codes = {step["expect"]["result"]["exit_code"] for s in shipped for step in s.raw["steps"]
             if step["op"] == "cli" and "expect" in step}
    assert codes >= {0, 1, 2, 3, 4, 6}
