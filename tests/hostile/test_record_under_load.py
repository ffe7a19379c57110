"""Issue 25, item 5: ``record --upstream`` under a palace that streams: SIGTERM -> exit in under
2 s whatever the palace is sending, per-call latency flat over 1,000 calls while a palace streams
server requests, and bounded memory under a 200 MB answer (the relays stream with caps and the
draft is written off the event loop)."""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
CLI = str(Path(sys.executable).with_name("palace-conformance"))


@contextmanager
def recorder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    """The hostile palace and a recorder in front of it: (recorder, its URL, the draft)."""
    palace = subprocess.Popen([sys.executable, str(HERE / "hostile_palace.py")],
                              stdout=subprocess.PIPE, text=True)
    assert palace.stdout is not None
    port = int(palace.stdout.readline())
    out = tmp_path / "tool.recorded.load.json"
    proc = subprocess.Popen([CLI, "record", "--upstream", f"http://127.0.0.1:{port}/mcp",
                             "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("export MEMPALACE_REMOTE_URL="), line
        yield proc, line.split("=", 1)[1].strip(), out
    finally:
        for child in (proc, palace):
            if child.poll() is None:
                child.kill()
            child.wait(10)


def rpc(n: int, method: str = "tools/call", **params: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": n, "method": method,
            "params": params or {"name": "mempalace_status", "arguments": {}}}


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.timeout(300)
def test_sigterm_while_the_palace_streams_10000_server_requests(tmp_path: Path) -> None:
    with recorder(tmp_path) as (proc, url, out):
        with httpx.Client(timeout=60) as client:
            for n in range(1, 21):  # answered calls for the draft
                client.post(url, json=rpc(n))
            with client.stream("POST", url, json=rpc(99, "stream", count=10000)) as stream:
                events = 0
                for line in stream.iter_lines():
                    events += line.startswith("data:")
                    if events == 5000:
                        break
                sent = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
                took = time.monotonic() - sent
        draft = json.loads(out.read_text())
    print(f"SIGTERM -> exit: {took:.2f} s after 5000 of 10000 streamed server requests")
    assert proc.returncode == 0 and took < 2.0, took
    assert sum(step["op"] == "call_tool" for step in draft["steps"]) == 20


@pytest.mark.timeout(300)
def test_latency_stays_flat_while_a_palace_streams_server_requests(tmp_path: Path) -> None:
    with recorder(tmp_path) as (proc, url, _):
        with httpx.Client(timeout=60) as client, httpx.Client(timeout=60) as listener, \
                listener.stream("GET", url, headers={"Accept": "text/event-stream"}) as stream:
            lines = stream.iter_lines()
            next(lines)  # the palace is streaming server requests now
            took = []
            for n in range(1, 1001):
                started = time.monotonic()
                answer = client.post(url, json=rpc(n))
                took.append(time.monotonic() - started)
                assert answer.status_code == 200
                if n % 50 == 0:  # keep the stream drained as a bridge would
                    for _, _ in zip(range(200), lines, strict=False):
                        pass
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    first, last = statistics.median(took[:100]) * 1000, statistics.median(took[-100:]) * 1000
    print(f"per-call latency (median): first 100 {first:.1f} ms, last 100 {last:.1f} ms")
    # medians: a neighbour's load spikes single calls; the bug this guards grew the typical call
    # from 50 to 239 ms within 240 calls (a draft rebuilt per message on the event loop)
    assert last < max(3 * first, first + 50), (first, last)


@pytest.mark.timeout(300)
def test_a_200_mb_answer_is_streamed_through_with_bounded_memory(tmp_path: Path) -> None:
    with recorder(tmp_path) as (proc, url, _):
        with httpx.Client(timeout=120) as client:
            received = 0
            with client.stream("POST", url, json=rpc(1, "big", mb=200)) as answer:
                for chunk in answer.iter_raw():
                    received += len(chunk)
        peak = peak_rss_mb(proc.pid)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    print(f"200 MB answer relayed: recorder peak RSS {peak:.0f} MB")
    assert received == 200 * 1024 * 1024
    assert peak < 250, peak
