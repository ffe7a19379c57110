"""Issue 13, item 3: the path policy. A fixture (or a bundle's fixture) names files only inside
the run's directory and never re-aims the fake's own variables; the loader refuses one that does
in one line naming the field and the fix, and the runner checks again where it writes."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake import options
from palace_conformance.resources import fixtures_dir
from palace_conformance.runner.execution.world import SetupError, World
from palace_conformance.scenarios import paths
from palace_conformance.scenarios.loader import ScenarioError, load_scenario, scenarios_dir
from palace_conformance.scenarios.model import Scenario
from palace_conformance.standins import scripted

SID = "feed.lock.refused-then-next-trigger-remines"


def shipped_raw() -> dict[str, Any]:
    return json.loads((scenarios_dir() / "feed" / f"{SID}.json").read_text())


def hostile(tmp_path: Path, change: dict[str, Any]) -> Path:
    """The shipped feed scenario with ``change`` merged in (a fixture from elsewhere)."""
    data = shipped_raw()
    for key, value in change.items():
        if key == "feed":
            data["helpers"]["feed"].update(value)
        else:
            data[key] = value
    path = tmp_path / "feed" / f"{SID}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return path


ESCAPES = [
    ({"feed": {"mine_source": "/etc/palace-escape"}}, "/helpers/feed/mine_source",
     "${TMP}/NAME"),
    ({"feed": {"mine_source": "${TMP}/../escape"}}, "/helpers/feed/mine_source", "${TMP}/NAME"),
    ({"feed": {"mine_source": "${TMP}/${FAKE_URL}"}}, "/helpers/feed/mine_source", "${TMP}/NAME"),
    ({"feed": {"files": {"/etc/passwd-x": "x"}}}, "/helpers/feed/files",
     "relative to mine_source"),
    ({"feed": {"files": {"a/../../../x": "x"}}}, "/helpers/feed/files",
     "relative to mine_source"),
    ({"env": {"PALACE_FAKE_JOURNAL": "/tmp/elsewhere.jsonl"}}, "/env", "PALACE_FAKE_*"),
    ({"env": {"PALACE_FAKE_STATE": "/tmp/elsewhere.json"}}, "/env", "PALACE_FAKE_*"),
    # where a palace and its writer lock live: a fake hold-lock must not reach a real palace
    ({"env": {"HOME": "/home/someone"}}, "/env/HOME", "${TMP}/NAME"),
    ({"env": {"XDG_CONFIG_HOME": "${TMP}/../config"}}, "/env/XDG_CONFIG_HOME", "${TMP}/NAME"),
    ({"env": {"MEMPALACE_PALACE_PATH": "~/.mempalace/palace"}}, "/env/MEMPALACE_PALACE_PATH",
     "${TMP}/NAME"),
    # other output may not name a second source, one the policy never confined
    ({"feed": {"stdout_after": ["MINE_SOURCE=/etc"]}}, "/helpers/feed/stdout_after/0",
     "the source is mine_source"),
    ({"feed": {"stdout_before": ["ok", "  MINE_SOURCE=/etc"]}},
     "/helpers/feed/stdout_before/1", "the source is mine_source"),
    ({"feed": {"stdout_after": ["log\nMINE_SOURCE=/etc"]}}, "/helpers/feed/stdout_after/0",
     "the source is mine_source"),
]


@pytest.mark.parametrize(("change", "pointer", "fix"), ESCAPES)
def test_the_loader_refuses_a_fixture_that_escapes_in_one_line(
        tmp_path: Path, change: dict[str, Any], pointer: str, fix: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        load_scenario(hostile(tmp_path, change))
    line = str(refused.value)
    assert "\n" not in line and f": {pointer}" in line and fix in line


def test_a_palace_placed_inside_the_run_is_accepted(tmp_path: Path) -> None:
    scenario = load_scenario(hostile(tmp_path, {"env": {"HOME": "${TMP}/home",
                                                        "XDG_CONFIG_HOME": "${TMP}"}}))
    assert scenario.env["HOME"] == "${TMP}/home"


def test_a_set_env_step_may_not_set_the_fakes_variables(tmp_path: Path) -> None:
    data = shipped_raw()
    data["steps"].insert(1, {"op": "set_env", "env": {"PALACE_FAKE_PLAN": "/tmp/x.json"}})
    path = tmp_path / "feed" / f"{SID}.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    with pytest.raises(ScenarioError, match=r"/steps/1/env: .*PALACE_FAKE_"):
        load_scenario(path)


@pytest.mark.parametrize(("raw", "pointer"), [
    ({"helpers": {"feed": {"mine_source": "${TMP}\\..\\x"}}}, "/helpers/feed/mine_source"),
    ({"helpers": {"feed": {"mine_source": "${TMP}x"}}}, "/helpers/feed/mine_source"),
    ({"helpers": {"feed": {"mine_source": "${TMP}/x", "files": {"a\\..\\..\\b": ""}}}},
     "/helpers/feed/files/a\\..\\..\\b"),
    ({"helpers": {"feed": {"files": {"": ""}}}}, "/helpers/feed/files/"),
    ({"env": {"PALACE_FAKE_CATALOGUE": "light"}}, "/env/PALACE_FAKE_CATALOGUE"),
    ({"helpers": {"feed": {"stdout_after": ["a\u2028b"]}}}, "/helpers/feed/stdout_after/0"),
    ({"helpers": {"feed": {"stdout_before": ["x MINE_SOURCE=y"]}}},
     "/helpers/feed/stdout_before/0"),
])
def test_the_semantic_rule_catches_what_the_schema_pattern_might_not(
        raw: dict[str, Any], pointer: str) -> None:
    assert [where for where, _, _ in paths.fixture_problems(raw)] == [pointer]


def test_the_shipped_catalogue_keeps_to_the_policy() -> None:
    for path in sorted(scenarios_dir().rglob("*.json")):
        assert list(paths.fixture_problems(json.loads(path.read_text()))) == [], path


def test_the_policy_names_every_fake_variable_and_the_schemas_id_form() -> None:
    fake_vars = [value for name, value in vars(options).items()
                 if name.startswith("ENV_") or name == "WATCH_ENV"]
    assert len(fake_vars) >= 6 and all(paths.fake_owned(v) for v in fake_vars)
    schema = json.loads((fixtures_dir() / "schema" / "scenario.schema.json").read_text())
    assert paths.SCENARIO_ID.pattern == schema["properties"]["id"]["pattern"]


def test_confine_resolves_symlinks_and_refuses_what_leads_out(tmp_path: Path) -> None:
    root = tmp_path / "run"
    (root / "inside").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path)
    assert paths.confine(root, "inside/x") == (root / "inside" / "x").resolve()
    assert paths.confine(root, root / "inside") == (root / "inside").resolve()
    for escape in ("../x", "/etc/passwd", "out/x", "inside/../../x"):
        with pytest.raises(paths.PathEscape, match="leads outside"):
            paths.confine(root, escape)


# -- at run time: a scenario that never went through the loader --------------------------------

def unloaded(change: dict[str, Any]) -> Scenario:
    data = copy.deepcopy(shipped_raw())
    data["helpers"]["feed"].update(change.get("feed", {}))
    data.setdefault("env", {}).update(change.get("env", {}))
    return Scenario.from_json(data, Path(f"{SID}.json"))


@pytest.mark.parametrize("change", [
    {"feed": {"mine_source": "OUTSIDE"}},
    {"feed": {"files": {"../../OUTSIDE-file": "x"}}},
    {"env": {"PALACE_FAKE_JOURNAL": "OUTSIDE"}},
    {"env": {"MEMPALACE_CONFIG_DIR": "OUTSIDE"}},
])
def test_the_world_refuses_an_escape_the_loader_never_saw(tmp_path: Path,
                                                           change: dict[str, Any]) -> None:
    outside = tmp_path / "outside"
    text = json.dumps(change).replace("OUTSIDE", str(outside))
    world = World(unloaded(json.loads(text)), "stdio", work_root=tmp_path / "runs")
    try:
        with pytest.raises(SetupError, match="refused by the path policy"):
            world.open()
    finally:
        world.close()
    assert not outside.exists() and not (tmp_path / "OUTSIDE-file").exists()


def test_the_feed_stand_in_refuses_a_symlink_out_as_it_writes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "run"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "feed-export").symlink_to(outside)  # e.g. made by the bridge during the run
    code = scripted.run_feed({"mine_source": str(root / "feed-export"),
                              "files": {"s.jsonl": "x"}}, str(root))
    assert code == 2 and "refused" in capsys.readouterr().err
    assert list(outside.iterdir()) == []
    (root / "feed-export").unlink()
    assert scripted.run_feed({"mine_source": str(root / "feed-export"),
                              "files": {"sub/s.jsonl": "x"}}, str(root)) == 0
    assert (root / "feed-export" / "sub" / "s.jsonl").read_text() == "x"


def test_replay_of_a_hostile_bundle_fixture_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``replay --bridge reference`` loads a bundle's fixture through the same loader."""
    from palace_conformance.cli import main

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    escape = tmp_path / "escaped-journal.jsonl"
    data = shipped_raw()
    data["env"] = {"PALACE_FAKE_JOURNAL": str(escape)}
    (bundle / "scenario.json").write_text(json.dumps(data))
    (bundle / "bundle.json").write_text(json.dumps({"transports": ["stdio"], "bridge": "x"}))
    with pytest.raises(SystemExit) as done:
        main(["replay", str(bundle), "--bridge", "reference"])
    err = capsys.readouterr().err.strip()
    assert done.value.code == 2 and "\n" not in err and "/env: " in err
    assert "PALACE_FAKE_JOURNAL" in err
    assert not escape.exists()


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_the_world_confines_files_under_a_symlinked_mine_source(tmp_path: Path) -> None:
    """mine_source inside the run, but a file name that resolves out through a symlink made
    before the stand-in runs: the stand-in refuses it."""
    root = tmp_path / "run"
    (root / "feed-export").mkdir(parents=True)
    os.symlink(tmp_path, root / "feed-export" / "up")
    code = scripted.run_feed({"mine_source": str(root / "feed-export"),
                              "files": {"up/escaped.txt": "x"}}, str(root))
    assert code == 2 and not (tmp_path / "escaped.txt").exists()


def test_an_unloaded_scenarios_id_names_no_directory_outside(tmp_path: Path) -> None:
    """A scenario built without the loader, its id a path: the world's directory and the kept
    artifacts stay where they belong."""
    from palace_conformance.runner.execution.execute import RunOptions, run_scenario

    data = copy.deepcopy(shipped_raw())
    data["id"] = "../../escaped-run"
    scenario = Scenario.from_json(data, Path("x.json"))
    world = World(scenario, "stdio", work_root=tmp_path / "runs")
    try:
        assert world.root.parent == (tmp_path / "runs").resolve()
    finally:
        world.close()
    kept = tmp_path / "deep" / "er" / "kept"
    result = run_scenario(scenario, "stdio", RunOptions(
        host_argv=("/nonexistent/host",), work_root=tmp_path / "runs", artifacts=kept))
    assert result.artifacts is None
    assert not (tmp_path / "deep" / "escaped-run").exists()


def test_the_feed_stand_in_refuses_a_second_source_as_it_prints(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = scripted.run_feed({"mine_source": str(tmp_path / "x"),
                              "stdout_after": ["MINE_SOURCE=/etc"]}, str(tmp_path))
    captured = capsys.readouterr()
    assert code == 2 and "refused" in captured.err and captured.out == ""
