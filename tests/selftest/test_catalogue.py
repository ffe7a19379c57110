"""The mutant catalogue is well formed, and every patch still hits a real target.

Nothing here patches this process (other tests share it): targets are resolved and their
replacements built, and applying is tried in a child interpreter.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from palace_conformance.scenarios.behaviours import load_behaviours
from palace_conformance.scenarios.loader import load_catalogue
from palace_conformance.selftest import mutants
from palace_conformance.selftest.engine import selection
from palace_conformance.selftest.mutants import Mutant, MutantError, Patch, find, resolve

EVERY = (*mutants.MUTANTS, *mutants.CONTROLS)
PATCHES = [(m.name, p) for m in EVERY for p in m.patches]


@pytest.fixture(scope="module")
def scenarios() -> list[Any]:
    loaded = load_catalogue(None)
    assert not loaded.problems
    return loaded.scenarios


def _callable(value: Any) -> Any:
    if isinstance(value, classmethod | staticmethod):
        return value.__func__
    if isinstance(value, property):
        return value.fget
    return value


def _parameters(function: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


def test_at_least_fifteen_mutants_with_unique_wellformed_names() -> None:
    names = [m.name for m in EVERY]
    assert len(mutants.MUTANTS) >= 15
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", n) for n in names), names
    assert all(m.description and m.patches and m.breaks for m in EVERY)
    assert not any(m.control for m in mutants.MUTANTS)
    assert all(m.control for m in mutants.CONTROLS)


def test_every_broken_behaviour_is_a_known_id_with_scenarios_to_kill_it(
        scenarios: list[Any]) -> None:
    known = {b.id for b in load_behaviours()}
    ids = {s.id for s in scenarios}
    for mutant in EVERY:
        assert set(mutant.breaks) <= known, (mutant.name, mutant.breaks)
        assert set(mutant.also) <= ids, (mutant.name, mutant.also)
        assert selection(mutant, scenarios), f"nothing can kill {mutant.name}"


def test_selection_is_the_covering_bridge_scenarios_on_their_transports(
        scenarios: list[Any]) -> None:
    picked = selection(find("wake-on-resume"), scenarios)
    assert {(s.id, t) for s, t in picked} == {
        ("wake.reloaded-session.no-injection", "stdio"),
        ("wake.resumed-session.no-injection", "stdio"),
        ("wake.forked-session.no-injection", "stdio"),
        ("wake.forked-session.no-injection", "http")}
    full = selection(find("wake-on-resume"), scenarios, full=True)
    assert len(full) > 100 and all(s.subject == "bridge" for s, _ in full)


@pytest.mark.parametrize(("name", "patch"), PATCHES, ids=[f"{n}:{p.target}" for n, p in PATCHES])
def test_every_patch_target_exists_and_the_replacement_fits_it(name: str, patch: Patch) -> None:
    owner, attribute, original = resolve(patch)
    assert vars(owner)[attribute] is original and attribute == patch.path[-1]
    assert patch.module.startswith("palace_bridge")
    replacement = patch.make(original)
    assert replacement is not original
    before, after = _callable(original), _callable(replacement)
    if inspect.isclass(original):
        assert inspect.isclass(replacement)
    elif inspect.isfunction(before):
        assert type(replacement) is type(original)  # a classmethod stays a classmethod
        assert _parameters(after) == _parameters(before), "the signature drifted: update it"
        assert inspect.iscoroutinefunction(after) == inspect.iscoroutinefunction(before)
    else:
        assert type(replacement) is type(original) and replacement != original


def test_a_renamed_or_inherited_target_is_refused_not_silently_skipped() -> None:
    with pytest.raises(MutantError, match="not defined there"):
        resolve(Patch("palace_bridge.respawn:RespawnPolicy.on_succes", lambda o: o))
    with pytest.raises(MutantError, match="not defined there"):  # lives on Exception
        resolve(Patch("palace_bridge.errors:PalaceTimeout.with_traceback", lambda o: o))
    with pytest.raises(MutantError, match="cannot import"):
        resolve(Patch("palace_bridge.nowhere:thing", lambda o: o))
    with pytest.raises(MutantError, match="not found"):
        resolve(Patch("palace_bridge.respawn:Policy.want_child", lambda o: o))
    with pytest.raises(MutantError, match="no mutant named 'nope'"):
        find("nope")


def test_applying_each_mutant_replaces_every_target_in_a_fresh_process() -> None:
    """Apply each mutant, see each target changed, restore; in a child (patches are global)."""
    code = textwrap.dedent("""
        from palace_conformance.selftest import mutants
        for mutant in (*mutants.MUTANTS, *mutants.CONTROLS):
            saved = [mutants.resolve(p) for p in mutant.patches]
            mutants.apply(mutant)
            for owner, name, original in saved:
                assert vars(owner)[name] is not original, (mutant.name, name)
            for owner, name, original in saved:
                setattr(owner, name, original)
        print("applied", len(mutants.MUTANTS) + len(mutants.CONTROLS))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"applied {len(EVERY)}"


def test_apply_changes_nothing_when_one_target_is_missing() -> None:
    """All targets resolve before any is patched: a half-applied mutant would lie."""
    code = textwrap.dedent("""
        from palace_bridge import respawn
        from palace_conformance.selftest import mutants
        before = respawn.RespawnPolicy.on_success
        broken = mutants.Mutant("half", ("STDIO-07",), "x", (
            mutants.Patch("palace_bridge.respawn:RespawnPolicy.on_success", lambda o: None),
            mutants.Patch("palace_bridge.respawn:RespawnPolicy.gone", lambda o: None)))
        try:
            mutants.apply(broken)
        except mutants.MutantError:
            print("unchanged" if respawn.RespawnPolicy.on_success is before else "changed")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.stdout.strip() == "unchanged", done.stderr


def test_the_mutant_dataclass_keeps_what_reports_need() -> None:
    mutant = find("stdio-budget-never-resets")
    assert isinstance(mutant, Mutant) and mutant.breaks == ("STDIO-07",)
    assert [p.target for p in mutant.patches] == [
        "palace_bridge.respawn:RespawnPolicy.on_ready",
        "palace_bridge.respawn:RespawnPolicy.on_success"]
