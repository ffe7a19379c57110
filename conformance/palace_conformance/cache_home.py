"""The kit's one cache root: ``$XDG_CACHE_HOME/palace-conformance``.

Every cache the kit keeps lives below it: compiled bytecode (bytecode.py), the scenario files
found valid (scenarios/cache.py), the ``--last-failed`` records (runner/last_failed.py) and the
installed Node hosts (hosts/node.py). The XDG base-directory rule decides the base: an absolute
``XDG_CACHE_HOME``; otherwise (unset, empty or relative, which the spec calls invalid) the
home directory's ``.cache``.

Standard library only and no kit imports: the package's ``__init__`` reaches it (through
bytecode.py) before anything else is imported.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "XDG_CACHE_HOME"
KIT_CACHE = "palace-conformance"


def kit_cache_root() -> Path | None:
    """``$XDG_CACHE_HOME/palace-conformance`` when that variable holds an absolute path, else
    ``~/.cache/palace-conformance``; None when neither names a place (no home directory)."""
    base = os.environ.get(ENV, "")
    if os.path.isabs(base):
        return Path(base) / KIT_CACHE
    try:
        return Path.home() / ".cache" / KIT_CACHE
    except RuntimeError:  # no home directory to be found
        return None
