"""Issue 13, hardening: ten thousand generated stdin lines (``PALACE_FUZZ_FRAMES`` for more)
down one long-lived ``palace-fake-mcp``, in batches each followed by a sentinel ping. Every reply
before the sentinel's must be exactly what mempalace owes its line, in order
(:func:`~.stdio_harness.expected_reply`); no sentinel within its bound is a hang, an exit is a
crash. The tally goes to the terminal summary (``tests/conftest.py``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from .fuzz_frames import frames_wanted, seed, stdio_line, timeout_for_frames
from .stdio_harness import FakeProcess, check_reply, expected_reply, rpc

BATCH = 50
#: a batch is answered in well under a second on a quiet machine; past this it is a hang
SENTINEL_BOUND_S = 60.0


@pytest.mark.timeout(timeout_for_frames())
def test_ten_thousand_stdin_lines_no_crash_no_hang_every_reply_correct(
        tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    wanted, run_seed = frames_wanted(), seed()
    rng = random.Random(run_seed)
    tally = {"transport": "stdio", "seed": run_seed, "frames": 0, "replies": 0, "crashes": 0,
             "hangs": 0, "kinds": {}}
    with FakeProcess(tmp_path) as fake:
        batch_no = 0
        while tally["frames"] < wanted:
            batch_no += 1
            lines = [stdio_line(rng) for _ in range(min(BATCH, wanted - tally["frames"]))]
            for kind, line in lines:
                fake.send(line)
                tally["kinds"][kind] = tally["kinds"].get(kind, 0) + 1
            sentinel = f"sentinel-{batch_no}"
            fake.send(rpc("ping", None, sentinel))
            replies = []
            while True:
                try:
                    reply = json.loads(fake.recv_line(timeout=SENTINEL_BOUND_S))
                except AssertionError:
                    tally["crashes" if not fake.alive() else "hangs"] += 1
                    record_property("fuzz_tally", tally)
                    raise AssertionError(f"batch {batch_no} (seed {run_seed}): "
                                         f"{'exited' if not fake.alive() else 'no sentinel'}; "
                                         f"stderr {fake.stderr_text()[-1500:]!r}") from None
                if reply.get("id") == sentinel:
                    assert reply == {"jsonrpc": "2.0", "id": sentinel, "result": {}}
                    break
                replies.append(reply)
            owed = [(line, expected) for _, line in lines
                    if (expected := expected_reply(line)) is not None]
            assert len(replies) == len(owed), (batch_no, run_seed, replies[-3:])
            for (line, expected), reply in zip(owed, replies, strict=True):
                try:
                    check_reply(expected, reply)
                except AssertionError as exc:
                    raise AssertionError(f"batch {batch_no} seed {run_seed}: line "
                                         f"{line[:300]!r} got {reply}") from exc
            tally["frames"] += len(lines)
            tally["replies"] += len(replies)
        assert fake.alive()
        fake.close_stdin()
        assert fake.wait(30) == 0
    record_property("fuzz_tally", tally)
    assert tally["frames"] == wanted and tally["replies"] > wanted // 3
