"""The resume policy (HTTP-12) and the server-request answer (TOOL-07), without I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palace_bridge.clock import FakeClock
from palace_bridge.deadlines import Deadline
from palace_bridge.jsonrpc import ServerRequest, answer_server_request
from palace_bridge.resume import DEFAULT_RETRY_MS, MAX_RESUMES, GiveUp, Resume, StreamResume
from palace_bridge.sse import SSEDecoder


def policy(timeout_ms: int = 10_000, clock: FakeClock | None = None, **kw) -> StreamResume:
    return StreamResume(Deadline.start(clock or FakeClock(), timeout_ms), **kw)


def test_a_stream_with_an_id_is_resumed_after_the_servers_retry():
    assert policy().on_stream_end("ev-7", 500) == Resume("ev-7", 500)


def test_no_retry_from_the_server_waits_the_default():
    assert policy().on_stream_end("ev-7", None) == Resume("ev-7", DEFAULT_RETRY_MS)


def test_a_retry_of_zero_is_honoured_not_replaced_by_the_default():
    assert policy().on_stream_end("ev-7", 0) == Resume("ev-7", 0)


@pytest.mark.parametrize("last_id", [None, ""])
def test_a_stream_without_an_event_id_fails_at_once(last_id):
    decision = policy().on_stream_end(last_id, 500)
    # the wording inside the protocol error the agent gets is the reference's own
    assert decision == GiveUp("it carried no event id to resume from")


def test_attempts_are_bounded():
    resume = policy(timeout_ms=0)  # no deadline: only the bound stops a server that never answers
    decisions = [resume.on_stream_end(f"ev-{n}", 10) for n in range(MAX_RESUMES + 1)]
    assert all(isinstance(d, Resume) for d in decisions[:MAX_RESUMES])
    assert isinstance(decisions[-1], GiveUp) and f"{MAX_RESUMES} resumed" in decisions[-1].reason
    assert [d.last_event_id for d in decisions[:MAX_RESUMES]] == [
        f"ev-{n}" for n in range(MAX_RESUMES)], "each GET carries the latest id"


def test_a_call_sends_at_most_three_gets_and_counts_each_once():
    """The documented bound (docs/choices.md): 3 GETs per call, then the call fails."""
    resume = StreamResume(Deadline.start(FakeClock(), 0))
    decisions = [resume.on_stream_end(f"ev-{n}", 10) for n in range(4)]
    assert decisions[:3] == [Resume("ev-0", 10), Resume("ev-1", 10), Resume("ev-2", 10)]
    assert decisions[3] == GiveUp("still none after 3 resumed streams")


def test_the_default_wait_is_one_second():
    assert StreamResume(Deadline.start(FakeClock(), 0)).on_stream_end("ev-7", None) == Resume(
        "ev-7", 1000)


def test_a_wait_that_cannot_end_before_the_deadline_is_not_started():
    clock = FakeClock()
    resume = policy(timeout_ms=1000, clock=clock)
    clock.advance(600)
    decision = resume.on_stream_end("ev-1", 400)
    assert isinstance(decision, GiveUp) and "400 ms" in decision.reason
    assert resume.on_stream_end("ev-1", 399) == Resume("ev-1", 399)


@given(st.integers(0, 5000), st.integers(1, 5000), st.integers(0, 5000))
def test_a_resume_always_fits_in_the_deadline(retry, timeout, elapsed):
    clock = FakeClock()
    resume = policy(timeout_ms=timeout, clock=clock)
    clock.advance(elapsed)
    decision = resume.on_stream_end("ev", retry)
    assert isinstance(decision, Resume) == (retry < timeout - min(elapsed, timeout))


def test_the_decoder_remembers_the_last_id_and_retry_across_a_resume():
    decoder = SSEDecoder()
    decoder.feed(b"id: ev-1\nretry: 250\ndata: \n\n")
    assert (decoder.last_event_id, decoder.retry_ms) == ("ev-1", 250)
    decoder.feed(b"id: ev-2\ndata: {\"half\"")  # an event cut by the close does not count
    assert decoder.last_event_id == "ev-1"
    resumed = decoder.resumed()
    assert (resumed.last_event_id, resumed.retry_ms) == ("ev-1", 250)
    events = resumed.feed(b"event: message\ndata: {}\n\n")
    assert events[0].id == "ev-1", "an event without an id keeps the last one"
    resumed.feed(b"id: ev-9\ndata: x\n\n")
    assert resumed.last_event_id == "ev-9"


@pytest.mark.parametrize("method", ["elicitation/create", "sampling/createMessage", "roots/list"])
def test_an_unserved_server_request_is_refused_with_method_not_found(method):
    answer = answer_server_request(ServerRequest("srv-1", method, {}))
    assert answer == {"jsonrpc": "2.0", "id": "srv-1",
                      "error": {"code": -32601, "message": f"Method not found: {method}"}}


def test_a_server_ping_is_answered_with_an_empty_result():
    assert answer_server_request(ServerRequest(7, "ping", None)) == {
        "jsonrpc": "2.0", "id": 7, "result": {}}
