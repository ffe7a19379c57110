"""``profile init`` end to end: start the bridge's host, observe it, derive and check the draft."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palace_conformance.contract import TRANSPORTS
from palace_conformance.errors import HostError, RunUsageError
from palace_conformance.resources import tool_catalogue
from palace_conformance.runner.execution.suite import HostProbeError, probe_host
from palace_conformance.runner.profile import PROFILE_SCHEMA
from palace_conformance.runner.profiling.derive import Draft, derive
from palace_conformance.runner.profiling.observe import Session, observe
from palace_conformance.runner.selection import host_argv


class NothingObserved(HostError):
    """No session could be run at all; one line naming why for each transport."""


@dataclass
class Outcome:
    draft: Draft
    sessions: list[Session]


def catalogue_tools() -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = tool_catalogue()["tools"]
    return tools


def schema_check(profile: dict[str, Any]) -> None:
    """A draft that does not validate is this module's bug, not the user's: say so loudly."""
    from palace_conformance.scenarios.schema import schema_problems

    problems = schema_problems(profile, PROFILE_SCHEMA)
    if problems:
        first = problems[0]
        raise AssertionError(f"profile init drafted an invalid profile at {first.pointer}: "
                             f"{first.message}")


def draft_profile(bridge: str, *, out_dir: Path | None = None,
                  transports: Sequence[str] = TRANSPORTS,
                  op_timeout_ms: int = 15000) -> Outcome:
    """Observe ``bridge`` (a ``--bridge`` spec) and draft its profile.

    :class:`RunUsageError` for a bridge that cannot be started (one line), :class:`NothingObserved`
    when no session ran.
    """
    argv = host_argv(bridge)
    try:
        probe_host(argv)
    except HostProbeError as exc:
        raise RunUsageError(f"--bridge {bridge}: the host did not start ({exc})") from None
    catalogue = catalogue_tools()
    sessions = observe(argv, catalogue, transports=transports, op_timeout_ms=op_timeout_ms)
    if not any(s.status == "observed" for s in sessions):
        why = "; ".join(f"{s.transport}: {s.reason}" for s in sessions)
        raise NothingObserved(f"nothing observed ({why})")
    draft = derive(bridge, sessions, catalogue, out_dir=out_dir)
    schema_check(draft.profile)
    return Outcome(draft, sessions)
