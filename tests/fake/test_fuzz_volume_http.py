"""Issue 13, hardening: ten thousand generated HTTP requests (``PALACE_FUZZ_FRAMES`` for more)
against one ``palace-conformance fake http``, eight connections at a time, in batches each
followed by a sentinel (``/healthz`` and a JSON-RPC ping) proving the server lives.

Every answer must be well-formed HTTP/1.1 that closes its connection (or a hang-up); a clean
JSON-RPC POST must get what mempalace owes its message (:func:`~.stdio_harness.expected_reply`:
202 for silence, a hang-up when the message has an id, else one JSON-RPC response with the right
id or error code). An exchange that neither answers nor hangs up within its bound is a hang; the
process exiting is a crash. The tally goes to the terminal summary (``tests/conftest.py``)."""

from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import h11
import pytest

from .fuzz_frames import frames_wanted, http_request, seed, timeout_for_frames
from .http_support import Fake, parse_response, raw_exchange, request_bytes, start_fake
from .stdio_harness import check_reply, expected_reply

BATCH = 200
WORKERS = 8
#: the fake's own body-read bound is 10 s; past this an exchange is a hang
EXCHANGE_BOUND_S = 30.0


def owes_a_hang_up(message: Any) -> bool:
    """The one clean POST mempalace hangs up on: an id (even null) but nothing to answer
    (port.py's finish(): "no response")."""
    return (isinstance(message, dict) and "id" in message
            and expected_reply(json.dumps(message).encode()) is None)


def check_answer(kind: str, payload: bytes, message: Any, data: bytes) -> int:
    """Assert ``data`` is a correct answer to ``payload``; returns its status (0: hung up)."""
    if not data:
        assert kind != "clean" or owes_a_hang_up(message), "a clean POST is answered"
        return 0
    answer = parse_response(data, "HEAD" if payload.startswith(b"HEAD ") else "GET")
    assert 100 <= answer.status <= 599
    assert answer.complete, "the body must match its framing"
    assert answer.header("connection") == "close"
    if kind != "clean":
        return answer.status
    owed = expected_reply(json.dumps(message).encode()) if isinstance(message, dict) else None
    if isinstance(message, dict) and owed is None:
        assert (answer.status, answer.body) == (202, b""), answer
    elif isinstance(message, dict):
        assert answer.status == 200
        assert (answer.header("content-type") or "").startswith("application/json")
        check_reply(owed, json.loads(answer.body))
    else:  # a batch: mempalace 3.11 reads one message per POST
        assert answer.status in (200, 202, 400), answer
        if answer.body:
            assert isinstance(json.loads(answer.body), dict | list)
    return answer.status


def sentinel(fake: Fake, batch_no: int) -> None:
    health = parse_response(raw_exchange(fake.port, request_bytes(
        "GET", "/healthz", fake.port), timeout=EXCHANGE_BOUND_S).data)
    assert health.body == b"ok\n"
    ping = fake.post({"jsonrpc": "2.0", "id": f"sentinel-{batch_no}", "method": "ping"},
                     timeout=EXCHANGE_BOUND_S)
    assert ping.json() == {"jsonrpc": "2.0", "id": f"sentinel-{batch_no}", "result": {}}


@pytest.mark.timeout(timeout_for_frames())
def test_ten_thousand_http_requests_no_crash_no_hang_every_answer_well_formed(
        tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    wanted, run_seed = frames_wanted(), seed()
    rng = random.Random(run_seed)
    tally: dict[str, Any] = {"transport": "http", "seed": run_seed, "frames": 0, "crashes": 0,
                             "hangs": 0, "hang_ups": 0, "statuses": {}, "kinds": {}}
    fake = start_fake(tmp_path)
    #: clean frames that got nothing back, then a correct answer on one more try (seen once in
    #: CI under load, never reproduced alone: the same frame sent 60 times got 60 answers)
    retried: list[str] = []
    try:
        def exchange(frame: tuple[str, bytes, bool, Any]) -> tuple[int, str]:
            kind, payload, half_close, message = frame
            try:
                reply = raw_exchange(fake.port, payload, timeout=EXCHANGE_BOUND_S,
                                     half_close=half_close)
                if kind == "clean" and not reply.data and not owes_a_hang_up(message):
                    retried.append(f"reset={reply.reset}")
                    reply = raw_exchange(fake.port, payload, timeout=EXCHANGE_BOUND_S,
                                         half_close=half_close)
            except TimeoutError:
                return -1, f"no answer and no hang-up within {EXCHANGE_BOUND_S}s"
            except (ConnectionRefusedError, BrokenPipeError, ConnectionResetError) as exc:
                if fake.proc.poll() is not None:
                    return -2, f"the fake exited ({fake.proc.returncode})"
                return 0, type(exc).__name__  # a hang-up mid-send is an allowed answer
            try:
                return check_answer(kind, payload, message, reply.data), ""
            except (AssertionError, h11.RemoteProtocolError, ValueError) as exc:
                return -3, f"{type(exc).__name__}: {exc}"

        with ThreadPoolExecutor(WORKERS) as pool:
            batch_no = 0
            while tally["frames"] < wanted:
                batch_no += 1
                frames = [http_request(rng, fake.port)
                          for _ in range(min(BATCH, wanted - tally["frames"]))]
                for frame, (status, problem) in zip(frames, pool.map(exchange, frames),
                                                    strict=True):
                    tally["kinds"][frame[0]] = tally["kinds"].get(frame[0], 0) + 1
                    if status == -1:
                        tally["hangs"] += 1
                    elif status == -2:
                        tally["crashes"] += 1
                    elif status == 0:
                        tally["hang_ups"] += 1
                    else:
                        tally["statuses"][str(status)] = tally["statuses"].get(str(status), 0) + 1
                    assert status >= 0, (
                        f"batch {batch_no} seed {run_seed}: {problem}; frame "
                        f"{frame[1][:400]!r}")
                try:
                    sentinel(fake, batch_no)
                except OSError as exc:  # TimeoutError included
                    tally["crashes" if fake.proc.poll() is not None else "hangs"] += 1
                    raise AssertionError(f"sentinel {batch_no} (seed {run_seed}): {exc}; "
                                         f"{fake.stderr()[-1500:]}") from None
                tally["frames"] += len(frames)
        assert fake.proc.poll() is None
    finally:
        tally["empty_then_answered"] = len(retried)
        record_property("fuzz_tally", tally)
        code = fake.stop()
    assert code == 0, fake.stderr()[-2000:]
    assert tally["frames"] == wanted and tally["crashes"] == tally["hangs"] == 0
    # the fake's catch-all (a 500 of its own making) firing is a fake bug, whatever the frame
    assert "Traceback" not in fake.stderr(), fake.stderr()[-3000:]
    assert "HTTP handler error" not in fake.stderr(), [
        line for line in fake.stderr().splitlines() if "HTTP handler error" in line][:5]
