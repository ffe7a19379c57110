#!/usr/bin/env python3
"""Per-call latency of the reference bridge vs the official MCP SDK client, same fake, same wire.

Why: the reference bridge is the conformance suite's oracle and runs every scenario, so its own
overhead must not dominate; the official Python SDK (``mcp`` 2.3.0) is the natural yardstick.
Goal: ratio (bridge / SDK, median per call) <= 1.0.

Usage::

    python benchmarks/bench_bridge.py [--calls 300] [--rounds 5] [--transport stdio|http|both]
                                      [--tool mempalace_status] [--json FILE]

Both clients talk to the same fake process kind over the same transport: a stdio child
(``mempalace-mcp`` shim on PATH, one per client) or one ``palace-conformance fake http`` server
(stateless, like mempalace 3.11). Calls are sequential ``tools/call`` round trips after a warm-up;
rounds alternate between the two clients so machine noise hits both alike. The SDK runs in
``mode="legacy"`` (plain initialize; no 2026 probe). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from palace_bridge.client import create_client
from palace_conformance.fake.shims import install_shim

CallFn = Callable[[], Awaitable[Any]]


def base_env(home: Path, bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_FAKE_", "MEMPALACE_", "MEMPAL_"))}
    env["HOME"] = str(home)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- clients -------------------------------------------------------------------------------------

async def open_bridge(stack: AsyncExitStack, env: dict[str, str], tool: str) -> CallFn:
    client = create_client(env)
    if not await client.start():
        raise SystemExit("bench_bridge: the reference bridge could not start the fake")
    stack.push_async_callback(client.stop)

    async def call() -> Any:
        result = await client.call_tool(tool, {})
        assert not result.is_error
        return result

    return call


async def open_sdk(stack: AsyncExitStack, env: dict[str, str], tool: str,
                   url: str | None) -> CallFn:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server: Any = url
    if url is None:
        os.environ["PATH"] = env["PATH"]  # the SDK resolves the command on our PATH
        devnull = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
        server = stdio_client(StdioServerParameters(command="mempalace-mcp", args=[], env=env),
                              errlog=devnull)
    client = Client(server, mode="legacy", read_timeout_seconds=60)
    await stack.enter_async_context(client)

    async def call() -> Any:
        result = await client.call_tool(tool, {})
        assert not result.is_error
        return result

    return call


# -- the HTTP fake -------------------------------------------------------------------------------

def start_http_fake(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    ready = root / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from palace_conformance.cli import main; main()", "fake", "http",
         "--port", "0", "--ready-file", str(ready)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not (ready.exists() and ready.stat().st_size):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit("bench_bridge: the HTTP fake did not start")
        time.sleep(0.05)
    return proc, json.loads(ready.read_text())["url"]


# -- measuring -----------------------------------------------------------------------------------

async def measure(call: CallFn, calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        began = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - began)
    return samples


async def bench_transport(transport: str, root: Path, calls: int, rounds: int, warmup: int,
                          tool: str) -> dict[str, Any]:
    bin_dir = root / "bin"
    install_shim(bin_dir)
    home = root / "home"
    home.mkdir(exist_ok=True)
    env = base_env(home, bin_dir)
    fake = None
    url = None
    if transport == "http":
        fake, url = start_http_fake(root, env)
    try:
        async with AsyncExitStack() as stack:
            bridge_env = dict(env)
            if url:
                bridge_env["MEMPALACE_REMOTE_URL"] = url
            if transport == "stdio":  # one child each, so the lock never makes them contend
                sdk_home = root / "home-sdk"
                sdk_home.mkdir(exist_ok=True)
                sdk_env = {**env, "HOME": str(sdk_home)}
            else:
                sdk_env = env
            clients = {"bridge": await open_bridge(stack, bridge_env, tool),
                       "sdk": await open_sdk(stack, sdk_env, tool, url)}
            samples: dict[str, list[float]] = {name: [] for name in clients}
            for call in clients.values():
                await measure(call, warmup)
            for index in range(rounds):
                order = list(clients) if index % 2 == 0 else list(reversed(clients))
                for name in order:
                    samples[name] += await measure(clients[name], calls)
    finally:
        if fake is not None:
            fake.send_signal(signal.SIGTERM)
            fake.wait(10)
    stats = {name: {"median_ms": statistics.median(s) * 1000,
                    "p90_ms": percentile(s, 0.9) * 1000,
                    "mean_ms": statistics.fmean(s) * 1000, "calls": len(s)}
             for name, s in samples.items()}
    return {"transport": transport, "tool": tool, **stats,
            "ratio_median": stats["bridge"]["median_ms"] / stats["sdk"]["median_ms"],
            "ratio_p90": stats["bridge"]["p90_ms"] / stats["sdk"]["p90_ms"]}


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| transport | client | median ms | p90 ms | mean ms | calls |",
             "|---|---|---:|---:|---:|---:|"]
    for r in results:
        for name, label in (("bridge", "palace_bridge"), ("sdk", "mcp 2.3.0 Client")):
            s = r[name]
            lines.append(f"| {r['transport']} | {label} | {s['median_ms']:.3f} | "
                         f"{s['p90_ms']:.3f} | {s['mean_ms']:.3f} | {s['calls']} |")
    lines += ["", "| transport | ratio bridge/SDK (median) | ratio (p90) | goal |",
              "|---|---:|---:|---|"]
    for r in results:
        verdict = "met" if r["ratio_median"] <= 1.0 else "NOT met"
        lines.append(f"| {r['transport']} | {r['ratio_median']:.2f} | {r['ratio_p90']:.2f} | "
                     f"<= 1.0 {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per client per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--transport", choices=["stdio", "http", "both"], default="both")
    parser.add_argument("--tool", default="mempalace_status")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.rounds < 1 or args.warmup < 0:
        parser.error("--calls and --rounds must be >= 1, --warmup >= 0")
    transports = ["stdio", "http"] if args.transport == "both" else [args.transport]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as tmp:
        for transport in transports:
            root = Path(tmp) / transport
            root.mkdir()
            results.append(asyncio.run(bench_transport(transport, root, args.calls, args.rounds,
                                                       args.warmup, args.tool)))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, tool {args.tool}, "
          f"{args.rounds} rounds x {args.calls} calls per client")
    print()
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
