"""The module → behaviour map: complete for the bridge as it is, and loud when it falls behind."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from mutation.module_map import (
    MapError,
    ModuleMap,
    bridge_modules,
    covering,
    load_catalogue_facts,
    problems,
    selections,
)

KNOWN = ["LIFE-01", "LIFE-02", "STDIO-05", "STDIO-06", "HTTP-02"]


def test_the_shipped_map_lists_every_bridge_module_with_known_behaviours() -> None:
    known, _ = load_catalogue_facts()
    module_map = ModuleMap.load()
    assert problems(module_map, bridge_modules(), known) == []
    assert "backoff.py" in module_map.modules
    assert "features/feeding.py" in module_map.modules


def test_every_mapped_module_is_judged_by_some_bridge_scenario() -> None:
    chosen = selections(ModuleMap.load())
    assert chosen, "no module mapped"
    assert [m for m, ids in chosen.items() if not ids] == []
    assert all(not s.startswith("fake.") for ids in chosen.values() for s in ids)


def test_a_new_module_an_old_one_and_unknown_names_are_reported() -> None:
    module_map = ModuleMap(modules={"backoff.py": ("STDIO-06", "NOPE-01"), "gone.py": ("LIFE",),
                                    "both.py": ("LIFE",), "empty.py": ()},
                           unreached={"both.py": "x", "quiet.py": " "})
    found = problems(module_map, ["backoff.py", "new.py", "both.py", "empty.py", "quiet.py"],
                     KNOWN)
    assert any(p.startswith("new.py: not in the module map") for p in found)
    assert any(p.startswith("gone.py: in the module map but not in the bridge") for p in found)
    assert "both.py: both in 'modules' and 'unreached'" in found
    assert any(p.startswith("empty.py: no behaviours") for p in found)
    assert "backoff.py: unknown behaviour ID or area 'NOPE-01'" in found
    assert "quiet.py: 'unreached' needs a reason" in found
    assert not any(p.startswith("backoff.py: not in") for p in found)


def test_an_area_expands_to_its_ids_and_an_id_stays_itself() -> None:
    module_map = ModuleMap(modules={"m.py": ("STDIO", "HTTP-02")}, unreached={})
    assert module_map.behaviours("m.py", KNOWN) == ["STDIO-05", "STDIO-06", "HTTP-02"]


def test_covering_picks_bridge_scenarios_citing_any_behaviour() -> None:
    scenarios = [SimpleNamespace(id="b.one", covers=("STDIO-05",), subject="bridge"),
                 SimpleNamespace(id="a.two", covers=("LIFE-01", "HTTP-02"), subject="bridge"),
                 SimpleNamespace(id="f.fake", covers=("STDIO-05",), subject="fake"),
                 SimpleNamespace(id="c.other", covers=("LIFE-02",), subject="bridge")]
    assert covering(scenarios, ["STDIO-05", "HTTP-02"]) == ["a.two", "b.one"]


def test_an_unreadable_map_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "modules.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(MapError, match="cannot read the module map"):
        ModuleMap.load(bad)
    bad.write_text(json.dumps({"modules": {"x.py": ["LIFE"]}}), encoding="utf-8")
    assert ModuleMap.load(bad).modules == {"x.py": ("LIFE",)}
