"""Whatever a scenario file holds, the loader answers with one-line problems, never a traceback."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from palace_conformance.scenarios import schema
from palace_conformance.scenarios.loader import Context, load_file

from .shipped import catalogue
from .shipped import scenario as shipped

CONTEXT = Context.default()

SEEDS = ("tool.errors.rpc-errors-and-results-kept", "stdio.respawn.cap-with-backoff",
         "mail.wakeup.broadcast-never-owed", "fake.handshake.catalogue-and-versions")
junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(
        ["", "x", "$regex", "${TMP}", "${NOPE}", "stdio", "http", "load", "sequence", "stall",
         "mempalace_search", "LIFE-01", "tools/call"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["op", "check", "action", "$eq", "$bogus", "match", "on", "x"]), inner,
        max_size=3),
    max_leaves=6,
)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _paths(value, (*prefix, index))
    return found


def _replace(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    data[path[0]] = _replace(data[path[0]], path[1:], value)
    return data


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SEEDS), st.data(), junk)
def test_mutated_scenarios_give_one_line_problems(tmp_path: Path, seed: str, data: st.DataObject,
                                                  value: Any) -> None:
    original = shipped(seed)
    raw = copy.deepcopy(dict(original.raw))
    path = data.draw(st.sampled_from(_paths(raw)[1:]))
    mutated = _replace(raw, path, value)
    target = tmp_path / original.area / f"{original.id}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(mutated))
    loaded, problems = load_file(target, CONTEXT)
    assert (loaded is None) == bool(problems)
    for problem in problems:
        line = str(problem)
        assert "\n" not in line and line.startswith(str(target)), line
        assert problem.message and problem.fix, line


def _shape(error: ValidationError) -> tuple[Any, ...]:
    """Everything of an error that problems are made from, its causes included."""
    return (tuple(error.absolute_path), tuple(error.absolute_schema_path), error.validator,
            error.message, tuple(_shape(cause) for cause in error.context))


def _errors(validator: Any, data: Any) -> list[tuple[Any, ...]]:
    return [_shape(error) for error in validator.iter_errors(data)]


STOCK = Draft202012Validator(schema.load_schema(schema.SCENARIO_SCHEMA),
                             registry=schema._registry())


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SEEDS), st.data(), junk)
def test_the_dispatching_all_of_gives_the_stock_validators_errors(
        seed: str, data: st.DataObject, value: Any) -> None:
    raw = copy.deepcopy(dict(shipped(seed).raw))
    path = data.draw(st.sampled_from(_paths(raw)))
    mutated = _replace(raw, path, value)
    assert _errors(schema.validator(), mutated) == _errors(STOCK, mutated)


def _kinds(data: Any) -> set[tuple[str, str]]:
    """The ops, check kinds, actions and matcher operators a document uses."""
    found: set[tuple[str, str]] = set()
    if isinstance(data, dict):
        found |= {(key, data[key]) for key in ("op", "check", "action")
                  if isinstance(data.get(key), str)}
        found |= {("matcher", key) for key in data if key.startswith("$")}
        for value in data.values():
            found |= _kinds(value)
    elif isinstance(data, list):
        for value in data:
            found |= _kinds(value)
    return found


def _covering(scenarios: list[Any]) -> list[Any]:
    """Few scenarios that together use every kind the catalogue uses (validating them all with
    the stock validator costs seconds)."""
    kinds = {s.id: _kinds(dict(s.raw)) for s in scenarios}
    wanted = set().union(*kinds.values())
    chosen: list[Any] = []
    covered: set[tuple[str, str]] = set()
    while covered != wanted:
        best = max(scenarios, key=lambda s: len(kinds[s.id] - covered))
        chosen.append(best)
        covered |= kinds[best.id]
    return chosen


def test_the_dispatching_all_of_agrees_on_shipped_scenarios_and_broken_steps() -> None:
    broken_steps: list[Any] = [{"op": "bogus"}, {}, {"op": 3}, {"op": ["load"]}, "load", [],
                               {"op": "call_tool"}, {"op": "load", "extra": 1}, None]
    chosen = _covering(catalogue().scenarios)
    assert len(chosen) >= 10 and {"op", "check", "action", "matcher"} == {
        kind for s in chosen for kind, _ in _kinds(dict(s.raw))}
    for scenario in chosen:
        raw = dict(scenario.raw)
        broken = {**raw, "steps": [*raw["steps"], *broken_steps]}
        found = _errors(schema.validator(), broken)
        assert found == _errors(STOCK, broken) and len(found) >= len(broken_steps)
