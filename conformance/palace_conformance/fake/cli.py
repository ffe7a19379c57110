"""``palace-fake-mcp``: the fake as a drop-in ``mempalace-mcp`` (stdio, configured by environment).

Kept import-light on purpose: a bridge pays this module's import time on every (re)spawn.
"""

from __future__ import annotations

import os
import sys

from palace_conformance.fake.options import ENV_ARGV0, FakeOptions, FakeSetupError, build_brain
from palace_conformance.fake.stdio import serve_stdio


def run_stdio(options: FakeOptions, prog: str = "palace-fake-mcp") -> int:
    """Serve one stdio session; a bad plan, fault spec or state file is one line and exit 2."""
    try:
        brain = build_brain(options.merged(FakeOptions.from_env()), "stdio")
    except FakeSetupError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    return serve_stdio(brain, sys.argv)


def option_from_argv(args: list[str], flag: str) -> str | None:
    """``FLAG VALUE`` or ``FLAG=VALUE`` as mempalace's servers read it (the last one wins);
    other flags are ignored."""
    value = None
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith(f"{flag}="):
            value = arg.split("=", 1)[1]
    return value


def fake_mcp_main(catalogue: str | None = None) -> None:
    """Entry point of ``palace-fake-mcp`` (and of the ``mempalace-mcp`` shim and the fake
    ``mempalace`` package's servers). ``catalogue`` (``light``) beats ``PALACE_FAKE_CATALOGUE``.

    The journaled argv (and the lock holder's name) is ``sys.argv`` as the process got it: the
    shim's path, or ``.../mempalace/mcp_server/__main__.py`` under ``python -m``, like the real
    server's; ``PALACE_FAKE_ARGV0`` overrides ``argv[0]`` for a wrapper that knows better."""
    argv0 = os.environ.pop(ENV_ARGV0, "")
    if argv0:
        sys.argv[0] = argv0
    sys.exit(run_stdio(FakeOptions(palace=option_from_argv(sys.argv[1:], "--palace"),
                                     catalogue=catalogue)))


def fake_light_mcp_main() -> None:
    """Entry point of the ``mempalace-light-mcp`` shim: the light server's 3-tool catalogue."""
    fake_mcp_main(catalogue="light")
