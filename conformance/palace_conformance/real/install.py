"""Finding the real mempalace server and giving it an isolated environment.

The kit never installs the real server itself (it is about 525 MB with chromadb and onnxruntime):
the user names a Python that has it (``--real-python PY`` or ``PALACE_REAL_PYTHON``), or runs
``tox -e real-palace``, which builds that Python. Anything else is a one-line error saying so.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from palace_conformance.errors import PalaceError

#: the release the fake models; another one is refused unless the caller allows it
PINNED_VERSION = "3.11.0"
ENV_PYTHON = "PALACE_REAL_PYTHON"
HOW = (f"pass --real-python PY (a Python with mempalace=={PINNED_VERSION} installed) or set "
       f"{ENV_PYTHON}, or run `tox -e real-palace`, which installs it")
PROBE_TIMEOUT_S = 60.0


class RealServerMissing(PalaceError):
    """No usable real mempalace: the message names what was tried and the fix, on one line."""


@dataclass(frozen=True)
class RealServer:
    """An installed real mempalace: the Python that has it and its version."""

    python: Path
    version: str

    @property
    def bin_dir(self) -> Path:
        """The venv's bin directory, where ``mempalace-mcp`` and ``mempalace`` live."""
        return self.python.parent

    def stdio_command(self) -> list[str]:
        """How the bridge's palace would be started: the real ``mempalace-mcp`` entry point."""
        return [str(self.bin_dir / "mempalace-mcp")]

    def http_command(self, port: int, palace: Path, host: str = "127.0.0.1") -> list[str]:
        """The real streamable-HTTP server on ``host:port`` over ``palace``."""
        return [str(self.python), "-m", "mempalace.mcp_server", "--transport", "http",
                "--host", host, "--port", str(port), "--palace", str(palace)]


def locate(real_python: str | None = None, *, allow_other_version: bool = False,
           env: Mapping[str, str] | None = None) -> RealServer:
    """The real server named by ``real_python`` or ``PALACE_REAL_PYTHON``; raises
    :class:`RealServerMissing` with the fix when there is none or it is unusable."""
    named = real_python or (env if env is not None else os.environ).get(ENV_PYTHON)
    if not named:
        raise RealServerMissing(f"the real mempalace server is not configured: {HOW}")
    python = Path(named).expanduser()
    if not python.is_file() or not os.access(python, os.X_OK):
        raise RealServerMissing(f"{named} is not an executable Python: {HOW}")
    probe = "import importlib.metadata as m; print(m.version('mempalace'))"
    try:
        done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False, env=_probe_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RealServerMissing(
            f"{named} could not be asked for mempalace ({exc}): {HOW}") from None
    version = done.stdout.strip()
    if done.returncode != 0 or not version:
        raise RealServerMissing(f"{named} has no mempalace installed: {HOW}")
    if version != PINNED_VERSION and not allow_other_version:
        raise RealServerMissing(f"{named} has mempalace {version}, the kit models "
                                f"{PINNED_VERSION}: install mempalace=={PINNED_VERSION} there")
    entry = python.parent / "mempalace-mcp"
    if not entry.is_file():
        raise RealServerMissing(f"{named} has mempalace but no mempalace-mcp beside it "
                                f"({entry}): use the Python of the venv mempalace was installed in")
    return RealServer(python=python.absolute(), version=version)


def _probe_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MEMPALACE_", "PYTHON"))}


def isolated_environment(home: Path, palace: Path | None, extra: Mapping[str, str] | None = None,
                         base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for one real server (or its CLI) in its own world.

    Every inherited ``MEMPALACE_*`` is dropped (a developer's own palace must never be touched),
    ``HOME`` and the XDG config dir point into the world, hub forwarding is off (a stdio server
    would otherwise proxy to an HTTP server of another world) and model hubs are offline.
    """
    env = {k: v for k, v in (base if base is not None else os.environ).items()
           if not k.startswith(("MEMPALACE_", "XDG_", "PYTHON"))}
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "MEMPALACE_HUB_FORWARD": "0",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
    })
    if palace is not None:
        env["MEMPALACE_PALACE_PATH"] = str(palace)
    env.update(extra or {})
    return env
