"""The servers the official suite's server scenarios run against: the fake or the real mempalace
3.11.0 over HTTP, each on loopback, without a token (the suite cannot send one), in its own
temporary world, stopped (its process group killed) when the run ends."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from palace_conformance.errors import PalaceError
from palace_conformance.loopback import free_port

READY_TIMEOUT_S = 60.0  # the real server imports chromadb before it listens
STOP_TIMEOUT_S = 5.0


class TargetError(PalaceError, RuntimeError):
    """A server that would not start; one line naming it and where its log is."""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left (we created the group)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(STOP_TIMEOUT_S)


def _wait_listening(proc: subprocess.Popen[bytes], url: str, log: Path, what: str) -> None:
    """Until the server answers anything on ``url`` (a GET: 404 on mempalace), or give up."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TargetError(f"{what} exited with status {proc.returncode} before listening; "
                              f"see {log}")
        try:
            httpx.get(url, timeout=1.0, trust_env=False)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise TargetError(f"{what} did not listen within {READY_TIMEOUT_S:.0f} s; see {log}")


@contextlib.contextmanager
def fake_server(work: Path) -> Iterator[str]:
    """``palace-conformance fake http`` (stateless, like mempalace 3.11) in ``work``; its URL."""
    home = work / "fake-home"
    home.mkdir(parents=True, exist_ok=True)
    ready = work / "fake-ready.json"
    log = work / "fake-stderr.txt"
    argv = [sys.executable, "-c", "from palace_conformance.cli import main; main()", "fake",
            "http", "--port", "0", "--no-control", "--ready-file", str(ready)]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_FAKE_", "MEMPALACE_", "MEMPAL_"))}
    env["HOME"] = str(home)
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (ready.exists() and ready.stat().st_size > 0):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise TargetError(f"the fake did not start; see {log}")
            time.sleep(0.05)
        yield str(json.loads(ready.read_text())["url"])
    finally:
        _stop(proc)


@contextlib.contextmanager
def real_server(work: Path, real_python: str | None = None) -> Iterator[str]:
    """The real mempalace HTTP server over an empty palace in ``work`` (a new user's world)."""
    from palace_conformance.real.install import isolated_environment, locate

    server = locate(real_python)
    home = work / "real-home"
    palace = home / "palace"
    palace.mkdir(parents=True, exist_ok=True)
    log = work / "real-stderr.txt"
    port = free_port()
    env = isolated_environment(home, palace)
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(server.http_command(port, palace), env=env, cwd=home,
                                stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        _wait_listening(proc, url, log, "the real mempalace server")
        yield url
    finally:
        _stop(proc)


@contextlib.contextmanager
def scratch(keep: Path | None) -> Iterator[Path]:
    """``keep`` when given (created), else a temporary directory removed afterwards."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="palace-official-") as tmp:
        yield Path(tmp)
