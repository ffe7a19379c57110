"""``task_create`` past its checks and ``sync`` as the real 3.11.0 answered the fidelity script
(2026-12-02); ``tests/real/test_half_made_real.py`` pins the same answers on the real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake.palace import PalaceStore, run_tool

TASK = {"project": "fidelity", "from_agent": "probe-agent", "to_agent": "other-agent",
        "goal": "compare", "branch": "main", "base_commit": "abc1234def",
        "done": "no differences"}
TASK_BODY = ("Goal:\ncompare\n\nDefinition of done:\nno differences\n\nDelivery:\nClose the loop "
             "through MemPalace: claim the request, then submit a patch with "
             "mempalace_patch_submit or reply with blocked/failed evidence.")


def call(store: PalaceStore, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    return run_tool(store, tool, arguments or {}, "/p")


def test_a_task_is_one_task_request_event_with_its_handoff() -> None:
    store = PalaceStore(None, {"initialised": False})
    call(store, "mempalace_event_append", {"type": "note", "stream": "fidelity",
                                           "room": "notes", "from_agent": "probe-agent"})
    answer = call(store, "mempalace_task_create", TASK)
    assert answer["success"] is True
    task = answer["task"]
    correlation = task["correlation_id"]
    assert correlation.startswith("task_compare_") and len(correlation) == len("task_compare_") + 8
    assert {k: task[k] for k in ("seq", "origin_seq", "type", "stream", "room", "topic",
                                 "from_agent", "to_agent", "branch", "base_commit", "status",
                                 "artifact_ids", "body", "metadata")} == {
        "seq": 2, "origin_seq": 2, "type": "task.request", "stream": "project/fidelity",
        "room": "delegation", "topic": None, "from_agent": "probe-agent",
        "to_agent": "other-agent", "branch": "main", "base_commit": "abc1234def",
        "status": "open", "artifact_ids": [], "body": TASK_BODY, "metadata": {}}
    assert answer["handoff"] == (
        f"Open MemPalace task {correlation} as other-agent. Claim it, follow its exact "
        "definition of done, and deliver through the logstream.")
    # the event log holds it: newest first in event_list, oldest first in event_wait
    assert [e["type"] for e in call(store, "mempalace_event_list")["events"]] == [
        "task.request", "note"]
    assert [e["type"] for e in call(store, "mempalace_event_wait",
                                    {"timeout_ms": 0})["events"]] == ["note", "task.request"]
    patch = call(store, "mempalace_patch_submit", {"content": "diff --git a b",
                                                   "from_agent": "probe-agent",
                                                   "stream": "fidelity"})
    assert patch["event"]["seq"] == 3


def test_a_task_strips_its_fields_and_slugs_its_stream() -> None:
    task = call(PalaceStore(None, {}), "mempalace_task_create", {
        **TASK, "project": "  My Project!  ", "from_agent": " a ", "to_agent": " b ",
        "branch": " feat/x ", "base_commit": " ABCDEF1 ", "goal": "Fix: the thing"})["task"]
    assert (task["stream"], task["from_agent"], task["to_agent"], task["branch"],
            task["base_commit"]) == ("project/my_project", "a", "b", "feat/x", "abcdef1")
    assert task["correlation_id"].startswith("task_fix_the_thing_")
    blank = call(PalaceStore(None, {}), "mempalace_task_create", {**TASK, "project": "!!!"})
    assert blank["task"]["stream"] == "project/project"


@pytest.mark.parametrize(("changes", "error"), [
    ({"project": " ", "from_agent": ""}, "task project must not be empty"),
    ({"from_agent": 1, "to_agent": ""}, "task requesting agent must not be empty"),
    ({"to_agent": " ", "branch": ""}, "task destination agent must not be empty"),
    ({"branch": "", "base_commit": "main"}, "task branch must not be empty"),
    ({"base_commit": " ", "goal": ""}, "task base commit must not be empty"),
    ({"base_commit": "main", "goal": ""}, "task base commit must be a hexadecimal Git object id "
                                          "(at least 7 characters), not a branch or tag"),
    ({"goal": " ", "done": ""}, "task goal must not be empty"),
    ({"done": 3}, "task definition of done must not be empty"),
])
def test_a_task_is_refused_in_3_11s_order(changes: dict[str, Any], error: str) -> None:
    store = PalaceStore(None, {})
    assert call(store, "mempalace_task_create", {**TASK, **changes}) == {
        "success": False, "error": error}
    assert store.state.events == []


def _mined(tmp_path: Path) -> tuple[PalaceStore, Path]:
    """An initialised palace with a drawer filed by hand and the files of ``source`` mined."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "notes.md").write_text("notes the sync probe can see\n", encoding="utf-8")
    (source / "other.md").write_text("another file\n", encoding="utf-8")
    store = PalaceStore(None, {"initialised": True})
    call(store, "mempalace_add_drawer", {"wing": "probe", "room": "notes", "content": "hand"})
    assert call(store, "mempalace_mine", {"source": str(source)})["success"] is True
    return store, source


def _report(**counts: Any) -> dict[str, Any]:
    base = {"success": True, "scanned": 0, "kept": 0, "gitignored": 0, "missing": 0,
            "unresolved": 0, "no_source": 0, "out_of_scope": 0, "removed_drawers": 0,
            "removed_closets": 0, "dry_run": True, "by_source": {}, "unresolved_by_source": {}}
    return {**base, **counts}


