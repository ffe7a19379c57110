#!/usr/bin/env python3
"""Benchmark the fake MemPalace server: cold start and round trips, over stdio (and HTTP).

Why: a bridge under test respawns its stdio child often (crash, restart and timeout scenarios),
so the fake must start far faster than the real ``mempalace-mcp`` (1.3-2.6 s to its initialize
answer on a 2-core machine) or the conformance suite spends its time waiting for Python imports.

Usage::

    python benchmarks/bench_fake.py [--runs 30] [--seconds 3] [--json FILE]

Cold start is spawn -> first byte of the ``initialize`` reply, measured from just before
``Popen``. Round trips are strictly sequential request/reply pairs on one process (stdio is
sequential anyway; HTTP dials once per request because the fake answers ``Connection: close``).
Every spawned fake gets a private HOME under a temp dir. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
FAKE_MCP = BIN / "palace-fake-mcp"
CONFORMANCE = BIN / "palace-conformance"
INITIALIZE = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "bench", "version": "0"}}})
              + "\n").encode()
STATUS = {"name": "mempalace_status", "arguments": {}}


def env_for(home: Path) -> dict[str, str]:
    """A private HOME; bytecode caching allowed (as after any install), so the warm-up run
    writes the package's ``.pyc`` files even where ``PYTHONDONTWRITEBYTECODE`` is set."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_FAKE_", "MEMPALACE_")) and k != "PYTHONDONTWRITEBYTECODE"}
    env["HOME"] = str(home)
    return env


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(samples) * 1000,
            "p90_ms": percentile(samples, 0.9) * 1000, "min_ms": min(samples) * 1000,
            "runs": len(samples)}


# -- stdio ----------------------------------------------------------------------------------


def stdio_cold_start(command: list[str], home: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env_for(home))
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    proc.stdout.read(1)  # the first byte of the reply
    elapsed = time.perf_counter() - started
    proc.stdout.readline()
    proc.stdin.close()
    proc.wait(10)
    return elapsed


