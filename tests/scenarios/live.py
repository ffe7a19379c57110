"""A minimal stand-in runner for the tests: plays scenario pieces against the real fake.

It is not the runner: it knows just enough (``rpc`` steps, journal checks, a scripted client) to
prove that shipped scenarios pass against a correct peer and fail against a wrong one.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from palace_conformance.fake.journal import read_journal
from palace_conformance.resources import tool_catalogue
from palace_conformance.scenarios.checks import Verdict, evaluate, evaluate_tools
from palace_conformance.scenarios.matching import matches, why_not
from palace_conformance.scenarios.model import Scenario, Step

LAUNCH = "from palace_conformance.cli import main; main()"
WAIT = 10.0


def fake_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALACE_FAKE_", "MEMPALACE_"))}
    env["HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    return env


class StdioFake:
    """``palace-conformance fake stdio`` over pipes, one JSON line per message."""

    def __init__(self, root: Path, journal: Path, plan: Path | None = None) -> None:
        argv = [sys.executable, "-c", LAUNCH, "fake", "stdio", "--journal", str(journal)]
        if plan is not None:
            argv += ["--plan", str(plan)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=fake_env(root / "home"))
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send one message; wait for the reply when it is a request (None at EOF)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None
        if "id" not in message:
            return None
        line = self.lines.get(timeout=WAIT)
        return json.loads(line) if line else None

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            return self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(WAIT)


class HttpFake:
    """``palace-conformance fake http`` on a free loopback port."""

    def __init__(self, root: Path, journal: Path, plan: Path | None = None,
                 *options: str) -> None:
        ready = root / "ready.json"
        argv = [sys.executable, "-c", LAUNCH, "fake", "http", "--port", "0", "--journal",
                str(journal), "--ready-file", str(ready), *options]
        if plan is not None:
            argv += ["--plan", str(plan)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=fake_env(root / "home"))
        deadline = time.monotonic() + WAIT
        while not ready.exists():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("the HTTP fake did not start")
            time.sleep(0.02)
        self.url = json.loads(ready.read_text())["url"]
        self.http = httpx.Client(timeout=WAIT)  # one client: no TLS setup per request

    def post(self, message: dict[str, Any], **headers: str) -> httpx.Response:
        wanted = {"Accept": "application/json, text/event-stream",
                  **{k.replace("_", "-"): v for k, v in headers.items()}}
        return self.http.post(self.url, json=message, headers=wanted)

    def control(self, method: str, path: str, body: Any = None) -> Any:
        base = self.url.rsplit("/mcp", 1)[0]
        answer = self.http.request(method, f"{base}/_fake/{path}", json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def send(self, message: dict[str, Any]) -> dict[str, Any] | None:
        answer = self.post(message)
        return answer.json() if answer.status_code != 202 and answer.content else None

    def close(self) -> int:
        if hasattr(self, "http"):
            self.http.close()
        self.proc.terminate()
        try:
            return self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(WAIT)


def judge_rpc_step(step: Step, reply: dict[str, Any] | None) -> list[Verdict]:
    """The verdicts of one ``rpc`` step's expectations on the fake's reply."""
    expect = step.expect
    verdicts: list[Verdict] = []
    if expect is None:
        return verdicts
    if expect.has_result:
        reason = why_not(expect.result, reply)
        verdicts.append(Verdict(reason is None, reason or "result matches"))
    if expect.tools is not None:
        tools = ((reply or {}).get("result") or {}).get("tools") or []
        verdicts.extend(evaluate_tools(expect.tools, tools, tool_catalogue()["tools"]))
    return verdicts


def play_fake_scenario(scenario: Scenario, transport: str, root: Path,
                       plan: Path | None = None) -> list[Verdict]:
    """Run a ``subject: fake`` scenario's rpc steps; every verdict, passed or not."""
    journal = root / "journal.jsonl"
    fake: StdioFake | HttpFake = (StdioFake(root, journal, plan) if transport == "stdio"
                                  else HttpFake(root, journal, plan))
    verdicts: list[Verdict] = []
    try:
        for step in scenario.steps_for(transport):
            assert step.op == "rpc", step
            verdicts.extend(judge_rpc_step(step, fake.send(dict(step.params["message"]))))
    finally:
        fake.close()
    return verdicts


def journal_verdicts(scenario: Scenario, journal: Path, transport: str,
                     since: int = 0) -> list[Verdict]:
    """The scenario's journal checks over the records from index ``since`` on."""
    records = read_journal(journal)[since:]
    return [evaluate(c, records) for c in scenario.expect.journal if c.applies_to(transport)]


__all__ = ["HttpFake", "StdioFake", "journal_verdicts", "matches", "play_fake_scenario"]
