"""Issue 25, items 1-2: the run's own machinery is off limits to every untrusted writer.

A fixture's feed files and a profile's files may not land in the run's ``bin/`` (the fake's shims
and the runner's stand-ins, first on PATH), its journal, plan, state or stderr files, HOME's lease,
or the folders Python and Node load code from; a profile knob may not aim a scenario's value at a
variable the runner sets or a loader reads. Each attack is refused by the schema and the loader
(one line naming the file, the field and the fix) and, forced past them, at run time without
anything being run; a shim changed during the run makes the result *not testable*."""

from __future__ import annotations

import copy
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.runner.support import options
from tests.runner.support import scripted as scripted_host

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.execution.fake_client import FakeClient
from palace_conformance.runner.execution.world import SetupError, World
from palace_conformance.runner.profile import (
    Knob,
    Profile,
    ProfileError,
    ProfileFile,
    load_profile,
)
from palace_conformance.runner.results import NOT_TESTABLE
from palace_conformance.scenarios import paths
from palace_conformance.scenarios.loader import ScenarioError, load_scenario, scenarios_dir
from palace_conformance.scenarios.model import Scenario
from palace_conformance.standins import scripted

SID = "feed.lock.refused-then-next-trigger-remines"
SHIM_ATTACKS = [
    ("${TMP}/bin", {"mempalace-mcp": "#!/bin/sh\ntouch MARK\n"}),
    ("${TMP}", {"bin/mempalace-mcp": "#!/bin/sh\ntouch MARK\n"}),
    ("${TMP}/journal.jsonl", {}),
    ("${TMP}/home/.mempalace/locks", {"x.lock": ""}),
    ("${TMP}/BIN", {"mempalace-pi-session": "x"}),
]


def shipped_raw() -> dict[str, Any]:
    return json.loads((scenarios_dir() / "feed" / f"{SID}.json").read_text())


def with_feed(mine_source: str, files: dict[str, str]) -> dict[str, Any]:
    data = copy.deepcopy(shipped_raw())
    data["helpers"]["feed"].update({"mine_source": mine_source, "files": files})
    return data


@pytest.mark.parametrize(("source", "files"), SHIM_ATTACKS)
def test_the_loader_refuses_a_feed_aimed_at_the_runners_files(
        tmp_path: Path, source: str, files: dict[str, str]) -> None:
    path = tmp_path / "feed" / f"{SID}.json"
    path.parent.mkdir()
    path.write_text(json.dumps(with_feed(source, files)))
    started = time.monotonic()
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert time.monotonic() - started < 5
    assert "\n" not in message and str(path) in message and "/helpers/feed/" in message
    assert "${TMP}/" in message  # the fix: a folder of its own below the run


@pytest.mark.parametrize(("source", "files"), SHIM_ATTACKS)
def test_a_feed_forced_past_the_loader_is_refused_before_anything_runs(
        tmp_path: Path, source: str, files: dict[str, str]) -> None:
    marker = tmp_path / "ran"
    data = with_feed(source, {k: v.replace("MARK", str(marker)) for k, v in files.items()})
    world = World(Scenario.from_json(data, Path(f"{SID}.json")), "stdio",
                  work_root=tmp_path / "runs")
    try:
        with pytest.raises(SetupError, match="refused by the path policy"):
            world.open()
    finally:
        world.close()
    assert not marker.exists()


