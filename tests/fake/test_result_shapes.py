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
