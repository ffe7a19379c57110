"""action.yml and the example workflows in docs/ci.md: the YAML parses, every input an example
passes exists and holds a valid value, the action's steps call only ``palace-conformance ci`` and
``hosts install``, and each example's inputs run through the action's own run step (its bash, its
environment mapping) against the reference bridge with a small selection."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from palace_conformance.cli import build_parser

from .support import CHECKOUT, KIT, Runner, run

ACTION = yaml.safe_load((CHECKOUT / "action.yml").read_text())
DOC = (CHECKOUT / "docs" / "ci.md").read_text()
EXAMPLES = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", DOC, re.S)]
KIT_IN_ACTION = '"$RUNNER_TEMP/palace-conformance-venv/bin/palace-conformance"'
SMALL = "wake.fresh-session.inject-once wake.palace-down.silent"


def steps() -> list[dict[str, Any]]:
    return list(ACTION["runs"]["steps"])


def step(step_id: str) -> dict[str, Any]:
    return next(s for s in steps() if s.get("id") == step_id)


def action_step(workflow: dict[str, Any]) -> dict[str, Any]:
    (job,) = workflow["jobs"].values()
    found = [s for s in job["steps"] if str(s.get("uses", "")).split("@")[0]
             == "OWNER/palace-conformance"]
    assert len(found) == 1, "each example calls the action once"
    return found[0]


def test_the_action_is_composite_with_the_inputs_the_issue_names() -> None:
    assert ACTION["runs"]["using"] == "composite"
    assert {"bridge", "profile", "level", "baseline", "transports", "shard",
            "kit-version"} <= set(ACTION["inputs"])
    text = (CHECKOUT / "action.yml").read_text()
    used = set(re.findall(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", text))
    assert used == set(ACTION["inputs"]), "an input declared but unused, or used but undeclared"
    for ref in re.findall(r"steps\.([\w-]+)\.outputs\.([\w-]+)", text):
        assert any(s.get("id") == ref[0] for s in steps()), ref


def test_the_action_only_calls_the_kit_and_pins_its_actions() -> None:
    parser = build_parser()
    for each in steps():
        if "uses" in each:
            assert re.fullmatch(r"actions/[\w-]+@v\d+", each["uses"]), each["uses"]
            continue
        for line in each["run"].strip().splitlines():
            if KIT_IN_ACTION not in line:
                assert "pip install" in line or line.startswith('"$PYTHON" -m venv'), line
                continue
            argv = line.split(KIT_IN_ACTION, 1)[1].split()
            # the flags the step passes are the command's own (values are "$VARS")
            parsed = parser.parse_args([w if w.startswith("-") or not w.startswith('"$')
                                        else "x" for w in argv])
            assert parsed.command in ("ci", "hosts")
    cache = next(s for s in steps() if str(s.get("uses", "")).startswith("actions/cache@"))
    assert cache["with"] == {"path": "${{ steps.prepare.outputs.hosts-path }}",
                             "key": "${{ steps.prepare.outputs.hosts-key }}"}
    assert cache["if"] == "steps.prepare.outputs.node-hosts == 'true'"
    python = next(s for s in steps() if str(s.get("uses", "")).startswith("actions/setup-python"))
    assert python["with"]["update-environment"] is False  # the job's python stays the job's


@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=["pi-extension", "python-bridge"])
def test_each_example_passes_valid_inputs(index: int) -> None:
    assert len(EXAMPLES) == 2
    workflow = EXAMPLES[index]
    call = action_step(workflow)
    assert re.fullmatch(r"OWNER/palace-conformance@v\d+\.\d+\.\d+", call["uses"])
    given = call.get("with", {})
    assert set(given) <= set(ACTION["inputs"]), set(given) - set(ACTION["inputs"])
    assert given.get("level", "core") in ("core", "seed")
    assert given.get("transports", "both") in ("stdio", "http", "both")
    shard = str(given.get("shard", "1/1"))
    (job,) = workflow["jobs"].values()
    for value in job.get("strategy", {}).get("matrix", {}).get("shard", [1]):
        assert re.fullmatch(r"\d+/\d+", shard.replace("${{ matrix.shard }}", str(value)))
    assert "bridge" in given or "profile" in given


def _as_the_action_would(gh: Runner, given: dict[str, str]) -> dict[str, str]:
    """The run step's environment for these inputs (its `env:` block with the inputs and the
    prepare step's outputs filled in), files the inputs name made in the workspace."""
    values = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    values |= {k: str(v) for k, v in given.items()}
    if values["profile"]:  # the reader's profile names their extension: here the reference
        (gh.workspace / values["profile"]).write_text(json.dumps(
            {"schema_version": 1, "name": "example", "entry": "reference"}))
    if values["baseline"]:
        (gh.workspace / values["baseline"]).write_text(json.dumps(
            {"schema_version": 1, "entries": []}))
    if values["bridge"] and values["bridge"] != "reference":
        values["bridge"] = "reference"  # the reader's own bridge is not here
    values["shard"] = values["shard"].replace("${{ matrix.shard }}", "1")
    values["select"] = SMALL
    prepared = gh.outputs()
    env = {}
    for name, expression in step("run")["env"].items():
        match = re.fullmatch(r"\$\{\{ (inputs|steps\.prepare\.outputs)\.([\w-]+) \}\}",
                             expression)
        assert match, expression
        env[name] = values[match[2]] if match[1] == "inputs" else prepared[match[2]]
    return env


@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=["pi-extension", "python-bridge"])
def test_each_example_runs_through_the_actions_own_steps(index: int, tmp_path: Path) -> None:
    gh = Runner(tmp_path)
    given = {k: str(v) for k, v in action_step(EXAMPLES[index]).get("with", {}).items()}
    kit = str(KIT).replace('"', "")
    # the prepare step, as written in action.yml, then the run step
    prepare_env = gh.env(BRIDGE="", PROFILE="", SHARD="")
    done = run(["bash", "-c", step("prepare")["run"].replace(KIT_IN_ACTION, f'"{kit}"')],
               prepare_env, cwd=gh.workspace)
    assert done.returncode == 0, done.stderr
    env = _as_the_action_would(gh, given)
    script = step("run")["run"].replace(KIT_IN_ACTION, f'"{kit}"')
    done = run([shutil.which("bash") or "bash", "-c", script], gh.env(**env), cwd=gh.workspace)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "palace-conformance ci: palace-conformance run" in done.stdout
    assert gh.summary.read_text().startswith("## ✅ palace-conformance: passed")
    outputs = gh.outputs()
    report = Path(outputs["report-dir"])
    assert (report / "junit.xml").is_file() and (report / "summary.md").is_file()
    assert outputs["exit-code"] == "0"