def test_the_feed_stand_in_never_writes_into_the_runners_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The stand-in, given a configuration that names the run's bin/ (a world that skipped
    its own check), refuses as it writes: the shim is left as it was."""
    root = tmp_path / "run"
    (root / "bin").mkdir(parents=True)
    shim = root / "bin" / "mempalace-mcp"
    shim.write_text("the shim")
    for source, name in ((root / "bin", "mempalace-mcp"), (root, "bin/mempalace-mcp"),
                         (root / "home" / ".mempalace", "locks/x.lock")):
        code = scripted.run_feed({"mine_source": str(source), "files": {name: "evil"}}, str(root))
        assert code == 2 and "refused" in capsys.readouterr().err
    assert shim.read_text() == "the shim"


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and symlinks")
def test_the_untrusted_writer_follows_no_symlink_fifo_or_device(tmp_path: Path) -> None:
    root = tmp_path / "run"
    (root / "feed").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("kept")
    (root / "feed" / "link").symlink_to(outside)
    (root / "feed" / "dirlink").symlink_to(tmp_path)
    os.mkfifo(root / "feed" / "pipe")
    (root / "feed" / "null").symlink_to("/dev/null")
    for name in ("feed/link", "feed/dirlink/x", "feed/pipe", "feed/null"):
        started = time.monotonic()
        with pytest.raises(paths.PathEscape) as caught:
            paths.write_untrusted(root, name, b"evil")
        assert time.monotonic() - started < 2 and "\n" not in str(caught.value)
    assert outside.read_text() == "kept" and not (tmp_path / "x").exists()
    paths.write_untrusted(root, "feed/sub/ok.txt", b"fine")
    assert (root / "feed" / "sub" / "ok.txt").read_bytes() == b"fine"


def test_every_entry_a_world_makes_is_reserved(tmp_path: Path) -> None:
    """The reserved list is the runner's own layout: a new file the world writes must be added
    to it (or it would be open to a fixture's feed files)."""
    for transport in ("stdio", "http"):
        world = World(Scenario.from_json(shipped_raw(), Path(f"{SID}.json")), transport,
                      work_root=tmp_path / transport)
        try:
            world.open()
            world.seal()
            made = {entry.name for entry in world.root.iterdir()}
        finally:
            world.close()
        assert made - {"feed-export"} <= set(paths.RESERVED_IN_RUN), made


def test_a_shim_changed_after_the_seal_is_never_started(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    world = World(Scenario.from_json(shipped_raw(), Path(f"{SID}.json")), "stdio",
                  work_root=tmp_path / "runs")
    try:
        world.open()
        world.seal()
        shim = world.bin / "mempalace-mcp"
        assert not shim.stat().st_mode & stat.S_IWUSR and world.tampered() is None
        os.chmod(world.bin, 0o755)  # (as root the mode would not stop it: the digest does)
        os.chmod(shim, 0o755)
        shim.write_text(f"#!/bin/sh\ntouch {marker}\n")
        why = world.tampered()
        assert why is not None and "bin/" in why and "mempalace-mcp" in why and "\n" not in why
        with pytest.raises(OSError, match="changed during the run"):
            FakeClient(world)
    finally:
        world.close()
    assert not marker.exists() and not world.root.exists()


def test_a_run_whose_shim_is_tampered_is_not_testable(tmp_path: Path) -> None:
    """Whatever writes the shim mid-run (here the host, at ``load``), the runner starts nothing
    more and the result says why."""
    marker = tmp_path / "ran"
    scenario = load_scenario(scenarios_dir() / "feed" / f"{SID}.json")
    started = time.monotonic()
    host = scripted_host(f"tamper:{marker}", "stdio,feeding")
    result = run_scenario(scenario, "stdio", options(host, work_root=tmp_path / "runs"))
    assert result.status == NOT_TESTABLE, result.reason
    assert "changed during the run" in (result.reason or "") and "mempalace-mcp" in result.reason
    assert time.monotonic() - started < 60 and not marker.exists()


# -- profiles --------------------------------------------------------------------------------------

def minimal(**extra: Any) -> dict[str, Any]:
    return {"schema_version": 1, "name": "mine", "entry": "pi-extension:ext.ts", **extra}


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "bridge.profile.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("path", [
    "${CWD}/bin/mempalace-mcp", "${CWD}/bin", "${CWD}/journal.jsonl", "${CWD}/palace-state.json",
    "${CWD}/home/.mempalace/locks/x", "${HOME}/.mempalace/locks/mine.lock",
    "${HOME}/.local/lib/python3.11/site-packages/evil.pth", "${HOME}/.node_modules/x/index.js",
    "${CWD}/host-stderr.txt", "${CWD}/faults.json",
])
def test_the_loader_refuses_a_profile_file_aimed_at_the_runners_files(tmp_path: Path,
                                                                      path: str) -> None:
    source = write(tmp_path, minimal(files=[{"path": path, "content": "x"}]))
    with pytest.raises(ProfileError) as caught:
        load_profile(source)
    message = str(caught.value)
    assert "\n" not in message and str(source) in message and "/files" in message
    assert "runner's own files" in message


@pytest.mark.parametrize("env", [
    "PALACE_FAKE_JOURNAL", "MEMPALACE_MCP_BIN", "MEMPALACE_FEED_BIN", "PATH", "HOME",
    "PYTHONPATH", "NODE_OPTIONS", "LD_PRELOAD", "DYLD_INSERT_LIBRARIES", "MEMPALACE_REMOTE_URL",
    "MEMPALACE_PALACE_PATH", "BASH_ENV", "pythonstartup", "PALACE_CONFORMANCE_HOST_MARK",
])
def test_the_loader_refuses_a_knob_aimed_at_a_reserved_variable(tmp_path: Path, env: str) -> None:
    source = write(tmp_path, minimal(knobs={"MEMPALACE_MCP_TIMEOUT_MS": {"env": env}}))
    with pytest.raises(ProfileError) as caught:
        load_profile(source)
    message = str(caught.value)
    assert "\n" not in message and "/knobs/MEMPALACE_MCP_TIMEOUT_MS/env" in message
    assert "bridge's own variable" in message


