"""``mempalace`` (``mempalace.cli:main``) and ``python -m mempalace``: the fake CLI.

Only ``mine`` is modelled (it contends for the writer lock like the real one, journaled as
``cli_run``). Inside a runner's world, where the shim directory holds the runner's stand-in
configuration, every run is first journaled as a ``helper_run``, whichever way it was started.
"""

from __future__ import annotations

import sys

from ._kit import load_kit


def main() -> None:
    kit = load_kit()
    from palace_conformance.fake.mempalace_cli import mempalace_cli_main
    from palace_conformance.standins import scripted

    argv = list(sys.argv)  # argv[0]: the shim's path, or .../mempalace/__main__.py under -m
    config = scripted.config_in(kit.get("shim_dir"))
    if config is not None:
        scripted.run_cli(str(config), argv)
    else:
        mempalace_cli_main(argv[1:], argv0=argv[0])


if __name__ == "__main__":
    main()
