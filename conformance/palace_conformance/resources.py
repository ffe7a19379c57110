"""Where shipped data lives: `fixtures/` in a checkout, the package's `fixtures` in a wheel."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def fixtures_dir() -> Path:
    """The fixtures directory: packaged copy first, then the source checkout."""
    for candidate in (_PACKAGE_DIR / "fixtures", _PACKAGE_DIR.parent.parent / "fixtures"):
        if (candidate / "schema").is_dir():
            return candidate
    raise FileNotFoundError(
        "palace-conformance fixtures not found; reinstall the package "
        "(pip install palace-conformance)"
    )


#: catalogue name -> file in ``fixtures/catalogue``: the full server (``mempalace-mcp``, 47 tools)
#: and the light one (``mempalace-light-mcp``, 3 consolidated tools)
CATALOGUES = {"full": "mempalace-3.11.0-tools.json", "light": "mempalace-light-3.11.0-tools.json"}


@cache
def tool_catalogue(name: str = "full") -> dict[str, Any]:
    """The captured ``tools/list`` of mempalace 3.11.0 (``full``, or the ``light`` server's) plus
    the per-tool server policies and the ``serverInfo`` it answers with."""
    path = fixtures_dir() / "catalogue" / CATALOGUES[name]
    catalogue: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return catalogue
