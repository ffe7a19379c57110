"""Issue 25, item 5: the fake's in-memory journal (an HTTP fake without ``--journal``) is bounded
in bytes as well as records: big requests cannot grow it without bound."""

from __future__ import annotations

from palace_conformance.fake.journal import (
    MEMORY_MAX_BYTES,
    MEMORY_RECORD_MAX_BYTES,
    Journal,
    JournalTail,
)


def test_a_ten_megabyte_record_is_kept_as_its_outline() -> None:
    journal = Journal(None, "http")
    for n in range(5):
        journal.record("recv", method="tools/call", id=n, raw="x" * 10_000_000)
    assert journal.memory_bytes < 5 * 1024 and len(journal.memory) == 5
    kept = journal.memory[-1]
    assert kept["method"] == "tools/call" and kept["id"] == 4 and "raw" not in kept
    assert kept["truncated_bytes"] > 10_000_000


def test_the_ring_drops_the_oldest_past_its_byte_cap() -> None:
    journal = Journal(None, "http")
    body = "y" * (MEMORY_RECORD_MAX_BYTES - 1000)
    count = 2 * MEMORY_MAX_BYTES // len(body)
    tail = JournalTail(journal)
    seen = 0
    for n in range(count):
        journal.record("recv", n=n, raw=body)
        if n % 50 == 0:
            seen += sum(1 for _ in tail.new_records())
    seen += sum(1 for _ in tail.new_records())
    assert journal.memory_bytes <= MEMORY_MAX_BYTES
    assert journal.dropped == count - len(journal.memory) > 0
    assert journal.memory[-1]["n"] == count - 1 and seen == count
