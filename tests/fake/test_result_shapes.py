"""Result and error shapes the schema lets through, as mempalace 3.11.0 gives them.

Pinned to ``data/argument_results.json`` (each item names its source: a line of the research
captures' ``stdio_session.jsonl``, or ``mempalace-3.11-semantics.md`` sections 4.1 and 5 where no
raw capture exists), and to ``stdio_session.jsonl`` line 44 for the event shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from .stdio_harness import DATA, FakeProcess, payload

ITEMS = json.loads((DATA / "argument_results.json").read_text(encoding="utf-8"))["items"]
#: stdio_session.jsonl line 44: event_append's event, in 3.11's key order
EVENT_KEYS = ["id", "seq", "origin_replica", "origin_seq", "hlc", "type", "stream", "room",
              "topic", "from_agent", "to_agent", "correlation_id", "branch", "base_commit",
              "status", "artifact_ids", "body", "created_at", "metadata"]


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeProcess]:
    with FakeProcess(tmp_path_factory.mktemp("shapes")) as proc:
        yield proc


@pytest.mark.parametrize("item", ITEMS, ids=lambda i: i["call"]["name"] + "-" + "-".join(
    sorted(i["call"]["arguments"])))
def test_wrong_typed_arguments_answer_as_3_11(fake: FakeProcess, item: dict[str, Any]) -> None:
    reply = fake.call(item["call"]["name"], item["call"]["arguments"])
    if "error" in item:
        assert reply.get("error") == item["error"], item["source"]
        assert "result" not in reply
    else:
        assert "error" not in reply, item["source"]
        assert "isError" not in reply["result"]
        assert payload(reply) == item["payload"], item["source"]


def test_a_refused_write_files_nothing(fake: FakeProcess) -> None:
    fake.call("mempalace_add_drawer", {"wing": "shapes", "room": "r", "content": "   "})
    fake.call("mempalace_checkpoint", {"items": "not a list"})
    assert "shapes" not in payload(fake.call("mempalace_list_wings"))["wings"]


def test_event_append_without_a_body_stores_an_empty_one(fake: FakeProcess) -> None:
    """mempalace-3.11-semantics.md section 4.1: a missing body becomes ""."""
    event = payload(fake.call("mempalace_event_append", {
        "type": "note", "stream": "shapes", "room": "r", "from_agent": "c@z",
        "to_agent": "*"}))["event"]
    assert event["body"] == "" and list(event) == EVENT_KEYS
    listed = payload(fake.call("mempalace_event_list", {"stream": "shapes"}))["events"]
    assert [e["body"] for e in listed] == [""]


# -- result shapes of mempalace-3.11-semantics.md section 4.1 (and the captures it names) -------


def test_event_ack_checks_the_status_of_a_known_event(fake: FakeProcess) -> None:
    """stdio_session.jsonl lines 117-120 (session s2): a known event with status 'done' gets
    the status text; an unknown one 'not found', whatever its status."""
    event = payload(fake.call("mempalace_event_append", {
        "type": "note", "stream": "acks", "room": "r", "from_agent": "a", "body": "b"}))["event"]
    assert payload(fake.call("mempalace_event_ack", {
        "event_id": event["id"], "from_agent": "probe-agent", "status": "done"})) == {
        "success": False, "error": "status='done' is not one of: applied, blocked, claimed, "
                                   "failed, open, ready, superseded"}
    assert payload(fake.call("mempalace_event_ack", {
        "event_id": "evt_nope", "from_agent": "probe-agent", "status": "done"})) == {
        "success": False, "error": "event 'evt_nope' not found"}


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    ("mempalace_get_drawer", {"drawer_id": "x"}, {"error": "Drawer not found: x"}),
    ("mempalace_artifact_get", {"artifact_id": "x"}, {"error": "artifact 'x' not found"}),
    ("mempalace_artifact_put", {"kind": "nope", "content": "x", "created_by": "a"},
     {"success": False, "error": "kind='nope' is not one of: file, json, log, note, patch"}),
])
def test_misses_and_refusals_have_3_11s_shape(fake: FakeProcess, tool: str,
                                              arguments: dict[str, Any], expected: Any) -> None:
    reply = fake.call(tool, arguments)
    assert "isError" not in reply["result"] and payload(reply) == expected


def test_event_list_notes_that_from_agent_does_not_filter(fake: FakeProcess) -> None:
    note = ("from_agent is your identity and does not filter event_list/event_wait. Filter by "
            "who wrote an event with writer=<agent>; for your inbox use to_agent=<you>.")
    fake.call("mempalace_event_append", {"type": "note", "stream": "notes", "room": "r",
                                         "from_agent": "b@y"})
    noted = payload(fake.call("mempalace_event_list", {"stream": "notes", "from_agent": "a@x"}))
    assert noted["note"] == note and noted["count"] == 1  # and it filtered nothing
    assert list(noted) == ["events", "count", "note"]
    for arguments in ({"stream": "notes"}, {"stream": "notes", "from_agent": "a@x",
                                            "writer": "b@y"}):
        assert "note" not in payload(fake.call("mempalace_event_list", arguments))


def test_kg_query_sorts_facts_as_3_11(fake: FakeProcess) -> None:
    fake.call("mempalace_kg_add", {"subject": "alice", "predicate": "works_on",
                                   "object": "palace"})
    fake.call("mempalace_kg_add", {"subject": "alice", "predicate": "worked_on", "object": "hut",
                                   "valid_to": "2001-01-01"})
    answer = payload(fake.call("mempalace_kg_query", {"entity": "alice"}))
    fact = {"direction": "outgoing", "subject": "alice", "predicate": "works_on",
            "object": "palace", "valid_from": None, "valid_to": None, "confidence": 1.0,
            "source_closet": None, "current": True}
    assert list(answer) == ["entity", "as_of", "active_facts", "historical_facts",
                            "future_facts", "facts", "count"]
    assert answer["active_facts"] == [fact] and answer["as_of"] is None
    assert [f["object"] for f in answer["historical_facts"]] == ["hut"]
    assert answer["historical_facts"][0]["current"] is False
    assert answer["future_facts"] == [] and answer["count"] == 2
    incoming = payload(fake.call("mempalace_kg_query", {"entity": "palace"}))["facts"]
    assert [f["direction"] for f in incoming] == ["incoming"]


def test_search_items_have_3_11s_eighteen_keys(fake: FakeProcess) -> None:
    """stdio_session.jsonl line 40: a search item's keys, in order."""
    fake.call("mempalace_add_drawer", {"wing": "keys", "room": "notes",
                                       "content": "lighthouse storms"})
    item = payload(fake.call("mempalace_search", {"query": "lighthouse", "wing": "keys"}))[
        "results"][0]
    assert list(item) == ["drawer_id", "text", "wing", "room", "source_file", "source_path",
                          "created_at", "filed_at", "authored_at", "authored_at_source",
                          "content_date", "content_date_source", "similarity", "distance",
                          "effective_distance", "closet_boost", "matched_via", "bm25_score"]


