"""A fresh palace (no chroma database until the first vector write) answers as mempalace 3.11.0.

Each answer is pinned to ``data/fresh_palace_results.json``: the bytes of the research captures
(``stdio_session.jsonl`` line 9: status; ``lock_sessions.jsonl`` line 5 and ``http_session.txt``:
diary_read), or, where no raw capture exists, the shapes of the research notes
(``mempalace-3.11-semantics.md`` section 3: list_wings, search, list_drawers, get_taxonomy).
Both transports share the one brain; each is checked against the same items.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake.palace import PalaceStore, replica_id_for, run_tool

from .http_support import Fake, call, start_fake
from .stdio_harness import DATA, FakeProcess, payload

FRESH = json.loads((DATA / "fresh_palace_results.json").read_text(encoding="utf-8"))["fresh"]
CAPTURED_STATUS = next(item for item in FRESH
                       if item["capture"] and item["capture"].startswith("stdio_session.jsonl"))


def item_id(item: dict[str, Any]) -> str:
    return f"{item['call']['name']}-{len(item['call']['arguments'])}"


def fresh_state(path: Path) -> Path:
    path.write_text(json.dumps({"initialised": False}), encoding="utf-8")
    return path


def expected(item: dict[str, Any], palace: Path) -> dict[str, Any]:
    """The recorded result with ``<PALACE>`` read as this fake's palace path."""
    return json.loads(json.dumps(item["result"]).replace("<PALACE>", str(palace)))


@pytest.fixture(scope="module")
def stdio_fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeProcess]:
    root = tmp_path_factory.mktemp("fresh-stdio")
    with FakeProcess(root, state=fresh_state(root / "state.json")) as proc:
        yield proc


@pytest.fixture(scope="module")
def http_fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fake, Path]]:
    root = tmp_path_factory.mktemp("fresh-http")
    palace = root / "palace"
    server = start_fake(root, "--state", str(fresh_state(root / "state.json")),
                        "--palace", str(palace))
    yield server, palace
    server.stop()


@pytest.mark.parametrize("item", FRESH, ids=item_id)
def test_stdio_fresh_answers_are_the_recorded_ones(stdio_fake: FakeProcess,
                                                   item: dict[str, Any]) -> None:
    reply = stdio_fake.call(item["call"]["name"], item["call"]["arguments"])
    assert reply["result"] == expected(item, stdio_fake.palace), item["capture"] or item["note"]


@pytest.mark.parametrize("item", FRESH, ids=item_id)
def test_http_fresh_answers_are_the_recorded_ones(http_fake: tuple[Fake, Path],
                                                  item: dict[str, Any]) -> None:
    fake, palace = http_fake
    reply = fake.post(call(item["call"]["name"], item["call"]["arguments"], 7)).json()
    assert reply == {"jsonrpc": "2.0", "id": 7, "result": expected(item, palace)}, (
        item["capture"] or item["note"])


def test_the_status_text_is_the_captured_bytes(tmp_path: Path) -> None:
    """stdio_session.jsonl line 9: the whole reply line, byte for byte (indent, key order)."""
    palace = tmp_path / "palace"
    with FakeProcess(tmp_path, state=fresh_state(tmp_path / "state.json"), palace=palace) as fake:
        fake.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                   "params": {"name": "mempalace_status", "arguments": {}}})
        line = fake.recv_line().decode()
    result = expected(CAPTURED_STATUS, palace)
    assert line == json.dumps({"jsonrpc": "2.0", "id": 4, "result": result},
                              ensure_ascii=False) + "\n"