def test_sync_counts_the_drawers_of_a_project(tmp_path: Path) -> None:
    store, source = _mined(tmp_path)
    assert call(store, "mempalace_sync", {"project_dir": str(source)}) == _report(
        scanned=3, kept=2, no_source=1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert call(store, "mempalace_sync", {"project_dir": str(elsewhere)}) == _report(
        scanned=3, out_of_scope=2, no_source=1)
    assert call(store, "mempalace_sync", {"project_dir": str(source), "wing": "probe"}) == (
        _report(scanned=1, no_source=1))


def test_sync_tells_a_deleted_file_from_an_unreachable_one(tmp_path: Path) -> None:
    """Gone beside a file still there: missing. Gone with every neighbour: unresolved."""
    store, source = _mined(tmp_path)
    (source / "notes.md").unlink()
    gone = str((source / "notes.md").resolve())
    assert call(store, "mempalace_sync", {"project_dir": str(source)}) == _report(
        scanned=3, kept=1, missing=1, no_source=1, by_source={gone: 1})
    (source / "other.md").unlink()
    other = str((source / "other.md").resolve())
    assert call(store, "mempalace_sync", {"project_dir": str(source)}) == _report(
        scanned=3, unresolved=2, no_source=1, unresolved_by_source={gone: 1, other: 1})


def test_sync_checks_in_3_11s_order() -> None:
    fresh = PalaceStore(None, {"initialised": False})
    assert call(fresh, "mempalace_sync", {"project_dir": 12345}) == {
        "success": False, "error": "sync failed: /p"}
    assert call(fresh, "mempalace_sync", {"apply": True}) == {
        "success": False, "error": "sync apply requires explicit wing= or project_dirs= so it "
                                   "cannot auto-prune every wing in a multi-project palace; "
                                   "pass --wing or a project directory"}
    ready = PalaceStore(None, {"initialised": True})
    assert call(ready, "mempalace_sync", {"project_dir": 12345}) == {
        "success": False,
        "error": "sync failed: expected str, bytes or os.PathLike object, not int"}
    assert call(ready, "mempalace_sync", {"project_dir": "/nowhere", "apply": True}) == _report(
        dry_run=False)


def test_sync_without_a_project_dir_guesses_the_roots_from_the_sources(tmp_path: Path) -> None:
    """A source's root is its deepest ancestor holding a .git or a .gitignore file; a source
    under none is out of scope (tests/real/test_half_made_real.py pins the real side)."""
    store, source = _mined(tmp_path)
    assert call(store, "mempalace_sync", {}) == _report(scanned=3, out_of_scope=2, no_source=1)
    (source / ".git").mkdir()
    assert call(store, "mempalace_sync", {}) == _report(scanned=3, kept=2, no_source=1)
    (source / "notes.md").unlink()
    gone = str(source / "notes.md")
    assert call(store, "mempalace_sync", {}) == _report(
        scanned=3, kept=1, missing=1, no_source=1, by_source={gone: 1})


def test_sync_reads_gitignore_rules_from_each_root_down(tmp_path: Path) -> None:
    store, source = _mined(tmp_path)
    (source / "sub").mkdir()
    (source / "sub" / "deep.md").write_text("deep\n", encoding="utf-8")
    assert call(store, "mempalace_mine", {"source": str(source)})["success"] is True
    (source / ".gitignore").write_text("# c\n*.md\n!notes.md\n/sub/\n", encoding="utf-8")
    ignored = {str(source / "other.md"): 1, str(source / "sub" / "deep.md"): 1}
    project = {"project_dir": str(source)}
    assert call(store, "mempalace_sync", project) == _report(
        scanned=4, kept=1, gitignored=2, no_source=1, by_source=ignored)
    # a nearer file's rule wins; guessed, sub/ is then a root of its own
    (source / "sub" / ".gitignore").write_text("!deep.md\n", encoding="utf-8")
    assert call(store, "mempalace_sync", project) == _report(
        scanned=4, kept=2, gitignored=1, no_source=1, by_source={str(source / "other.md"): 1})
    assert call(store, "mempalace_sync", {}) == call(store, "mempalace_sync", project)


def test_sync_apply_removes_and_purges_the_closets_of_emptied_sources(tmp_path: Path) -> None:
    store, source = _mined(tmp_path)
    call(store, "mempalace_add_drawer", {"wing": "copy", "room": "notes", "content": "copy",
                                         "source_file": str(source / "notes.md")})
    (source / "notes.md").unlink()
    notes = {"source_file": str(source / "notes.md")}
    scoped = call(store, "mempalace_sync", {**{"project_dir": str(source)}, "apply": True,
                                            "wing": "source"})
    assert (scoped["dry_run"], scoped["removed_drawers"], scoped["removed_closets"]) == (
        False, 1, 0)
    # the source is still filed in another wing: its closet stays with it
    assert call(store, "mempalace_delete_by_source", notes)["closet_match_count"] == 1
    whole = call(store, "mempalace_sync", {"project_dir": str(source), "apply": True})
    assert (whole["removed_drawers"], whole["removed_closets"]) == (1, 1)
    assert call(store, "mempalace_delete_by_source", notes)["match_count"] == 0
    assert len(store.state.drawers) == 2
