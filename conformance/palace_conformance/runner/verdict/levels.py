"""Conformance levels: which checks count when a run is judged at ``core`` or at ``seed``.

``core`` is what any MemPalace bridge must do; ``seed`` adds the conventions of the seed's
``mempalace.ts`` (its wording, knob defaults, exact order). A check's level is its scenario's,
unless the expectation marks that part ``seed_only``; a scenario's level is its own ``level``, or
``core`` when it covers a core behaviour (``fixtures/behaviours.json``), else ``seed``. The fake's
self-tests are ``fake``: they count at every level but are never the bridge's. Parity (both
transports alike) is the seed's promise that its copies behave the same, so it is ``seed``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from palace_conformance.runner.results import CORE, FAKE, SEED
from palace_conformance.scenarios.behaviours import load_behaviours
from palace_conformance.scenarios.checks import resolve_pointer
from palace_conformance.scenarios.model import Scenario

RUN_LEVELS = (CORE, SEED)
_EXPECT = re.compile(r"^(/steps/[0-9]+/expect|/expect)(/.*)?$")


@cache
def _behaviour_levels() -> dict[str, str]:
    return {b.id: b.level for b in load_behaviours()}


def scenario_level(scenario: Scenario) -> str:
    if scenario.subject == "fake":
        return FAKE
    explicit = scenario.raw.get("level")
    if explicit in RUN_LEVELS:
        return str(explicit)
    levels = _behaviour_levels()
    return CORE if any(levels.get(b) == CORE for b in scenario.covers) else SEED


def check_level(base: str, raw: Mapping[str, Any], pointer: str) -> str:
    """The level of the check record at ``pointer`` (a scenario-file pointer) in a scenario of
    level ``base`` (:func:`scenario_level`, worked out once a scenario) whose data is ``raw``."""
    if base != CORE:
        return base
    if pointer == "/parity":
        return SEED
    found = _EXPECT.match(pointer)
    if found is None:
        return base
    owner: Any = resolve_pointer(raw, found.group(1))
    relative = found.group(2) or ""
    marked = owner.get("seed_only", []) if isinstance(owner, dict) else []
    if any(relative == part or relative.startswith(part + "/") for part in marked):
        return SEED
    return base
