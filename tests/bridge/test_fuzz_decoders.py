"""Issue 13, hardening: hostile servers on both transports feed the reference bridge generated
garbage (bad JSON, wrong types, wrong ids, huge and unterminated lines, bad SSE framing, invalid
UTF-8, wrong content types and statuses, hang-ups, exits, silence) through real pipes and sockets.

For every call: it returns a result or raises a :class:`~palace_bridge.errors.PalaceError` (any
other exception escaping the client is a failure), it ends within its deadline plus slack, and
the whole run's traced memory stays bounded and returns to its baseline after ``stop()``. The
line and event bounds are lowered to 1 MB so the huge frames (up to 4 MB) cross them. Each
garbage answer is chosen by ``random.Random(f"{seed}:{frame}")``, so a failing frame replays from
its number and the seed. ``PALACE_FUZZ_BRIDGE_CALLS`` asks for more calls than the default,
``PALACE_FUZZ_SEED`` for other garbage.
"""

from __future__ import annotations

import asyncio
import gc
import io
import json
import os
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from palace_bridge.client import PalaceClient, create_client
from palace_bridge.errors import PalaceError
from palace_bridge.stdio import StdioConnection

from .hostile_http import Exchange, HostileHttp
from .support import FAST, clean_base_env, remote_env, run

HERE = Path(__file__).resolve().parent
CALLS_ENV = "PALACE_FUZZ_BRIDGE_CALLS"
#: per transport: a stdio call that ends in a stall-kill costs a respawn, an HTTP one does not
DEFAULT_CALLS = {"stdio": 100, "http": 150}
#: ``PALACE_FUZZ_SEED`` picks other garbage (the same variable as the fake's volume fuzz)
SEED = int(os.environ["PALACE_FUZZ_SEED"]) if os.environ.get("PALACE_FUZZ_SEED", "").isdigit() \
    else 13
TIMEOUT_MS = 250
#: a call may also respawn a child (init budget below) before its own deadline starts
INIT_TIMEOUT_MS = 2000
SLACK_S = 5.0
LINE_BOUND = 1_000_000
#: traced memory: the peak over a whole run, and what may stay allocated after stop()
PEAK_BOUND = 256 * 1024 * 1024
RESIDUE_BOUND = 16 * 1024 * 1024


def calls_wanted(transport: str) -> int:
    raw = os.environ.get(CALLS_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_CALLS[transport]


def timeout_for_calls() -> float:
    """pytest-timeout's bound: a stdio call that stalls costs a respawn (about 0.4 s, loaded)."""
    return 120 + max(calls_wanted("stdio"), calls_wanted("http")) * 1.0


def drive(client: PalaceClient, calls: int, record_property: Any, transport: str) -> dict[str, Any]:
    """Start ``client``, make ``calls`` calls (frame numbers 0..calls-1), stop it; the tally."""
    tally: dict[str, Any] = {"transport": f"bridge-{transport}", "seed": SEED, "calls": 0,
                             "answered": 0, "failed": {}, "escaped": 0, "late": 0,
                             "slowest_s": 0.0}
    bound_s = (TIMEOUT_MS + INIT_TIMEOUT_MS) / 1000 + SLACK_S

    async def main() -> int:
        try:
            return await calls_then_peak()
        finally:  # even after a failed call: no child or connection outlives the test
            await asyncio.wait_for(client.stop(), 30)

    async def calls_then_peak() -> int:
        assert await client.start(), "the hostile server's handshake is good"
        for frame in range(calls):
            began = time.monotonic()
            try:
                result = await asyncio.wait_for(
                    client.call_tool("mempalace_status", {"frame": frame},
                                     timeout_ms=TIMEOUT_MS), bound_s + 30)
                assert isinstance(result.content, list)
                tally["answered"] += 1
            except PalaceError as exc:
                name = type(exc).__name__
                tally["failed"][name] = tally["failed"].get(name, 0) + 1
            except Exception as exc:  # the point: nothing else may escape
                tally["escaped"] += 1
                raise AssertionError(f"frame {frame}: {type(exc).__name__} escaped: {exc!r}") \
                    from exc
            took = time.monotonic() - began
            tally["slowest_s"] = round(max(tally["slowest_s"], took), 3)
            tally["late"] += took > bound_s
            assert took <= bound_s, f"frame {frame} took {took:.1f}s (bound {bound_s}s)"
            tally["calls"] += 1
        return tracemalloc.get_traced_memory()[1]

    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        try:
            peak = run(main())
        finally:
            record_property("fuzz_tally", tally)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]  # the loop and its tasks are gone by now
    finally:
        tracemalloc.stop()
    tally["peak_mib"] = round((peak - baseline) / 2**20, 1)
    tally["residue_mib"] = round((after - baseline) / 2**20, 1)  # the recorded dict, updated
    assert peak - baseline < PEAK_BOUND, tally
    assert after - baseline < RESIDUE_BOUND, tally
    return tally


