"""The ``cli`` op (DRIVER.md): run the reference bridge's command-line program, ``palace-bridge``.

The program runs as a user runs it: a process of its own (``python -m palace_bridge.cli``, the
interpreter and ``palace_bridge`` package of this host, so the CLI judged is the bridge the host
judges), in a session of its own, with exactly the environment and directory the runner gives
(the scenario's, as ``load`` gets it), ``stdin`` written and closed. The reply is what the user
sees: the exit status and both streams, decoded as UTF-8 (bytes that are not become U+FFFD) and
each cut at :data:`~palace_conformance.contract.CLI_OUTPUT_LIMIT` characters.

When the op's deadline cancels it, the whole process group is killed (the CLI's palace child
with it) before the cancellation goes on: a run never leaves a CLI behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

from palace_conformance.contract import CLI_OUTPUT_LIMIT
from palace_conformance.errors import HostError

#: the module a ``palace-bridge`` console script runs
CLI_MODULE = "palace_bridge.cli"


class CliRequestError(HostError):
    """A ``cli`` request this host cannot run (the runner's mistake: ``bad_request``)."""


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise CliRequestError(f"cli needs '{what}': a list of strings")
    return list(value)


def _environment(value: Any, package_root: str) -> dict[str, str]:
    """The request's environment, plus where this host's ``palace_bridge`` lives
    (``package_root``, first on ``PYTHONPATH``), so the child imports the very bridge this host
    judges."""
    if not isinstance(value, dict):
        raise CliRequestError("cli needs 'env': an object of strings (the bridge's environment)")
    env = {str(k): str(v) for k, v in value.items() if v is not None}
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")[:CLI_OUTPUT_LIMIT]


async def run_bridge_cli(request: dict[str, Any], package_root: str) -> dict[str, Any]:
    """``{"exit_code", "stdout", "stderr"}`` of one ``palace-bridge`` run (a negative exit code:
    the signal that ended it), importing ``palace_bridge`` from ``package_root``."""
    args = _strings(request.get("args"), "args")
    env = _environment(request.get("env"), package_root)
    stdin = request.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise CliRequestError("cli 'stdin' must be a string")
    cwd = request.get("cwd")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", CLI_MODULE, *args, env=env,
        cwd=str(cwd) if isinstance(cwd, str) and cwd else None,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        out, err = await process.communicate((stdin or "").encode("utf-8"))
    except BaseException:  # cancelled at the op's deadline: nothing of the run may stay
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(process.wait(), 2)
        raise
    return {"exit_code": process.returncode, "stdout": _text(out), "stderr": _text(err)}
