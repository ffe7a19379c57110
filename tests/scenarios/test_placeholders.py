"""``${NAME}`` expansion: every string, escaped inside ``$regex``, loud when a value is missing."""

from __future__ import annotations

import pytest

from palace_conformance.scenarios.matching import matches
from palace_conformance.scenarios.placeholders import PlaceholderError, expand, names

from .shipped import catalogue

VALUES = {"TMP": "/tmp/run.1+x", "FAKE_URL": "http://127.0.0.1:5/mcp", "FAKE_TOKEN": "tok"}


def test_expands_every_string_but_not_keys() -> None:
    data = {"env": {"${TMP}": "${TMP}/a"}, "list": ["${FAKE_URL}", 3, None]}
    assert expand(data, VALUES) == {"env": {"${TMP}": "/tmp/run.1+x/a"},
                                    "list": ["http://127.0.0.1:5/mcp", 3, None]}


def test_regex_values_are_inserted_escaped() -> None:
    matcher = expand({"source": {"$regex": "^${TMP}/feed$"}}, VALUES)
    assert matches(matcher, {"source": "/tmp/run.1+x/feed"})
    assert not matches(matcher, {"source": "/tmp/runX1+x/feed"})  # '.' is literal


def test_missing_value_is_an_error() -> None:
    with pytest.raises(PlaceholderError) as raised:
        expand({"env": {"U": "${FAKE_URL}"}}, {"TMP": "/t"})
    assert "${FAKE_URL} has no value here" in str(raised.value)


def test_shipped_scenarios_expand_on_each_of_their_transports() -> None:
    for scenario in catalogue().scenarios:
        for transport in scenario.transports:
            values = dict(VALUES) if transport == "http" else {"TMP": VALUES["TMP"]}
            steps = [s for s in scenario.raw["steps"] if s.get("transport") in (None, transport)]
            expanded = expand({**scenario.raw, "steps": steps}, values)
            assert not any(names(text) for text in _strings(expanded)), scenario.id


def _strings(data: object) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    return []
