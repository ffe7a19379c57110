"""What a user's flags select: the host command for ``--bridge`` and the scenarios for
``--select``, ``--covers`` and ``--shard``. Shared by every command that runs scenarios; light,
like the commands themselves."""

from __future__ import annotations

import difflib
import fnmatch
import functools
import hashlib
import os
import shlex
import shutil
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from palace_conformance.errors import RunUsageError, as_usage_error
from palace_conformance.hosts import REFERENCE_HOST

if TYPE_CHECKING:
    from palace_conformance.runner.profile import Profile
    from palace_conformance.runner.verdict.baseline import BaselineFile
    from palace_conformance.scenarios.model import Scenario


Loaded = TypeVar("Loaded")

#: characters that make a value a glob pattern rather than a file name
GLOB_CHARS = frozenset("*?[")


def check_stray_patterns(paths: list[str], patterns: list[str], flag: str = "--select") -> None:
    """A usage error when a scenario path that does not exist looks like a ``--select`` pattern:
    ``--select 'mail.*' 'feed.*'`` reads the second value as a path (the flag takes one value
    per use), which would otherwise surface as a problem in the scenario files."""
    if not patterns:
        return
    for path in paths:
        if not os.path.exists(path) and GLOB_CHARS & set(path):
            raise RunUsageError(
                f"{path!r} was read as a scenario path (it does not exist): {flag} takes one "
                f"pattern per use; to pass two, repeat the flag: {flag} {patterns[-1]!r} "
                f"{flag} {path!r}")


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
        from palace_conformance.suggest import bridge as suggested_bridge

        meant = suggested_bridge(bridge)
        if meant is not None:
            raise RunUsageError(f"--bridge {bridge}: no such bridge; did you mean --bridge "
                                f"{meant}?")
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


def select(scenarios: list[Scenario], patterns: list[str],
           covers: Sequence[str] = ()) -> list[Scenario]:
    """The scenarios whose id matches any of ``patterns`` (all when none), then of those the
    ones covering any of ``covers`` (behaviour IDs, or areas for all their IDs; all when none):
    ``--select`` and ``--covers``, each a one-line usage error when it leaves nothing."""
    chosen = scenarios
    if patterns:
        chosen = [s for s in chosen if any(fnmatch.fnmatchcase(s.id, p) for p in patterns)]
        if not chosen:
            raise RunUsageError(f"no scenario id matches --select {' '.join(patterns)} "
                                "(see palace-conformance fixtures list)")
    if covers:
        wanted = _covers_wanted(covers)
        chosen = [s for s in chosen
                  if any(b == w or b.split("-", 1)[0] == w for b in s.covers for w in wanted)]
        if not chosen:
            raise RunUsageError(f"no selected scenario covers {' '.join(wanted)} (see "
                                "palace-conformance fixtures coverage)")
    return chosen


def covers_selector(value: str, ids: list[str], areas: list[str]) -> str:
    """``--covers`` value checked: a behaviour ID (``STDIO-05``) or an area (``STDIO``), upper
    case; anything else is a one-line error naming the nearest ID."""
    wanted = value.strip().upper()
    if wanted in ids or wanted in areas:
        return wanted
    nearest = difflib.get_close_matches(wanted, ids + areas, n=1, cutoff=0.0)
    hint = f"did you mean {nearest[0]}? " if nearest else ""
    raise RunUsageError(f"--covers {value}: no such behaviour ID or area ({hint}the IDs are in "
                        "fixtures/behaviours.json)")


def _covers_wanted(values: Sequence[str]) -> list[str]:
    """``--covers`` values checked against the behaviours (:func:`covers_selector`)."""
    from palace_conformance.scenarios.behaviours import load_behaviours

    behaviours = load_behaviours()
    ids = [b.id for b in behaviours]
    areas = sorted({b.area for b in behaviours})
    return [covers_selector(v, ids, areas) for v in values]


def parse_shard(value: str) -> tuple[int, int]:
    """``K/N`` with 1 <= K <= N, as integers; anything else is a one-line usage error."""
    index, slash, total = value.partition("/")
    try:
        k, n = int(index), int(total)
    except ValueError:
        k = n = 0
    if not slash or n < 1 or not 1 <= k <= n:
        raise RunUsageError(f"--shard {value}: give K/N with 1 <= K <= N, e.g. --shard 1/4 "
                            "for the first of four CI jobs")
    return k, n


def shard_of(scenario_id: str, total: int) -> int:
    """The shard (1..total) a scenario falls in: a hash of its id alone, so adding or removing
    other scenarios never moves it, and both transports (and parity) stay together."""
    digest = hashlib.sha256(scenario_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % total + 1


def select_shard(scenarios: list[Scenario], index: int, total: int) -> list[Scenario]:
    return [s for s in scenarios if shard_of(s.id, total) == index]


def flag_file(path: str | None, load: Callable[[str], Loaded],
              *errors: type[Exception]) -> Loaded | None:
    """What the file a flag names holds, read by ``load``; None without the flag; ``errors``
    of the reading are one-line usage errors."""
    if path is None:
        return None
    with as_usage_error(*errors):
        loaded = load(path)
    return loaded


def load_profile_arg(path: str | None) -> Profile | None:
    """The ``--profile`` given, loaded; a bad one is a one-line usage error."""
    from palace_conformance.runner.profile import ProfileError, load_profile

    return flag_file(path, load_profile, ProfileError)


def load_baseline_arg(path: str | None, flag: str = "--baseline") -> BaselineFile | None:
    """The ``--baseline`` given, loaded; a bad one is a one-line usage error."""
    from palace_conformance.runner.verdict.baseline import BaselineError, load_baseline

    return flag_file(path, functools.partial(load_baseline, flag=flag), BaselineError)


def bridge_of(bridge: str | None, profile: Profile | None) -> str:
    """``--bridge`` when given, else the profile's entry, else the reference bridge."""
    if bridge is not None:
        return bridge
    return profile.bridge if profile is not None else "reference"


def default_level(bridge: str, profile: Profile | None = None) -> str:
    """The level a run is judged at when ``--level`` is not given: the profile's claim; else the
    reference bridge (the seed's copy) keeps the seed's conventions, and any other bridge owes
    only what every bridge must do."""
    if profile is not None:
        return profile.level
    return "seed" if bridge == "reference" else "core"