def test_the_first_vector_write_ends_freshness_for_every_process(tmp_path: Path) -> None:
    state = fresh_state(tmp_path / "state.json")
    with FakeProcess(tmp_path / "a", state=state) as first:
        # the knowledge graph and the event log need no chroma database: the palace stays fresh
        assert payload(first.call("mempalace_kg_add", {"subject": "a", "predicate": "p",
                                                       "object": "o"}))["success"] is True
        assert payload(first.call("mempalace_event_append", {
            "type": "note", "stream": "s", "room": "r", "from_agent": "ann"}))["success"] is True
        # a refused write files nothing, so it creates nothing
        assert payload(first.call("mempalace_diary_write", {"agent_name": "", "entry": "x"})) == {
            "success": False, "error": "agent_name must be a non-empty string"}
        assert payload(first.call("mempalace_status"))["error"] == "Chroma database missing"
        assert payload(first.call("mempalace_diary_write",
                                  {"agent_name": "ann", "entry": "first"}))["success"] is True
        status = payload(first.call("mempalace_status"))
    assert set(status) == {"total_drawers", "wings", "rooms", "protocol", "aaak_dialect",
                           "backend", "embedding_device", "sqlite_integrity",
                           "library_versions", "updates"}
    # 3.11 checks integrity when it starts (the truth table's initialised session): this
    # process started on a fresh palace, so it still reports that no quick_check ran
    assert status["sqlite_integrity"]["checked"] is False and "reason" in status[
        "sqlite_integrity"]
    with FakeProcess(tmp_path / "b", state=state) as second:  # a respawn sees the database
        read = payload(second.call("mempalace_diary_read", {"agent_name": "ann"}))
        assert [e["content"] for e in read["entries"]] == ["first"]
        assert "error" not in payload(second.call("mempalace_search", {"query": "first"}))
        checked = payload(second.call("mempalace_status"))["sqlite_integrity"]
    assert checked["checked"] is True and "reason" not in checked


@pytest.mark.parametrize(("tool", "args"), [
    ("mempalace_add_drawer", {"wing": "w", "room": "r", "content": "c"}),
    ("mempalace_checkpoint", {"items": [{"wing": "w", "room": "r", "content": "c"}]}),
    ("mempalace_diary_write", {"agent_name": "ann", "entry": "e"}),
])
def test_each_vector_write_initialises(tool: str, args: dict[str, Any]) -> None:
    store = PalaceStore(None, {"initialised": False})
    assert run_tool(store, "mempalace_list_wings", {}, "/p")["error"] == "Chroma database missing"
    run_tool(store, tool, args, "/p")
    assert store.state.initialised is True
    assert "error" not in run_tool(store, "mempalace_list_wings", {}, "/p")


def test_a_state_file_without_the_flag_is_an_initialised_palace(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"drawers": []}), encoding="utf-8")
    status = run_tool(PalaceStore(path), "mempalace_status", {}, "/p")
    assert status["total_drawers"] == 0 and "error" not in status


def test_no_fresh_answer_is_flagged_is_error(stdio_fake: FakeProcess) -> None:
    """The truth table's fresh session: every "missing" answer is a plain result."""
    assert not [item for item in FRESH if item["result"].get("isError")]
    for item in FRESH:
        reply = stdio_fake.call(item["call"]["name"], item["call"]["arguments"])
        assert "isError" not in reply["result"], item["call"]


# -- origin_replica: random per palace, stable within one ----------------------------------


def test_origin_replica_is_per_palace_and_shared_by_its_processes(tmp_path: Path) -> None:
    replicas = []
    for name in ("one", "two"):
        state = tmp_path / f"{name}.json"
        state.write_text("{}", encoding="utf-8")
        events = []
        for _ in range(2):  # two stores on one state file: two processes of one palace
            store = PalaceStore(state)
            events.append(run_tool(store, "mempalace_event_append", {
                "type": "note", "stream": "s", "room": "r", "from_agent": "a"}, "/p")["event"])
        assert events[0]["origin_replica"] == events[1]["origin_replica"]
        assert events[1]["hlc"].endswith(events[1]["origin_replica"])
        replicas.append(events[0]["origin_replica"])
    assert replicas[0] != replicas[1]
    assert all(r.startswith("rep_") and len(r) == 36 and int(r[4:], 16) >= 0 for r in replicas)


def test_a_state_file_without_a_replica_gets_one_stable_id(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"events": []}), encoding="utf-8")
    first = PalaceStore(state).state.replica
    assert first == PalaceStore(state).state.replica == replica_id_for(state)


def test_mesh_peers_names_the_palace_replica() -> None:
    store = PalaceStore()
    assert run_tool(store, "mempalace_mesh_peers", {}, "/p")["self"]["version_vector"] == {}
    event = run_tool(store, "mempalace_event_append", {
        "type": "note", "stream": "s", "room": "r", "from_agent": "a"}, "/p")["event"]
    me = run_tool(store, "mempalace_mesh_peers", {}, "/p")["self"]
    assert me["replica_id"] == event["origin_replica"]
    assert me["version_vector"] == {event["origin_replica"]: 1}
