"""The kit's one cache root: ``$XDG_CACHE_HOME/palace-conformance``.

Every cache the kit keeps lives below it: compiled bytecode (bytecode.py), the scenario files
found valid (scenarios/cache.py), the ``--last-failed`` records (runner/last_failed.py) and the
installed Node hosts (hosts/node.py). The XDG base-directory rule decides the base: an absolute
``XDG_CACHE_HOME``; otherwise (unset, empty or relative, which the spec calls invalid) the
home directory's ``.cache``.

Standard library only and no kit imports: the package's ``__init__`` reaches it (through
bytecode.py) before anything else is imported, in every helper a bridge starts, so the path is
worked out with ``os.path``: importing ``pathlib`` costs a helper's start about 5 ms.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from pathlib import Path

ENV = "XDG_CACHE_HOME"
KIT_CACHE = "palace-conformance"


def kit_cache_dir() -> str | None:
    """``$XDG_CACHE_HOME/palace-conformance`` when that variable holds an absolute path, else
    ``~/.cache/palace-conformance``; None when neither names a place (no home directory)."""
    base = os.environ.get(ENV, "")
    if os.path.isabs(base):
        return os.path.join(base, KIT_CACHE)
    home = os.path.expanduser("~")
    if not os.path.isabs(home):  # "~" unchanged: no home directory to be found
        return None
    return os.path.join(home, ".cache", KIT_CACHE)


def kit_cache_root() -> Path | None:
    """:func:`kit_cache_dir` as a ``Path``."""
    from pathlib import Path

    directory = kit_cache_dir()
    return None if directory is None else Path(directory)