# -- stdio --------------------------------------------------------------------------------------


@pytest.mark.timeout(timeout_for_calls())
def test_stdio_garbage_never_escapes_never_overruns_and_memory_stays_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        record_property: pytest.RecordProperty) -> None:
    monkeypatch.setitem(StdioConnection.__init__.__kwdefaults__, "max_line", LINE_BOUND)
    server = tmp_path / "mempalace-mcp"
    server.write_text(f"#!{sys.executable} -S\n" + (HERE / "hostile_stdio.py").read_text())
    server.chmod(0o755)
    env = clean_base_env()
    env.update(FAST)
    env.update({"HOME": str(tmp_path), "HOSTILE_SEED": str(SEED),
                "MEMPALACE_MCP_BIN": str(server), "MEMPALACE_MCP_TIMEOUT_MS": str(TIMEOUT_MS),
                "MEMPALACE_MCP_INIT_TIMEOUT_MS": str(INIT_TIMEOUT_MS),
                "MEMPALACE_MCP_MAX_RESPAWNS": "1000000", "MEMPALACE_MCP_KILL_GRACE_MS": "100"})
    client = create_client(env, stderr=io.StringIO())
    tally = drive(client, calls_wanted("stdio"), record_property, "stdio")
    assert tally["answered"] > tally["calls"] // 4, tally  # the garbage let good answers through
    assert "PalaceTimeout" in tally["failed"], tally


# -- HTTP ---------------------------------------------------------------------------------------

GOOD = {"content": [{"type": "text", "text": "ok"}], "isError": False}


def response(request_id: Any, result: Any = None, **extra: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id,
                       "result": GOOD if result is None else result, **extra}).encode()


def head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def with_body(status: int, content_type: str | None, body: bytes) -> bytes:
    headers = {"Content-Length": str(len(body))}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return head(status, headers) + body


def sse(events: list[bytes]) -> bytes:
    return head(200, {"Content-Type": "text/event-stream", "Connection": "close"}) + b"".join(
        events)


def event(data: bytes) -> bytes:
    return b"event: message\ndata: " + data + b"\n\n"


