"""``palace-fake-mcp``: the fake as a drop-in ``mempalace-mcp`` (stdio, configured by environment)."""

from __future__ import annotations

import asyncio
import sys

from .faults import FaultPlanError
from .server import FakeOptions, build_brain
from .stdio import serve_stdio


def run_stdio(options: FakeOptions) -> int:
    try:
        brain = build_brain(options.merged(FakeOptions.from_env()), "stdio")
    except FaultPlanError as exc:
        print(f"palace-fake-mcp: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(serve_stdio(brain, sys.argv))
    except KeyboardInterrupt:
        return 0


def fake_mcp_main() -> None:
    """Entry point of ``palace-fake-mcp`` (and of shims named ``mempalace-mcp``)."""
    palace = None
    args = sys.argv[1:]
    if "--palace" in args:
        index = args.index("--palace")
        if index + 1 < len(args):
            palace = args[index + 1]
    sys.exit(run_stdio(FakeOptions(palace=palace)))
