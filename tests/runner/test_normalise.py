"""The outcome leaves the teardown out; what it masks is data in runner-tests/parity.json."""

from __future__ import annotations

from palace_conformance.runner.results import StepRecord
from palace_conformance.runner.verdict.normalise import outcome


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


def test_a_call_tools_outcome_keeps_each_calls_answer_and_drops_its_duration() -> None:
    def step(ms: float, text: str) -> StepRecord:
        return StepRecord(3, "both", "call_tools", ran=True, ok=True, result={"calls": [
            {"ok": True, "ms": ms, "result": {"content": [{"type": "text", "text": text}],
                                              "is_error": False}},
            {"ok": False, "ms": ms * 2, "error": {"kind": "session_lost", "message": "lost",
                                                 "data": {"status": 404}}}]})

    first = outcome([step(3.0, '{"hits": 1}')])["steps"]["both"]["result"]
    assert first == {"calls": [
        {"ok": True, "result": {"content": [{"type": "text", "json": {"hits": 1}}],
                                "is_error": False}},
        {"ok": False, "error": {"kind": "session_lost", "message": "lost"}}]}
    assert outcome([step(900.0, '{"hits": 1}')]) == outcome([step(3.0, '{"hits": 1}')])
    assert outcome([step(3.0, '{"hits": 2}')]) != outcome([step(3.0, '{"hits": 1}')])
