"""A respawn budget per call (``claims.respawn_budget: "call"``) judged on its own rule, against
the reference bridge made per-call (``mutant_host.py``): correct, it passes the cap scenarios
that a session's latch would fail; one respawn over its budget per call, it fails them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.profile import Profile, load_profile
from palace_conformance.runner.results import CORE, FAILED, PASSED

from .support import failing, mutant, options, shipped

SINGLE = "stdio.respawn.single-attempt-then-latch"


def per_call(tmp_path: Path) -> Profile:
    path = tmp_path / "per-call.profile.json"
    path.write_text(json.dumps({"schema_version": 1, "name": "per-call", "entry": "reference",
                                "claims": {"respawn_budget": "call"}}))
    return load_profile(path)


@pytest.mark.timeout(120)
def test_a_per_call_budget_passes_when_kept_and_fails_when_exceeded(tmp_path: Path) -> None:
    profile = per_call(tmp_path)
    kept = run_scenario(shipped(SINGLE), "stdio", options(
        mutant("per-call-budget"), profile=profile, level=CORE, work_root=tmp_path / "kept"))
    assert kept.status == PASSED, failing(kept)
    over = run_scenario(shipped(SINGLE), "stdio", options(
        mutant("per-call-budget-overspent"), profile=profile, level=CORE,
        work_root=tmp_path / "over"))
    assert over.status == FAILED
    assert any("/journal/" in pointer and "process_start" in message
               for pointer, message in failing(over).items()), failing(over)
    # judged as the seed's session budget (no profile), the same per-call bridge fails: its
    # spent call spawns instead of failing at once as unavailable
    session = run_scenario(shipped(SINGLE), "stdio", options(
        mutant("per-call-budget"), level=CORE, work_root=tmp_path / "session"))
    assert session.status == FAILED
    assert "/steps/5/expect/error/kind" in failing(session) or \
        "/expect/processes/spawned" in failing(session), failing(session)
