"""The official MCP conformance suite's server scenarios give the fake and the real mempalace
3.11.0 the same verdicts and the same checks, per-run values masked (needs Node >= 22, installed
from npm into the kit's cache on first use)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LAUNCH = "from palace_conformance.cli import main; main()"


@pytest.mark.real_palace
def test_fake_and_real_score_identically_on_the_official_server_scenarios(tmp_path: Path) -> None:
    report = tmp_path / "server.json"
    done = subprocess.run([sys.executable, "-c", LAUNCH, "official", "server", "--fake", "--real",
                           "--out", str(tmp_path / "runs"), "--json", str(report)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    payload = json.loads(report.read_text())
    assert payload["differences"] == [] and payload["problems"] == {"fake": [], "real": []}
    assert payload["verdicts"]["fake"] == payload["verdicts"]["real"]
    assert len(payload["verdicts"]["real"]) == 32
