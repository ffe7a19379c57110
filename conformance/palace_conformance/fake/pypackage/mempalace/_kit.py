"""Where the palace-conformance kit is, for this package's entry points (standard library only).

``install-shim`` links this package into a small venv's site-packages and writes
``palace-conformance-kit.json`` beside it: ``kit_root`` (the directory holding
``palace_conformance``) and ``shim_dir`` (the shim directory, where the runner keeps its stand-in
configuration, and the run's settings: see ``palace_conformance.fake.shims.apply_world``). Run
from the source tree itself, the kit is the tree this file is in.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

KIT_FILE = "palace-conformance-kit.json"


def load_kit() -> dict[str, Any]:
    """Put the kit first on ``sys.path`` (as the shims always did), make the run's settings in
    the shim directory the defaults of their variables (a bridge may have filtered them out of
    this process's environment) and return where the kit is."""
    package = os.path.dirname(os.path.abspath(__file__))  # as imported: links not followed
    try:
        with open(os.path.join(os.path.dirname(package), KIT_FILE), encoding="utf-8") as handle:
            where: dict[str, Any] = json.load(handle)
    except (OSError, ValueError):  # palace_conformance/fake/pypackage/mempalace, run in place
        source = os.path.dirname(os.path.realpath(__file__))
        where = {"kit_root": os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(source)))), "shim_dir": None}
    root = where.get("kit_root")
    if isinstance(root, str) and root not in sys.path:
        sys.path.insert(0, root)
    shim_dir = where.get("shim_dir")
    if isinstance(shim_dir, str):
        from palace_conformance.fake.shims import apply_world

        apply_world(shim_dir)
    return where
