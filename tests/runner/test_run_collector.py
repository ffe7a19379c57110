"""The cyclic garbage collector while ``run`` runs the suite (commands/run.py): what is alive at
the start is frozen out of its walks and full collections are rarer; all of it is undone when
the suite ends, by a result or an exception."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from palace_conformance.commands import run as run_command
from palace_conformance.runner.execution import suite


def _state() -> tuple[tuple[int, int, int], int]:
    return gc.get_threshold(), gc.get_freeze_count()


@pytest.mark.parametrize("ends_by", ["result", "interrupt"])
def test_the_suite_runs_with_rarer_full_collections_and_all_is_restored(
        monkeypatch: pytest.MonkeyPatch, ends_by: str) -> None:
    before = _state()
    kept = [[object()] for _ in range(100)]  # alive at the start: frozen while the runs go on
    seen: list[tuple[tuple[int, int, int], int]] = []

    def runs(scenarios: Any, options: Any, progress: Any) -> str:
        seen.append(_state())
        if ends_by == "interrupt":
            raise KeyboardInterrupt
        return "the run"

    monkeypatch.setattr(suite, "run_suite", runs)
    if ends_by == "interrupt":
        with pytest.raises(KeyboardInterrupt):
            run_command._run_suite([], None, None)  # type: ignore[arg-type]
    else:
        assert run_command._run_suite([], None, None) == "the run"  # type: ignore[arg-type]
    (threshold, frozen), = seen
    assert threshold[:2] == before[0][:2]
    assert threshold[2] >= run_command.SUITE_FULL_COLLECTION_EVERY > before[0][2]
    assert frozen >= before[1] + len(kept)
    assert _state() == before