def http_garbage(rng: random.Random, request_id: Any) -> bytes | None:
    """The raw answer to one tools/call (None: never answer)."""
    good = response(request_id)
    wrong_types = [response(request_id, 5), response(request_id, {"content": "text"}),
                   response(request_id, {"content": [1, None]}, isError="yes"),
                   json.dumps({"jsonrpc": "2.0", "id": request_id, "error": "boom"}).encode(),
                   json.dumps({"jsonrpc": "2.0", "id": request_id,
                               "error": {"code": "x", "message": 5}}).encode(),
                   json.dumps({"id": request_id}).encode(), b"[]", b"null", b'"x"']
    wrong_id = rng.choice([request_id + 1000, str(request_id), None, [request_id], -1])
    mode = rng.choice(["good", "bad_json", "wrong_types", "wrong_id", "invalid_utf8",
                       "content_type", "status", "length_lie", "chunked_garbage", "hang_up",
                       "partial_head", "sse_framing", "sse_wrong_id", "sse_unterminated",
                       "sse_hold", "sse_huge", "sse_invalid_utf8", "sse_server_requests",
                       "huge_json", "accepted", "hold"])
    if mode == "good":
        return with_body(200, "application/json", good)
    if mode == "bad_json":
        return with_body(200, "application/json", rng.choice(
            [b"{", b"{'a': 1}", b"nan", b"}{", b'{"id": 1,}', b"", b"\x00\x01", good[:-2]]))
    if mode == "wrong_types":
        return with_body(200, "application/json", rng.choice(wrong_types))
    if mode == "wrong_id":
        return with_body(200, "application/json", response(wrong_id))
    if mode == "invalid_utf8":
        return with_body(200, "application/json; charset=utf-8",
                         good.replace(b'"ok"', b'"o\xff\xfe\xc3("'))
    if mode == "content_type":
        return with_body(200, rng.choice([None, "text/html", "text/plain", "application/jsonx",
                                          "application/json; charset=latin-1",
                                          "text/event-stream", "multipart/mixed", ""]), good)
    if mode == "status":
        status = rng.choice([201, 204, 301, 307, 400, 401, 403, 404, 405, 406, 409, 413, 415,
                             429, 500, 502, 503, 504, 599])
        body = rng.choice([b"", b"<html>no</html>", json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": "x"}}
        ).encode(), b"\xff\xfe"])
        extra = {"Location": "/mcp"} if status in (301, 307) else {}
        return head(status, {"Content-Length": str(len(body)), "Content-Type": rng.choice(
            ["text/html", "application/json"]), **extra}) + body
    if mode == "length_lie":
        declared = len(good) + rng.choice([-10, 1, 500, 10**9])
        return head(200, {"Content-Type": "application/json",
                          "Content-Length": str(max(declared, 0))}) + good
    if mode == "chunked_garbage":
        return head(200, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}) + \
            rng.choice([b"zz\r\n" + good, b"5\r\n" + good, b"ffffffffff\r\nab", b"\r\n\r\n"])
    if mode == "hang_up":
        return b""
    if mode == "partial_head":
        return rng.choice([b"HTTP/1.1 200", b"HTTP/1.1 200 OK\r\nContent-Type: application/j",
                           b"HTTP/9.9 abc\r\n\r\n", b"garbage\r\n\r\n", b"\xff" * 100])
    if mode == "sse_framing":
        junk = [b": comment\n\n", b"event: other\ndata: {}\n\n", b"data\n\n", b"retry: x\n\n",
                b"id: a\x00b\ndata: 1\n\n", b"\xef\xbb\xbfdata: \n\n", b"data: not json\n\n",
                b"data: [1,\ndata: 2]\n\n", b"event: message\r\rdata: {\"a\": 1}\r\r",
                b"field-with-no-colon\n\n", b"data: " + response(wrong_id) + b"\n\n"]
        events = rng.sample(junk, rng.randint(1, 5))
        split = good.replace(b", ", b",\ndata: ", 1)  # one JSON across two data lines
        events.append(b"event: message\ndata: " + split + b"\n\n" if rng.random() < 0.5
                      else event(good))
        return sse(events)
    if mode == "sse_wrong_id":
        return sse([event(response(wrong_id)) for _ in range(rng.randint(1, 4))])
    if mode == "sse_unterminated":
        return sse([b"event: message\ndata: " + good])
    if mode == "sse_hold":
        return None if rng.random() < 0.3 else sse([b": keepalive\n\n"]) + b"HOLD"
    if mode == "sse_huge":
        return sse([b"data: " + b"x" * rng.randint(LINE_BOUND + 1, 4 * LINE_BOUND), event(good)])
    if mode == "sse_invalid_utf8":
        return sse([event(good.replace(b'"ok"', b'"\xff\xc3("')), event(good)])
    if mode == "sse_server_requests":
        pings = [event(json.dumps({"jsonrpc": "2.0", "id": f"srv-{n}", "method": "ping"}).encode())
                 for n in range(rng.randint(1, 50))]
        return sse([*pings, event(good)])
    if mode == "huge_json":
        text = "é" * rng.randint(LINE_BOUND // 2, 2 * LINE_BOUND)
        return with_body(200, "application/json", response(
            request_id, {"content": [{"type": "text", "text": text}]}))
    if mode == "accepted":
        return head(202, {"Content-Length": "0"})
    return None  # hold


@pytest.fixture
def hostile_garbage() -> Iterator[Callable[[], HostileHttp]]:
    servers: list[HostileHttp] = []

    async def handler(message: dict[str, Any], exchange: Exchange) -> None:
        if message.get("method") != "tools/call":
            await exchange.accepted()
            return
        frame = (message.get("params") or {}).get("arguments", {}).get("frame", 0)
        answer = http_garbage(random.Random(f"{SEED}:{frame}"), message["id"])
        if answer is None:
            await exchange.hold()
        elif answer.endswith(b"HOLD"):
            await exchange.raw(answer[:-4])
            await exchange.hold()
        else:
            await exchange.raw(answer)

    def make() -> HostileHttp:
        servers.append(HostileHttp(handler))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


@pytest.mark.timeout(timeout_for_calls())
def test_http_garbage_never_escapes_never_overruns_and_memory_stays_bounded(
        hostile_garbage: Callable[[], HostileHttp], monkeypatch: pytest.MonkeyPatch,
        record_property: pytest.RecordProperty) -> None:
    monkeypatch.setattr("palace_bridge.http.MAX_EVENT", LINE_BOUND)
    monkeypatch.setattr("palace_bridge.http.MAX_BODY", 2 * LINE_BOUND)
    server = hostile_garbage()
    client = create_client(remote_env(server.url, MEMPALACE_MCP_TIMEOUT_MS=str(TIMEOUT_MS),
                                      MEMPALACE_MCP_INIT_TIMEOUT_MS=str(INIT_TIMEOUT_MS)),
                           stderr=io.StringIO())
    tally = drive(client, calls_wanted("http"), record_property, "http")
    assert tally["answered"] > tally["calls"] // 10, tally
    assert {"PalaceTimeout", "PalaceProtocolError"} <= set(tally["failed"]), tally
