#!/usr/bin/env python3
"""Wall time for N reference bridges in one event loop to start and stop against one HTTP fake.

Why: a host may run many bridges (the load test runs fifty), and anything a bridge does on the
event loop while starting blocks all the others. ``--verify-every-url`` restores the behaviour
before issue 13's fix (every client loaded certifi's CA bundle, even for a plain-http palace),
so the two can be timed side by side, alternating.

Usage::

    python benchmarks/bench_bridge_starts.py [--bridges 50] [--rounds 2] [--verify-every-url]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from palace_bridge import http as bridge_http
from palace_bridge.client import create_client


def start_fake(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = root / "ready.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALACE_FAKE_", "MEMPALACE_"))}
    env["HOME"] = str(root)
    proc = subprocess.Popen(
        [sys.executable, "-c", "from palace_conformance.cli import main; main()", "fake", "http",
         "--port", "0", "--sessions", "--ready-file", str(ready)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (ready.exists() and ready.stat().st_size):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("bench_bridge_starts: the HTTP fake did not start")
        time.sleep(0.02)
    return proc, json.loads(ready.read_text())["url"]


def verify_every_url() -> None:
    """Make every bridge client verify (load the CA bundle), as before the fix."""

    class Verifying(httpx.AsyncClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["verify"] = True
            super().__init__(*args, **kwargs)

    patched = type(httpx)("httpx_verifying")
    patched.__dict__.update(httpx.__dict__)
    patched.AsyncClient = Verifying  # type: ignore[attr-defined]
    bridge_http.httpx = patched  # type: ignore[attr-defined]


async def start_and_stop(url: str, bridges: int) -> float:
    async def one() -> None:
        env = {"MEMPALACE_REMOTE_URL": url, "MEMPALACE_MCP_TIMEOUT_MS": "5000"}
        client = create_client(env, stderr=io.StringIO())
        if not await client.start():
            raise SystemExit("bench_bridge_starts: a bridge did not start")
        await client.stop()

    began = time.monotonic()
    await asyncio.gather(*(one() for _ in range(bridges)))
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bridges", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--verify-every-url", action="store_true",
                        help="load the CA bundle for every client (the behaviour before the fix)")
    args = parser.parse_args()
    if args.verify_every_url:
        verify_every_url()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_fake(Path(tmp))
        try:
            for round_no in range(1, args.rounds + 1):
                wall = asyncio.run(start_and_stop(url, args.bridges))
                print(f"round {round_no}: {args.bridges} bridges started and stopped in "
                      f"{wall:.2f} s (load average {os.getloadavg()[0]:.1f})")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)


if __name__ == "__main__":
    main()
