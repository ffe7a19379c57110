"""A pi extension run without a profile is judged with what observing it showed, not with the
extension host's placeholder list of all eleven capabilities.

``knobs.ts`` spawns ``mempalace-mcp`` and registers the palace's tools; it has no wake-up, no
feeding and no diary command, and it never talks HTTP. Judged as if it had them (the list given
as authoritative with ``?capabilities=``), those scenarios fail; without a profile, they are *not
applicable*, with a reason that names the observation, and the reports say what was detected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.cli import main

from .support import EXTENSIONS

KNOBS = EXTENSIONS / "realworld" / "knobs.ts"
LACKING = {"wake.fresh-session.inject-once": "wakeup", "feed.wing.defaults": "feeding",
           "diary.command.no-topic-default-agent": "diary_command"}
PASSES = "life.shutdown.stdio-polite-close"
DETECTED = ("capabilities detected by observation: stdio; write a profile "
            "(palace-conformance profile init) to claim more")


def run(capsys: pytest.CaptureFixture[str], bridge: str, out: Path,
        *extra: str) -> tuple[int, dict[str, Any], str]:
    selected = [arg for sid in (*LACKING, PASSES) for arg in ("--select", sid)]
    with pytest.raises(SystemExit) as done:
        main(["run", "--bridge", bridge, "--level", "seed", *selected, "--jobs", "2",
              "--report-dir", str(out), *extra])
    printed, _ = capsys.readouterr()
    code = done.value.code
    assert isinstance(code, int)
    results: dict[str, Any] = json.loads((out / "results.json").read_text())
    return code, results, printed


def test_lacking_features_are_not_applicable_not_failed(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, results, printed = run(capsys, f"pi-extension:{KNOBS}", tmp_path / "detected")
    host = results["host"]
    assert host["capabilities"] == ["stdio", "result_parts"]  # + the harness's
    assert host["capabilities_source"] == "observation"
    assert host["capabilities_note"].startswith(DETECTED + " (observed in ")
    status = {(r["scenario"], r["transport"]): (r["status"], r["reason"])
              for r in results["results"]}
    for scenario, capability in LACKING.items():
        assert status[(scenario, "stdio")] == (
            "not_applicable", f"Not applicable: {capability} not detected by observation, and "
            "no profile claims it")
    assert status[("wake.fresh-session.inject-once", "http")][1].startswith(
        "Not applicable: http, wakeup not detected by observation")
    assert status[(PASSES, "stdio")][0] == "passed"  # what it does is still judged
    assert code == 0
    assert DETECTED in printed  # the console header
    summary = (tmp_path / "detected" / "summary.md").read_text()
    assert f"**Capabilities:** {DETECTED}" in summary


def test_the_same_scenarios_fail_when_the_features_are_declared(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The contrast: declared (authoritatively) as a bridge it is not, it is judged as one."""
    claimed = "stdio,wakeup,feeding,diary_command"
    code, results, printed = run(capsys, f"pi-extension:{KNOBS}?capabilities={claimed}",
                                 tmp_path / "declared", "--transport", "stdio")
    assert results["host"]["capabilities_source"] == "host"
    assert "capabilities_note" not in results["host"]
    status = {r["scenario"]: r["status"] for r in results["results"]}
    assert {status[s] for s in LACKING} == {"failed"}
    assert code == 1 and "detected by observation" not in printed
