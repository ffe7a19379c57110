"""Which scenarios judge a mutant: module → behaviours (``modules.json``) → covering scenarios.

The map is data so that the selection is reviewable; :func:`problems` is what the test runs so a
module added to the bridge cannot be forgotten.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BRIDGE_DIR = ROOT / "reference" / "palace_bridge"
MAP_PATH = Path(__file__).with_name("modules.json")


class MapError(Exception):
    """The module map cannot be read or names something unknown; one line."""


@dataclass(frozen=True)
class ModuleMap:
    """``modules``: module path (relative to the bridge package) → behaviour IDs or areas;
    ``unreached``: module path → why no scenario can judge it."""

    modules: Mapping[str, tuple[str, ...]]
    unreached: Mapping[str, str]

    @classmethod
    def load(cls, path: Path = MAP_PATH) -> ModuleMap:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise MapError(f"cannot read the module map {path}: {exc}") from None
        modules = {name: tuple(entries) for name, entries in data.get("modules", {}).items()}
        return cls(modules=modules, unreached=dict(data.get("unreached", {})))

    def behaviours(self, module: str, known: Iterable[str]) -> list[str]:
        """The module's entries with each area expanded to its behaviour IDs, in ``known`` order."""
        entries = set(self.modules[module])
        return [bid for bid in known if bid in entries or bid.split("-")[0] in entries]

    def areas(self, known: Iterable[str]) -> dict[str, list[str]]:
        """Each module's behaviour areas (``STDIO``, ``HTTP``, ...), for a report."""
        known = list(known)
        return {m: sorted({b.split("-")[0] for b in self.behaviours(m, known)})
                for m in self.modules}


def bridge_modules(bridge_dir: Path = BRIDGE_DIR) -> list[str]:
    """Every Python module of the bridge, as a path relative to the package, sorted."""
    return sorted(p.relative_to(bridge_dir).as_posix() for p in bridge_dir.rglob("*.py"))


def problems(module_map: ModuleMap, modules: Iterable[str], known: Iterable[str]) -> list[str]:
    """Everything wrong with the map: unlisted, stale or doubly listed modules, unknown IDs or
    areas, an ``unreached`` entry without a reason. Empty when the map is sound."""
    known_ids = list(known)
    areas = {bid.split("-")[0] for bid in known_ids}
    present = set(modules)
    listed = set(module_map.modules) | set(module_map.unreached)
    found = [f"{m}: not in the module map (add it to 'modules' with the behaviours it "
             "implements, or to 'unreached' with the reason)" for m in sorted(present - listed)]
    found += [f"{m}: in the module map but not in the bridge (remove it)"
              for m in sorted(listed - present)]
    found += [f"{m}: both in 'modules' and 'unreached'"
              for m in sorted(set(module_map.modules) & set(module_map.unreached))]
    for module, entries in sorted(module_map.modules.items()):
        if not entries:
            found.append(f"{module}: no behaviours (list some, or move it to 'unreached')")
        found += [f"{module}: unknown behaviour ID or area {entry!r}" for entry in entries
                  if entry not in known_ids and entry not in areas]
    found += [f"{m}: 'unreached' needs a reason" for m, why in module_map.unreached.items()
              if not why.strip()]
    return found


def covering(scenarios: Iterable[Any], behaviour_ids: Iterable[str]) -> list[str]:
    """Ids of the bridge scenarios citing any of ``behaviour_ids`` (what ``fixtures list --covers``
    finds, one ID at a time), sorted; the fake's self-tests never judge the bridge."""
    wanted = set(behaviour_ids)
    return sorted(s.id for s in scenarios
                  if getattr(s, "subject", "bridge") == "bridge" and wanted & set(s.covers))


def load_catalogue_facts() -> tuple[list[str], list[Any]]:
    """(behaviour IDs in file order, the shipped scenarios) through the kit's own loader."""
    from palace_conformance.scenarios.behaviours import load_behaviours
    from palace_conformance.scenarios.loader import load_catalogue

    known = [b.id for b in load_behaviours()]
    catalogue = load_catalogue()
    if catalogue.problems:
        raise MapError(f"{len(catalogue.problems)} invalid scenario file(s); run "
                       "'palace-conformance fixtures validate'")
    return known, list(catalogue.scenarios)


def checked_facts() -> tuple[ModuleMap, list[str], list[Any]]:
    """(the module map, behaviour IDs, shipped scenarios) once the map is known to be current:
    what every ``python -m mutation...`` command starts from; :class:`MapError` when it is not."""
    module_map = ModuleMap.load()
    known, scenarios = load_catalogue_facts()
    wrong = problems(module_map, bridge_modules(), known)
    if wrong:
        raise MapError(f"the module map is out of date: {wrong[0]}")
    return module_map, known, scenarios


def shipped_scenario_ids() -> list[str]:
    """Every shipped scenario id, the slow tier's included: what a triage entry may name."""
    from palace_conformance.scenarios.loader import load_catalogue, shipped_roots

    return [scenario.id for scenario in load_catalogue(shipped_roots(slow=True)).scenarios]


def selections(module_map: ModuleMap) -> dict[str, list[str]]:
    """Module → the scenario ids that judge its mutants."""
    known, scenarios = load_catalogue_facts()
    return {module: covering(scenarios, module_map.behaviours(module, known))
            for module in sorted(module_map.modules)}
