"""The golden traces on disk: one per shipped scenario and transport, canonical, self-contained.

What CI needs besides the seed-level run (which fails on a trace that departs): a new scenario
without a golden trace, a golden file whose scenario is gone, a hand edit that is not what
``run --update-golden`` writes, or a registration reference that resolves to nothing, each
fails here, without running a bridge.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palace_conformance.runner.compare import golden
from palace_conformance.scenarios.loader import load_catalogue, shipped_roots

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "fixtures" / golden.GOLDEN_DIR


@pytest.fixture(scope="module")
def shipped() -> dict[Path, tuple[str, ...]]:
    """golden file (relative to the tree) -> the transports its scenario runs on."""
    catalogue = load_catalogue(shipped_roots(slow=True))
    out: dict[Path, tuple[str, ...]] = {}
    for scenario in catalogue.scenarios:
        if scenario.subject == "fake":
            continue
        where = golden.golden_root(scenario.path)
        assert where is not None and where[0] == TREE, scenario.path
        out[where[1]] = tuple(scenario.transports)
    return out


def _files() -> list[Path]:
    return sorted(p.relative_to(TREE) for p in TREE.rglob("*.json")
                  if p.name != golden.REGISTRY_NAME)


def test_every_shipped_scenario_has_a_golden_trace_per_transport(
        shipped: dict[Path, tuple[str, ...]]) -> None:
    missing = []
    for relative, transports in sorted(shipped.items()):
        path = TREE / relative
        traces = json.loads(path.read_text())["transports"] if path.is_file() else {}
        missing += [f"{relative}[{t}]" for t in transports if t not in traces]
    assert missing == [], ("no golden trace (run 'palace-conformance run --update-golden "
                           f"--select ID' and review the new file): {missing}")


def test_no_golden_file_outlives_its_scenario(shipped: dict[Path, tuple[str, ...]]) -> None:
    orphans = [str(f) for f in _files() if f not in shipped]
    assert orphans == [], f"golden traces of no scenario (delete them): {orphans}"
    for relative in _files():
        data = json.loads((TREE / relative).read_text())
        extra = set(data["transports"]) - set(shipped[relative])
        assert not extra, f"{relative}: traces for transports the scenario does not run: {extra}"
        assert data["scenario"] == relative.stem


def test_files_are_what_update_golden_writes() -> None:
    """Canonical JSON (sorted keys, one-space indent, a final newline): a hand edit that is
    not shows here; a reviewed update rewrites them whole."""
    for path in [*(TREE / f for f in _files()), TREE / golden.REGISTRY_NAME]:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        assert data["format"] == golden.FORMAT, path
        assert golden._dump(data) == text, f"{path} is not as --update-golden writes it"


def test_every_registration_reference_resolves_and_every_entry_is_used() -> None:
    registry = json.loads((TREE / golden.REGISTRY_NAME).read_text())["registrations"]
    used: set[str] = set()

    def refs(value: object) -> None:
        if isinstance(value, dict):
            if golden.REF_KEY in value:
                used.add(str(value[golden.REF_KEY]))
            for item in value.values():
                refs(item)
        elif isinstance(value, list):
            for item in value:
                refs(item)

    for relative in _files():
        refs(json.loads((TREE / relative).read_text()))
    assert used - set(registry) == set(), "references to no registration"
    assert set(registry) - used == set(), ("registrations no trace uses (regenerate the whole "
                                           "catalogue with --update-golden to drop them)")
    for digest, registration in registry.items():
        assert golden._digest(registration) == digest