def stdio_round_trips(home: Path, method: str, params: Any, seconds: float) -> float:
    proc = subprocess.Popen([str(FAKE_MCP)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env_for(home))
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    proc.stdout.readline()
    count, deadline = 0, time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        count += 1
        message = {"jsonrpc": "2.0", "id": count, "method": method}
        if params is not None:
            message["params"] = params
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        assert reply["id"] == count, reply
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(10)
    return count / elapsed


# -- HTTP -----------------------------------------------------------------------------------


def http_available() -> bool:
    try:
        import palace_conformance.fake.http.serve  # noqa: F401
    except ImportError:
        return False
    return True


def start_http(home: Path, ready: Path) -> tuple[subprocess.Popen[bytes], int]:
    if ready.exists():
        ready.unlink()
    proc = subprocess.Popen([str(CONFORMANCE), "fake", "http", "--port", "0", "--ready-file",
                             str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env_for(home))
    deadline = time.perf_counter() + 30
    while not ready.exists():
        if proc.poll() is not None or time.perf_counter() > deadline:
            raise RuntimeError("palace-conformance fake http did not start")
        time.sleep(0.002)
    return proc, int(json.loads(ready.read_text())["port"])


def http_post(port: int, message: dict[str, Any]) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/mcp", body=json.dumps(message),
                     headers={"Content-Type": "application/json",
                              "Accept": "application/json, text/event-stream"})
        response = conn.getresponse()
        return json.loads(response.read())
    finally:
        conn.close()


def http_cold_start(home: Path) -> float:
    ready = home / "ready.json"
    started = time.perf_counter()
    proc, port = start_http(home, ready)
    try:
        http_post(port, json.loads(INITIALIZE))
        return time.perf_counter() - started
    finally:
        proc.terminate()
        proc.wait(10)


def http_round_trips(home: Path, method: str, params: Any, seconds: float) -> float:
    proc, port = start_http(home, home / "ready.json")
    try:
        count, deadline = 0, time.perf_counter() + seconds
        started = time.perf_counter()
        while time.perf_counter() < deadline:
            count += 1
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": count, "method": method}
            if params is not None:
                message["params"] = params
            assert http_post(port, message)["id"] == count
        return count / (time.perf_counter() - started)
    finally:
        proc.terminate()
        proc.wait(10)


# -- main -----------------------------------------------------------------------------------


def measure(label: str, runs: int, sample: Callable[[], float]) -> dict[str, float]:
    sample()  # warm the page cache (and write bytecode if allowed) before timing
    result = summary([sample() for _ in range(runs)])
    print(f"  {label}: median {result['median_ms']:.1f} ms, p90 {result['p90_ms']:.1f} ms",
          file=sys.stderr)
    return result


def install_shim(target: Path) -> Path:
    subprocess.run([str(CONFORMANCE), "fake", "install-shim", str(target)], check=True,
                   stdout=subprocess.DEVNULL, env=env_for(target))
    return target / "mempalace-mcp"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="cold starts per variant (30)")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per throughput run")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON here")
    args = parser.parse_args()
    if not FAKE_MCP.exists():
        print(f"bench_fake: {FAKE_MCP} not found; run from the project venv "
              "(pip install -e .)", file=sys.stderr)
        return 2
    results: dict[str, Any] = {"python": sys.version.split()[0], "cpus": os.cpu_count(),
                               "runs": args.runs, "seconds": args.seconds}
    with tempfile.TemporaryDirectory(prefix="bench-fake-") as tmp:
        home = Path(tmp)
        shim = install_shim(home / "shims")
        print("stdio cold start (spawn -> initialize reply):", file=sys.stderr)
        results["python_baseline"] = measure(
            "python -c pass", args.runs,
            lambda: _time_run([sys.executable, "-c", "pass"], home))
        results["stdio_cold"] = measure(
            "palace-fake-mcp", args.runs, lambda: stdio_cold_start([str(FAKE_MCP)], home))
        results["stdio_cold_shim"] = measure(
            "mempalace-mcp shim", args.runs, lambda: stdio_cold_start([str(shim)], home))
        print("stdio round trips:", file=sys.stderr)
        results["stdio_ping_rps"] = stdio_round_trips(home, "ping", None, args.seconds)
        results["stdio_call_rps"] = stdio_round_trips(home, "tools/call", STATUS, args.seconds)
        print(f"  ping {results['stdio_ping_rps']:.0f}/s, tools/call "
              f"{results['stdio_call_rps']:.0f}/s", file=sys.stderr)
        if http_available():
            print("HTTP:", file=sys.stderr)
            results["http_cold"] = measure("fake http", max(5, args.runs // 3),
                                           lambda: http_cold_start(home))
            results["http_ping_rps"] = http_round_trips(home, "ping", None, args.seconds)
            results["http_call_rps"] = http_round_trips(home, "tools/call", STATUS, args.seconds)
            print(f"  ping {results['http_ping_rps']:.0f}/s, tools/call "
                  f"{results['http_call_rps']:.0f}/s", file=sys.stderr)
        else:
            print("HTTP: skipped, the HTTP fake is not there yet", file=sys.stderr)
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _time_run(command: list[str], home: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env_for(home))
    return time.perf_counter() - started


def print_table(results: dict[str, Any]) -> None:
    print(f"| measure ({results['cpus']} CPUs, Python {results['python']}) | median | p90 |")
    print("|---|---|---|")
    for key, label in (("python_baseline", "`python -c pass` (floor)"),
                       ("stdio_cold", "stdio cold start, `palace-fake-mcp`"),
                       ("stdio_cold_shim", "stdio cold start, `mempalace-mcp` shim"),
                       ("http_cold", "HTTP cold start (spawn -> initialize answered)")):
        if key in results:
            row = results[key]
            print(f"| {label} | {row['median_ms']:.0f} ms | {row['p90_ms']:.0f} ms |")
    for key, label in (("stdio_ping_rps", "stdio ping round trips"),
                       ("stdio_call_rps", "stdio `tools/call mempalace_status` round trips"),
                       ("http_ping_rps", "HTTP ping round trips"),
                       ("http_call_rps", "HTTP `tools/call mempalace_status` round trips")):
        if key in results:
            print(f"| {label} | {results[key]:.0f}/s | |")


if __name__ == "__main__":
    sys.exit(main())
