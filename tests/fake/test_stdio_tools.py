"""FAKE-03 over stdio: tools/call argument handling, error texts and result shapes of 3.11.0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from .stdio_harness import FakeProcess, payload


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeProcess]:
    with FakeProcess(tmp_path_factory.mktemp("tools")) as proc:
        yield proc


@pytest.fixture
def fake(shared: FakeProcess) -> Iterator[FakeProcess]:
    """One process for the module: each test uses its own agent, stream and wing names."""
    yield shared
    assert shared.alive() and shared.sync() == []


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" not in reply, reply
    return reply["error"]


@pytest.mark.parametrize(("params", "code", "message"), [
    ({"arguments": {}}, -32602, "Invalid params: 'name' is required for tools/call"),
    ({}, -32602, "Invalid params: 'name' is required for tools/call"),
    ({"name": 5}, -32602, "Invalid params: 'name' must be a string and 'arguments' an object"),
    ({"name": None}, -32602, "Invalid params: 'name' must be a string and 'arguments' an object"),
    ({"name": "mempalace_status", "arguments": []}, -32602,
     "Invalid params: 'name' must be a string and 'arguments' an object"),
    ({"name": "mempalace_status", "arguments": "x"}, -32602,
     "Invalid params: 'name' must be a string and 'arguments' an object"),
    ({"name": "mempalace_nope", "arguments": {}}, -32601, "Unknown tool: mempalace_nope"),
    ({"name": "mempalace_diary_read", "arguments": {"agent": "x"}}, -32602,
     "Unknown parameter 'agent' for tool mempalace_diary_read"),
    ({"name": "mempalace_diary_read", "arguments": {"agent_name": "x", "b": 1, "a": 2}}, -32602,
     "Unknown parameters 'b', 'a' for tool mempalace_diary_read"),
    ({"name": "mempalace_diary_write", "arguments": {"entry": "no agent"}}, -32602,
     "Missing required parameter 'agent_name' for tool mempalace_diary_write"),
    ({"name": "mempalace_diary_write", "arguments": {"agent_name": "a"}}, -32602,
     "Missing required parameter 'entry' for tool mempalace_diary_write"),
    ({"name": "mempalace_kg_add", "arguments": {"predicate": "p"}}, -32602,
     "Missing required parameters 'subject', 'object' for tool mempalace_kg_add"),
    ({"name": "mempalace_diary_read", "arguments": {"agent_name": "a", "last_n": "abc"}}, -32602,
     "Invalid value for parameter 'last_n'"),
    ({"name": "mempalace_diary_read", "arguments": {"agent_name": "a", "last_n": "2.5"}}, -32602,
     "Invalid value for parameter 'last_n'"),
    ({"name": "mempalace_diary_read", "arguments": {"agent_name": "a", "last_n": None}}, -32602,
     "Invalid value for parameter 'last_n'"),
    ({"name": "mempalace_search", "arguments": {"query": "q", "max_distance": "far"}}, -32602,
     "Invalid value for parameter 'max_distance'"),
])
def test_argument_errors_are_jsonrpc_errors(fake: FakeProcess, params: dict[str, Any],
                                            code: int, message: str) -> None:
    assert error_of(fake.request("tools/call", params)) == {"code": code, "message": message}


def test_unknown_parameters_are_refused_before_missing_ones(fake: FakeProcess) -> None:
    reply = fake.call("mempalace_kg_add", {"subj": "x"})
    assert error_of(reply)["message"] == "Unknown parameter 'subj' for tool mempalace_kg_add"


def test_internal_tool_error_carries_class_and_message(fake: FakeProcess) -> None:
    reply = fake.call("mempalace_mine", {"source": 5})  # os.path.expanduser(5) raises
    error = error_of(reply)
    assert error["code"] == -32000 and error["message"] == "Internal tool error"
    assert set(error["data"]) == {"error_class", "message"}
    assert error["data"]["error_class"] == "TypeError"
    assert "int" in error["data"]["message"]


def test_result_is_one_pretty_printed_text_block_without_is_error(fake: FakeProcess) -> None:
    reply = fake.call("mempalace_kg_add", {"subject": "s", "predicate": "p", "object": "\u00f6"})
    assert list(reply["result"]) == ["content"]
    text = reply["result"]["content"][0]["text"]
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    assert text.startswith('{\n  "success": true,\n  "triple_id": "t_s_p_\u00f6_')
    assert json.loads(text)["fact"] == "s \u2192 p \u2192 \u00f6"


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    # 3.11 checks that the event exists before its status (the status text: test_result_shapes)
    ("mempalace_event_ack", {"event_id": "evt_x", "from_agent": "a", "status": "done"},
     {"success": False, "error": "event 'evt_x' not found"}),
    ("mempalace_event_ack", {"event_id": "evt_nope", "from_agent": "a"},
     {"success": False, "error": "event 'evt_nope' not found"}),
    ("mempalace_diary_write", {"agent_name": "", "entry": "x"},
     {"success": False, "error": "agent_name must be a non-empty string"}),
    ("mempalace_diary_read", {"agent_name": "nobody"},
     {"agent": "nobody", "entries": [], "message": "No diary entries yet."}),
])
def test_business_failures_are_plain_results(fake: FakeProcess, tool: str,
                                             arguments: dict[str, Any], expected: Any) -> None:
    reply = fake.call(tool, arguments)
    assert "isError" not in reply["result"]
    assert payload(reply) == expected


def test_content_is_an_alias_for_entry_and_entry_wins(fake: FakeProcess) -> None:
    assert payload(fake.call("mempalace_diary_write",
                             {"agent_name": "alias", "content": "via alias"}))["success"] is True
    assert payload(fake.call("mempalace_diary_write",
                             {"agent_name": "alias", "entry": "entry wins", "content": "ignored"}))
    assert payload(fake.call("mempalace_diary_write",
                             {"agent_name": "alias", "entry": None, "content": "null entry"}))
    entries = payload(fake.call("mempalace_diary_read", {"agent_name": "alias"}))["entries"]
    assert sorted(e["content"] for e in entries) == ["entry wins", "null entry", "via alias"]


def test_wait_for_previous_is_accepted_and_dropped(fake: FakeProcess) -> None:
    reply = fake.call("mempalace_diary_read", {"agent_name": "w", "wait_for_previous": True})
    assert payload(reply)["agent"] == "w"


def test_numbers_are_coerced_like_mempalace(fake: FakeProcess) -> None:
    for index in range(3):
        fake.call("mempalace_diary_write", {"agent_name": "num", "entry": f"entry {index}"})
    for last_n, shown in (("1", 1), (2.9, 2), ("  3 ", 3), (True, 1)):
        result = payload(fake.call("mempalace_diary_read",
                                   {"agent_name": "num", "last_n": last_n}))
        assert (result["showing"], result["total"]) == (shown, 3), last_n


def test_diary_write_result_shape(fake: FakeProcess) -> None:
    result = payload(fake.call("mempalace_diary_write",
                               {"agent_name": "probe-agent", "entry": "e", "topic": "probe"}))
    assert list(result) == ["success", "entry_id", "agent", "topic", "timestamp", "chunks"]
    assert result["entry_id"].startswith("diary_wing_probe-agent_")
    assert (result["agent"], result["topic"], result["chunks"]) == ("probe-agent", "probe", 1)


def test_add_drawer_twice_reports_already_exists(fake: FakeProcess) -> None:
    args = {"wing": "probe", "room": "twice", "content": "A drawer about the probe run."}
    first = payload(fake.call("mempalace_add_drawer", args))
    second = payload(fake.call("mempalace_add_drawer", args))
    assert list(first) == ["success", "drawer_id", "wing", "room", "chunks"]
    assert second == {"success": True, "reason": "already_exists",
                      "drawer_id": first["drawer_id"]}


def test_event_append_then_list(fake: FakeProcess) -> None:
    appended = payload(fake.call("mempalace_event_append", {
        "type": "note", "stream": "only-here", "room": "r", "from_agent": "a", "body": "hello"}))
    assert appended["success"] is True and appended["event"]["seq"] >= 1
    listed = payload(fake.call("mempalace_event_list", {"stream": "only-here", "limit": "5"}))
    assert listed["count"] == 1 and listed["events"][0]["id"] == appended["event"]["id"]
