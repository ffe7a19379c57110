"""Helpers for the bridge's integration tests: a fake ``mempalace-mcp`` on PATH, journal queries.

Every scenario gets its own HOME (the fake's writer lease lives under ``$HOME/.mempalace``), its own
shim directory and journal inside ``tmp_path``, so tests run in parallel without meeting.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from palace_bridge.cli import main as bridge_main
from palace_bridge.client import PalaceClient, create_client
from palace_conformance.fake.journal import read_journal
from palace_conformance.fake.shims import install_shim

T = TypeVar("T")

#: knobs small enough that fault scenarios take well under a second each
FAST = {
    "MEMPALACE_MCP_TIMEOUT_MS": "300",
    "MEMPALACE_MCP_INIT_TIMEOUT_MS": "5000",
    "MEMPALACE_MCP_RESPAWN_BACKOFF_MS": "50",
    "MEMPALACE_MCP_KILL_GRACE_MS": "300",
    "MEMPALACE_REMOTE_CONNECT_BACKOFF_MS": "20",
}
#: slack on timing checks: lower bounds are exact, upper bounds generous, because CI machines
#: are shared and a loaded one runs the fake's start, its journal and our timers late. Every
#: upper bound that uses it is on a stall that never ends, so it tells "the deadline fired" from
#: "it hung"; how precisely a knob is honoured is the scenario catalogue's two-sided checks' job
SLACK_S = 5.0


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@dataclass(frozen=True)
class Done:
    """What a finished ``palace-bridge`` command left: its exit status and its two streams."""

    returncode: int
    stdout: str
    stderr: str


def bridge_in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                      env: dict[str, str], *args: str, stdin: str = "") -> Done:
    """``palace-bridge ARGS`` run by its ``main`` in this process, with exactly ``env`` as the
    environment and ``stdin`` as standard input: what a subprocess would see, minus the
    interpreter start-up."""
    capsys.readouterr()
    with monkeypatch.context() as patched:
        for name in list(os.environ):
            patched.delenv(name)
        for name, value in env.items():
            patched.setenv(name, value)
        patched.setattr(sys, "stdin", io.StringIO(stdin))
        code = bridge_main(list(args))
    out, err = capsys.readouterr()
    return Done(code, out, err)


def clean_base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PALACE_FAKE_", "MEMPALACE_", "MEMPAL_"))}


@dataclass
class Scenario:
    """A fake palace on PATH plus the env a bridge under test gets."""

    root: Path
    faults: list[str] = field(default_factory=list)
    knobs: dict[str, str] = field(default_factory=dict)
    plan: Any = None

    def __post_init__(self) -> None:
        self.bin = self.root / "bin"
        self.home = self.root / "home"
        self.journal_path = self.root / "journal.jsonl"
        self.home.mkdir(parents=True, exist_ok=True)
        install_shim(self.bin)
        self.stderr = io.StringIO()

    @property
    def env(self) -> dict[str, str]:
        env = clean_base_env()
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["HOME"] = str(self.home)
        env["PALACE_FAKE_JOURNAL"] = str(self.journal_path)
        # an initialised palace, as the kit's worlds hand theirs (a bare fake in a new HOME
        # starts as the real server would there: with none)
        env["PALACE_FAKE_STATE"] = str(self.root / "palace-state.json")
        if self.faults:
            env["PALACE_FAKE_FAULT"] = ";".join(self.faults)
        if self.plan is not None:
            plan_path = self.root / "plan.json"
            plan_path.write_text(json.dumps(self.plan))
            env["PALACE_FAKE_PLAN"] = str(plan_path)
        env.update(FAST)
        env.update(self.knobs)
        return env

    def client(self, **overrides: str) -> PalaceClient:
        env = self.env
        env.update(overrides)
        return create_client(env, stderr=self.stderr)

    # -- journal -------------------------------------------------------------------------------

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [r for r in read_journal(self.journal_path) if kind is None or r["kind"] == kind]

    def received(self, method: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records("recv")
                if method is None or r.get("method") == method]

    def pids(self) -> list[int]:
        """Fake processes started, in order."""
        return [r["pid"] for r in self.records("process_start")]

    def wire(self) -> list[str]:
        """Method names the fake received (responses to its own requests shown as 'response')."""
        out = []
        for r in self.records("recv"):
            out.append(r.get("method") or ("response" if r.get("response") else "invalid"))
        return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); look at its state
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(predicate: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


async def eventually(predicate: Any, timeout_s: float = 5.0) -> bool:
    """``wait_until`` for use inside the event loop (it yields instead of blocking)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return bool(predicate())


