"""What a user's flags select: the host command for ``--bridge`` and the scenarios for
``--select``. Shared by every command that runs scenarios; light, like the commands themselves."""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
from typing import TYPE_CHECKING

from palace_conformance.hosts import REFERENCE_HOST
from palace_conformance.runner.usage import RunUsageError

if TYPE_CHECKING:
    from palace_conformance.scenarios.model import Scenario


def host_argv(bridge: str) -> tuple[str, ...]:
    """``reference`` or a host command line; the program must exist."""
    if bridge == "reference":
        return REFERENCE_HOST
    node_argv = _node_host(bridge)
    if node_argv is not None:
        return node_argv
    try:
        argv = shlex.split(bridge)
    except ValueError as exc:
        raise RunUsageError(f"--bridge {bridge!r}: {exc} (quote the host command once)") from None
    if not argv:
        raise RunUsageError("--bridge is empty (give 'reference' or a host command)")
    program = argv[0]
    found = (program if os.sep in program and os.access(program, os.X_OK)
             else shutil.which(program) if os.sep not in program else None)
    if found is None:
        raise RunUsageError(f"bridge command {program!r} not found or not executable (give a "
                            "driver host command, e.g. --bridge 'node host.mjs', or --bridge "
                            "reference)")
    return tuple(argv)


def _node_host(bridge: str) -> tuple[str, ...] | None:
    """The Node hosts' specs (``pi-extension:FILE``, ``pi-mcp``, ...), when that module is here."""
    try:
        from palace_conformance.hosts import node
    except ImportError:
        return None
    if not node.is_node_spec(bridge):
        return None
    try:
        return tuple(node.host_command(bridge))
    except (node.HostSpecError, node.NodeHostError) as exc:
        raise RunUsageError(f"--bridge {bridge}: {exc}") from None


def select(scenarios: list[Scenario], patterns: list[str]) -> list[Scenario]:
    if not patterns:
        return scenarios
    chosen = [s for s in scenarios if any(fnmatch.fnmatchcase(s.id, p) for p in patterns)]
    if not chosen:
        raise RunUsageError(f"no scenario id matches --select {' '.join(patterns)} "
                            "(see palace-conformance fixtures list)")
    return chosen


def default_level(bridge: str) -> str:
    """The level a run is judged at when ``--level`` is not given: the reference bridge is the
    seed's copy and keeps its conventions; any other bridge owes only what every bridge must do."""
    return "seed" if bridge == "reference" else "core"
