"""fixtures/runner-tests/ is the source of truth: every case runs through the real Python judge.

One pytest item per case, named ``<file>: <group>: <test>`` from the data's descriptions, so a
runner in another language (tests/ts/judge_from_docs.mjs) and this one are held to the same cases.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.contract import HOST_ERROR_KINDS as HOST_KINDS
from palace_conformance.resources import fixtures_dir
from palace_conformance.runner.results import PARITY, ScenarioResult, StepRecord
from palace_conformance.runner.verdict import judge as judge_module
from palace_conformance.runner.verdict import parity
from palace_conformance.runner.verdict.judge import Observation, judge, wire_texts
from palace_conformance.runner.verdict.normalise import (
    PARITY_EFFECT_KINDS,
    TIME_KEYS,
    normalise,
    replacement_list,
    step_outcome,
    tool_result,
)
from palace_conformance.scenarios.checks import evaluate, process_facts, resolve_pointer
from palace_conformance.scenarios.matching import MISSING, OPERATORS, json_equal, matches
from palace_conformance.scenarios.model import Check, Scenario
from palace_conformance.scenarios.schema import schema_problems, validator

RUNNER_TESTS = fixtures_dir() / "runner-tests"
SCHEMA = "runner-tests.schema.json"
FILES = ("matchers", "checks", "expectations", "steps", "parity")
KINDS = ("matcher", "check", "pointer", "tools", "processes", "wire_secrets", "step", "normalise",
         "parity")
CHECK_KINDS = ("sequence", "count", "absent", "order", "distinct", "gap")


@dataclass(frozen=True)
class Case:
    """One test of one group of one file."""

    file: str
    group: dict[str, Any]
    test: dict[str, Any]

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if k in self.group)

    @property
    def id(self) -> str:
        return f"{self.file}: {self.group['description']}: {self.test['description']}"

    @property
    def data(self) -> Any:
        return self.test["data"]


def load(name: str) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = json.loads(
        (RUNNER_TESTS / f"{name}.json").read_text(encoding="utf-8"))
    return groups


CASES = [Case(name, group, test) for name in FILES for group in load(name)
         for test in group["tests"]]


def cases(kind: str) -> list[Any]:
    return [pytest.param(case, id=case.id) for case in CASES if case.kind == kind]


def scenario(steps: list[dict[str, Any]], expect: dict[str, Any] | None = None,
             ignore: list[str] | None = None) -> Scenario:
    data = {"schema_version": 1, "id": "tool.runner-tests.case", "title": "t",
            "covers": ["TOOL-03"], "transports": ["stdio", "http"], "steps": steps,
            "expect": expect or {}, "parity": {"ignore": ignore or []}}
    return Scenario.from_json(data, Path("tool.runner-tests.case.json"))


def verdicts(observation: Observation, prefix: str) -> dict[str, str]:
    return {c.pointer: c.status for c in judge(observation) if c.pointer.startswith(prefix)}


# --- the files themselves ----------------------------------------------------------------


@pytest.mark.parametrize("name", FILES)
def test_each_file_is_valid_against_the_schema(name: str) -> None:
    assert schema_problems(load(name), SCHEMA) == []


def test_the_schema_rejects_a_malformed_case() -> None:
    good = {"description": "d", "matcher": 1, "tests": [
        {"description": "t", "data": 1, "valid": True}]}
    assert validator(SCHEMA).is_valid([good])
    for bad in ({**good, "check": {"check": "absent", "match": {}}},  # two things under test
                {**good, "tests": [{"description": "t", "data": 1}]},  # no outcome
                {**good, "description": "trailing: "},
                {"description": "d", "pointer": "/01", "tests": [
                    {"description": "t", "data": [1, 2], "found": False, "expected": 2}]},
                {"description": "d", "step": {"op": "load"}, "tests": [
                    {"description": "t", "data": {"ok": True}, "expected": {"/steps/1": "pass"}}]}):
        assert not validator(SCHEMA).is_valid([bad]), bad


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_the_data_covers_every_operator_check_host_kind_and_masked_key() -> None:
    text = {name: (RUNNER_TESTS / f"{name}.json").read_text(encoding="utf-8") for name in FILES}
    assert [op for op in OPERATORS if f'"{op}"' not in text["matchers"]] == []
    checks = {case.group["check"]["check"] for case in CASES if case.kind == "check"}
    assert checks == set(CHECK_KINDS)
    errors = {case.data["error"]["kind"] for case in CASES if case.kind == "step"
              and (case.data.get("error") or {}).get("kind") in HOST_KINDS}
    assert errors == set(HOST_KINDS)
    masked = {key for case in CASES if case.kind == "normalise"
              and isinstance(case.data, dict) for key in case.data}
    assert sorted(TIME_KEYS - masked) == []


def test_the_readme_names_every_masked_key_host_kind_and_compared_effect() -> None:
    readme = (fixtures_dir() / "README.md").read_text(encoding="utf-8")
    parity_section = readme[readme.index("## Parity"):readme.index("## Runner tests")]
    named = set(re.findall(r"`([a-z_]+)`", parity_section))
    assert sorted((TIME_KEYS | PARITY_EFFECT_KINDS) - named) == []
    judging = readme[readme.index("### How a step is judged"):readme.index("## Scenario exp")]
    assert all(f"`{kind}`" in judging for kind in HOST_KINDS)


# --- matchers and checks -----------------------------------------------------------------


@pytest.mark.parametrize("case", cases("matcher"))
def test_matcher(case: Case) -> None:
    assert matches(case.group["matcher"], case.data) is case.test["valid"]


@pytest.mark.parametrize("case", cases("check"))
def test_check(case: Case) -> None:
    verdict = evaluate(Check.from_json(case.group["check"]), case.data)
    assert verdict.passed is case.test["valid"], verdict.detail


@pytest.mark.parametrize("case", cases("pointer"))
def test_pointer(case: Case) -> None:
    value = resolve_pointer(case.data, case.group["pointer"])
    if not case.test["found"]:
        assert value is MISSING
    else:
        assert value is not MISSING and json_equal(value, case.test["expected"]), value


# --- scenario expectations ---------------------------------------------------------------


@pytest.mark.parametrize("case", cases("tools"))
def test_tools(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = {"tools": case.group["catalogue"]}
    monkeypatch.setattr(judge_module, "tool_catalogue", lambda: catalogue)
    observation = Observation(scenario([{"op": "load"}], {"tools": case.group["tools"]}),
                              "stdio", [], [], final_tools=case.data)
    expected = {f"/expect/tools/{field}": status for field, status in case.test["expected"].items()}
    assert verdicts(observation, "/expect/tools/") == expected


@pytest.mark.parametrize("case", cases("processes"))
def test_processes(case: Case) -> None:
    alive = set(case.data["alive"])
    facts = process_facts(case.data["journal"], alive=lambda pid: pid in alive)
    assert facts == case.test["facts"]
    observation = Observation(scenario([{"op": "load"}], {"processes": case.group["processes"]}),
                              "stdio", [], case.data["journal"], facts=facts)
    expected = {f"/expect/processes/{field}": status
                for field, status in case.test["expected"].items()}
    assert verdicts(observation, "/expect/processes/") == expected


@pytest.mark.parametrize("case", cases("wire_secrets"))
def test_wire_secrets(case: Case) -> None:
    data = case.data
    journal_text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data["journal"])
    steps = [StepRecord(index, str(index), "call_tool", ran=True, request=s.get("request", {}),
                        result=s.get("result"), error=s.get("error"),
                        effects=list(s.get("effects", [])))
             for index, s in enumerate(data["steps"])]
    texts = wire_texts(journal_text, data["journal"], steps, data["host_stderr"],
                       data["host_argv"])
    observation = Observation(scenario([{"op": "load"}],
                                       {"wire_secrets": case.group["wire_secrets"]}),
                              "stdio", [], data["journal"], secret_texts=texts)
    expected = {f"/expect/wire_secrets/{index}": status
                for index, status in case.test["expected"].items()}
    assert verdicts(observation, "/expect/wire_secrets/") == expected


# --- steps -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases("step"))
def test_step(case: Case) -> None:
    data = case.data
    journal = list(data.get("journal", []))
    case_scenario = scenario([case.group["step"]])
    step = case_scenario.steps[0]
    record = StepRecord(step.index, step.key, step.op, ran=data.get("ran", True), ok=data["ok"],
                        result=data.get("result"), error=data.get("error"),
                        effects=list(data.get("effects", [])),
                        elapsed_ms=data.get("elapsed_ms"), failure=data.get("failure"),
                        journal_start=0, journal_end=len(journal))
    step_tools = {step.index: data["tools"]} if "tools" in data else {}
    observation = Observation(case_scenario, data.get("transport", "stdio"), [record], journal,
                              step_tools=step_tools)
    assert verdicts(observation, "/steps/") == case.test["expected"]


# --- parity ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases("normalise"))
def test_normalise(case: Case) -> None:
    options = case.group["normalise"]
    replacements = replacement_list(options["replacements"])
    data = case.data
    if options["as"] == "value":
        got = normalise(data, replacements)
    elif options["as"] == "tool_result":
        got = tool_result(data, replacements)
    else:
        record = StepRecord(0, data["key"], data["op"], ran=True, ok=data.get("ok"),
                            result=data.get("result"), error=data.get("error"),
                            effects=list(data.get("effects", [])), failure=data.get("failure"))
        got = step_outcome(record, replacements)
    assert json_equal(got, case.test["expected"]), got


@pytest.mark.parametrize("case", cases("parity"))
def test_parity(case: Case) -> None:
    settings = case.group["parity"]
    compared = scenario(settings["steps"], ignore=settings["ignore"])
    runs = {t: ScenarioResult(compared.id, t, "passed", outcome=case.data[t])
            for t in ("stdio", "http")}
    result = parity.compare(compared, runs["stdio"], runs["http"])
    [check] = result.checks
    assert check.transport == PARITY
    expected = case.test["expected"]
    if expected is None:
        assert result.status == "passed", result.reason
        return
    assert result.status == "failed"
    assert f"differ at {expected['pointer']}: " in check.message, check.message
    assert json_equal(check.expected, expected["stdio"]) and json_equal(check.got, expected["http"])
