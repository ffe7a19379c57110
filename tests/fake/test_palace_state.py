"""The fake palace: tool handlers keep their promises, in memory and through a shared state file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palace_conformance.fake.palace import PalaceStore, entity_key, run_tool

from .stdio_harness import FakeProcess, payload

PROPS = settings(deadline=None, max_examples=60,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])
# names and texts 3.11 accepts: not blank (a blank one is refused, see test_result_shapes.py)
words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1,
                max_size=20).filter(lambda text: text.strip() != "")
# knowledge-graph subjects and objects, drawer and diary content 3.11 accepts: no NUL
values = words.filter(lambda text: "\x00" not in text)
# wing, room and predicate names 3.11's name rule accepts (letters or digits at both ends)
names = st.from_regex(r"[^\W_](?:[\w .'-]{0,10}[^\W_])?", fullmatch=True)


def run(store: PalaceStore, tool: str, **args: Any) -> dict[str, Any]:
    return run_tool(store, tool, args, "/palace")


@settings(PROPS)
@given(st.lists(st.tuples(st.sampled_from(["ann", "bob"]), values), min_size=1, max_size=12),
       st.integers(-3, 120))
def test_diary_read_counts_and_clamps(entries: list[tuple[str, str]], last_n: int) -> None:
    store = PalaceStore()
    for agent, entry in entries:
        assert run(store, "mempalace_diary_write", agent_name=agent, entry=entry)["success"]
    for agent in ("ann", "bob"):
        mine = [entry for who, entry in entries if who == agent]
        result = run(store, "mempalace_diary_read", agent_name=agent, last_n=last_n)
        if not mine:
            assert result == {"agent": agent, "entries": [], "message": "No diary entries yet."}
            continue
        assert result["total"] == len(mine)
        assert result["showing"] == min(len(mine), max(1, min(100, last_n)))
        assert {e["content"] for e in result["entries"]} <= set(mine)


@settings(PROPS)
@given(names, names, values)
def test_add_drawer_is_idempotent_and_searchable(wing: str, room: str, content: str) -> None:
    store = PalaceStore()
    first = run(store, "mempalace_add_drawer", wing=wing, room=room, content=content)
    second = run(store, "mempalace_add_drawer", wing=wing, room=room, content=content)
    assert second == {"success": True, "reason": "already_exists",
                      "drawer_id": first["drawer_id"]}
    status = run(store, "mempalace_status")
    assert status["total_drawers"] == 1 and status["wings"] == {wing: 1}


@settings(PROPS)
@given(st.lists(st.tuples(values, names, values), min_size=1, max_size=6))
def test_state_file_round_trips(tmp_path_factory: pytest.TempPathFactory,
                                triples: list[tuple[str, str, str]]) -> None:
    path = tmp_path_factory.mktemp("state") / "state.json"
    writer = PalaceStore(path)
    for subject, predicate, obj in triples:
        run(writer, "mempalace_kg_add", subject=subject, predicate=predicate, object=obj)
        run(writer, "mempalace_event_append", type="note", stream="s", room="r",
            from_agent="probe-agent")  # 3.11 refuses control characters here
    reader = PalaceStore(path)  # another process would open it like this
    for subject, _, obj in triples:
        facts = run(reader, "mempalace_kg_query", entity=subject)["facts"]
        # filed stripped, as 3.11 files them; matched by key (case, spaces), as 3.11 does
        assert any(entity_key(f["subject"]) == entity_key(subject.strip())
                   and entity_key(f["object"]) == entity_key(obj.strip()) for f in facts), facts
    seqs = [e["seq"] for e in run(reader, "mempalace_event_list", limit=100,
                                  order="asc")["events"]]
    assert seqs == list(range(1, len(triples) + 1))
    assert json.loads(path.read_text())["triples"]


def test_event_list_is_newest_first_without_a_cursor_and_forward_from_one() -> None:
    """3.11's schema: order defaults to 'desc' without since_event_id, 'asc' with it; an explicit
    order always wins; the limit applies after ordering."""
    store = PalaceStore()
    ids = [run(store, "mempalace_event_append", type="note", stream="s", room="r",
               from_agent="ann", body=str(n))["event"]["id"] for n in range(5)]

    def listed(**args: Any) -> list[str]:
        return [e["id"] for e in run(store, "mempalace_event_list", **args)["events"]]

    assert listed() == ids[::-1]
    assert listed(limit=2) == ids[:2:-1]  # the newest two
    assert listed(since_event_id=ids[1]) == ids[2:]
    assert listed(since_event_id=ids[1], limit=2) == ids[2:4]
    assert listed(since_event_id=ids[1], order="desc") == ids[:1:-1]
    assert listed(order="asc", limit=3) == ids[:3]
    assert listed(before_event_id=ids[3]) == ids[2::-1]


def test_search_ranks_by_word_overlap() -> None:
    store = PalaceStore()
    run(store, "mempalace_add_drawer", wing="w", room="r", content="alpha beta gamma")
    run(store, "mempalace_add_drawer", wing="w", room="r", content="alpha delta")
    run(store, "mempalace_add_drawer", wing="w", room="r", content="unrelated")
    results = run(store, "mempalace_search", query="alpha gamma")["results"]
    # like 3.11's vector search, a drawer sharing no word still comes back, ranked last
    assert [r["text"] for r in results] == ["alpha beta gamma", "alpha delta", "unrelated"]
    assert results[0]["similarity"] > results[1]["similarity"] > results[2]["similarity"]


def test_mine_files_a_directory_and_caps_the_walk(tmp_path: Path) -> None:
    source = tmp_path / "project"
    (source / "sub").mkdir(parents=True)
    for index in range(5):
        (source / "sub" / f"f{index}.txt").write_text(f"file number {index}")
    store = PalaceStore()
    result = run(store, "mempalace_mine", source=str(source), limit=3)
    # 3.11's shape: success, mode, dry_run and the CLI's report as output
    assert set(result) == {"success", "mode", "dry_run", "output"}
    assert "  Files:   3\n" in result["output"] and "  Drawers filed: 3\n" in result["output"]
    again = run(store, "mempalace_mine", source=str(source))
    assert "  Files:   5\n" in again["output"] and "  Drawers filed: 2\n" in again["output"]
    assert "Files skipped (already filed or other): 3" in again["output"]
    missing = run(store, "mempalace_mine", source=str(tmp_path / "nope"))
    # the truth table (mine {"source": "x"}): 3.11 quotes the source as given
    assert missing == {"success": False, "error": f"source not found: {str(tmp_path / 'nope')!r}"}


def test_respawned_process_sees_what_its_predecessor_wrote(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with FakeProcess(tmp_path / "one", state=state) as first:
        first.call("mempalace_diary_write", {"agent_name": "a", "entry": "before the crash"})
    with FakeProcess(tmp_path / "two", state=state) as second:
        entries = payload(second.call("mempalace_diary_read", {"agent_name": "a"}))["entries"]
        assert [e["content"] for e in entries] == ["before the crash"]


def test_seeded_state_file_with_diary_entries(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"diary": [
        {"agent_name": "seed", "entry": "seeded entry", "topic": "t",
         "timestamp": "2026-01-02T03:04:05"}]}))
    result = run(PalaceStore(state), "mempalace_diary_read", agent_name="seed")
    assert result["entries"] == [{"date": "2026-01-02", "timestamp": "2026-01-02T03:04:05",
                                  "topic": "t", "content": "seeded entry"}]


def test_mine_never_walks_past_the_file_cap(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from palace_conformance.fake import palace

    monkeypatch.setattr(palace, "MINE_FILE_CAP", 4)
    for index in range(10):
        (tmp_path / f"f{index}.txt").write_text(f"content {index}")
    result = run(PalaceStore(), "mempalace_mine", source=str(tmp_path))
    assert "  Files:   4\n" in result["output"]
