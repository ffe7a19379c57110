"""Issue 13, hardening (load): fifty reference bridges in remote mode share one
``palace-conformance fake http`` (sessions on) while faults fire on some calls: delays, stalls
past the call's deadline, sessions forgotten, 503s and connections reset mid-answer.

Every call must be answered or fail with a :class:`~palace_bridge.errors.PalaceError` within its
deadline plus slack; every call must reach the fake's journal (each carries a unique marker; a
call that timed out may not have), every request there must have its outcome journaled and
every journal line must be whole JSON; the fake must live through it and exit cleanly. The tally
goes to the terminal summary (``tests/conftest.py``).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from palace_bridge.client import create_client
from palace_bridge.errors import PalaceError, PalaceTimeout

from .support import HttpFake, remote_env, run

BRIDGES = int(os.environ.get("PALACE_LOAD_BRIDGES", "50"))
CALLS_PER_BRIDGE = 10
#: long enough that only the stall faults time out on a quiet machine; a loaded one may time out
#: more calls, which must still end cleanly and on time
TIMEOUT_MS = 5000
SLACK_S = 10.0
#: which calls break, by tool: the journal counts tools/call per tool across all fifty bridges
FAULTS = [
    "delay@mempalace_kg_query#1x100,ms=200",
    "stall@mempalace_kg_query#150x5",  # past the deadline
    "forget_session@mempalace_kg_add#20x10",
    "http_status@mempalace_search#10x5,status=503",
    "reset@mempalace_search#40x5,after_bytes=20",
]
TOOLS = ("mempalace_kg_add", "mempalace_kg_query", "mempalace_search")


def arguments(tool: str, marker: str) -> dict[str, Any]:
    if tool == "mempalace_kg_add":
        return {"subject": marker, "predicate": "load", "object": "test"}
    if tool == "mempalace_kg_query":
        return {"entity": marker}
    return {"query": marker}


def test_fifty_bridges_under_faults_every_call_ends_cleanly_and_reaches_the_journal(
        tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    fake = HttpFake(tmp_path, sessions=True, faults=FAULTS)
    tally: dict[str, Any] = {"transport": "load-http", "bridges": BRIDGES, "calls": 0,
                             "answered": 0, "failed": {}, "escaped": 0, "late": 0,
                             "slowest_s": 0.0}
    markers: list[str] = []
    timed_out: set[str] = set()
    bound_s = TIMEOUT_MS / 1000 + SLACK_S

    async def bridge(number: int) -> None:
        client = create_client(remote_env(fake.url, MEMPALACE_MCP_TIMEOUT_MS=str(TIMEOUT_MS)),
                               stderr=io.StringIO())
        assert await asyncio.wait_for(client.start(), bound_s)
        try:
            for call in range(CALLS_PER_BRIDGE):
                tool = TOOLS[(number + call) % len(TOOLS)]
                marker = f"load-{number}-{call}"
                markers.append(marker)
                began = time.monotonic()
                try:
                    await asyncio.wait_for(client.call_tool(tool, arguments(tool, marker)),
                                           bound_s + 30)
                    tally["answered"] += 1
                except PalaceTimeout:
                    timed_out.add(marker)
                    tally["failed"]["PalaceTimeout"] = tally["failed"].get("PalaceTimeout", 0) + 1
                except PalaceError as exc:
                    name = type(exc).__name__
                    tally["failed"][name] = tally["failed"].get(name, 0) + 1
                except Exception as exc:  # the point: nothing else may escape
                    tally["escaped"] += 1
                    raise AssertionError(f"{marker}: {exc!r} escaped") from exc
                took = time.monotonic() - began
                tally["slowest_s"] = round(max(tally["slowest_s"], took), 3)
                tally["late"] += took > bound_s
                tally["calls"] += 1
        finally:
            await asyncio.wait_for(client.stop(), bound_s)

    async def main() -> None:
        await asyncio.gather(*(bridge(n) for n in range(BRIDGES)))

    try:
        run(main())
        assert fake.proc.poll() is None, "the fake lived through the load"
    finally:
        record_property("fuzz_tally", tally)
        fake.close()
    assert fake.proc.returncode == 0, fake.stderr_path.read_text()[-2000:]

    lines = fake.journal_path.read_bytes().splitlines()
    records = [json.loads(line) for line in lines]  # every line whole: none torn or interleaved
    called = set()
    for record in records:
        message = record.get("message") if record.get("kind") == "recv" else None
        if isinstance(message, dict) and message.get("method") == "tools/call":
            for value in message["params"]["arguments"].values():
                called.add(value)
    # a call that timed out may have died before the fake read it (a loaded machine): not a
    # request the fake lost; every other call must be in the journal
    lost = sorted(set(markers) - called - timed_out)
    ends: dict[int, list[str]] = {}
    for record in records:
        if record.get("kind") in ("http_request", "http_response", "http_closed", "http_error"):
            ends.setdefault(record["conn"], []).append(record["kind"])
    unfinished = {conn: kinds for conn, kinds in ends.items()
                  if kinds[0] != "http_request" or len(kinds) != 2}
    fired = [r for r in records if r.get("kind") == "fault"]
    tally.update(journal_records=len(records), lost=len(lost), faults_fired=len(fired),
                 http_requests=len(ends), unfinished=len(unfinished),
                 timed_out_undelivered=len(timed_out - called))
    stderr = fake.stderr_path.read_text()

    assert tally["calls"] == len(markers) == BRIDGES * CALLS_PER_BRIDGE, tally
    assert tally["escaped"] == tally["late"] == 0, tally
    assert lost == [], lost[:10]
    assert unfinished == {}, list(unfinished.items())[:5]  # each request journaled with its fate
    assert {"PalaceTimeout", "PalaceHTTPError"} <= set(tally["failed"]), tally
    assert tally["answered"] > 0 and len(fired) >= 25, tally
    assert "Traceback" not in stderr and "HTTP handler error" not in stderr, stderr[-2000:]
