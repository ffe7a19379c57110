"""Issue 13, hardening (load): several stdio fakes with one HOME and palace write at once, all
racing for mempalace's writer lock (a kernel ``flock``, :mod:`palace_conformance.fake.lease`).

Exactly one becomes the writer and every one of its writes lands; every write of the others is
refused with -32001 (peer contention); the shared journal holds every request, whole. The tally
goes to the terminal summary (``tests/conftest.py``).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from .stdio_harness import FakeProcess, payload

SERVERS = 6
WRITES_EACH = 25


def test_contending_writers_one_wins_the_rest_get_32001_and_nothing_is_lost(
        tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    shared = {"home": tmp_path / "home", "palace": tmp_path / "palace",
              "state": tmp_path / "state.json", "journal": tmp_path / "journal.jsonl"}
    fakes = [FakeProcess(tmp_path / f"s{n}", name=f"S{n}", **shared) for n in range(SERVERS)]
    replies: dict[int, list[dict[str, Any]]] = {}
    go = threading.Event()

    def writer(number: int, fake: FakeProcess) -> None:
        go.wait()
        replies[number] = [fake.call("mempalace_diary_write", {
            "agent_name": "load", "entry": f"lease-{number}-{n}"}, timeout=60)
            for n in range(WRITES_EACH)]

    try:
        for fake in fakes:
            fake.ping()  # all up before the race starts
        threads = [threading.Thread(target=writer, args=(n, f)) for n, f in enumerate(fakes)]
        for thread in threads:
            thread.start()
        go.set()
        for thread in threads:
            thread.join(120)
        assert all(not t.is_alive() for t in threads), "a writer hung"
        written = {n for n, got in replies.items() if any("result" in r for r in got)}
        refused = {n: [r for r in got if "error" in r] for n, got in replies.items()}
        diary = payload(fakes[0].call("mempalace_diary_read", {"agent_name": "load",
                                                               "last_n": 1000}))
        assert all(f.alive() for f in fakes), "no server crashed"
        pids = {n: f.pid for n, f in enumerate(fakes)}
    finally:
        for fake in fakes:
            fake.close()

    records = [json.loads(line) for line in shared["journal"].read_bytes().splitlines()]
    entries = {r["message"]["params"]["arguments"]["entry"] for r in records
               if r.get("kind") == "recv" and isinstance(r.get("message"), dict)
               and r["message"].get("method") == "tools/call"
               and r["message"]["params"]["name"] == "mempalace_diary_write"}
    sent = {f"lease-{n}-{k}" for n in range(SERVERS) for k in range(WRITES_EACH)}
    acquired = {r["pid"] for r in records if r.get("kind") == "lease"
                and r.get("event") == "acquired"}
    tally = {"transport": "load-lease", "servers": SERVERS, "writes": len(sent),
             "writers": len(written), "refused": sum(len(v) for v in refused.values()),
             "lost": len(sent - entries), "journal_records": len(records)}
    record_property("fuzz_tally", tally)

    assert len(written) == 1, tally
    (winner,) = written
    assert acquired == {pids[winner]}, (acquired, pids)
    assert all("result" in r and payload(r)["success"] for r in replies[winner])
    for number, errors in refused.items():
        if number != winner:
            assert len(errors) == WRITES_EACH, (number, errors[:2])
            assert {e["error"]["code"] for e in errors} == {-32001}
            assert {e["error"]["data"]["failure_kind"] for e in errors} == {"peer_contention"}
    assert sent == entries, sorted(sent - entries)[:10]
    kept = {e["content"] for e in diary["entries"]}
    assert kept == {f"lease-{winner}-{k}" for k in range(WRITES_EACH)}, sorted(kept)[:5]
