"""The fake answers every probe of the truth table recorded from the real mempalace 3.11.0
(``fixtures/catalogue/mempalace-3.11.0-answers.json``, ``palace-conformance fake catalog
--from-real``), after the same normalisation: the fake's fidelity pinned without the real server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from palace_conformance.fake.palace import PalaceStore, run_tool
from palace_conformance.fidelity.truth_table import (
    KINDS,
    POPULATED_SEED,
    STATES,
    Recording,
    derived_extra_required,
    differences,
    load_truth,
    normalise,
    probe_plan,
    record,
    resolve,
)
from palace_conformance.resources import tool_catalogue

TRUTH = load_truth()
CATALOGUE = tool_catalogue("full")


@pytest.fixture(scope="module")
def fake_recording() -> Iterator[Recording]:
    yield record("fake")


def test_the_fake_answers_every_probe_as_the_real_server_did(
        fake_recording: Recording) -> None:
    lines = differences(TRUTH, fake_recording.table)
    assert not lines, "\n".join(lines)
    assert fake_recording.tools == CATALOGUE["tools"]


def test_the_table_probes_every_tool_in_every_state_in_the_plan_order() -> None:
    plan = probe_plan(CATALOGUE)
    assert STATES == ("fresh", "initialised", "populated")
    for state in STATES:
        probes = [(p["tool"], p["arguments"]) for p in TRUTH["probes"] if p["state"] == state]
        assert probes == probe_plan(CATALOGUE, state)
        assert probes[-len(plan):] == plan  # the populated palace's seed and hits come first
    seeded = probe_plan(CATALOGUE, "populated")[:len(POPULATED_SEED)]
    assert seeded == POPULATED_SEED
    assert {tool for tool, _ in plan} == {t["name"] for t in CATALOGUE["tools"]}
    # every tool without required arguments is called bare; one with them is refused bare
    bare = {tool for tool, arguments in plan if not arguments}
    assert "mempalace_status" in bare and "mempalace_search" in bare
    assert len(KINDS) == 4 and len(plan) > 3 * len(CATALOGUE["tools"]) - 20


def test_a_changed_answer_is_reported_with_both_sides() -> None:
    changed = json.loads(json.dumps(TRUTH))
    changed["probes"][0]["answer"] = {"result": {"error": "something else"}}
    lines = differences(TRUTH, changed)
    assert len(lines) == 1 and "something else" in lines[0]
    assert lines[0].startswith("fresh mempalace_status {}")
    assert differences(TRUTH, {"probes": TRUTH["probes"][:-1]})[0].startswith("probes: ")


def test_normalise_masks_what_varies_between_runs_and_machines() -> None:
    answer = {
        "event": {"id": "evt_20261202T003642_0123456789ab", "created_at": "2026-12-02T00:36:42Z",
                  "origin_replica": "rep_" + "a" * 32,
                  "hlc": "1764635802000-000000-rep_" + "a" * 32},
        "drawer_id": "drawer_w_r_" + "b" * 24, "ended": "2026-12-02", "similarity": 0.4,
        "path": "/tmp/world/palace/chroma.sqlite3", "hardware": "Linux-6", "id": "72c7dff5f6545b82",
        "entry_id": "diary_wing_a_20261202_003642123456_" + "c" * 12,
        "profiles": {"rep_" + "d" * 32: {"embedder": "openai-compat"}},
        "self": {"replica_id": "rep_" + "e" * 32, "name": "somehost"},
    }
    assert normalise(answer, {"/tmp/world/palace": "<PALACE>"}) == {
        "event": {"id": "<EVENT_ID>", "created_at": "<TS>", "origin_replica": "<REPLICA>",
                  "hlc": "<HLC>"},
        "drawer_id": "drawer_w_r_<hex24>", "ended": "<DATE>", "similarity": "<SCORE>",
        "path": "<PALACE>/chroma.sqlite3", "hardware": "<PLATFORM>", "id": "<hex16>",
        "entry_id": "diary_wing_a_<STAMP>", "profiles": {"<REPLICA>": {"embedder": "<EMBEDDER>"}},
        "self": {"replica_id": "<REPLICA>", "name": "<HOSTNAME>"},
    }


def test_references_name_an_earlier_answer() -> None:
    payloads = [{"drawer_id": "d1"}, {"event": {"id": "e1"}}]
    assert resolve({"ids": ["$ref:0:drawer_id", "x"], "e": "$ref:1:event.id"}, payloads) == {
        "ids": ["d1", "x"], "e": "e1"}
    assert resolve("$ref:5:drawer_id", payloads) is None
    assert resolve("$ref:1:event.missing", payloads) is None


def test_the_populated_palace_is_hit_by_its_probes() -> None:
    """The recorded hits found what the seed filed (a probe of a miss would pin nothing)."""
    answers = {(p["tool"], json.dumps(p["arguments"], sort_keys=True)): p["answer"]
               for p in TRUTH["probes"] if p["state"] == "populated"}
    drawer = answers[("mempalace_get_drawer", '{"drawer_id": "$ref:0:drawer_id"}')]["result"]
    assert drawer["content"] == "lighthouse storms notebook" and "metadata" in drawer
    search = answers[("mempalace_search", '{"query": "lighthouse storms", "wing": "probe"}')]
    assert [r["text"] for r in search["result"]["results"]] == ["lighthouse storms notebook"]
    ack = answers[("mempalace_event_ack",
                   '{"event_id": "$ref:3:event.id", "from_agent": "probe@y"}')]["result"]
    assert ack["event"]["type"] == "event.ack" and ack["event"]["status"] is None


def test_policies_are_read_off_the_probes() -> None:
    assert derived_extra_required(TRUTH, CATALOGUE["tools"]) == CATALOGUE["policies"][
        "extra_required"] == {"mempalace_diary_write": ["entry"]}


def test_a_tool_without_a_handler_answers_visibly() -> None:
    """README, "Fidelity": every path the kit and its generator reach is modelled since
    2026-12-07 (sync without project_dir, over .gitignore rules and applied:
    test_task_and_sync.py; update_drawer with changes since 2026-12-06:
    test_generated_fixes.py); a name the fake has no handler for says so rather than guess."""
    store = PalaceStore(None, {"initialised": True})
    answer = run_tool(store, "mempalace_not_a_tool", {}, "/p")
    assert answer["fake_unmodelled"] is True and answer["success"] is False
    assert "not modelled" in answer["error"]


def test_updating_a_drawer_that_is_not_there_is_refused_as_3_11() -> None:
    """As the real 3.11.0 answered the fidelity script (2026-12-02): the lookup comes first, and
    on a fresh palace the database is missing before any drawer is."""
    store = PalaceStore(None, {"initialised": True})
    answer = run_tool(store, "mempalace_update_drawer",
                      {"drawer_id": "drawer_nope", "content": "updated"}, "/p")
    assert answer == {"success": False, "error": "Drawer not found: drawer_nope"}
    fresh = run_tool(PalaceStore(None, {"initialised": False}), "mempalace_update_drawer",
                     {"drawer_id": 12345, "content": "updated"}, "/p")
    assert fresh["error"] == "Chroma database missing"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from palace_conformance.cli import main; main()",
               "fake", "catalog", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env,
                          check=False)


def test_catalog_check_replays_the_table_against_the_fake() -> None:
    done = _cli("--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"the fake answers all {len(TRUTH['probes'])} probes" in done.stdout


@pytest.mark.parametrize(("args", "code", "text"), [
    ((), 2, "give --from-real"),
    (("--real-python", "py"), 2, "--real-python needs --from-real"),
    (("--from-real", "--check"), 1, "the real mempalace server is not configured"),
    (("--from-real", "--real-python", "/nonexistent/python"), 1, "is not an executable Python"),
])
def test_catalog_refuses_in_one_line(tmp_path: Path, args: tuple[str, ...], code: int,
                                     text: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PALACE_REAL_PYTHON"}
    done = _cli(*args, env=env)
    assert done.returncode == code and text in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