# -- the name rules (mempalace-3.11-semantics.md section 5), checked in 3.11's order ----------


@pytest.mark.parametrize(("arguments", "error"), [
    ({"subject": "café", "predicate": "\u2192", "object": "ü"},  # section 4.1's own example
     "predicate contains invalid characters"),
    ({"subject": "s", "predicate": "p" * 129, "object": "o"},
     "predicate exceeds maximum length of 128 characters"),
    ({"subject": "s", "predicate": "a/b", "object": "o"},
     "predicate contains invalid path characters"),
    ({"subject": "s", "predicate": "a..b", "object": "o"},
     "predicate contains invalid path characters"),
    ({"subject": "s", "predicate": "a\x00b", "object": "o"}, "predicate contains null bytes"),
    ({"subject": "s", "predicate": "_p", "object": "o"}, "predicate contains invalid characters"),
    ({"subject": "x" * 129, "predicate": "p", "object": "o"},
     "subject exceeds maximum length of 128 characters"),
    ({"subject": "s", "predicate": "p", "object": "o\x00"}, "object contains null bytes"),
])
def test_kg_add_refuses_as_3_11(fake: FakeProcess, arguments: dict[str, Any], error: str) -> None:
    assert payload(fake.call("mempalace_kg_add", arguments)) == {"success": False,
                                                                 "error": error}


