"""A fresh palace that 3.11's ``search`` or ``sync`` half-made, as the real 3.11.0 answered it.

Once the palace directory exists (the event log and ``mesh_peers`` make it), ``search`` and
``sync`` on a still-fresh palace leave a ``chroma.sqlite3`` without its collection: reads then
answer "Backend open failed" (``isError``) until a vector write or ``status`` makes the
collection. Without the directory they make nothing. Found with the fidelity script and pinned
against the real server by ``tests/real/test_half_made_real.py`` (2026-12-02).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake.brain import tool_result
from palace_conformance.fake.palace import PalaceStore, run_tool

PALACE = "/p"
BACKEND_OPEN_FAILED = {
    "error": "Backend open failed", "details": "Could not open the selected backend collection.",
    "hint": "Run: mempalace status or mempalace repair-status for diagnostics.",
    "backend": "chroma"}
NO_PALACE = {"error": "No palace found", "results": [],
             "hint": "Run: mempalace init <dir> && mempalace mine <dir>"}
#: every read that opens the collection, with arguments that pass its checks
READS = [("mempalace_list_wings", {}), ("mempalace_list_rooms", {}),
         ("mempalace_get_taxonomy", {}), ("mempalace_check_duplicate", {"content": "x"}),
         ("mempalace_get_drawer", {"drawer_id": "d"}),
         ("mempalace_get_drawers", {"drawer_ids": ["d"]}), ("mempalace_list_drawers", {}),
         ("mempalace_diary_read", {"agent_name": "a"}), ("mempalace_graph_stats", {}),
         ("mempalace_follow_tunnels", {"wing": "probe", "room": "notes"}),
         ("mempalace_delete_drawer", {"drawer_id": "drawer_nope"}),
         ("mempalace_delete_drawers", {"drawer_ids": ["drawer_nope"]}),
         ("mempalace_update_drawer", {"drawer_id": "drawer_nope", "content": "u"}),
         ("mempalace_delete_by_source", {"source_file": "/x/y.md"})]
#: the tools that open 3.11's event log (and so make the palace directory) on any call
DIRECTORY_MAKERS = [("mempalace_mesh_peers", {}), ("mempalace_event_list", {}),
                    ("mempalace_event_wait", {"timeout_ms": 0}),
                    ("mempalace_artifact_get", {"artifact_id": "art_nope"}),
                    ("mempalace_event_append", {"type": "", "stream": "s", "room": "r",
                                                "from_agent": "a"}),
                    ("mempalace_task_create", {"project": 12345, "from_agent": "a",
                                               "to_agent": "b", "goal": "g", "branch": "main",
                                               "base_commit": "abc1234", "done": "d"})]


def call(store: PalaceStore, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    return run_tool(store, tool, arguments or {}, PALACE)


def half_made() -> PalaceStore:
    store = PalaceStore(None, {"initialised": False})
    call(store, "mempalace_mesh_peers")
    assert call(store, "mempalace_search", {"query": "x"}) == NO_PALACE
    return store


def test_search_on_a_palace_without_its_directory_makes_nothing() -> None:
    store = PalaceStore(None, {"initialised": False})
    assert call(store, "mempalace_search", {"query": "x"}) == NO_PALACE
    assert call(store, "mempalace_sync") == {"success": False, "error": "sync failed: /p"}
    assert call(store, "mempalace_list_drawers")["error"] == "Chroma database missing"
    assert store.state.bare_database is False and store.state.directory is False


@pytest.mark.parametrize(("tool", "arguments"), DIRECTORY_MAKERS,
                         ids=[tool for tool, _ in DIRECTORY_MAKERS])
def test_the_event_log_tools_make_the_directory_even_when_they_refuse(
        tool: str, arguments: dict[str, Any]) -> None:
    store = PalaceStore(None, {"initialised": False})
    call(store, tool, arguments)
    assert store.state.directory is True
    call(store, "mempalace_search", {"query": "x"})
    assert call(store, "mempalace_list_wings") == BACKEND_OPEN_FAILED


def test_knowledge_graph_tools_leave_no_directory() -> None:
    """3.11 keeps the knowledge graph outside the palace directory."""
    store = PalaceStore(None, {"initialised": False})
    call(store, "mempalace_kg_add", {"subject": "s", "predicate": "p", "object": "o"})
    call(store, "mempalace_search", {"query": "x"})
    assert call(store, "mempalace_list_wings")["error"] == "Chroma database missing"


@pytest.mark.parametrize(("tool", "arguments"), READS, ids=[tool for tool, _ in READS])
def test_every_read_of_a_half_made_palace_says_the_backend_failed(
        tool: str, arguments: dict[str, Any]) -> None:
    store = half_made()
    answer = call(store, tool, arguments)
    assert answer == BACKEND_OPEN_FAILED
    assert tool_result(answer)["isError"] is True  # one brain: both transports flag it
    assert call(store, "mempalace_list_drawers") == BACKEND_OPEN_FAILED  # it stays half-made


def test_the_rest_of_a_half_made_palace_answers_as_3_11() -> None:
    store = half_made()
    assert call(store, "mempalace_search", {"query": "x"}) == NO_PALACE
    # the room graph is read from chroma.sqlite3 itself: empty, not failed
    assert call(store, "mempalace_traverse", {"start_room": "notes"}) == {
        "error": "Room 'notes' not found", "suggestions": []}
    assert call(store, "mempalace_find_tunnels") == []
    assert call(store, "mempalace_reconnect") == {
        "success": False, "message": "Backend open failed",
        "details": "Could not open the selected backend collection.",
        "hint": "Run: mempalace status or mempalace repair-status for diagnostics.",
        "drawers": 0, "vector_disabled": False}
    assert call(store, "mempalace_update_drawer", {"drawer_id": "drawer_nope"}) == {
        "success": True, "drawer_id": "drawer_nope", "noop": True}
    for arguments in ({}, {"project_dir": 12345}, {"project_dir": "/src"}):
        assert call(store, "mempalace_sync", arguments) == {
            "success": False, "error": "sync failed: /p"}
    # no room to check against: the tunnel is filed, under 3.11's symmetric id
    tunnel = call(store, "mempalace_create_tunnel", {
        "source_wing": "probe", "source_room": "notes", "target_wing": "other",
        "target_room": "notes"})
    assert tunnel["id"] == "8054775b0a7c8b3b"
    assert [t["id"] for t in call(store, "mempalace_list_tunnels")] == ["8054775b0a7c8b3b"]
    assert call(store, "mempalace_mesh_peers")["self"]["profile"]["drawers"] is None


def test_a_vector_write_makes_the_collection() -> None:
    store = half_made()
    assert call(store, "mempalace_add_drawer", {"wing": "probe", "room": "notes",
                                                "content": "A drawer."})["success"] is True
    assert call(store, "mempalace_list_wings") == {"wings": {"probe": 1}}
    assert store.state.bare_database is False and store.state.initialised is True


def test_status_makes_the_collection_of_a_half_made_palace() -> None:
    """3.11's status opens with create=True once chroma.sqlite3 exists: an empty palace whose
    integrity was never checked (the server started on a fresh one)."""
    store = half_made()
    status = call(store, "mempalace_status")
    assert (status["total_drawers"], status["wings"], status["rooms"]) == (0, {}, {})
    assert status["sqlite_integrity"]["checked"] is False
    assert call(store, "mempalace_list_drawers") == {"drawers": [], "total": 0, "count": 0,
                                                     "offset": 0, "limit": 20}
    assert call(store, "mempalace_reconnect")["success"] is True


def test_the_half_made_state_outlives_the_process(tmp_path: Path) -> None:
    """A respawned fake sees what its predecessor left, as the real palace's files would."""
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"initialised": False}), encoding="utf-8")
    store = PalaceStore(path)
    call(store, "mempalace_event_list")
    call(store, "mempalace_search", {"query": "x"})
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert (saved["directory"], saved["bare_database"]) == (True, True)
    assert call(PalaceStore(path), "mempalace_get_drawer", {"drawer_id": "d"}) == (
        BACKEND_OPEN_FAILED)


def test_a_state_file_without_the_new_keys_reads_as_before() -> None:
    assert PalaceStore(None, {"initialised": False}).state.directory is False
    assert PalaceStore(None, {"initialised": True}).state.directory is True
    seeded = PalaceStore(None, {"initialised": False, "events": [{"seq": 1}]})
    assert seeded.state.directory is True and seeded.state.bare_database is False
