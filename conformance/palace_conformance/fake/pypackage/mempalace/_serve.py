"""Start the fake stdio server from one of this package's entry points."""

from __future__ import annotations

import os
import sys

from ._kit import load_kit

PRESET_ENV = "PALACE_FAKE_PRESET"


def serve(catalogue: str | None = None) -> None:
    """Serve stdio like ``mempalace-mcp`` (or the light server); refuse ``--transport http``,
    which the fake package does not model, with one line rather than wait on stdin."""
    preset = load_kit().get("preset")
    if isinstance(preset, str) and preset:  # install-shim --preset; the environment wins
        os.environ.setdefault(PRESET_ENV, preset)
    from palace_conformance.fake.cli import fake_mcp_main, option_from_argv

    transport = option_from_argv(sys.argv[1:], "--transport")
    if transport is not None and transport != "stdio":
        print(f"mempalace (palace-conformance fake): --transport {transport} is not modelled by "
              "the fake package; a scenario's HTTP palace is the runner's own HTTP fake "
              "(MEMPALACE_REMOTE_URL)", file=sys.stderr)
        sys.exit(2)
    fake_mcp_main(catalogue)
