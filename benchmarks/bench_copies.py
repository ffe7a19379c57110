#!/usr/bin/env python3
"""Per-call latency of each copy of the bridge against the bare client library, side by side.

Why: issue 28 holds three copies (the Python reference, the pi copy on pi-mcp, the OpenCode copy
on the official SDK) to one catalogue; their policy (budgets, respawn, id checks, stream guards)
must not cost the agent noticeable time over the client library alone.

Usage::

    python benchmarks/bench_copies.py [--calls 100] [--rounds 3] [--transport stdio|http|both]
                                      [--tool mempalace_status] [--json FILE]

Every bridge runs in its driver host (DRIVER.md) and every call is one ``call_tool`` op timed
from the runner's side, so the host's own protocol overhead is in every row alike: the rows
compare bridges, not hosts. Bridges: ``reference`` (Python), ``pi-mcp`` (pi-mcp's McpClient
alone), ``pi-extension:reference/pi/mempalace.ts``, the bare official SDK as an OpenCode plugin
(``benchmarks/bare/sdk-plugin.ts``), ``opencode-plugin:reference/opencode/mempalace.ts``. Each
round starts every bridge fresh against one fake of its own (a stdio child, or one ``fake http``
server), warms it with 5 calls, then times ``--calls`` sequential calls; rounds alternate the
bridges so machine noise hits them alike. Prints a Markdown table (median, p90 per call, ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from palace_conformance.fake.shims import install_shim
from palace_conformance.runner.execution.driver import DriverClient
from palace_conformance.runner.selection import host_argv

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = "from palace_conformance.cli import main; main()"
BRIDGES = (("Python reference", "reference"),
           ("pi-mcp (bare client)", "pi-mcp"),
           ("pi copy", f"pi-extension:{ROOT / 'reference' / 'pi' / 'mempalace.ts'}"),
           ("official SDK (bare client)",
            f"opencode-plugin:{ROOT / 'benchmarks' / 'bare' / 'sdk-plugin.ts'}"),
           ("OpenCode copy", f"opencode-plugin:{ROOT / 'reference' / 'opencode' / 'mempalace.ts'}"))
WARMUP = 5
START_S = 20.0
OP_MS = 30000.0


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_FAKE_", "MEMPALACE_", "PI_"))}
    env["HOME"] = str(home)
    env.update(extra)
    return env


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Fake:
    """The palace one bridge is pointed at: shims on PATH, and for HTTP a running fake server."""

    def __init__(self, root: Path, transport: str) -> None:
        self.root = root
        self.shims = root / "shims"
        install_shim(self.shims)
        (root / "home").mkdir(parents=True, exist_ok=True)
        self.url: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        if transport == "http":
            ready = root / "ready.json"
            self.proc = subprocess.Popen(
                [sys.executable, "-c", LAUNCH, "fake", "http", "--port", "0", "--ready-file",
                 str(ready), "--journal", str(root / "journal.jsonl")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=clean_env(root / "home"))
            deadline = time.monotonic() + START_S
            while not ready.exists():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise SystemExit("bench_copies: the http fake did not start")
                time.sleep(0.02)
            url = str(json.loads(ready.read_text())["url"])
            self.url = url if url.endswith("/mcp") else url.rstrip("/") + "/mcp"

    def bridge_env(self) -> dict[str, str]:
        env = clean_env(self.root / "home", PATH=f"{self.shims}{os.pathsep}{os.environ['PATH']}",
                        PALACE_FAKE_JOURNAL=str(self.root / "journal.jsonl"),
                        MEMPALACE_FEED="0")
        if self.url:
            env["MEMPALACE_REMOTE_URL"] = self.url
        return env

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def one_round(spec: str, transport: str, tool: str, calls: int, root: Path) -> list[float]:
    """Per-call times (ms) of ``calls`` call_tool ops on a fresh bridge."""
    fake = Fake(root / "fake", transport)
    client = DriverClient(list(host_argv(spec)), env=clean_env(root / "host-home"),
                          stderr_path=root / "host-stderr.txt").start()
    try:
        for op, fields in (("load", {"env": fake.bridge_env(), "cwd": str(root)}),
                           ("event", {"name": "session_start", "payload": {"reason": "startup"}}),
                           ("settle", {"quiet_ms": 200, "max_ms": 15000})):
            reply = client.request(op, fields, deadline_ms=OP_MS)
            if not reply.ok:
                raise SystemExit(f"bench_copies: {spec}: {op} failed: {reply.error}")
        times: list[float] = []
        for n in range(WARMUP + calls):
            started = time.perf_counter()
            reply = client.request("call_tool", {"name": tool, "args": {}}, deadline_ms=OP_MS)
            elapsed = (time.perf_counter() - started) * 1000
            if not reply.ok:
                raise SystemExit(f"bench_copies: {spec}: call_tool failed: {reply.error}")
            if n >= WARMUP:
                times.append(elapsed)
        client.request("shutdown", {"reason": "quit"}, deadline_ms=OP_MS)
        return times
    finally:
        client.close()
        fake.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transport", choices=("stdio", "http", "both"), default="both")
    parser.add_argument("--tool", default="mempalace_status")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    transports = ("stdio", "http") if args.transport == "both" else (args.transport,)
    samples: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-copies-") as tmp:
        for round_no in range(args.rounds):
            for transport in transports:
                order = BRIDGES if round_no % 2 == 0 else tuple(reversed(BRIDGES))
                for label, spec in order:
                    root = Path(tmp) / f"r{round_no}-{transport}-{abs(hash(spec))}"
                    samples.setdefault((label, transport), []).extend(
                        one_round(spec, transport, args.tool, args.calls, root))
    rows: list[dict[str, Any]] = []
    print(f"{args.rounds} round(s) x {args.calls} call(s) of {args.tool} per bridge and transport")
    print("| bridge | transport | median ms | p90 ms | calls |")
    print("|---|---|---|---|---|")
    for transport in transports:
        for label, _spec in BRIDGES:
            values = samples[(label, transport)]
            row = {"bridge": label, "transport": transport, "median_ms": statistics.median(values),
                   "p90_ms": percentile(values, 0.9), "calls": len(values)}
            rows.append(row)
            print(f"| {label} | {transport} | {row['median_ms']:.2f} | {row['p90_ms']:.2f} | "
                  f"{row['calls']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
