"""Driver-protocol hosts (DRIVER.md): processes that wrap one bridge so the runner can drive it.

``reference`` wraps the Python reference bridge (``palace_bridge``); a TypeScript bridge gets a
Node host of its own. The runner starts a host as an argv list and never imports it.
"""

from __future__ import annotations

import sys

#: Python's ``-P``: the runner's own Python programs never get their working directory (the
#: user's, or a run directory a scenario writes into) put first on ``sys.path``, where a
#: ``palace_bridge/`` or a ``json.py`` there would be imported instead of the real one
SAFE_PATH = "-P"
#: how the runner starts the reference host (``--bridge reference``)
REFERENCE_HOST: tuple[str, ...] = (sys.executable, SAFE_PATH, "-m",
                                   "palace_conformance.hosts.reference")
