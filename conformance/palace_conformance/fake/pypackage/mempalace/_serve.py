"""Start the fake stdio server from one of this package's entry points."""

from __future__ import annotations

import sys

from ._kit import load_kit


def _transport(args: list[str]) -> str:
    """``--transport T`` or ``--transport=T`` as the real server reads it (default stdio)."""
    transport = "stdio"
    for index, arg in enumerate(args):
        if arg == "--transport" and index + 1 < len(args):
            transport = args[index + 1]
        elif arg.startswith("--transport="):
            transport = arg.split("=", 1)[1]
    return transport


def serve(catalogue: str | None = None) -> None:
    """Serve stdio like ``mempalace-mcp`` (or the light server); refuse ``--transport http``,
    which the fake package does not model, with one line rather than wait on stdin."""
    transport = _transport(sys.argv[1:])
    if transport != "stdio":
        print(f"mempalace (palace-conformance fake): --transport {transport} is not modelled by "
              "the fake package; a scenario's HTTP palace is the runner's own HTTP fake "
              "(MEMPALACE_REMOTE_URL)", file=sys.stderr)
        sys.exit(2)
    load_kit()
    from palace_conformance.fake.cli import fake_mcp_main

    fake_mcp_main(catalogue)
