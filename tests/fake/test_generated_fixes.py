"""The fake answers as the real mempalace 3.11.0 did where ``fidelity --generated`` (seeds 3,
29, 30 and 31) found it off. The same calls, shrunk, are the regression cases
(``fidelity/generated_cases.json``, ``generated_sequences.json``) that every ``fidelity
--generated`` run replays on both servers first (``tests/real/test_generated_real.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from palace_conformance.fake.palace import PalaceStore, run_tool


def call(store: PalaceStore, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    return run_tool(store, tool, arguments or {}, "/p")


def initialised() -> PalaceStore:
    store = PalaceStore(None, {})
    call(store, "mempalace_add_drawer", {"wing": "probe", "room": "notes", "content": "A note."})
    return store


def test_content_with_a_nul_byte_or_past_100000_characters_is_refused() -> None:
    store = initialised()
    assert call(store, "mempalace_add_drawer", {"wing": "w", "room": "r", "content": "a\x00b"}
                ) == {"success": False, "error": "content contains null bytes"}
    assert call(store, "mempalace_add_drawer", {"wing": "w", "room": "r",
                                                "content": "x" * 100_001}) == {
        "success": False, "error": "content exceeds maximum length of 100000 characters"}
    assert call(store, "mempalace_diary_write", {"agent_name": "a", "entry": "a\x00b"}) == {
        "success": False, "error": "content contains null bytes"}
    assert call(store, "mempalace_list_wings")["wings"] == {"probe": 1}


def test_search_checks_its_filters_and_options_in_311s_order() -> None:
    store = initialised()
    assert call(store, "mempalace_search", {"query": "x", "query_task": "x"}) == {
        "error": "include_media must be boolean and query_task must be 'search' or 'code'"}
    assert call(store, "mempalace_search", {"query": "x", "candidate_strategy": "bm25"}) == {
        "error": "candidate_strategy must be one of ('vector', 'union')"}
    assert call(store, "mempalace_search", {"query": "x", "source_file": 3}) == {
        "error": "source_file must be a string"}
    assert call(store, "mempalace_search", {"query": "x", "since": "yesterday"}) == {
        "error": "since must be an ISO date string (e.g. '2026-04-01' or "
                 "'2026-04-01T09:30:00'), got 'yesterday'"}
    assert call(store, "mempalace_search", {"query": "x", "since": 1.5}) == {
        "error": "since must be an ISO date string"}
    with pytest.raises(AttributeError, match="'list' object has no attribute 'strip'"):
        call(store, "mempalace_search", {"query": "x", "wing": ["probe"]})
    # a falsy query is searched as "", the limit clamped to 1..100, a blank wing no filter
    answer = call(store, "mempalace_search", {"query": None, "limit": 0, "wing": " "})
    assert (answer["query"], len(answer["results"]), answer["filters"]["wing"]) == ("", 1, None)


def test_mine_checks_mode_options_and_source_before_it_mines(tmp_path: Any) -> None:
    store = initialised()
    assert call(store, "mempalace_mine", {"source": "x", "mode": "x"}) == {
        "success": False, "error": "invalid mode 'x'; expected one of: projects, convos, extract"}
    assert call(store, "mempalace_mine", {"source": "x", "include_subagents": "yes"}) == {
        "success": False, "error": "include_subagents must be a boolean",
        "error_class": "ValueError"}
    (tmp_path / "a.md").write_text("hello\n")
    assert call(store, "mempalace_mine", {"source": str(tmp_path / "a.md")}) == {
        "success": False, "error": f"source not found: {str(tmp_path / 'a.md')!r}"}
    assert call(store, "mempalace_mine", {"source": 0}) == {
        "success": False, "error": "source not found: 0"}
    assert call(store, "mempalace_mine", {"source": str(tmp_path), "dry_run": "x"})[
        "dry_run"] == "x"


def test_non_string_drawer_ids_get_chromadbs_and_pythons_complaints() -> None:
    store = initialised()
    assert call(store, "mempalace_update_drawer", {"drawer_id": 1.5, "wing": "w"}) == {
        "success": False, "error": "Expected ID to be a str, got 1.5 in get."}
    got = call(store, "mempalace_get_drawers", {"drawer_ids": [["x"], {"a": 1}, 1]})
    assert [r["error"] for r in got["results"]] == [
        "unhashable type: 'list'", "unhashable type: 'dict'", "Drawer not found: 1"]
    drawer = call(store, "mempalace_list_drawers")["drawers"][0]["drawer_id"]
    deleted = call(store, "mempalace_delete_drawers", {"drawer_ids": [[], drawer]})
    assert deleted["results"] == [
        {"drawer_id": [], "error": "unhashable type: 'list'"},
        {"drawer_id": drawer, "deleted_ids": [drawer], "chunks_deleted": 1,
         "closets_deleted": 0}]


def test_sync_passes_a_list_or_object_wing_to_chromadb() -> None:
    store = initialised()
    assert call(store, "mempalace_sync", {"wing": ["probe"]})["error"] == (
        "Expected where value to be a str, int, float, or operator expression, got ['probe'] "
        "in get.")
    assert call(store, "mempalace_sync", {"wing": {"a": 1}})["error"].endswith("got a in get.")


def test_diary_wing_checks_use_sanitize_names_default_field() -> None:
    store = initialised()
    assert call(store, "mempalace_diary_read", {"agent_name": "general", "wing": "@"}) == {
        "error": "name contains invalid characters"}
    with pytest.raises(ValueError, match="name contains invalid characters"):
        call(store, "mempalace_diary_write", {"agent_name": "a", "entry": "e", "wing": "@"})


def test_event_ack_looks_the_event_up_before_its_other_fields() -> None:
    store = initialised()
    assert call(store, "mempalace_event_ack", {"event_id": "t_x", "from_agent": " "}) == {
        "success": False, "error": "event 't_x' not found"}


def test_patch_submit_checks_the_artifact_then_the_event() -> None:
    store = initialised()
    base = {"content": "x", "from_agent": "a", "stream": "s"}
    assert call(store, "mempalace_patch_submit", {**base, "topic": "a\x00b"}) == {
        "success": False, "error": "topic contains control characters"}
    assert call(store, "mempalace_patch_submit", {**base, "content": 5, "stream": ""}) == {
        "success": False, "error": "content must be a non-empty string"}
    assert call(store, "mempalace_patch_submit", {**base, "from_agent": "a\x00b"}) == {
        "success": False, "error": "created_by contains control characters"}


def test_kg_timeline_clamps_its_limit_to_1_through_100() -> None:
    store = initialised()
    call(store, "mempalace_kg_add", {"subject": "Alice", "predicate": "knows", "object": "Bob"})
    answer = call(store, "mempalace_kg_timeline", {"entity": "alice", "limit": 0})
    assert (answer["limit"], answer["count"], answer["total"]) == (1, 1, 1)


def test_content_past_800_characters_is_filed_as_chunks_under_one_logical_id() -> None:
    store = initialised()
    content = "Every drawer keeps its words. " * 30  # 900 characters
    filed = call(store, "mempalace_add_drawer", {"wing": "w", "room": "r", "content": content})
    logical = filed["drawer_id"]
    assert filed["chunks"] == 2 and filed["chunk_ids"] == [f"{logical}_chunk_000000",
                                                          f"{logical}_chunk_000001"]
    assert call(store, "mempalace_list_wings")["wings"] == {"probe": 1, "w": 2}  # rows
    got = call(store, "mempalace_get_drawer", {"drawer_id": logical})
    assert got["content"] == content and got["chunks"] == 2
    assert got["metadata"]["parent_drawer_id"] == logical
    listed = call(store, "mempalace_list_drawers", {"wing": "w"})
    assert [d["drawer_id"] for d in listed["drawers"]] == [logical] and listed["total"] == 1
    updated = call(store, "mempalace_update_drawer", {"drawer_id": logical, "content": "short"})
    assert updated["chunk_ids"] == [f"{logical}_chunk_000000"]
    deleted = call(store, "mempalace_delete_drawer", {"drawer_id": logical})
    assert deleted["deleted_ids"] == [f"{logical}_chunk_000000"]
    assert call(store, "mempalace_list_wings")["wings"] == {"probe": 1}


def test_drawer_ids_follow_311s_recipe_and_updates_keep_them() -> None:
    store = PalaceStore(None, {})
    filed = call(store, "mempalace_add_drawer", {"wing": "probe", "room": "notes",
                                                 "content": "A drawer filed before the probes."})
    assert filed["drawer_id"] == "drawer_probe_notes_08b315f29d41957407eddca9"  # 3.11's id
    moved = call(store, "mempalace_update_drawer", {"drawer_id": filed["drawer_id"],
                                                    "wing": " elsewhere "})
    assert moved == {"success": True, "drawer_id": filed["drawer_id"], "wing": "elsewhere",
                     "room": "notes", "closets_deleted": 0}
    assert call(store, "mempalace_update_drawer", {"drawer_id": filed["drawer_id"],
                                                   "content": "a\x00b"}) == {
        "success": False, "error": "content contains null bytes"}


def test_checkpoint_checks_each_item_for_a_duplicate_before_filing_it() -> None:
    store = initialised()
    item = {"wing": "alpha", "room": "notes", "content": "Filed twice in one checkpoint."}
    answer = call(store, "mempalace_checkpoint", {"items": [item, item]})
    assert len(answer["added"]) == 1 and answer["errors"] == []
    assert [d["room"] for d in answer["duplicates"]] == ["notes"]
    assert answer["duplicates"][0]["matches"][0]["similarity"] == 1.0
    assert call(store, "mempalace_checkpoint", {"items": [], "dedup_threshold": "x"}) == {
        "error": "dedup_threshold must be a number"}


def test_a_batch_resolves_its_ids_first_and_a_number_as_source_file_raises() -> None:
    store = initialised()
    drawer = call(store, "mempalace_list_drawers")["drawers"][0]["drawer_id"]
    deleted = call(store, "mempalace_delete_drawers", {"drawer_ids": [drawer, drawer]})
    assert (deleted["deleted"], deleted["errors"]) == (2, 0)
    with pytest.raises(TypeError, match="expected string or bytes-like object, got 'int'"):
        call(store, "mempalace_add_drawer", {"wing": "w", "room": "r", "content": "c",
                                             "source_file": 12345})


def test_a_cli_compatible_search_with_matching_rows_answers_the_clis_printout() -> None:
    store = initialised()
    call(store, "mempalace_add_drawer", {"wing": "probe", "room": "plans",
                                         "content": "Plans.\nA second line."})
    answer = call(store, "mempalace_search", {"query": "note", "wing": "probe", "limit": 1,
                                              "cli_compatible": True})
    assert set(answer) == {"query", "cli_output"} and answer["query"] == "note"
    rule = "=" * 60
    assert answer["cli_output"] == (
        f'\n{rule}\n  Results for: "note"\n  Wing: probe\n{rule}\n\n'
        "  [1] probe / notes\n      Source: ?\n      Match:  cosine_sim=1.0  bm25=1.0\n\n"
        f"      A note.\n\n  {'-' * 56}\n\n")
    both = call(store, "mempalace_search", {"query": "plans", "cli_compatible": True})
    printout = both["cli_output"]
    assert printout.count("  [") == 2 and "      Plans.\n      A second line.\n" in printout
    # no row filed in the window: the CLI's no-results line
    assert call(store, "mempalace_search", {"query": "x", "before": "2000-01-01",
                                            "cli_compatible": True}) == {
        "query": "x", "cli_output": '\n  No results found for: "x"\n'}


def test_search_answers_the_query_it_searched_stripped() -> None:
    # seed 30, 2026-12-07: 3.11 answers sanitize_query's clean query, not the one sent
    store = initialised()
    assert call(store, "mempalace_search", {"query": "  note "})["query"] == "note"
    assert call(store, "mempalace_search", {"query": " a\ud800 "})["query"] == "a\ufffd"
    assert call(store, "mempalace_search", {"query": "   "})["query"] == "   "


def test_kg_query_answers_a_fact_s_far_end_by_its_first_filed_name() -> None:
    # seed 31, 2026-12-07: the entity "alice" was filed first, so "Alice" answers as "alice"
    store = PalaceStore(None, {"initialised": False})
    call(store, "mempalace_kg_add", {"subject": "alice", "predicate": "works on",
                                     "object": "Alice"})
    answer = call(store, "mempalace_kg_query", {"entity": "Alice"})
    outgoing = [f for f in answer["facts"] if f["direction"] == "outgoing"]
    assert [(f["subject"], f["object"]) for f in outgoing] == [("Alice", "alice")]
    incoming = [f for f in answer["facts"] if f["direction"] == "incoming"]
    assert [(f["subject"], f["object"]) for f in incoming] == [("alice", "Alice")]


def test_mesh_peers_repeats_its_own_profile_for_a_minute(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # seed 31, 2026-12-07: 3.11 caches the node profile per server process for 60 s
    import palace_conformance.fake.palace as palace

    now = [1000.0]
    monkeypatch.setattr(palace.time, "monotonic", lambda: now[0])
    store = PalaceStore(None, {"initialised": False})
    first = call(store, "mempalace_mesh_peers")["self"]["profile"]
    assert (first["roles"], first["drawers"]) == (["compute"], None)
    call(store, "mempalace_add_drawer", {"wing": "w", "room": "r", "content": "A note."})
    now[0] += palace.PROFILE_TTL_S - 0.5
    assert call(store, "mempalace_mesh_peers")["self"]["profile"] == first
    # another server process counts afresh, as does this one once the minute is over
    other = PalaceStore(None, store.state.to_json())
    assert call(other, "mempalace_mesh_peers")["self"]["profile"]["drawers"] == 1
    now[0] += 1.0
    again = call(store, "mempalace_mesh_peers")["self"]["profile"]
    assert (again["roles"], again["drawers"]) == (["replica", "compute"], 1)
