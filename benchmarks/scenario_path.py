#!/usr/bin/env python3
"""The path of one scenario from loading to verdict: the kit's functions it passes through.

Why: a newcomer follows a scenario through the runner to learn it; every extra stop, and every
return to a module already left, is something more to read (issue 24 asks for under 31 stops and
no module returned to more than twice). This counts them instead of reading them by hand.

Usage::

    python benchmarks/scenario_path.py [--scenario ID] [--transport stdio|http]

It runs ``palace-conformance run --select ID --transport T --jobs 1 -q`` in this process, with a
profiler on every thread, and keeps each call of a ``palace_conformance`` function that is handed
the scenario itself or gives it back: an argument that is a ``Scenario`` (the loaded one or one
derived from it: adapted, paced, expanded; the parts a world lays out before its palace starts,
``StartParts``) or the ``Observation`` the verdict is taken from, or a
return value that is a scenario or the list of loaded ones (``self`` does not count: a method of
an object that holds the scenario is one step of that object's own work; nor do the
constructors dataclasses generate).
A stop is such a function, counted once, in the order first reached; a *return* is the path
coming back to a module it had left. Prints the stops, then the counts.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from palace_conformance import cli
from palace_conformance.runner.execution.world import StartParts
from palace_conformance.runner.verdict.judge import Observation
from palace_conformance.scenarios.model import Scenario

DEFAULT_SCENARIO = "stdio.respawn.after-crash"


def _carries_scenario(frame: FrameType) -> bool:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    for name in code.co_varnames[:count]:
        if name == "self":
            continue
        if isinstance(frame.f_locals.get(name), Scenario | StartParts | Observation):
            return True
    return False


def _gives_scenario(value: Any) -> bool:
    """A return value that is the scenario, or the loaded scenarios it is among."""
    if isinstance(value, list | tuple) and value:
        value = value[0]
    return isinstance(value, Scenario)


def trace(argv: list[str]) -> tuple[int, list[tuple[str, str]]]:
    """Run the CLI with ``argv``; its exit code and the stops, as (module, function)."""
    stops: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    lock = threading.Lock()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("palace_conformance") or "<locals>" in frame.f_code.co_qualname:
            return
        if not (_carries_scenario(frame) if event == "call" else _gives_scenario(arg)):
            return
        key = (module, frame.f_code.co_qualname)
        with lock:
            if key not in seen:
                seen.add(key)
                stops.append(key)

    hook: Callable[[FrameType, str, Any], None] = profile
    threading.setprofile(hook)  # type: ignore[arg-type]
    sys.setprofile(hook)  # type: ignore[arg-type]
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return code, stops


def returns(stops: list[tuple[str, str]]) -> dict[str, int]:
    """Per module, how many times the path comes back to it after leaving it."""
    counts: dict[str, int] = {}
    left: set[str] = set()
    previous = None
    for module, _ in stops:
        if module != previous:
            if module in left:
                counts[module] = counts.get(module, 0) + 1
            if previous is not None:
                left.add(previous)
            previous = module
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=DEFAULT_SCENARIO)
    parser.add_argument("--transport", default="stdio", choices=("stdio", "http"))
    args = parser.parse_args()
    code, stops = trace(["run", "--select", args.scenario, "--transport", args.transport,
                         "--jobs", "1", "-q"])
    for index, (module, name) in enumerate(stops, 1):
        print(f"{index:3} {module.removeprefix('palace_conformance.')}.{name}")
    back = returns(stops)
    modules = len({module for module, _ in stops})
    worst = max(back.values(), default=0)
    print(f"{len(stops)} stops in {modules} modules; returns: "
          + (", ".join(f"{m.removeprefix('palace_conformance.')} {n}"
                       for m, n in sorted(back.items())) or "none")
          + f"; the most returns to one module: {worst}; run exit code {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
