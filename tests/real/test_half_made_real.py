"""What the fake learned from the real mempalace 3.11.0 on 2026-12-02, pinned on the real server
(``tests/fake/test_half_made_palace.py`` and ``test_task_and_sync.py`` pin the fake's side).

Each session drives one real ``mempalace-mcp`` (isolated world, offline embeddings) and the fake's
palace through the same calls and asserts equal answers once per-run values (ids, times) are
masked, plus the facts that matter on the real answer itself: a fresh palace half-made by
``search`` once its directory exists, ``task_create`` past its checks, ``sync`` over a project.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake.brain import tool_result
from palace_conformance.fake.palace import PalaceStore, run_tool
from palace_conformance.fidelity.truth_table import StdioSession
from palace_conformance.real.embedding import environment, running_stub
from palace_conformance.real.install import isolated_environment, locate

pytestmark = pytest.mark.real_palace
#: keys whose values differ between any two honest runs (the fidelity rules' per-run values)
PER_RUN = {"id", "drawer_id", "created_at", "last_activated", "hlc", "origin_replica",
           "correlation_id", "handoff", "artifact_ids", "filed_at", "last_modified"}
Call = tuple[str, dict[str, Any]]
#: answers compared on the real side only, and why
UNCOMPARED = {"mempalace_mesh_peers": "its host profile is the machine's",
              "mempalace_mine": "its text report names the embedder",
              "mempalace_status": "the fake abridges the protocol texts"}
UNLINK = "unlink"  # not a tool: delete a source file between two calls
WRITE = "write"  # not a tool: write a file (its ``text``) between two calls


@pytest.fixture(scope="module")
def embedder() -> Iterator[str]:
    with running_stub() as url:
        yield url


def masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<PER-RUN>" if k in PER_RUN else masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def both(url: str, calls: list[Call], root: Path) -> list[tuple[Any, Any]]:
    """(real answer, fake answer) of every call, each as ``[payload, isError]``."""
    home, palace, source = root / "home", root / "palace", root / "source"
    home.mkdir()
    installed = locate(None)
    server = StdioSession(installed.stdio_command(),
                          isolated_environment(home, palace, environment(url)), root, "real")
    fake = PalaceStore(None, {"initialised": False})
    answers = []
    try:
        server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "half-made", "version": "1"}}, 60)
        for tool, raw in calls:
            arguments = json.loads(json.dumps(raw).replace("<SOURCE>", str(source)))
            if tool in (UNLINK, WRITE):
                path = Path(arguments["path"])
                if tool == UNLINK:
                    path.unlink()
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(arguments["text"], encoding="utf-8")
                answers.append((None, None))
                continue
            result = server.request("tools/call", {"name": tool, "arguments": arguments},
                                    60)["result"]
            real = [json.loads(result["content"][0]["text"]), bool(result.get("isError"))]
            payload = run_tool(fake, tool, arguments, str(palace))
            answers.append((real, [payload, bool(tool_result(payload).get("isError"))]))
    finally:
        server.close()
    return answers


def run(url: str, calls: list[Call], source_files: dict[str, str] | None = None) -> list[Any]:
    """The real answers, after asserting the fake gave the same at every call (but those of
    :data:`UNCOMPARED`)."""
    with tempfile.TemporaryDirectory(prefix="half-made-real-") as tmp:
        root = Path(tmp).resolve()
        (root / "source").mkdir()
        for name, text in (source_files or {}).items():
            (root / "source" / name).parent.mkdir(parents=True, exist_ok=True)
            (root / "source" / name).write_text(text, encoding="utf-8")
        answers = both(url, calls, root)
        for (tool, _), (real, fake) in zip(calls, answers, strict=True):
            if tool not in UNCOMPARED and real is not None:
                assert masked(real) == masked(fake), tool
        return [json.loads(json.dumps(real).replace(str(root), "<ROOT>"))
                for real, _ in answers]


BACKEND_OPEN_FAILED = [{"error": "Backend open failed",
                        "details": "Could not open the selected backend collection.",
                        "hint": "Run: mempalace status or mempalace repair-status for "
                                "diagnostics.", "backend": "chroma"}, True]


def test_search_half_makes_a_fresh_palace_once_its_directory_exists(embedder: str) -> None:
    reads: list[Call] = [
        ("mempalace_list_wings", {}), ("mempalace_check_duplicate", {"content": "x"}),
        ("mempalace_get_drawer", {"drawer_id": "d"}), ("mempalace_diary_read", {"agent_name": "a"}),
        ("mempalace_graph_stats", {}), ("mempalace_follow_tunnels", {"wing": "p", "room": "n"}),
        ("mempalace_delete_drawer", {"drawer_id": "drawer_nope"}),
        ("mempalace_update_drawer", {"drawer_id": "drawer_nope", "content": "u"}),
        ("mempalace_delete_by_source", {"source_file": "/x/y.md"})]
    answers = run(embedder, [
        ("mempalace_search", {"query": "x"}), ("mempalace_list_wings", {}),
        ("mempalace_mesh_peers", {}), ("mempalace_search", {"query": "x"}), *reads,
        ("mempalace_traverse", {"start_room": "notes"}), ("mempalace_find_tunnels", {}),
        ("mempalace_reconnect", {}), ("mempalace_sync", {}),
        ("mempalace_create_tunnel", {"source_wing": "probe", "source_room": "notes",
                                     "target_wing": "other", "target_room": "notes"}),
        ("mempalace_add_drawer", {"wing": "probe", "room": "notes", "content": "A drawer."}),
        ("mempalace_list_wings", {})])
    # no directory yet: search makes nothing
    assert answers[1][0]["error"] == "Chroma database missing"
    assert answers[3][0]["error"] == "No palace found"
    assert answers[4:4 + len(reads)] == [BACKEND_OPEN_FAILED] * len(reads)
    traverse, tunnels, reconnect, sync, tunnel, _, wings = answers[4 + len(reads):]
    assert traverse == [{"error": "Room 'notes' not found", "suggestions": []}, False]
    assert tunnels == [[], False]
    assert reconnect[0]["message"] == "Backend open failed"
    assert sync == [{"success": False, "error": "sync failed: <ROOT>/palace"}, False]
    assert tunnel[0]["id"] == "8054775b0a7c8b3b"  # symmetric: sha256 of the sorted ends
    assert wings == [{"wings": {"probe": 1}}, False]


def test_status_makes_the_collection_of_a_half_made_palace(embedder: str) -> None:
    answers = run(embedder, [("mempalace_event_list", {}), ("mempalace_search", {"query": "x"}),
                             ("mempalace_status", {}), ("mempalace_list_drawers", {}),
                             ("mempalace_reconnect", {})])
    status = answers[2][0]
    assert (status["total_drawers"], status["sqlite_integrity"]["checked"]) == (0, False)
    assert answers[3] == [{"drawers": [], "total": 0, "count": 0, "offset": 0, "limit": 20},
                          False]
    assert answers[4][0]["success"] is True


def test_a_task_and_the_events_after_it(embedder: str) -> None:
    task = {"project": "My Project", "from_agent": " probe ", "to_agent": "other",
            "goal": "compare", "branch": "main", "base_commit": "ABC1234DEF", "done": "done"}
    answers = run(embedder, [
        ("mempalace_event_append", {"type": "note", "stream": "s", "room": "r",
                                    "from_agent": "probe"}),
        ("mempalace_task_create", task),
        ("mempalace_task_create", {**task, "to_agent": " ", "branch": ""}),
        ("mempalace_task_create", {**task, "base_commit": "main", "goal": ""}),
        ("mempalace_event_list", {}),
        ("mempalace_patch_submit", {"content": "diff\n", "from_agent": "p", "stream": "s"})])
    created = answers[1][0]
    assert created["task"]["stream"] == "project/my_project"
    assert (created["task"]["from_agent"], created["task"]["base_commit"]) == (
        "probe", "abc1234def")
    assert re.fullmatch(r"task_compare_[0-9a-f]{8}", created["task"]["correlation_id"])
    assert answers[2][0]["error"] == "task destination agent must not be empty"
    assert answers[3][0]["error"].startswith("task base commit must be a hexadecimal")
    assert [e["type"] for e in answers[4][0]["events"]] == ["task.request", "note"]
    assert answers[5][0]["event"]["seq"] == 3


def test_sync_over_a_mined_project(embedder: str) -> None:
    files = {"notes.md": "Notes the sync probe mines, long enough to be filed as a drawer.\n",
             "other.md": "Another file the sync probe mines, long enough to be filed too.\n"}
    sync = ("mempalace_sync", {"project_dir": "<SOURCE>"})
    answers = run(embedder, [
        ("mempalace_add_drawer", {"wing": "probe", "room": "notes", "content": "By hand."}),
        ("mempalace_mine", {"source": "<SOURCE>"}), sync,
        ("mempalace_sync", {"project_dir": "<SOURCE>", "wing": "probe"}),
        ("mempalace_sync", {"project_dir": "<SOURCE>/../home"}),
        ("mempalace_sync", {"project_dir": 12345}),
        (UNLINK, {"path": "<SOURCE>/notes.md"}), sync,
        (UNLINK, {"path": "<SOURCE>/other.md"}), sync], files)
    counts = ("scanned", "kept", "missing", "unresolved", "no_source", "out_of_scope")
    assert [answers[2][0][k] for k in counts] == [3, 2, 0, 0, 1, 0]
    assert [answers[3][0][k] for k in counts] == [1, 0, 0, 0, 1, 0]
    assert [answers[4][0][k] for k in counts] == [3, 0, 0, 0, 1, 2]
    assert answers[5][0]["error"] == ("sync failed: expected str, bytes or os.PathLike object, "
                                      "not int")
    # gone beside a file still there: missing; gone with every neighbour: unresolved
    assert [answers[7][0][k] for k in counts] == [3, 1, 1, 0, 1, 0]
    assert answers[7][0]["by_source"] == {"<ROOT>/source/notes.md": 1}
    assert [answers[9][0][k] for k in counts] == [3, 0, 0, 2, 1, 0]


COUNTS = ("scanned", "kept", "gitignored", "missing", "unresolved", "no_source", "out_of_scope")


def counts(answer: Any) -> list[int]:
    return [answer[0][k] for k in COUNTS]


def test_sync_without_a_project_dir_guesses_the_roots(embedder: str) -> None:
    # 3.11 takes the deepest ancestor of each source holding a .git or a .gitignore file as
    # its project root; with none, every source is out of scope (seed 29 at scale, 2026-12-06)
    files = {"notes.md": "Notes the sync probe mines, long enough to be filed as a drawer.\n",
             "other.md": "Another file the sync probe mines, long enough to be filed too.\n"}
    sync = ("mempalace_sync", {})
    answers = run(embedder, [
        ("mempalace_mine", {"source": "<SOURCE>"}), sync,
        ("mempalace_add_drawer", {"wing": "source", "room": "notes", "content": "Elsewhere.",
                                  "source_file": "<SOURCE>/../elsewhere/x.md"}),
        (WRITE, {"path": "<SOURCE>/.git/HEAD", "text": "ref: refs/heads/main\n"}), sync,
        (UNLINK, {"path": "<SOURCE>/notes.md"}), sync,
        ("mempalace_sync", {"wing": "source", "apply": True}),
        ("mempalace_list_drawers", {}), sync], files)
    assert counts(answers[1]) == [2, 0, 0, 0, 0, 0, 2]
    assert counts(answers[4]) == [3, 2, 0, 0, 0, 0, 1]
    assert counts(answers[6]) == [3, 1, 0, 1, 0, 0, 1]
    assert answers[6][0]["by_source"] == {"<ROOT>/source/notes.md": 1}
    applied = answers[7][0]
    assert (applied["dry_run"], applied["removed_drawers"], applied["removed_closets"]) == (
        False, 1, 1)
    assert answers[8][0]["total"] == 2
    assert counts(answers[9]) == [2, 1, 0, 0, 0, 0, 1]


def test_sync_reads_the_gitignore_rules_from_the_root_down(embedder: str) -> None:
    # 3.11's own .gitignore reading (miner.GitignoreMatcher): the last matching rule wins, a
    # nearer file's over a farther one's, even under a directory a farther rule ignores
    text = "A file the sync probe mines, long enough to be filed as a drawer: {}.\n"
    files = {name: text.format(name) for name in
             ("notes.md", "other.md", "keep.md", "sub/deep.md", "sub/kept.md")}
    project = {"project_dir": "<SOURCE>"}
    answers = run(embedder, [
        ("mempalace_mine", {"source": "<SOURCE>"}),
        (WRITE, {"path": "<SOURCE>/.gitignore",
                 "text": "# built\n*.md\n!notes.md\n\\#x\n/sub/\n"}),
        (WRITE, {"path": "<SOURCE>/sub/.gitignore", "text": "!kept.md\n"}),
        ("mempalace_sync", project), ("mempalace_sync", {}),
        (UNLINK, {"path": "<SOURCE>/other.md"}), ("mempalace_sync", project),
        ("mempalace_sync", {**project, "apply": True}),
        ("mempalace_list_wings", {}), ("mempalace_sync", project)], files)
    assert counts(answers[3]) == [5, 2, 3, 0, 0, 0, 0]
    assert answers[3][0]["by_source"] == {f"<ROOT>/source/{name}": 1 for name in
                                          ("keep.md", "other.md", "sub/deep.md")}
    # guessed, sub/ is a root of its own (its .gitignore): the rules above it are not read
    assert counts(answers[4]) == [5, 3, 2, 0, 0, 0, 0]
    # other.md is gone beside notes.md (kept): missing, and no longer gitignored
    assert counts(answers[6]) == [5, 2, 2, 1, 0, 0, 0]
    applied = answers[7][0]
    assert (applied["removed_drawers"], applied["removed_closets"]) == (3, 3)
    assert answers[8][0] == {"wings": {"source": 2}}
    assert counts(answers[9]) == [2, 2, 0, 0, 0, 0, 0]


def test_sync_apply_keeps_the_closet_of_a_source_still_filed_elsewhere(embedder: str) -> None:
    # the closets go with a source only when no drawer of it is left in the whole palace
    files = {"notes.md": "Notes the sync probe mines, long enough to be filed as a drawer.\n",
             "other.md": "Another file the sync probe mines, long enough to be filed too.\n"}
    by_source = ("mempalace_delete_by_source", {"source_file": "<SOURCE>/notes.md"})
    answers = run(embedder, [
        ("mempalace_mine", {"source": "<SOURCE>"}),
        ("mempalace_add_drawer", {"wing": "copy", "room": "notes", "content": "A copy.",
                                  "source_file": "<SOURCE>/notes.md"}),
        (UNLINK, {"path": "<SOURCE>/notes.md"}),
        ("mempalace_sync", {"wing": "source", "project_dir": "<SOURCE>", "apply": True}),
        by_source, ("mempalace_sync", {"project_dir": "<SOURCE>", "apply": True}), by_source],
        files)
    assert (answers[3][0]["removed_drawers"], answers[3][0]["removed_closets"]) == (1, 0)
    assert (answers[4][0]["match_count"], answers[4][0]["closet_match_count"]) == (1, 1)
    assert (answers[5][0]["removed_drawers"], answers[5][0]["removed_closets"]) == (1, 1)
    assert (answers[6][0]["match_count"], answers[6][0]["closet_match_count"]) == (0, 0)


def test_sync_resolves_a_given_project_dir_before_it_reads_a_drawer(embedder: str) -> None:
    answers = run(embedder, [
        ("mempalace_add_drawer", {"wing": "probe", "room": "notes", "content": "By hand."}),
        ("mempalace_sync", {"project_dir": "<SOURCE>/a\u0000b", "wing": ["x"]}),
        ("mempalace_sync", {"project_dir": "<SOURCE>", "wing": ["x"]})])
    assert answers[1] == [{"success": False, "error": "embedded null byte"}, False]
    assert answers[2][0]["error"].startswith("Expected where value to be a str")
