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


@cache
def tool_catalogue() -> dict[str, Any]:
    """The captured ``tools/list`` of mempalace 3.11.0 plus the per-tool server policies."""
    path = fixtures_dir() / "catalogue" / "mempalace-3.11.0-tools.json"
    catalogue: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return catalogue
