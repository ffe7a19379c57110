"""Deliberately harmless mutants: selecting one must make the selftest fail (it survives)."""

from __future__ import annotations

from typing import Any

from palace_conformance.selftest.mutants.model import Mutant, Patch
from palace_conformance.selftest.mutants.patching import RESPAWN


def _passthrough(original: Any) -> Any:
    def on_success(self: Any) -> None:
        original(self)

    return on_success


CONTROLS: tuple[Mutant, ...] = (
    Mutant("control-noop", ("STDIO-07",),
           "a real patch that changes nothing: it must survive",
           (Patch(f"{RESPAWN}:RespawnPolicy.on_success", _passthrough),), control=True),
)
