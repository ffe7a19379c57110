"""From relayed messages to a draft: pairing, redaction, stable matchers, error steps."""

from __future__ import annotations

import json

from palace_conformance.record.draft import Cleaner, build_draft, tool_calls
from palace_conformance.relay.stdio import FROM_PALACE, TO_PALACE, Message
from palace_conformance.scenarios.matching import matches

SECRET = "tok-0123456789abcdef"


def sent(message: dict) -> Message:
    return Message(TO_PALACE, 0.0, message)


def answered(message: dict) -> Message:
    return Message(FROM_PALACE, 0.0, message)


def call(id_: object, name: str, arguments: dict) -> Message:
    return sent({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                 "params": {"name": name, "arguments": arguments}})


def text_result(id_: object, value: object, is_error: bool = False) -> Message:
    return answered({"jsonrpc": "2.0", "id": id_, "result": {
        "content": [{"type": "text", "text": json.dumps(value)}], "isError": is_error}})


CLEANER = Cleaner([SECRET], [("/home/alice", "${TMP}/home"), ("/tmp", "${TMP}")])


def test_answers_pair_by_id_with_its_json_type() -> None:
    messages = [call(1, "mempalace_status", {}), call("1", "mempalace_search", {"query": "q"}),
                text_result("1", {"query": "q"}), text_result(1, {"total_drawers": 0}),
                answered({"jsonrpc": "2.0", "id": 7, "result": {}})]  # never asked: ignored
    pairs = tool_calls(messages)
    assert [(r["params"]["name"], a["result"]["content"][0]["text"]) for r, a in pairs] == [
        ("mempalace_status", '{"total_drawers": 0}'), ("mempalace_search", '{"query": "q"}')]


def test_arguments_lose_secrets_and_machine_paths() -> None:
    draft = build_draft([call(1, "mempalace_add_drawer", {
        "wing": "w", "room": "r", "content": f"token {SECRET} in /home/alice/notes",
        "source_file": "/tmp/pytest-9/x.md"}), text_result(1, {"success": True})],
        "tool.recorded.case", cleaner=CLEANER)
    step = draft["steps"][3]
    assert step["args"] == {"wing": "w", "room": "r",
                            "content": "token <redacted-secret-1> in ${TMP}/home/notes",
                            "source_file": "${TMP}/pytest-9/x.md"}
    assert step["validate"] is False
    assert SECRET not in json.dumps(draft)


def test_volatile_values_are_left_out_of_the_result_matcher() -> None:
    result = {"success": True, "drawer_id": "drawer_w_r_abc", "filed_at": "2026-08-01T09:30:00",
              "note": "held by PID 4242", "path": "/tmp/run-1/palace", "wing": "w",
              "nested": {"id": 3, "count": 2}, "items": [{"created_at": "x"}], "tags": ["a"],
              "leak": SECRET}
    draft = build_draft([call(1, "mempalace_add_drawer", {}), text_result(1, result)],
                        "tool.recorded.case", cleaner=CLEANER)
    assert draft["steps"][3]["expect"] == {"ok": True, "result": {
        "is_error": False,
        "json": {"success": True, "wing": "w", "nested": {"count": 2}, "tags": ["a"],
                 "items": [{"created_at": {"$exists": True}}]}}}


def test_a_recorded_search_asserts_how_many_hits_their_ids_and_shapes() -> None:
    found = {"query": "q", "results": [
        {"id": "drawer_w_r_1", "wing": "w", "similarity": 0.91, "filed_at": "2026-08-01T09:30:00",
         "source_file": "/tmp/run-1/notes.md"},
        {"id": "drawer_w_r_2", "wing": "w", "similarity": 0.52, "filed_at": "2026-08-01T09:31:00",
         "source_file": None}]}
    draft = build_draft([call(1, "mempalace_search", {"query": "q"}), text_result(1, found)],
                        "tool.recorded.search", cleaner=CLEANER)
    hits = draft["steps"][3]["expect"]["result"]["json"]["results"]
    assert len(hits) == 2  # how much was found
    assert [h["wing"] for h in hits] == ["w", "w"]  # where, stable
    assert hits[0]["id"] == {"$exists": True}  # a minted drawer id is volatile: only there
    assert hits[0]["filed_at"] == {"$exists": True}
    assert hits[0]["source_file"] == {"$exists": True}  # a machine path: only there
    assert set(hits[1]) == {"id", "wing", "similarity", "filed_at", "source_file"}  # its shape
    assert hits[1]["source_file"] is None
    fewer = {"query": "q", "results": found["results"][:1]}
    assert not matches(draft["steps"][3]["expect"]["result"]["json"], fewer)


def test_errors_become_error_kinds_and_is_error_results_stay_results() -> None:
    draft = build_draft([
        call(1, "mempalace_diary_read", {"agent": "x"}),
        answered({"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32602, "message": "Unknown parameter 'agent' for tool mempalace_diary_read"}}),
        call(2, "mempalace_search", {"query": "q"}),
        answered({"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": "search failed: disk full"}], "isError": True}}),
        call(3, "mempalace_status", {}),  # the palace never answered
    ], "tool.recorded.case", cleaner=CLEANER)
    steps = draft["steps"]
    assert steps[3]["expect"] == {"error": {
        "kind": "tool_error", "code": -32602,
        "message_contains": "Unknown parameter 'agent' for tool mempalace_diary_read"}}
    assert steps[4]["expect"] == {"ok": True, "result": {
        "is_error": True, "content": [{"type": "text", "text": "search failed: disk full"}]}}
    assert "expect" not in steps[5] and "never replied" in steps[5]["comment"]
    assert [s["as"] for s in steps[3:6]] == ["call-1-diary_read", "call-2-search",
                                             "call-3-status"]
    assert steps[-1] == {"op": "shutdown", "reason": "quit"}


def test_every_draft_meets_the_scenario_schema() -> None:
    from palace_conformance.scenarios.schema import schema_problems

    empty = build_draft([], "tool.recorded.empty", cleaner=CLEANER)
    assert [s["op"] for s in empty["steps"]] == ["load", "event", "settle", "shutdown"]
    full = build_draft([call(1, "mempalace_status", {}), text_result(1, {"a": 1}),
                        call(2, "mempalace_search", {"query": "q"}),
                        answered({"jsonrpc": "2.0", "id": 2, "error": {"code": -32000,
                                                                     "message": "boom"}})],
                       "tool.recorded.full", cleaner=CLEANER)
    assert schema_problems(empty) == [] and schema_problems(full) == []