def test_subjects_and_objects_only_need_text(fake: FakeProcess) -> None:
    """café and ü pass as subject and object (section 5); the predicate is a name."""
    added = payload(fake.call("mempalace_kg_add", {"subject": "café", "predicate": "likes",
                                                   "object": "ü / ✓"}))
    assert added["success"] is True and added["fact"] == "café \u2192 likes \u2192 ü / ✓"


# as the real 3.11.0 answered (2026-12-02, a stdio session with the offline embedding stub)
@pytest.mark.parametrize(("triple", "prefix"), [
    (("Café Au", "served by", "Naïve → Crème"), "t_café_au_served_by_naïve_→_crème_"),
    (("Alice B", "works_on", "Big Palace"), "t_alice_b_works_on_big_palace_"),
    (("X-Y", "p-q", "a.b c"), "t_x-y_p-q_a.b_c_"),
])
def test_triple_ids_are_lower_case_with_spaces_as_underscores(
        fake: FakeProcess, triple: tuple[str, str, str], prefix: str) -> None:
    subject, predicate, obj = triple
    added = payload(fake.call("mempalace_kg_add", {"subject": subject, "predicate": predicate,
                                                   "object": obj}))
    assert added["triple_id"].startswith(prefix), added
    assert len(added["triple_id"]) == len(prefix) + 12  # and a 12-hex digest
    assert added["fact"] == f"{subject} \u2192 {predicate} \u2192 {obj}"


@pytest.mark.parametrize(("tool", "arguments", "error"), [
    ("mempalace_add_drawer", {"wing": "a/b", "room": "r", "content": "c"},
     "wing contains invalid path characters"),
    ("mempalace_add_drawer", {"wing": "w", "room": "-r", "content": "c"},
     "room contains invalid characters"),
    ("mempalace_diary_write", {"agent_name": "pi@box", "entry": "e"},
     "agent_name contains invalid characters"),
    ("mempalace_diary_write", {"agent_name": "pi", "entry": "e", "topic": "a..b"},
     "topic contains invalid path characters"),
])
def test_names_follow_3_11s_rule(fake: FakeProcess, tool: str, arguments: dict[str, Any],
                                 error: str) -> None:
    assert payload(fake.call(tool, arguments)) == {"success": False, "error": error}


def test_hook_settings_stores_what_it_is_given_and_says_so(fake: FakeProcess) -> None:
    """As 3.11.0 answered (fidelity, 2026-12-02): a non-boolean is stored as given."""
    answer = payload(fake.call("mempalace_hook_settings", {"silent_save": "maybe"}))
    assert answer["settings"]["silent_save"] == "maybe"
    assert answer["updated"] == ["silent_save \u2192 maybe"]
    answer = payload(fake.call("mempalace_hook_settings", {"silent_save": True}))
    assert answer["updated"] == ["silent_save \u2192 True"]  # Python's text of the value
    assert "updated" not in payload(fake.call("mempalace_hook_settings", {}))


def test_patch_submit_refuses_content_that_is_not_text(fake: FakeProcess) -> None:
    answer = payload(fake.call("mempalace_patch_submit", {
        "content": 12345, "from_agent": "probe-agent", "stream": "fidelity"}))
    assert answer == {"success": False, "error": "content must be a non-empty string"}
