"""Normalisation masks what legitimately changes between runs, and nothing else."""

from __future__ import annotations

from palace_conformance.runner.results import StepRecord
from palace_conformance.runner.verdict.normalise import (
    ID_MASK,
    TIME_MASK,
    normalise,
    outcome,
    replacement_list,
    tool_result,
)

REPLACE = replacement_list({"TMP": "/tmp/pc-run-1", "FAKE_URL": "http://127.0.0.1:4321/mcp"})


def test_ids_times_and_run_paths_are_masked_but_values_kept() -> None:
    value = {"drawer_id": "drawer_w_r_abc", "id": 7, "created_at": "2026-08-01T09:30:00",
             "note": "filed 2026-08-01T09:30:00.123Z at /tmp/pc-run-1/home/.mempalace",
             "url": "http://127.0.0.1:4321/mcp", "count": 3, "wing": "w", "pid": 4242}
    assert normalise(value, REPLACE) == {
        "drawer_id": ID_MASK, "id": ID_MASK, "created_at": TIME_MASK,
        "note": f"filed {TIME_MASK} at ${{TMP}}/home/.mempalace", "url": "${FAKE_URL}",
        "count": 3, "wing": "w", "pid": TIME_MASK}


def test_tool_text_is_compared_as_parsed_json() -> None:
    result = {"content": [{"type": "text", "text": "{\"total\": 2, \"entry_id\": \"x\"}"},
                          {"type": "text", "text": "plain words"}], "is_error": False}
    assert tool_result(result) == {"is_error": False, "content": [
        {"type": "text", "json": {"total": 2, "entry_id": ID_MASK}},
        {"type": "text", "text": "plain words"}]}


def test_outcome_keeps_kinds_and_drops_transport_specific_effects() -> None:
    step = StepRecord(index=3, key="lost", op="call_tool", ran=True, ok=False,
                      error={"kind": "timeout", "message": "m", "data": {"x": 1}},
                      effects=[{"kind": "stderr", "line": "child said"},
                               {"kind": "injected", "custom_type": "mempalace-wakeup"},
                               {"kind": "exec", "argv": ["mempalace-pi-session"]}])
    teardown = StepRecord(index=-1, key="(teardown)", op="exit", ran=True, ok=True)
    assert outcome([step, teardown]) == {"steps": {"lost": {
        "ok": False, "error": {"kind": "timeout", "message": "m"}, "result": None,
        "effects": ["injected:mempalace-wakeup"]}}}
