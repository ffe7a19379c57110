"""Where the kit's own Python processes keep compiled bytecode when the environment says not to
write it beside the sources.

With ``PYTHONDONTWRITEBYTECODE`` set (Docker's official Python images, many CI setups) every
Python process compiles each module it imports from source, every time. A catalogue run starts
a few hundred of the kit's processes (the fake behind each stdio bridge, the transcript
stand-in, the warm server) and each would compile the fake's modules again: about 35 ms of CPU
a start, some 7 CPU-seconds of a reference run (docs/runner.md, "Where a run's CPU goes").

:func:`redirect` keeps the variable's promise (nothing is written beside the sources) and still
compiles once: it points :data:`sys.pycache_prefix` at the kit's own cache,
``$XDG_CACHE_HOME/palace-conformance/pycache`` (cache_home.py), and lets Python write
there. Only when that cache directory's parent already exists (the kit ran here before), so a
kit process started with a scenario's own ``HOME`` never writes into it. An explicit
``PYTHONPYCACHEPREFIX`` wins; ``PALACE_CONFORMANCE_PYCACHE`` names another directory, or ``off``.

Standard library and cache_home.py only: the package's ``__init__`` calls it before anything
else is imported.
"""

from __future__ import annotations

import os
import sys

from palace_conformance.cache_home import kit_cache_dir

ENV = "PALACE_CONFORMANCE_PYCACHE"
OFF = "off"
PYCACHE = "pycache"


def redirect() -> str | None:
    """When bytecode may not be written and no prefix is set, write and read it under the kit's
    cache instead; returns the prefix it set, else None (nothing changed)."""
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return None
    chosen = os.environ.get(ENV, "")
    if chosen == OFF:
        return None
    if not chosen:
        root = kit_cache_dir()
        if root is None or not os.path.isdir(root):
            return None
        chosen = os.path.join(root, PYCACHE)
    sys.pycache_prefix = chosen
    sys.dont_write_bytecode = False
    return chosen


def script_prelude() -> str:
    """Lines a script the kit writes (a shim) runs before it imports the kit: this process's
    bytecode settings, so the script never looks for a cache under the ``HOME`` it runs with."""
    if sys.pycache_prefix is None:
        return ""
    return (f"import sys as _sys\n\n_sys.pycache_prefix = {sys.pycache_prefix!r}\n"
            f"_sys.dont_write_bytecode = {sys.dont_write_bytecode!r}\n\n")
