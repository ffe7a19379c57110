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
