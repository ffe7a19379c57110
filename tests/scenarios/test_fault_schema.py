"""fault-plan.schema.json accepts exactly what the fake's loader accepts (differential test)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palace_conformance.fake.faults import (
    ACTIONS,
    INTEGER_PARAMS,
    MAX_COUNT,
    MAX_MS,
    FaultPlanError,
    fault_from_json,
    plan_from_json,
)
from palace_conformance.scenarios.schema import FAULT_PLAN_SCHEMA, schema_problems, validator

ABSENT = object()
PARAMS = sorted({p for _, params in ACTIONS.values() for p in params} | {"bogus", "every"})
VALUES = st.sampled_from([
    None, -300, -255, -1, 0, 1, 5, 99, 199, 200, 203, 204, 205, 300, 304, 399, 404, 599, 600,
    True, False, "text",
    "before_reply",
    "after_reply", "reply", "stall", "exit", {"a": 1}, [1], 1.5,
    "message", "two words", "error\n", "",  # an sse decoy_event: only an event type, not message
    "lf", "crlf", "cr", "mixed", "CRLF",  # an sse line_ending
    86_400_000, 86_400_001, 2**31, 2**31 + 1, 10**26,  # the ceilings of durations and sizes
    ["key=ab", "cd\n"], [], [""],  # write_stderr's pieces: only non-empty strings, at least one
])


@st.composite
def faults(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {}
    action = draw(st.sampled_from([*ACTIONS, "bogus", 3]))
    if draw(st.integers(0, 9)):  # rarely leave the action out
        data["action"] = action
    for key, choices in (
        ("id", [ABSENT, "", "f1", 3]),
        ("times", [ABSENT, None, 0, 1, 3, True, "1"]),
    ):
        value = draw(st.sampled_from(choices))
        if value is not ABSENT:
            data[key] = value
    on = draw(st.sampled_from([ABSENT, "x", {}]))
    if isinstance(on, dict):
        for key, choices in (
            ("method", [ABSENT, "*", "tools/call", "$startup", "initialize", None, 5]),
            ("tool", [ABSENT, None, "mempalace_search", "", 3]),
            ("nth", [ABSENT, 0, 1, 2, True, None, "1"]),
            ("every", [ABSENT, 0, 1, 5, True, None, "5"]),
            ("transport", [ABSENT, None, "stdio", "http", "tcp"]),
            ("extra", [ABSENT, 1]),
        ):
            value = draw(st.sampled_from(choices))
            if value is not ABSENT:
                on[key] = value
    if on is not ABSENT:
        data["on"] = on
    own = sorted(ACTIONS[action][1]) if action in ACTIONS else []
    for name in draw(st.lists(st.sampled_from(own + PARAMS), max_size=3, unique=True)):
        data[name] = draw(VALUES)
    return data


def _python_accepts(fault: dict[str, Any]) -> bool:
    try:
        fault_from_json(fault, 0)
    except FaultPlanError:
        return False
    return True


def _schema_accepts(fault: dict[str, Any]) -> bool:
    return validator(FAULT_PLAN_SCHEMA).is_valid({"schema_version": 1, "faults": [fault]})


@settings(max_examples=150, deadline=None)
@given(faults())
def test_schema_and_loader_agree(fault: dict[str, Any]) -> None:
    assert _schema_accepts(fault) == _python_accepts(fault), fault


def test_known_good_and_bad_faults() -> None:
    good = [
        {"action": "stall", "on": {"tool": "mempalace_search"}},
        {"action": "startup_fail", "on": {"method": "$startup", "nth": 2}, "times": None,
         "code": 1, "stderr": "held"},
        {"action": "http_status", "status": 404, "headers": {"x": "y"}},
        {"action": "error", "code": -32001, "data": {"failure_kind": "peer_contention"}},
        {"action": "stall", "ms": 86_400_000},
        {"action": "flood_stderr", "bytes": 2**31},
        {"action": "write_stderr", "pieces": ["key=ab", "cd\n"], "pause_ms": 300},
        {"action": "write_stderr", "on": {"method": "$startup"}, "pieces": ["x"]},
        {"action": "sse", "decoy_event": "error"},
        {"action": "sse", "decoy_event": "endpoint"},
        {"action": "sse", "decoy_event": None},
        {"action": "sse", "line_ending": "cr", "chunk_bytes": 1, "unknown_fields": True},
        {"action": "sse", "line_ending": None, "chunk_bytes": None, "unknown_fields": None},
        {"action": "sse", "line_ending": "mixed", "chunk_bytes": 3},
        {"action": "sse", "priming_id": "e1", "no_retry": True, "invalid_utf8": True},
        {"action": "sse", "retry_ms": 300, "no_retry": False},
    ]
    bad = [
        {"action": "startup_fail"},
        {"action": "stall", "on": {"method": "$startup"}},
        {"action": "error"},
        {"action": "exit", "when": "later"},
        {"action": "stall", "on": {"tool": "mempalace_search", "method": "ping"}},
        {"action": "stall", "ms": 86_400_001},  # past a day: a typo that would overflow a sleep
        {"action": "delay", "ms": 10**26},
        {"action": "flood_stderr", "bytes": 2**31 + 1},
        {"action": "write_stderr"},
        {"action": "write_stderr", "pieces": []},
        {"action": "write_stderr", "pieces": ["ok", ""]},
        {"action": "write_stderr", "pieces": "text"},
        {"action": "write_stderr", "pieces": ["x"], "bytes": 5},
        {"action": "sse", "decoy_event": "message"},  # that is the real answer's type
        {"action": "sse", "decoy_event": ""},
        {"action": "sse", "decoy_event": "error\n"},
        {"action": "sse", "decoy_event": "an error"},
        {"action": "sse", "decoy_event": 1},
        {"action": "sse", "line_ending": "CRLF"},
        {"action": "sse", "line_ending": "\r\n"},
        {"action": "sse", "line_ending": "Mixed"},
        {"action": "sse", "chunk_bytes": 0},  # a write of nothing
        {"action": "sse", "unknown_fields": 1},
        {"action": "sse", "no_retry": True},  # no priming event to leave the retry out of
        {"action": "sse", "no_retry": True, "priming_id": None},
        {"action": "sse", "no_retry": True, "priming_id": "e1", "retry_ms": 300},
        {"action": "sse", "invalid_utf8": "yes"},
    ]
    for fault in good:
        assert _schema_accepts(fault) and _python_accepts(fault), fault
    for fault in bad:
        assert not _schema_accepts(fault) and not _python_accepts(fault), fault


def test_plan_level_shapes() -> None:
    for plan in ([{"action": "stall"}], {"faults": []}, {"schema_version": 1, "faults": []}):
        assert schema_problems(plan, FAULT_PLAN_SCHEMA) == []
        plan_from_json(plan)
    assert schema_problems({"schema_version": 2, "faults": []}, FAULT_PLAN_SCHEMA)
    assert schema_problems({"faults": [], "extra": 1}, FAULT_PLAN_SCHEMA)


#: what an action needs besides the parameter under test, to be valid at all
_REQUIRED: dict[str, dict[str, Any]] = {
    "http_status": {"status": 500}, "error": {"code": -32001}, "server_request": {"method": "x"},
    "notify": {"method": "x"}, "negotiate_version": {"version": "2025-03-26"},
    "rotate_token": {"token": "t"}, "startup_fail": {"on": {"method": "$startup"}},
    "spawn_grandchild": {"on": {"method": "$startup"}}, "write_stderr": {"pieces": ["x"]},
}


@pytest.mark.parametrize(("action", "name"), sorted(
    (action, name) for action, (_, params) in ACTIONS.items() for name in params
    if name in INTEGER_PARAMS))
def test_every_integer_parameter_has_its_ceiling_in_schema_and_loader(action: str,
                                                                      name: str) -> None:
    ceiling = MAX_MS if name.endswith("ms") else MAX_COUNT
    fault = {"action": action, **_REQUIRED.get(action, {})}
    assert _schema_accepts({**fault, name: ceiling}) and _python_accepts({**fault, name: ceiling})
    over = {**fault, name: ceiling + 1}
    assert not _schema_accepts(over) and not _python_accepts(over), over
