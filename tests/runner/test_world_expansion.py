"""A scenario's placeholders are expanded, and the scenario built, once per run: when the palace
listens and ``${FAKE_URL}`` exists. What the palace reads as it starts is expanded on its own
before that (``StartParts``), with the values known then."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.runner.execution.translation import ProfileTranslation
from palace_conformance.runner.execution.world import StartParts, World
from palace_conformance.runner.profile import load_profile
from palace_conformance.scenarios.loader import load_scenario, scenarios_dir
from palace_conformance.scenarios.model import Scenario


def _shipped(sid: str) -> Scenario:
    return load_scenario(scenarios_dir() / sid.split(".", 1)[0] / f"{sid}.json")


def test_the_parts_laid_out_before_the_palace_starts_take_the_values_known_then() -> None:
    scenario = _shipped("knob.defaults.identity-feed-and-windows")
    assert scenario.feed_helper.mine_source == "${TMP}/feed-export"
    parts = StartParts.of(scenario, {"TMP": "/tmp/pc-run-1"})
    assert parts.feed_helper.mine_source == "/tmp/pc-run-1/feed-export"
    assert parts.faults.to_json() == scenario.faults.to_json()
    assert scenario.feed_helper.mine_source == "${TMP}/feed-export"  # the loaded one untouched


def test_an_http_world_builds_its_scenario_once_with_the_fakes_url(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = next(s for s in (_shipped(p.stem) for p in sorted(scenarios_dir().glob("http/*.json")))
                if "http" in s.transports and s.faults.faults)
    raw: dict[str, Any] = json.loads(json.dumps(base.raw))
    raw["env"] = {**raw.get("env", {}), "X_URL": "${FAKE_URL}", "X_DIR": "${TMP}/x"}
    scenario = Scenario.from_json(raw, base.path)
    built = _count_builds(monkeypatch)
    world = World(scenario, "http", work_root=tmp_path, warm_start=False)
    try:
        world.open()
        assert built == [scenario.id]
        assert world.fake_url is not None
        assert world.scenario.env["X_URL"] == world.fake_url
        assert world.env["X_URL"] == world.fake_url
        assert world.scenario.env["X_DIR"] == f"{world.root}/x"
        plan = json.loads(world.plan.read_text())
        assert plan == scenario.faults.for_transport("http").to_json()
    finally:
        world.close()


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []
    original = Scenario.from_json.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Scenario], data: Any, path: Any = None) -> Scenario:
        built.append(str(data.get("id")))
        return original(cls, data, path)  # type: ignore[no-any-return]

    monkeypatch.setattr(Scenario, "from_json", classmethod(counted))
    return built


def test_a_profile_that_adapts_and_paces_builds_the_scenario_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a per-call respawn budget rewrites the expectations (profile_edges), and a fixed init
    # timeout drops a pace value (pace): both edits, one build
    path = tmp_path / "both.profile.json"
    path.write_text(json.dumps({
        "schema_version": 1, "name": "both", "entry": "reference",
        "claims": {"respawn_budget": "call"},
        "knobs": {"MEMPALACE_MCP_INIT_TIMEOUT_MS": {"fixed": 20000}}}))
    scenario = _shipped("stdio.respawn.single-attempt-then-latch")
    built = _count_builds(monkeypatch)
    adapted, paced, why = ProfileTranslation(load_profile(path)).adapt(scenario, "stdio")
    assert why is None
    assert built == [scenario.id]
    assert adapted is paced.scenario
    assert paced.changes  # paced ...
    assert "MEMPALACE_MCP_INIT_TIMEOUT_MS" not in paced.scenario.env
    assert any(check.get("at_most") is not None  # ... and adapted to the per-call rule
               for step in paced.scenario.raw["steps"]
               for check in step.get("expect", {}).get("journal", ()))
