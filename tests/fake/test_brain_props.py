"""Properties of the brain, in-process: fast enough for hundreds of examples per property."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palace_conformance.fake.faults import ACTIONS, STARTUP, parse_compact
from palace_conformance.resources import tool_catalogue

from .stdio_harness import call_in_process, check_reply, drive, expected_reply, make_brain, rpc
from .test_stdio_fuzz import json_values, rpc_ish

PROPS = settings(deadline=None, max_examples=150,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
CATALOGUE = tool_catalogue()
TOOLS = {tool["name"]: tool for tool in CATALOGUE["tools"]}
#: tools whose arguments name host paths or block: driven with fixed values below
SPECIAL = {"mempalace_mine", "mempalace_event_wait"}


@pytest.fixture
def brain(tmp_path: Path) -> Any:
    return make_brain(tmp_path)


@settings(PROPS)
@given(rpc_ish)
def test_replies_follow_mempalace_rules(brain: Any, message: dict[str, Any]) -> None:
    line = json.dumps(message, ensure_ascii=False).encode("utf-8", "replace")
    port = drive(brain, line)
    assert port.exit_code is None
    expected = expected_reply(line)
    if expected is None:
        assert port.out == []
    else:
        assert len(port.out) == 1
        check_reply(expected, port.out[0])


def schema_value(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if kind == "string":
        return st.sampled_from(schema["enum"]) if "enum" in schema else st.text(max_size=20)
    if kind == "integer":
        return st.integers(-5, 50)
    if kind == "number":
        return st.floats(0, 1)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        items = schema.get("items", {})
        return st.lists(schema_value(items) if items else st.text(max_size=10), max_size=3)
    if kind == "object":
        properties = schema.get("properties", {})
        if properties:
            return st.fixed_dictionaries({k: schema_value(v) for k, v in properties.items()})
        return st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2)
    return json_values


@st.composite
def schema_valid_call(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(set(TOOLS) - SPECIAL)))
    schema = TOOLS[name]["inputSchema"]
    properties = schema.get("properties", {})
    required = set(schema.get("required", [])) | set(
        CATALOGUE["policies"]["extra_required"].get(name, []))
    optional = draw(st.sets(st.sampled_from(sorted(properties)), max_size=len(properties))
                    if properties else st.just(set()))
    args = {key: draw(schema_value(properties[key])) for key in sorted(required | optional)
            if key in properties}
    return name, args


@settings(PROPS)
@given(schema_valid_call())
def test_schema_valid_calls_give_one_pretty_result(brain: Any,
                                                   call: tuple[str, dict[str, Any]]) -> None:
    name, args = call
    reply = call_in_process(brain, name, args)
    if "error" in reply:
        # 3.11 checks some values past the schema (a name with ':' in it, say) and raises: its
        # one shape for that is -32000 with the exception's class and message in `data`
        error = reply["error"]
        assert error["code"] == -32000 and error["message"] == "Internal tool error", reply
        assert set(error["data"]) == {"error_class", "message"}, reply
        return
    assert "result" in reply, (name, args, reply)
    content = reply["result"]["content"]
    assert len(content) == 1 and content[0]["type"] == "text"
    text = content[0]["text"]
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    assert "isError" not in reply["result"]


@settings(PROPS, max_examples=80)
@given(st.sampled_from(sorted(TOOLS)),
       st.dictionaries(st.text(min_size=1, max_size=8), json_values, min_size=1, max_size=3))
def test_unknown_arguments_are_named_in_order(brain: Any, name: str,
                                              extra: dict[str, Any]) -> None:
    properties = TOOLS[name]["inputSchema"].get("properties", {})
    unknown = [k for k in extra if k not in properties and k != "wait_for_previous"]
    reply = call_in_process(brain, name, extra)
    if unknown:
        word = "parameter" if len(unknown) == 1 else "parameters"
        quoted = ", ".join(f"'{k}'" for k in unknown)
        assert reply["error"] == {"code": -32602,
                                  "message": f"Unknown {word} {quoted} for tool {name}"}


def test_event_wait_holds_for_its_timeout_without_sleeping_in_process(brain: Any) -> None:
    port = drive(brain, json.dumps(rpc("tools/call", {"name": "mempalace_event_wait",
                                                      "arguments": {"timeout_ms": "1500"}})))
    assert port.paused == [1500]
    assert json.loads(port.out[0]["result"]["content"][0]["text"])["timed_out"] is True
    port = drive(brain, json.dumps(rpc("tools/call", {"name": "mempalace_event_wait",
                                                      "arguments": {"timeout_ms": 10**9}})))
    assert port.paused == [300000]  # capped at 300 s like mempalace


# -- the compact syntax and occurrence rules -------------------------------------------------

targets = st.sampled_from(["", "@ping", "@tools/call", "@mempalace_search", "@*"])


@settings(PROPS)
@given(st.sampled_from(["stall", "delay", "garbage", "duplicate_response", "wrong_id"]),
       targets, st.integers(1, 9), st.one_of(st.none(), st.integers(1, 9)))
def test_compact_round_trip(action: str, target: str, nth: int, times: int | None) -> None:
    spec = f"{action}{target}#{nth}x{'*' if times is None else times}"
    data = parse_compact(spec).to_json()
    assert (data["action"], data["on"]["nth"], data["times"]) == (action, nth, times)
    if target.startswith("@mempalace_"):
        assert data["on"] == {"method": "tools/call", "tool": target[1:], "nth": nth}
    else:
        assert data["on"]["method"] == (target[1:] or "*")


@settings(PROPS, max_examples=60)
@given(st.integers(1, 4), st.integers(1, 3), st.lists(st.sampled_from(["ping", "tools/list"]),
                                                     min_size=1, max_size=10))
def test_faults_fire_on_the_nth_through_nth_plus_times_minus_one_match(
        tmp_path_factory: pytest.TempPathFactory, nth: int, times: int,
        methods: list[str]) -> None:
    brain = make_brain(tmp_path_factory.mktemp("nth"),
                       faults=[f"error@ping#{nth}x{times},code=-7,message=m"])
    seen = 0
    for index, method in enumerate(methods):
        port = drive(brain, json.dumps(rpc(method, None, index)))
        seen += method == "ping"
        should_fire = method == "ping" and nth <= seen < nth + times
        assert ("error" in port.out[0]) is should_fire, (index, method, seen)


@settings(PROPS, max_examples=40)
@given(st.integers(1, 4), st.lists(st.sampled_from(["ping", "tools/list"]), min_size=1,
                                   max_size=14))
def test_every_n_fires_through_the_brain_on_exactly_the_nth_2nth_3nth_match(
        tmp_path_factory: pytest.TempPathFactory, every: int, methods: list[str]) -> None:
    brain = make_brain(tmp_path_factory.mktemp("every"),
                       faults=[f"error@ping,every={every},code=-7,message=m"])
    seen = 0
    for index, method in enumerate(methods):
        port = drive(brain, json.dumps(rpc(method, None, index)))
        seen += method == "ping"
        should_fire = method == "ping" and seen % every == 0
        assert ("error" in port.out[0]) is should_fire, (index, method, seen)


def test_every_action_is_documented_with_its_transports() -> None:
    assert all(transports <= {"stdio", "http"} for transports, _ in ACTIONS.values())
    assert parse_compact(f"ignore_sigterm@{STARTUP}").on.method == STARTUP
