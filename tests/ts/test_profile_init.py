"""``profile init`` on TypeScript bridges: the drafts of the real-world bridges compared with
their hand-written profiles (``extensions/realworld/*.profile.json``) on every field observation
can know.

What it cannot know is asserted as absent rather than skipped: configfile's remote palace (its
settings file is empty in the run, so neither session reaches the fake) and knobs' fixed 8 s
start-up budget (a constant reads no variable) are left for the person, with a note.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.cli import main
from palace_conformance.runner.profile import load_profile
from palace_conformance.scenarios.schema import schema_problems

from .support import EXTENSIONS

REALWORLD = EXTENSIONS / "realworld"
def init(capsys: pytest.CaptureFixture[str], tmp_path: Path, bridge: str) -> tuple[
        dict[str, Any], str, Path]:
    out = tmp_path / f"{bridge}.profile.json"
    with pytest.raises(SystemExit) as done:
        main(["profile", "init", "--bridge", f"pi-extension:{REALWORLD / bridge}.ts",
              "--out", str(out)])
    _, err = capsys.readouterr()
    assert done.value.code == 0, err
    draft: dict[str, Any] = json.loads(out.read_text())
    assert schema_problems(draft, "bridge-profile.schema.json") == []
    assert load_profile(out).bridge == f"pi-extension:{REALWORLD / bridge}.ts"
    return draft, err, out


def hand_written(bridge: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((REALWORLD / f"{bridge}.profile.json").read_text())
    return found


def test_knobs_draft_maps_its_own_knob_names(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    draft, notes, _ = init(capsys, tmp_path, "knobs")
    expected = hand_written("knobs")
    own = {seed: knob for seed, knob in expected["knobs"].items() if "env" in knob}
    assert draft["knobs"] == own  # all four, PALACE_TOOL_TIMEOUT_S in seconds
    assert draft["claims"]["capabilities"] == expected["claims"]["capabilities"] == ["stdio"]
    # the fixed start-up budget reads no variable: a note asks for it
    assert "never read MEMPALACE_MCP_INIT_TIMEOUT_MS" in notes
    assert "PALACE_REQUEST_TIMEOUT_MS is not mapped" in notes
    assert not {"files", "tools", "path_programs"} & draft.keys()


def test_configfile_draft_names_its_settings_file(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    draft, notes, _ = init(capsys, tmp_path, "configfile")
    paths = [f["path"] for f in draft["files"]]
    assert paths[0] in [f["path"] for f in hand_written("configfile")["files"]]
    assert paths == ["${HOME}/.pi/agent/mempalace.json"]  # the token file is read only after it
    assert draft["files"][0]["json"] == {"TODO": "what the bridge reads from this file"}
    assert draft["claims"]["capabilities"] == []  # the hand-written http needs the file filled
    assert "settings file filled in first" in notes and "placeholder content" in notes
    assert "knobs" not in draft and "tools" not in draft


def test_curated_draft_maps_its_renamed_tools(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    draft, notes, _ = init(capsys, tmp_path, "curated")
    expected = hand_written("curated")
    assert draft["tools"] == expected["tools"]
    assert draft["claims"]["capabilities"] == expected["claims"]["capabilities"] == ["http"]
    assert "palace_status -> mempalace_status (the fake saw it call that tool)" in notes
    assert "knobs" not in draft


def test_agentshapes_draft_finds_its_agent_ui_channels(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    draft, _, _ = init(capsys, tmp_path, "agentshapes")
    expected = hand_written("agentshapes")
    # what the sessions can show: where the wake-up and diagnostics go (errors as isError results
    # need a failing call, which the observation does not make)
    assert draft["channels"] == {k: expected["channels"][k] for k in ("wakeup", "diagnostics")}
    assert draft["claims"]["capabilities"] == expected["claims"]["capabilities"]


def test_pyspawn_draft_maps_its_knob_and_reaches_the_fake_package(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    draft, notes, _ = init(capsys, tmp_path, "pyspawn")
    expected = hand_written("pyspawn")
    assert draft["knobs"] == expected["knobs"]
    # python3 -m mempalace.mcp_server finds the fake package the runner provides
    assert "the runner puts a fake mempalace package first" in notes
    assert draft["claims"]["capabilities"] == expected["claims"]["capabilities"] == ["stdio"]


def test_envelope_draft_sees_static_tools_and_the_envelope(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    draft, notes, _ = init(capsys, tmp_path, "envelope")
    expected = hand_written("envelope")
    assert draft["tools"]["static"] is expected["tools"]["static"] is True
    assert draft["results"] == expected["results"] == {"path": "/data"}
    assert {k: v for k, v in draft["tools"]["map"].items()} == {
        own: tool for own, tool in expected["tools"]["map"].items() if isinstance(tool, str)}
    assert "without ever sending tools/list" in notes and "inside an envelope, at /data" in notes
    # curated lists its tools and sends the palace's answer as it is: neither is drafted
    curated, _, _ = init(capsys, tmp_path, "curated")
    assert "static" not in curated["tools"] and "results" not in curated


def test_twoserver_draft_names_its_servers_by_role(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    draft, notes, _ = init(capsys, tmp_path, "twoserver")
    assert draft["servers"] == hand_written("twoserver")["servers"]
    assert "it started both mempalace-mcp and mempalace-light-mcp" in notes
