"""Where shipped data lives: `fixtures/` in a checkout, the package's `fixtures` in a wheel.

Every fake a bridge starts reads its tool catalogue from here, so the paths are worked out with
``os.path`` (importing ``pathlib`` costs a helper's start about 5 ms); :func:`fixtures_dir` gives
the runner its ``Path``.
"""

from __future__ import annotations

import json
import os
from functools import cache

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))


@cache
def fixtures_path() -> str:
    """The fixtures directory: packaged copy first, then the source checkout."""
    for candidate in (os.path.join(_PACKAGE_DIR, "fixtures"),
                      os.path.join(os.path.dirname(os.path.dirname(_PACKAGE_DIR)), "fixtures")):
        if os.path.isdir(os.path.join(candidate, "schema")):
            return candidate
    raise FileNotFoundError(
        "palace-conformance fixtures not found; reinstall the package "
        "(pip install palace-conformance)"
    )


@cache
def fixtures_dir() -> Path:
    """:func:`fixtures_path` as a ``Path``."""
    from pathlib import Path

    return Path(fixtures_path())


#: catalogue name -> file in ``fixtures/catalogue``: the full server (``mempalace-mcp``, 47 tools)
#: and the light one (``mempalace-light-mcp``, 3 consolidated tools)
CATALOGUES = {"full": "mempalace-3.11.0-tools.json", "light": "mempalace-light-3.11.0-tools.json"}


@cache
def tool_catalogue(name: str = "full") -> dict[str, Any]:
    """The captured ``tools/list`` of mempalace 3.11.0 (``full``, or the ``light`` server's) plus
    the per-tool server policies and the ``serverInfo`` it answers with."""
    path = os.path.join(fixtures_path(), "catalogue", CATALOGUES[name])
    with open(path, encoding="utf-8") as handle:
        catalogue: dict[str, Any] = json.load(handle)
    return catalogue
