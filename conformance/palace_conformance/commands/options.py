"""The option sets several commands share, defined once: ``--server fake|real`` and
``--real-python PY`` (the palace behind the bridge, for ``run``, ``replay``, ``diff`` and
``matrix``; docs/real-server.md), ``--jobs``, ``--op-timeout-ms`` and the scenario paths.

Argparse only at import time; the real server's machinery is imported when it is asked for.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from palace_conformance.commands.usage import RunUsageError
from palace_conformance.contract import SHARED_RUN_OPTIONS
from palace_conformance.runner.jobs import adaptive_ceiling, backfill_slots, default_jobs

if TYPE_CHECKING:
    from palace_conformance.real.world import RealServerSetup


def add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", choices=("fake", "real"), default="fake",
                        help="the palace behind the bridge: the fake (default; every scenario) "
                        "or the real mempalace 3.11.0 (scenarios it cannot serve are not "
                        "applicable, with the reason; docs/real-server.md)")
    add_real_python(parser, "with --server real")


def add_real_python(parser: argparse.ArgumentParser, used: str = "") -> None:
    """``--real-python PY``: where the real mempalace is, for every command that starts it
    (``used``: when, e.g. "with --server real")."""
    parser.add_argument("--real-python", metavar="PY", default=None,
                        help=(f"{used}: " if used else "") + "a Python with mempalace==3.11.0 "
                        "installed (default: $PALACE_REAL_PYTHON; `tox -e real-palace` "
                        "provisions one; docs/real-server.md)")


def add_scenario_paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="scenario files or directories (default: the shipped scenarios)")



def add_jobs(parser: argparse.ArgumentParser, grows: bool = False) -> None:
    """``--jobs N``; ``grows``: the default is adaptive (runner/execution/admission.py)."""
    growth = (f", growing to {adaptive_ceiling()} and then up to {backfill_slots()} of the "
              "shortest runs besides while the CPUs are idle") if grows else ""
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="runs in parallel, a fixed number (default: 4 per CPU, 2 to 12, "
                        f"as memory allows, here {default_jobs()}{growth}); every run is "
                        "isolated")


def add_op_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op-timeout-ms", **SHARED_RUN_OPTIONS["op-timeout-ms"])


@contextlib.contextmanager
def chosen_server(args: argparse.Namespace) -> Iterator[RealServerSetup | None]:
    """Nothing for the fake (each world starts its own); for ``--server real`` the located
    real server, the embedding stub and the template palace for the duration, or a one-line
    usage error saying how to get one."""
    if getattr(args, "server", "fake") != "real":
        yield None
        return
    from palace_conformance.real.install import RealServerMissing
    from palace_conformance.real.world import real_server_setup

    try:
        with real_server_setup(args.real_python) as setup:
            yield setup
    except RealServerMissing as exc:
        raise RunUsageError(f"--server real: {exc}") from None
