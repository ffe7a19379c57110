"""Issue 13, items 1 and 2: a repro bundle is data. ``replay`` never runs the command line a
bundle recorded, and never builds a path from the bundle's scenario id before checking it."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from .support import cli, one_line_error, shipped_file

SID = "tool.errors.rpc-errors-and-results-kept"


def hostile_bundle(directory: Path, marker: Path, sid: str = SID) -> tuple[Path, str]:
    """A bundle whose recorded bridge, if ever run, leaves ``marker`` behind."""
    recorded = shlex.join([sys.executable, "-c",
                           f"open({str(marker)!r}, 'w').write('ran')"])
    bundle = directory / "bundle"
    bundle.mkdir()
    scenario = json.loads(Path(shipped_file(SID)).read_text())
    scenario["id"] = sid
    (bundle / "scenario.json").write_text(json.dumps(scenario))
    (bundle / "bundle.json").write_text(json.dumps({
        "format": 1, "scenario": sid, "transport": "stdio", "transports": ["stdio"],
        "status": "failed", "bridge": recorded}))
    return bundle, recorded


def test_replay_without_bridge_refuses_and_runs_nothing(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    marker = tmp_path / "recorded-bridge-ran"
    bundle, recorded = hostile_bundle(tmp_path, marker)
    code, out, err = cli(capsys, "replay", str(bundle))
    line = one_line_error(err)
    assert code == 2, out
    assert "replay runs only the bridge you name" in line
    assert f"add --bridge {shlex.quote(recorded)}" in line and "--bridge reference" in line
    assert not marker.exists()


def test_replay_against_another_bridge_says_so_and_goes_on(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    marker = tmp_path / "recorded-bridge-ran"
    bundle, recorded = hostile_bundle(tmp_path, marker)
    code, out, _ = cli(capsys, "replay", str(bundle), "--bridge", "reference")
    assert code == 0, out
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: the bundle was recorded with --bridge {shlex.quote(recorded)}; "
                     "replaying against reference as asked"]
    assert not marker.exists()


def test_a_bridge_with_a_newline_is_shown_on_one_line(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    bundle, _ = hostile_bundle(tmp_path, tmp_path / "marker")
    manifest = json.loads((bundle / "bundle.json").read_text())
    manifest["bridge"] = "evil\nsecond line"
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    code, _, err = cli(capsys, "replay", str(bundle))
    assert code == 2 and "'evil\\nsecond line'" in one_line_error(err)


@pytest.mark.parametrize("shape", ["absolute", "dot-dot"])
def test_a_hostile_scenario_id_is_refused_before_any_write(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, shape: str) -> None:
    target = tmp_path / "outside" / "escaped"
    target.parent.mkdir()
    sid = str(target) if shape == "absolute" else "../" * 40 + str(target).lstrip("/")
    bundle, _ = hostile_bundle(tmp_path, tmp_path / "marker", sid=sid)
    code, _, err = cli(capsys, "replay", str(bundle), "--bridge", "reference")
    line = one_line_error(err)
    assert code == 2 and "is not a scenario id" in line and "regenerate the bundle" in line
    assert list(target.parent.iterdir()) == []  # no <id>.json written outside the scratch dir