def test_a_bridge_owned_knob_still_loads(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, minimal(
        knobs={"MEMPALACE_MCP_TIMEOUT_MS": {"env": "PALACE_TOOL_TIMEOUT_S", "unit": "s"}},
        files=[{"path": "${HOME}/.mempalace/token", "content": "t"},
               {"path": "${CWD}/.pi/settings.json", "content": "{}"}])))
    assert profile.knobs["MEMPALACE_MCP_TIMEOUT_MS"].env == "PALACE_TOOL_TIMEOUT_S"


def test_a_knob_reads_only_the_scenarios_own_variables() -> None:
    """``SHELL -> MEMPALACE_MCP_BIN`` (forced past the loader): the runner's SHELL is never
    read, and a reserved target is the reason the scenario cannot run, never applied."""
    profile = Profile(name="x", entry="reference", source=Path("x.json"),
                      knobs={"SHELL": Knob(env="PI_PALACE_BIN"),
                             "MEMPALACE_MCP_TIMEOUT_MS": Knob(env="MEMPALACE_MCP_BIN")})
    env = {"SHELL": "/bin/sh", "PATH": "/usr/bin"}
    out, why = profile.translate_env(env, own={})
    assert why is None and "PI_PALACE_BIN" not in out
    out, why = profile.translate_env({**env, "MEMPALACE_MCP_TIMEOUT_MS": "5"},
                                     own={"MEMPALACE_MCP_TIMEOUT_MS": "5"})
    assert why is not None and "MEMPALACE_MCP_BIN" in why and "MEMPALACE_MCP_BIN" not in out


def test_a_profile_forced_past_the_loader_writes_nothing_into_bin(tmp_path: Path) -> None:
    """The issue's attack: a ``files`` entry ``${CWD}/bin/mempalace-mcp`` in a profile built
    without the loader. The run is not testable; the host never starts, nothing is run."""
    marker = tmp_path / "ran"
    profile = Profile(name="x", entry="reference", source=tmp_path / "x.json",
                      files=(ProfileFile("${CWD}/bin/mempalace-mcp",
                                         f"#!/bin/sh\ntouch {marker}\n", None, 0o755, "always"),))
    scenario = load_scenario(scenarios_dir() / "feed" / f"{SID}.json")
    started = time.monotonic()
    result = run_scenario(scenario, "stdio", options(("/nonexistent/host",), profile=profile,
                                                     work_root=tmp_path / "runs"))
    assert result.status == NOT_TESTABLE and "refused by the path policy" in (result.reason or "")
    assert "\n" not in (result.reason or "") and time.monotonic() - started < 30
    assert not marker.exists()


def test_env_placeholders_read_only_the_scenarios_variables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``${ENV:GITHUB_TOKEN}`` in a profile file: the runner's own environment is not the
    scenario's, so it expands to nothing."""
    from palace_conformance.runner.execution import profile_edges

    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "a" * 36)
    profile = Profile(name="x", entry="reference", source=tmp_path / "x.json",
                      files=(ProfileFile("${CWD}/leak.txt", "[${ENV:GITHUB_TOKEN}]", None, 0o600,
                                         "always"),))
    world = World(Scenario.from_json(shipped_raw(), Path(f"{SID}.json")), "stdio",
                  work_root=tmp_path / "runs", keep=True)
    try:
        world.open()
        assert profile_edges.prepare(profile, world) is None
        assert (world.root / "leak.txt").read_text() == "[]"
    finally:
        world.close()


def test_a_knob_forced_past_the_loader_makes_the_run_not_testable(tmp_path: Path) -> None:
    """``PALACE_FAKE_JOURNAL`` as a knob's target (the fake would journal outside the run):
    refused before the host starts, nothing written outside."""
    profile = Profile(name="x", entry="reference", source=tmp_path / "x.json",
                      knobs={"MEMPALACE_MCP_TIMEOUT_MS": Knob(env="PALACE_FAKE_JOURNAL")})
    scenario = load_scenario(scenarios_dir() / "feed" / f"{SID}.json")
    started = time.monotonic()
    result = run_scenario(scenario, "stdio", options(("/nonexistent/host",), profile=profile,
                                                     work_root=tmp_path / "runs"))
    assert result.status == NOT_TESTABLE and "PALACE_FAKE_JOURNAL" in (result.reason or "")
    assert time.monotonic() - started < 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
