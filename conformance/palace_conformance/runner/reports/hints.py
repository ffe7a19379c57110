"""Hints about what a bridge declares but never does, so a report does not blame the bridge for
the kit's reading of its claims.

A capability declared in ``hello`` (or a profile) makes every scenario that requires it run. When
some of those runs failed and none shows the capability at work (no command registered for
``diary_command``, no injected message for ``wakeup``, no helper run for ``feeding``), the
failures are more likely a wrong claim than many defects: one line says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from palace_conformance.runner.results import FAILED, NOT_APPLICABLE, PARITY, RunResult
from palace_conformance.scenarios.model import Scenario

#: capability -> (effect kinds that show it at work, what the hint says was never seen)
EVIDENCE: Mapping[str, tuple[frozenset[str], str]] = {
    "diary_command": (frozenset({"command_registered"}), "no command was registered"),
    "wakeup": (frozenset({"injected"}), "no wake-up was injected"),
    "feeding": (frozenset({"exec"}), "no helper program was run"),
}


def capability_hints(run: RunResult, scenarios: Sequence[Scenario]) -> list[str]:
    """One line per declared capability that the runs needing it never showed at work."""
    requires = {s.id: set(s.requires) for s in scenarios}
    hints = []
    for capability in run.host.capabilities:
        if capability not in EVIDENCE:
            continue
        kinds, missing = EVIDENCE[capability]
        needing = [r for r in run.results if r.transport != PARITY
                   and r.status != NOT_APPLICABLE and capability in requires.get(r.scenario, ())]
        if not any(r.status == FAILED for r in needing):
            continue  # nothing to explain (a scenario may rightly expect no wake-up at all)
        if any(e.get("kind") in kinds for r in needing for e in r.effects):
            continue
        hints.append(f"hint: declared {capability}, but {missing} in the {len(needing)} run(s) "
                     "that need it: declare fewer capabilities (a profile's claims.capabilities)?")
    return hints
