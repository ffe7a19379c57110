"""Which behaviours a check record stands for: its expectation's ``cites``, else the scenario's.

A scenario may cover several behaviours (``LIFE-06`` and ``STDIO-04``) with checks that each
prove one of them. An expectation's ``cites`` maps its parts (JSON pointers relative to it, ``""``
for all of it) to the behaviour IDs they prove, so a failed check fails only those in
``matrix``'s behaviour roll-up; a check under no cited part stands for every behaviour the
scenario covers. The most specific cited part wins (``/journal/0`` over ``/journal``).
"""

from __future__ import annotations

import re
from typing import Any

from palace_conformance.scenarios.checks import resolve_pointer
from palace_conformance.scenarios.model import Scenario

_EXPECT = re.compile(r"^(/steps/[0-9]+/expect|/expect)(/.*)?$")


def _under(relative: str, part: str) -> bool:
    return part == "" or relative == part or relative.startswith(part + "/")


def check_covers(scenario: Scenario, pointer: str) -> tuple[str, ...]:
    """The behaviours the check record at ``pointer`` (a scenario-file pointer) cites."""
    found = _EXPECT.match(pointer)
    if found is None:
        return scenario.covers
    owner: Any = resolve_pointer(scenario.raw, found.group(1))
    cites = owner.get("cites") if isinstance(owner, dict) else None
    if not isinstance(cites, dict):
        return scenario.covers
    relative = found.group(2) or ""
    parts = [part for part in cites if isinstance(part, str) and _under(relative, part)]
    if not parts:
        return scenario.covers
    chosen = cites[max(parts, key=len)]
    return tuple(b for b in chosen if isinstance(b, str)) or scenario.covers
