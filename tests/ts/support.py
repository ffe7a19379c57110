"""Helpers for the Node host tests: start a host for a bridge spec, drive it, run the real fake.

Every host and fake runs as a real process with its own HOME under ``tmp_path`` (the writer lease
lives there), an ephemeral port and its own journal, so the tests are parallel-safe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palace_conformance.fake.journal import read_journal
from palace_conformance.fake.shims import install_shim
from palace_conformance.hosts.node import host_command
from palace_conformance.runner.execution.driver import DriverClient, Reply

EXTENSIONS = Path(__file__).resolve().parent / "extensions"
LAUNCH = "from palace_conformance.cli import main; main()"
START_SECONDS = 15.0
OP_DEADLINE_MS = 30000
CATALOGUE_TOOLS = 47


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_FAKE_", "MEMPALACE_", "PI_"))}
    env["HOME"] = str(home)
    env.update(extra)
    return env


@dataclass
class Palace:
    """What a bridge is pointed at: shims on PATH, a journal, and for HTTP a running fake."""

    root: Path
    transport: str
    journal: Path
    shims: Path
    url: str | None = None
    token: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "home"

    def bridge_env(self, **extra: str) -> dict[str, str]:
        """The environment a bridge gets at ``load`` (like the runner builds it)."""
        env = clean_env(self.home, PATH=f"{self.shims}{os.pathsep}{os.environ['PATH']}",
                        PALACE_FAKE_JOURNAL=str(self.journal), **self.extra_env)
        if self.url:
            env["MEMPALACE_REMOTE_URL"] = self.url
        if self.token:
            env["MEMPALACE_REMOTE_TOKEN"] = self.token
        env.update(extra)
        return env

    def records(self, kind: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        return [r for r in read_journal(self.journal)[since:]
                if kind is None or r.get("kind") == kind]

    def mark(self) -> int:
        return len(read_journal(self.journal))

    def calls(self, tool: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        return [r for r in self.records("recv", since) if r.get("method") == "tools/call"
                and (tool is None or r.get("tool") == tool)]

    def count(self, method: str, since: int = 0) -> int:
        return sum(1 for r in self.records("recv", since) if r.get("method") == method)


@contextmanager
def palace(root: Path, transport: str, *, sessions: bool = False, token: str | None = None,
           faults: tuple[str, ...] = ()) -> Iterator[Palace]:
    """The fake palace for one test: stdio shims always, plus ``fake http`` for HTTP runs."""
    root.mkdir(parents=True, exist_ok=True)
    shims = root / "shims"
    install_shim(shims)
    journal = root / "journal.jsonl"
    found = Palace(root, transport, journal, shims)
    found.home.mkdir(parents=True, exist_ok=True)
    # an initialised palace, as the kit's worlds hand theirs (a bare fake in a new HOME starts
    # as the real server would there: with none)
    state = root / "palace-state.json"
    found.extra_env["PALACE_FAKE_STATE"] = str(state)
    if faults and transport == "stdio":
        found.extra_env["PALACE_FAKE_FAULT"] = ";".join(faults)
    if transport == "http":
        ready = root / "ready.json"
        argv = [sys.executable, "-c", LAUNCH, "fake", "http", "--port", "0", "--ready-file",
                str(ready), "--journal", str(journal), "--state", str(state)]
        if sessions:
            argv.append("--sessions")
        if token:
            argv += ["--token", token]
        for fault in faults:
            argv += ["--fault", fault]
        with open(root / "fake-stderr.txt", "wb") as err:
            found.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=err,
                                          env=clean_env(found.home))
        deadline = time.monotonic() + START_SECONDS
        while not ready.exists():
            if found.proc.poll() is not None or time.monotonic() > deadline:
                found.proc.kill()
                raise AssertionError("fake http did not start: "
                                     + (root / "fake-stderr.txt").read_text())
            time.sleep(0.02)
        found.url = json.loads(ready.read_text())["url"]
        if not found.url.endswith("/mcp"):
            found.url = found.url.rstrip("/") + "/mcp"
        found.token = token
    try:
        yield found
    finally:
        if found.proc is not None and found.proc.poll() is None:
            found.proc.terminate()
            try:
                found.proc.wait(5)
            except subprocess.TimeoutExpired:
                found.proc.kill()
                found.proc.wait(5)


class Host:
    """A running Node host driven over the real driver protocol (the runner's own client)."""

    def __init__(self, spec: str, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.client = DriverClient(host_command(spec), env=clean_env(root / "host-home"),
                                   stderr_path=root / "host-stderr.txt").start()

    def op(self, op: str, deadline_ms: float = OP_DEADLINE_MS, **fields: Any) -> Reply:
        return self.client.request(op, fields, deadline_ms=deadline_ms)

    def ok(self, op: str, **fields: Any) -> Reply:
        reply = self.op(op, **fields)
        assert reply.ok, f"{op} failed: {reply.error}; stderr: {self.client.stderr_tail(5)}"
        return reply

    def start_session(self, env: dict[str, str], cwd: Path) -> list[dict[str, Any]]:
        """load + session_start + settle; every effect they produced."""
        effects = list(self.ok("load", env=env, cwd=str(cwd)).effects)
        effects += self.ok("event", name="session_start", payload={"reason": "startup"}).effects
        effects += self.ok("settle", quiet_ms=200, max_ms=15000).effects
        return effects

    def close(self) -> None:
        self.client.close()


@contextmanager
def host(spec: str, root: Path) -> Iterator[Host]:
    running = Host(spec, root)
    try:
        yield running
    finally:
        running.close()


def of_kind(effects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in effects if e.get("kind") == kind]


def payload(result: dict[str, Any]) -> Any:
    """The JSON a palace tool answered (``content[0].text``)."""
    return json.loads(result["content"][0]["text"])
