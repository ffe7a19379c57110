"""Issue 13: the fake's journal cannot take its memory or its event loop.

Without ``--journal`` the records are kept in a ring with a count of those dropped; ``GET
/_fake/journal`` is streamed, produced off the event loop, so a large journal neither holds the
fake's memory nor blocks other clients; and a read deadline does not expire on a client for time
the fake's own loop was busy (which used to turn a concurrent valid request into a 400)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from palace_conformance.fake.http.control import JournalBody
from palace_conformance.fake.http.wire import client_deadline
from palace_conformance.fake.journal import Journal, JournalTail

from .http_support import ping, start_fake

RECORDS = 60_000


def test_the_memory_journal_is_a_ring_that_counts_what_it_dropped() -> None:
    journal = Journal(None, "http", memory_keep=10)
    tail = JournalTail(journal)
    for n in range(4):
        journal.record("recv", n=n)
    assert [r["n"] for r in tail.new_records()] == [0, 1, 2, 3]
    for n in range(4, 25):
        journal.record("recv", n=n)
    assert [r["n"] for r in journal.memory] == list(range(15, 25))
    assert journal.dropped == 15
    assert [r["n"] for r in tail.new_records()] == list(range(15, 25))  # what is left of 4..24
    journal.record("recv", n=25)
    assert [r["n"] for r in tail.new_records()] == [25]


@pytest.mark.parametrize("on_disk", [False, True])
def test_skip_to_end_leaves_only_what_follows(tmp_path: Path, on_disk: bool) -> None:
    """``new_records`` is lazy: calling it without iterating skips nothing (a watcher that did
    so saw earlier examples' writes as its own); ``skip_to_end`` is the way to skip."""
    journal = Journal(tmp_path / "j.jsonl" if on_disk else None, "http")
    tail = JournalTail(journal)
    for n in range(3):
        journal.record("recv", n=n)
    tail.new_records()  # not iterated: reads nothing
    tail.skip_to_end()
    journal.record("recv", n=3)
    assert [r["n"] for r in tail.new_records()] == [3]


@pytest.fixture(scope="module")
def big_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("journal") / "big.jsonl"
    record = {"pid": 1, "transport": "http", "kind": "recv", "method": "tools/call",
              "message": {"params": {"arguments": {"query": "q" * 300}}}}
    with open(path, "w", encoding="utf-8") as handle:
        for n in range(RECORDS):
            handle.write(json.dumps({"t": n, **record}) + "\n")
    return path


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))


def test_a_large_journal_is_streamed_in_bounded_memory_while_others_are_served(
        tmp_path: Path, big_journal: Path) -> None:
    """Serving a 25 MB journal used to hold it decoded and re-encoded at once (about ten times
    its size) on the event loop; now the fake's peak grows by less than the journal's size, and
    concurrent pings are all answered."""
    home = tmp_path / "fake"
    home.mkdir()
    shutil.copy(big_journal, home / "journal.jsonl")
    fake = start_fake(home)
    try:
        before = peak_rss_kib(fake.proc.pid)
        size_kib = big_journal.stat().st_size // 1024
        statuses: list[int] = []

        def pinger() -> None:
            with httpx.Client(timeout=60) as client:
                answer = client.post(fake.url, json=ping(), headers={
                    "Accept": "application/json, text/event-stream"})
                statuses.append(answer.status_code)

        pingers = [threading.Thread(target=pinger) for _ in range(6)]
        with httpx.Client(timeout=120) as client, \
                client.stream("GET", f"{fake.base}/_fake/journal") as answer:
            for thread in pingers:
                thread.start()
            body = answer.read()
        for thread in pingers:
            thread.join(60)
        records = json.loads(body)
        assert answer.status_code == 200
        assert [r["t"] for r in records[:RECORDS]] == list(range(RECORDS))
        assert statuses == [200] * len(pingers)
        grown = peak_rss_kib(fake.proc.pid) - before
        assert grown < size_kib, f"peak RSS grew {grown} KiB for a {size_kib} KiB journal"
    finally:
        fake.stop()


def test_a_read_deadline_does_not_expire_for_time_the_loop_was_blocked() -> None:
    """The client's bytes arrive while the loop is busy past the deadline: they are read, not
    timed out (asyncio.timeout's callback used to run before the read it cut short)."""

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=ours)
        try:
            async def read() -> bytes:
                async with client_deadline(0.3):
                    return await reader.readexactly(5)

            reading = asyncio.ensure_future(read())
            await asyncio.sleep(0.05)  # the read is waiting

            def busy() -> None:  # CPU-bound dispatch: the loop is stuck past the deadline
                theirs.sendall(b"hello")
                time.sleep(0.8)

            loop.call_soon(busy)
            return await reading
        finally:
            writer.close()
            theirs.close()

    assert asyncio.run(main()) == b"hello"


def test_a_read_deadline_still_expires_on_a_silent_client() -> None:
    async def main() -> None:
        ours, theirs = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=ours)
        try:
            with pytest.raises(TimeoutError):
                async with client_deadline(0.2):
                    await reader.readexactly(5)
        finally:
            writer.close()
            theirs.close()

    asyncio.run(main())


def test_the_journal_answer_of_a_memory_journal_is_its_ring_with_the_dropped_count() -> None:
    journal = Journal(None, "http", memory_keep=5)
    for n in range(12):
        journal.record("recv", n=n)
    body = JournalBody(journal)
    journal.record("control", n=12)  # after the call arrived: not in its answer
    assert [r["n"] for r in json.loads(b"".join(body.pieces()))] == list(range(7, 12))
    assert body.dropped == 7


def test_the_journal_answer_of_a_file_skips_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path, "http")
    journal.record("recv", n=0)
    with open(path, "ab") as handle:
        handle.write(b'{"torn": \n')
    journal.record("recv", n=1)
    with open(path, "ab") as handle:
        handle.write(b'{"kind": "recv", "n": 2')  # a writer killed mid-line
    body = JournalBody(journal)
    assert [r["n"] for r in json.loads(b"".join(body.pieces()))] == [0, 1]
    assert body.dropped == 0