# -- the HTTP fake ---------------------------------------------------------------------------------

LAUNCH = "from palace_conformance.cli import main; main()"


class HttpFake:
    """A real ``palace-conformance fake http`` process on an ephemeral loopback port."""

    def __init__(self, root: Path, *, faults: list[str] | None = None, sessions: bool = False,
                 token: str | None = None, plan: Any = None) -> None:
        import subprocess
        import sys

        self.root = root
        self._control: Any = None  # the httpx.Client for control calls, made on first use
        self.home = root / "http-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.journal_path = root / "http-journal.jsonl"
        ready = root / "http-ready.json"
        argv = [sys.executable, "-c", LAUNCH, "fake", "http", "--port", "0",
                "--ready-file", str(ready), "--journal", str(self.journal_path)]
        if sessions:
            argv.append("--sessions")
        if plan is not None:
            plan_path = root / "http-plan.json"
            plan_path.write_text(json.dumps(plan))
            argv += ["--plan", str(plan_path)]
        for fault in faults or []:
            argv += ["--fault", fault]
        env = clean_base_env()
        env["HOME"] = str(self.home)
        if token is not None:
            env["MEMPALACE_MCP_HTTP_TOKEN"] = token  # never in argv
        self.stderr_path = root / "http-stderr.txt"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                     stderr=self._stderr)
        if not wait_until(lambda: ready.exists() and ready.stat().st_size > 0, 15):
            self.close()
            raise RuntimeError(f"the HTTP fake did not start: {self.stderr_path.read_text()}")
        info = json.loads(ready.read_text())
        self.url: str = info["url"]
        self.port: int = info["port"]
        self.mark = 0  # journal records before this index belong to earlier tests

    def reset(self, *, token: str | None = None, faults: list[str] | None = None,
              plan: Any = None) -> None:
        """Make a running fake fresh for the next test: no faults, sessions or drawers."""
        from palace_conformance.fake.faults import parse_compact

        self.control("POST", "reset")
        self.control("POST", "token", {"token": token})
        armed = [parse_compact(spec, i).to_json() for i, spec in enumerate(faults or [])]
        armed += list((plan or {}).get("faults", []))
        if armed:
            self.control("POST", "faults", armed)
        self.mark = len(read_journal(self.journal_path))

    @property
    def base(self) -> str:
        return self.url.rsplit("/mcp", 1)[0]

    def control(self, method: str, path: str, body: Any = None) -> Any:
        import httpx

        if self._control is None:  # one client: a new one builds an SSL context (~0.1 s)
            self._control = httpx.Client(timeout=10)
        response = self._control.request(method, f"{self.base}/_fake/{path}", json=body)
        response.raise_for_status()
        return response.json()

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        records = read_journal(self.journal_path)[self.mark:]
        return [r for r in records if kind is None or r["kind"] == kind]

    def received(self, method: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records("recv") if method is None or r.get("method") == method]

    def requests(self) -> list[dict[str, Any]]:
        """Bridge requests (control calls to ``/_fake/`` left out)."""
        return [r for r in self.records("http_request") if not r["path"].startswith("/_fake/")]

    def close(self) -> None:
        import signal
        import subprocess

        if self._control is not None:
            self._control.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._stderr.close()


def remote_env(url: str, **knobs: str) -> dict[str, str]:
    env = clean_base_env()
    env.update(FAST)
    env["MEMPALACE_REMOTE_URL"] = url
    env.update(knobs)
    return env
