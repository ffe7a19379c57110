"""Driver-protocol hosts (DRIVER.md): processes that wrap one bridge so the runner can drive it.

``reference`` wraps the Python reference bridge (``palace_bridge``); a TypeScript bridge gets a
Node host of its own. The runner starts a host as an argv list and never imports it.
"""

from __future__ import annotations

import sys

#: how the runner starts the reference host (``--bridge reference``)
REFERENCE_HOST: tuple[str, ...] = (sys.executable, "-m", "palace_conformance.hosts.reference")
