"""Seeding the palace: events name earlier events by label, since ids are made while filing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from palace_conformance.scenarios.model import Palace
from palace_conformance.scenarios.palace_state import PalaceSeedError, initial_state

from .test_loader import problems_for, scenario


def _event(body: str, **extra: Any) -> dict[str, Any]:
    return {"type": "note", "stream": "s", "room": "r", "from_agent": "ann", "body": body, **extra}


def test_an_event_id_reference_becomes_the_earlier_events_id() -> None:
    palace = Palace.from_json({"events": [
        _event("ask", **{"as": "ask-1"}),
        _event("reply", metadata={"ack_of": {"$event_id": "ask-1"},
                                  "also": [{"$event_id": "ask-1"}]}),
    ]})
    events = initial_state(palace)["events"]
    assert "as" not in events[0]  # the label is not part of the event
    assert events[1]["metadata"] == {"ack_of": events[0]["id"], "also": [events[0]["id"]]}
    assert events[0]["id"].startswith("evt_")


def test_a_reference_to_an_unknown_label_is_refused_when_seeding() -> None:
    palace = Palace.from_json({"events": [_event("x", metadata={"ack_of": {"$event_id": "nope"}})]})
    with pytest.raises(PalaceSeedError, match="palace event #1: no earlier event labelled 'nope'"):
        initial_state(palace)


@pytest.mark.parametrize(("events", "fragment"), [
    ([_event("reply", metadata={"ack_of": {"$event_id": "ask-1"}}),
      _event("ask", **{"as": "ask-1"})],
     "/palace/events/0/metadata/ack_of: $event_id 'ask-1' names no earlier event"),
    ([_event("a", **{"as": "one"}), _event("b", **{"as": "one"})],
     "/palace/events/1/as: event label 'one' is used twice"),
    ([_event("a", **{"as": "Not A Label"})], "/palace/events/0/as"),
])
def test_bad_labels_and_references_are_one_line_problems(tmp_path: Path, events: list[Any],
                                                         fragment: str) -> None:
    lines = problems_for(tmp_path, scenario(palace={"events": events}))
    assert any(fragment in line for line in lines), lines


def test_a_fresh_palace_seeds_events_and_stays_fresh() -> None:
    state = initial_state(Palace.from_json({"state": "fresh", "events": [_event("hi")]}))
    assert state["initialised"] is False and len(state["events"]) == 1
    assert state["events"][0]["origin_replica"] == state["replica"]
    assert initial_state(Palace.from_json({}))["initialised"] is True


def test_a_fresh_palace_has_its_directory_only_once_it_holds_events() -> None:
    """3.11 makes the palace directory with the first event or vector write; a search on a
    fresh palace half-makes it only if the directory exists (docs/real-server.md)."""
    assert initial_state(Palace.from_json({"state": "fresh"}))["directory"] is False
    with_events = initial_state(Palace.from_json({"state": "fresh", "events": [_event("hi")]}))
    assert with_events["directory"] is True
    assert initial_state(Palace.from_json({}))["directory"] is True


@pytest.mark.parametrize("key", ["diary", "drawers"])
def test_a_fresh_palace_with_filed_contents_is_a_one_line_problem(tmp_path: Path,
                                                                  key: str) -> None:
    item = ({"agent_name": "ann", "entry": "e"} if key == "diary"
            else {"wing": "w", "room": "r", "content": "c"})
    lines = problems_for(tmp_path, scenario(palace={"state": "fresh", key: [item]}))
    assert any(f"/palace/{key}: a fresh palace holds no {key}" in line for line in lines), lines


def test_an_unknown_palace_state_is_refused(tmp_path: Path) -> None:
    lines = problems_for(tmp_path, scenario(palace={"state": "empty"}))
    assert any("/palace/state" in line for line in lines), lines
