"""The whole fidelity comparison against the real mempalace 3.11.0 (tox -e real-palace)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from palace_conformance.fidelity.run import run_fidelity


@pytest.mark.real_palace
@pytest.mark.timeout(900)
def test_the_fake_matches_the_real_server_at_every_point(tmp_path: Path) -> None:
    out = io.StringIO()
    comparison = run_fidelity(None, json_out=str(tmp_path / "fidelity.json"), out=out,
                              log=io.StringIO())
    assert len(comparison.verdicts) >= 150
    assert comparison.differences == [], out.getvalue()
    written = json.loads((tmp_path / "fidelity.json").read_text())
    assert written["totals"]["differences"] == 0
