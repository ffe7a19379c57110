"""Faults over HTTP fire on the request they match, only there, and look right on the wire."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from palace_conformance.fake.http.port import sse_event

from .http_support import (
    Fake,
    call,
    fired_conns,
    parse_response,
    ping,
    raw_exchange,
    request_bytes,
    sse_events,
    start_fake,
    wait_for,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fake]:
    fake = start_fake(tmp_path_factory.mktemp("http-faults"))
    yield fake
    fake.stop()


@pytest.fixture
def fake(server: Fake) -> Fake:
    """The shared fake, reset: no faults, no sessions, an empty palace."""
    assert server.control("POST", "reset").status_code == 200
    return server


def on(method: str, **more: object) -> dict[str, object]:
    return {"method": method, **more}


def raw_post(fake: Fake, message: object, timeout: float = 5.0):
    data = request_bytes("POST", "/mcp", fake.port, json.dumps(message).encode(),
                         [("Content-Type", "application/json")])
    return raw_exchange(fake.port, data, timeout=timeout)


# -- HTTP-only faults ------------------------------------------------------------------------


def resume(fake: Fake, event_id: str) -> httpx.Response:
    """The GET that resumes a stream from ``event_id``, as a client sends it."""
    return fake.http.get(fake.url, headers={"Last-Event-ID": event_id,
                                           "Accept": "text/event-stream"})


def test_http_status_fires_on_its_request_only_and_carries_headers_and_body(fake: Fake) -> None:
    [fid] = fake.arm({"action": "http_status", "on": on("ping"), "status": 503,
                      "headers": {"Retry-After": "5"}, "body": {"busy": True}})
    mark = fake.mark()
    assert fake.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status_code == 200
    hit = fake.post(ping(2))
    after = fake.post(ping(3))
    assert hit.status_code == 503
    assert hit.headers["retry-after"] == "5"
    assert hit.json() == {"busy": True}
    assert hit.headers["content-type"] == "application/json; charset=utf-8"
    assert after.status_code == 200
    [conn] = fired_conns(fake, fid, mark)
    assert [r["conn"] for r in fake.records("http_response", mark) if r["status"] == 503] == [conn]


def test_http_status_without_a_body_sends_the_stock_page(fake: Fake) -> None:
    fake.arm({"action": "http_status", "on": on("ping"), "status": 502})
    answer = fake.post(ping())
    assert answer.status_code == 502
    assert "<p>Error code: 502</p>" in answer.text
    assert answer.headers["content-type"] == "text/html;charset=utf-8"


def test_nth_and_times_pick_exactly_those_occurrences(fake: Fake) -> None:
    [fid] = fake.arm({"action": "http_status", "on": on("ping", nth=2), "times": 2,
                      "status": 500})
    mark = fake.mark()
    statuses = [fake.post(ping(i)).status_code for i in range(1, 6)]
    assert statuses == [200, 500, 500, 200, 200]
    recv = [r for r in fake.records("recv", mark)]
    assert fired_conns(fake, fid, mark) == [recv[1]["conn"], recv[2]["conn"]]


def test_a_fault_armed_later_counts_only_later_messages(fake: Fake) -> None:
    fake.post(ping(1))
    fake.post(ping(2))
    fake.arm({"action": "accept_202", "on": on("ping", nth=1)})
    first = fake.post(ping(3))
    assert (first.status_code, first.content) == (202, b"")
    assert fake.post(ping(4)).status_code == 200


def test_accept_202_answers_a_request_with_an_empty_202(fake: Fake) -> None:
    [fid] = fake.arm({"action": "accept_202", "on": {"tool": "mempalace_status"}})
    mark = fake.mark()
    answer = fake.post(call("mempalace_status"))
    assert (answer.status_code, answer.content, answer.headers["content-length"]) == (202, b"", "0")
    assert len(fired_conns(fake, fid, mark)) == 1
    assert fake.post(call("mempalace_status")).status_code == 200


def test_content_type_changes_only_the_content_type(fake: Fake) -> None:
    fake.arm({"action": "content_type", "on": on("ping"), "value": "text/html"})
    answer = fake.post(ping(9))
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/html"
    assert answer.json() == {"jsonrpc": "2.0", "id": 9, "result": {}}


def test_answer_status_sends_the_real_answer_under_another_status(fake: Fake) -> None:
    [fid] = fake.arm({"action": "answer_status", "on": on("ping"), "status": 203})
    mark = fake.mark()
    answer = fake.post(ping(11))
    assert answer.status_code == 203
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json() == {"jsonrpc": "2.0", "id": 11, "result": {}}  # the id follows
    assert len(fired_conns(fake, fid, mark)) == 1
    assert fake.post(ping(12)).status_code == 200  # once


def test_answer_status_also_heads_an_event_stream(fake: Fake) -> None:
    fake.arm({"action": "answer_status", "on": on("ping"), "status": 300})
    fake.arm({"action": "sse", "on": on("ping")})
    answer = fake.post(ping(13))
    assert (answer.status_code, answer.headers["content-type"]) == (300, "text/event-stream")
    assert json.loads(sse_events(answer.content)[-1]["data"])["id"] == 13


def test_forget_session_in_stateless_mode_still_answers_404(fake: Fake) -> None:
    fake.arm({"action": "forget_session", "on": on("ping")})
    answer = fake.post(ping())
    assert answer.status_code == 404
    assert answer.json()["error"] == {"code": -32600, "message": "Session not found"}


def test_reset_sends_that_many_bytes_then_a_tcp_reset(fake: Fake) -> None:
    [fid] = fake.arm({"action": "reset", "on": on("ping", nth=2), "after_bytes": 10})
    mark = fake.mark()
    assert not raw_post(fake, ping(1)).reset
    cut = raw_post(fake, ping(2))
    assert cut.reset
    assert cut.data == b"HTTP/1.1 2"
    assert len(fired_conns(fake, fid, mark)) == 1
    assert fake.post(ping(3)).status_code == 200


def test_reset_at_zero_bytes_is_seen_by_httpx_as_a_transport_error(fake: Fake) -> None:
    fake.arm({"action": "reset", "on": on("ping")})
    with pytest.raises(httpx.TransportError):
        fake.post(ping())
    assert fake.http.get(f"{fake.base}/healthz").text == "ok\n"


def test_rotate_token_refuses_this_request_and_demands_the_new_token(fake: Fake) -> None:
    assert fake.control("POST", "token", {"token": "old-token"}).status_code == 200
    try:
        old = {"Authorization": "Bearer old-token"}
        new = {"Authorization": "Bearer new-token"}
        fake.arm({"action": "rotate_token", "on": on("ping"), "token": "new-token"})
        assert fake.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers=old).status_code == 200
        assert fake.post(ping(2), headers=old).status_code == 401
        assert fake.post(ping(3), headers=old).status_code == 401
        assert fake.post(ping(4), headers=new).status_code == 200
        assert "new-token" not in fake.journal_path.read_text()
    finally:
        fake.control("POST", "token", {"token": None})


# -- SSE ---------------------------------------------------------------------------------------


def test_sse_streams_priming_keepalives_then_the_reply(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "event_delay_ms": 60, "keepalives": 2,
              "priming_id": "e1"})
    started = time.monotonic()
    answer = fake.post(ping(5))
    elapsed = time.monotonic() - started
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/event-stream"
    events = sse_events(answer.content)
    assert events[0] == {"id": "e1", "retry": "200", "data": ""}
    assert events[1:3] == [{"comment": "keepalive"}, {"comment": "keepalive"}]
    assert events[3]["event"] == "message"
    assert json.loads(events[3]["data"]) == {"jsonrpc": "2.0", "id": 5, "result": {}}
    assert len(events) == 4
    assert elapsed >= 0.18  # two keep-alive delays and one event delay


def test_sse_no_retry_primes_without_a_retry_field(fake: Fake) -> None:
    """``no_retry`` leaves only the id (and empty data) in the priming event: the wait before a
    resume is then the client's own."""
    fake.arm({"action": "sse", "on": on("ping"), "priming_id": "e2", "no_retry": True})
    events = sse_events(fake.post(ping(6)).content)
    assert events[0] == {"id": "e2", "data": ""}
    assert json.loads(events[1]["data"]) == {"jsonrpc": "2.0", "id": 6, "result": {}}


def test_sse_invalid_utf8_sends_a_comment_of_bytes_that_are_not_utf8_first(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "invalid_utf8": True})
    mark = len(fake.records())
    body = fake.post(ping(7)).content
    first, _, rest = body.partition(b"\n\n")
    assert first == b": \x80\xff\xfe not UTF-8"
    with pytest.raises(UnicodeDecodeError):
        first.decode("utf-8")
    [event] = sse_events(rest)
    assert json.loads(event["data"]) == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert len(fake.records("http_invalid_utf8", mark)) == 1


def test_sse_decoy_event_goes_first_with_the_same_id_and_another_result(fake: Fake) -> None:
    """The decoy is what a client that reads non-message events as JSON-RPC would take for the
    answer: the request's own id, a result the palace never gives; the real reply follows."""
    fake.arm({"action": "sse", "on": on("ping"), "keepalives": 1, "decoy_event": "error"})
    mark = len(fake.records())
    answer = fake.post(ping(21))
    events = sse_events(answer.content)
    assert [e.get("event", "comment") for e in events] == ["comment", "error", "message"]
    decoy, real = (json.loads(e["data"]) for e in events[1:])
    assert decoy["id"] == real["id"] == 21
    assert decoy["result"]["content"][0]["text"].startswith("decoy:")
    assert real == {"jsonrpc": "2.0", "id": 21, "result": {}}
    [record] = fake.records("http_decoy", mark)
    assert (record["event"], record["id"]) == ("error", 21)
    assert fake.post(ping(22)).headers["content-type"].startswith("application/json")  # once


def test_sse_garbage_event_is_a_message_event_of_text_before_the_answer(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "decoy_event": "error",
              "garbage_event": "{not json"})
    mark = len(fake.records())
    events = sse_events(fake.post(ping(23)).content)
    assert [e.get("event") for e in events] == ["error", "message", "message"]
    assert events[1]["data"] == "{not json"
    assert json.loads(events[2]["data"]) == {"jsonrpc": "2.0", "id": 23, "result": {}}
    [record] = fake.records("http_garbage_event", mark)
    assert record["id"] == 23


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"])
def test_sse_line_ending_ends_every_line_of_the_stream_so(fake: Fake, ending: bytes) -> None:
    """The SSE standard's other two line endings, on every line: priming event, keep-alive,
    decoy and answer alike (JSON data holds no raw CR or LF, so only line ends change)."""
    name = {b"\r\n": "crlf", b"\r": "cr"}[ending]
    fake.arm({"action": "sse", "on": on("ping"), "line_ending": name, "keepalives": 1,
              "priming_id": "p-1", "decoy_event": "endpoint"})
    body = fake.post(ping(24)).content
    assert body.count(ending) == body.count(b"\r") and b"\n\n" not in body
    if ending == b"\r":
        assert b"\n" not in body
    events = sse_events(body.replace(ending, b"\n"))
    assert [e.get("event", e.get("id", "comment")) for e in events] == [
        "p-1", "comment", "endpoint", "message"]
    assert json.loads(events[3]["data"]) == {"jsonrpc": "2.0", "id": 24, "result": {}}


def test_sse_mixed_line_endings_use_all_three_in_one_stream(fake: Fake) -> None:
    """A line with more after it ends in a lone CR, the line before a blank line in CRLF, the
    blank line in LF; no lone CR is right before an LF, so the stream's lines are the LF
    stream's (the standard reads a CR followed by an LF as one line end)."""
    fake.arm({"action": "sse", "on": on("ping"), "line_ending": "mixed", "keepalives": 1,
              "priming_id": "p-2", "decoy_event": "endpoint"})
    body = fake.post(ping(27)).content
    assert body.startswith(b"id: p-2\rretry: 200\rdata: \r\n\n"
                           b": keepalive\r\n\nevent: endpoint\rdata: {")
    assert body.endswith(b"}\r\n\n") and b"event: message\rdata: {" in body
    assert body.count(b"\r\n\n") == 4 and body.count(b"\n") == 8  # 4 events, nothing else
    lines = re.split(rb"\r\n|\n|\r", body)
    events = sse_events(b"\n".join(lines))
    assert [e.get("event", e.get("id", "comment")) for e in events] == [
        "p-2", "comment", "endpoint", "message"]
    assert json.loads(events[3]["data"]) == {"jsonrpc": "2.0", "id": 27, "result": {}}


def test_sse_chunk_bytes_writes_each_event_in_pieces_of_that_size(fake: Fake) -> None:
    """Each piece is its own HTTP chunk, flushed before the next: a client's reads split there
    (a CR and its LF apart when the piece ends between them)."""
    fake.arm({"action": "sse", "on": on("ping"), "line_ending": "crlf", "chunk_bytes": 3,
              "decoy_event": "endpoint"})
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    with fake.http.stream("POST", fake.url, content=json.dumps(ping(25)).encode(),
                          headers=headers) as answer:
        pieces = list(answer.iter_raw())
    decoy = sse_event(b"", "endpoint")  # the framing's size: "event: endpoint" and one data
    assert pieces[:2] == [b"eve", b"nt:"]
    assert all(len(piece) <= 3 for piece in pieces) and len(pieces) > len(decoy)
    body = b"".join(pieces)
    events = sse_events(body.replace(b"\r\n", b"\n"))
    assert [e["event"] for e in events] == ["endpoint", "message"]
    assert json.loads(events[1]["data"]) == {"jsonrpc": "2.0", "id": 25, "result": {}}


def test_sse_unknown_fields_end_each_event_and_change_nothing_else(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "unknown_fields": True})
    body = fake.post(ping(26)).content
    assert body.startswith(b"event: message\ndata: {")
    assert body.endswith(b"}\nEvent: error\nData: an unknown field\nRetry: 86400000\n\n")
    [event] = sse_events(body)
    assert (event["Event"], event["Data"], event["Retry"]) == ("error", "an unknown field",
                                                               "86400000")
    assert json.loads(event["data"]) == {"jsonrpc": "2.0", "id": 26, "result": {}}


def test_sse_decoy_keeps_a_string_id_a_string(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "decoy_event": "endpoint"})
    events = sse_events(fake.post(ping("req-7")).content)
    assert [e["event"] for e in events] == ["endpoint", "message"]
    assert [json.loads(e["data"])["id"] for e in events] == ["req-7", "req-7"]


def test_sse_can_close_without_a_response_and_replay_it_on_resume(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "close_without_response": True,
              "priming_id": "resume-me"})
    answer = fake.post(ping(6))
    events = sse_events(answer.content)
    assert events == [{"id": "resume-me", "retry": "200", "data": ""}]
    assert fake.records("http_withheld")[-1]["resumable"] is True
    resumed = resume(fake, "resume-me")
    assert resumed.status_code == 200
    [event] = sse_events(resumed.content)
    assert json.loads(event["data"]) == {"jsonrpc": "2.0", "id": 6, "result": {}}
    assert fake.http.get(fake.url, headers={"Last-Event-ID": "resume-me"}).status_code == 404


def test_sse_resume_status_answers_the_resuming_get_with_it_once_for_a_2xx(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "close_without_response": True,
              "priming_id": "resume-203", "resume_status": 203})
    mark = fake.mark()
    assert sse_events(fake.post(ping(7)).content) == [
        {"id": "resume-203", "retry": "200", "data": ""}]
    resumed = resume(fake, "resume-203")
    assert resumed.status_code == 203
    assert resumed.headers["content-type"] == "text/event-stream"
    [event] = sse_events(resumed.content)
    assert json.loads(event["data"]) == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert [(r["last_event_id"], r["status"]) for r in fake.records("http_resumed", mark)] == [
        ("resume-203", 203)]
    # a 2xx delivered it: nothing is left to replay
    assert fake.http.get(fake.url, headers={"Last-Event-ID": "resume-203"}).status_code == 404


def test_sse_resume_status_error_keeps_the_stream_and_replays_on_every_get(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "close_without_response": True,
              "priming_id": "resume-500", "resume_status": 500})
    mark = fake.mark()
    fake.post(ping(8))
    for _ in range(2):  # a client that retries the GET is answered the same way each time
        resumed = resume(fake, "resume-500")
        assert resumed.status_code == 500
        assert resumed.headers["content-type"] == "text/event-stream"
        [event] = sse_events(resumed.content)
        assert json.loads(event["data"]) == {"jsonrpc": "2.0", "id": 8, "result": {}}
    assert [r["status"] for r in fake.records("http_resumed", mark)] == [500, 500]
    assert [r["status"] for r in fake.records("http_response", mark)
            if r["status"] == 500] == [500, 500]


def test_sse_resume_status_must_be_a_status_with_a_body(fake: Fake) -> None:
    for bad in (199, 204, 304, 600, True, "500"):
        answer = fake.control("POST", "faults", {"action": "sse", "on": on("ping"),
                                                 "resume_status": bad})
        assert answer.status_code == 400, bad
        assert "resume_status" in answer.json()["error"]


def test_sse_without_priming_just_ends_the_stream(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "close_without_response": True})
    answer = fake.post(ping())
    assert answer.status_code == 200 and sse_events(answer.content) == []


def test_server_request_goes_out_on_an_sse_stream_and_the_answer_gets_202(fake: Fake) -> None:
    fake.arm({"action": "server_request", "on": {"tool": "mempalace_status"}, "method": "ping"})
    answer = fake.post(call("mempalace_status", request_id=11))
    assert answer.headers["content-type"] == "text/event-stream"
    first, second = (json.loads(e["data"]) for e in sse_events(answer.content))
    assert first["method"] == "ping" and isinstance(first["id"], str)
    assert second["id"] == 11 and "result" in second
    mark = fake.mark()
    reply = fake.post({"jsonrpc": "2.0", "id": first["id"], "result": {}})
    assert (reply.status_code, reply.content) == (202, b"")
    [recv] = fake.records("recv", mark)
    assert recv["response"] is True and recv["message"]["id"] == first["id"]


def test_notify_and_progress_stream_live_before_the_reply(fake: Fake) -> None:
    fake.arm({"action": "notify", "on": on("ping"), "method": "notifications/message",
              "params": {"level": "info", "data": "hi"}},
             {"action": "drip_progress", "on": on("ping"), "count": 3, "interval_ms": 20})
    answer = fake.post({**ping(12), "params": {"_meta": {"progressToken": "p"}}})
    messages = [json.loads(e["data"]) for e in sse_events(answer.content)]
    assert [m.get("method") for m in messages] == [
        "notifications/message", "notifications/progress", "notifications/progress",
        "notifications/progress", None]
    assert [m["params"]["progress"] for m in messages[1:4]] == [1, 2, 3]
    assert messages[-1] == {"jsonrpc": "2.0", "id": 12, "result": {}}


def test_duplicate_response_needs_a_stream_and_gets_one(fake: Fake) -> None:
    fake.arm({"action": "duplicate_response", "on": on("ping")})
    events = sse_events(fake.post(ping(13)).content)
    assert [json.loads(e["data"]) for e in events] == [{"jsonrpc": "2.0", "id": 13,
                                                        "result": {}}] * 2


def test_a_progress_stream_that_then_stalls_keeps_the_stream_open(fake: Fake) -> None:
    fake.arm({"action": "drip_progress", "on": on("ping"), "count": 1, "interval_ms": 10,
              "then": "stall"})
    with fake.http.stream("POST", fake.url, content=json.dumps(ping()).encode(),
                      timeout=httpx.Timeout(5, read=0.5)) as answer:
        assert answer.headers["content-type"] == "text/event-stream"
        seen: list[str] = []
        with pytest.raises(httpx.ReadTimeout):
            seen.extend(answer.iter_lines())
    assert seen[:2] == ["event: message", seen[1]] and '"notifications/progress"' in seen[1]
    assert not any('"result"' in line for line in seen)


# -- transport-neutral faults over HTTP ------------------------------------------------------


def test_garbage_becomes_the_200_body(fake: Fake) -> None:
    fake.arm({"action": "garbage", "on": on("ping"), "text": "<html>oops</html>"})
    answer = fake.post(ping())
    assert answer.status_code == 200
    assert answer.content == b"<html>oops</html>"
    assert answer.headers["content-length"] == str(len(b"<html>oops</html>"))


def test_partial_line_sends_half_the_body_then_resets(fake: Fake) -> None:
    whole = parse_response(raw_post(fake, ping(77)).data).body
    fake.arm({"action": "partial_line", "on": on("ping")})
    cut = raw_post(fake, ping(77))
    assert cut.reset
    head, _, body = cut.data.partition(b"\r\n\r\n")
    assert f"Content-Length: {len(whole)}".encode() in head
    assert body == whole[: len(whole) // 2]
    assert fake.http.get(f"{fake.base}/healthz").status_code == 200


def test_stall_with_ms_drops_the_request_without_an_answer(fake: Fake) -> None:
    [fid] = fake.arm({"action": "stall", "on": on("ping"), "ms": 150})
    mark = fake.mark()
    started = time.monotonic()
    reply = raw_post(fake, ping())
    assert reply.data == b"" and not reply.reset
    assert time.monotonic() - started >= 0.14
    assert len(fired_conns(fake, fid, mark)) == 1
    assert wait_for(lambda: fake.records("http_closed", mark))[0]["reason"] == "no response"


def test_a_client_leaving_a_stalled_request_breaks_nothing(fake: Fake) -> None:
    fake.arm({"action": "stall", "on": {"tool": "mempalace_diary_write"}})
    mark = fake.mark()
    with pytest.raises(httpx.ReadTimeout):
        fake.post(call("mempalace_diary_write", {"agent_name": "a", "entry": "never"}),
                  timeout=httpx.Timeout(5, read=0.3))
    closed = wait_for(lambda: fake.records("http_closed", mark))
    assert closed[0]["reason"] == "client disconnected"
    assert fake.post(ping()).status_code == 200
    diary = fake.post(call("mempalace_diary_read", {"agent_name": "a"})).json()
    assert "never" not in json.dumps(diary)  # the stalled write was never carried out


def test_delay_holds_the_answer(fake: Fake) -> None:
    fake.arm({"action": "delay", "on": on("ping"), "ms": 200})
    started = time.monotonic()
    assert fake.post(ping()).status_code == 200
    assert time.monotonic() - started >= 0.19


def test_result_and_wrong_id_shape_the_json_reply(fake: Fake) -> None:
    fake.arm({"action": "result", "on": on("ping"), "result": {"odd": 1}},
             {"action": "wrong_id", "on": on("tools/list")})
    odd = fake.post(ping(3))
    assert odd.status_code == 200
    assert odd.json() == {"jsonrpc": "2.0", "id": 3, "result": {"odd": 1}}
    assert fake.post({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}).json()["id"] == "wrong-4"


def test_wrong_id_null_answers_the_post_with_a_null_id_result(fake: Fake) -> None:
    """``reply_id: null`` is a value, not "use the default": the POST's JSON answer is the real
    result under a null id (tool.ids.null-id-result-never-the-answer)."""
    fake.arm({"action": "wrong_id", "on": on("ping"), "reply_id": None})
    answer = fake.post(ping(5))
    assert answer.status_code == 200
    assert answer.json() == {"jsonrpc": "2.0", "id": None, "result": {}}
    assert fake.post(ping(6)).json()["id"] == 6


def test_plan_faults_from_the_command_line_count_from_start_and_exit_ends_the_server(
        tmp_path: Path) -> None:
    fake = start_fake(tmp_path, "--fault", "http_status@mempalace_status#2,status=418",
                      "--fault", "exit@ping#2,code=7",
                      "--fault", "rotate_token@notifications/never-sent,token=secret-rotation")
    try:
        assert "secret-rotation" not in fake.journal_path.read_text()
        statuses = [fake.post(call("mempalace_status", request_id=i)).status_code
                    for i in range(3)]
        assert statuses == [200, 418, 200]
        assert [r["fault_id"] for r in fake.records("fault")] == ["cli-1-http_status"]
        assert fake.post(ping(1)).status_code == 200
        with pytest.raises(httpx.TransportError):
            fake.post(ping(2))
        assert fake.proc.wait(5) == 7
        assert [r["code"] for r in fake.records("process_exit")] == [7]
        with pytest.raises(httpx.ConnectError):
            fake.http.get(f"{fake.base}/healthz")
    finally:
        fake.stop()


def test_a_connection_cut_by_the_client_mid_body_is_tolerated(fake: Fake) -> None:
    data = request_bytes("POST", "/mcp", fake.port, b'{"jsonrpc"',
                         [("Content-Length", "200")])
    with socket.create_connection(("127.0.0.1", fake.port)) as sock:
        sock.sendall(data)
    assert fake.post(ping()).status_code == 200


# -- protocol details: id types, negotiated version, a stream that stalls ----------------------


def test_retype_id_streams_a_decoy_with_the_other_id_type_then_the_reply(fake: Fake) -> None:
    fake.arm({"action": "retype_id", "on": on("ping")})
    events = sse_events(fake.post(ping(14)).content)
    decoy, reply = (json.loads(e["data"]) for e in events)
    assert decoy["id"] == "14" and decoy["error"]["code"] == -32099
    assert reply == {"jsonrpc": "2.0", "id": 14, "result": {}}
    after = fake.post({**ping(), "id": "15"})  # it fired once: a plain JSON reply again
    assert after.headers["content-type"].startswith("application/json")
    assert after.json()["id"] == "15"


def test_retype_id_of_a_string_id_is_a_number_and_can_stall(fake: Fake) -> None:
    fake.arm({"action": "retype_id", "on": on("ping"), "then": "stall"})
    with fake.http.stream("POST", fake.url, content=json.dumps({**ping(), "id": "16"}).encode(),
                          timeout=httpx.Timeout(5, read=0.5)) as answer:
        seen: list[str] = []
        with pytest.raises(httpx.ReadTimeout):
            seen.extend(answer.iter_lines())
    data = [json.loads(line[len("data: "):]) for line in seen if line.startswith("data: ")]
    assert [m["id"] for m in data] == [16] and "error" in data[0]


def test_negotiate_version_answers_initialize_with_that_version(fake: Fake) -> None:
    fake.arm({"action": "negotiate_version", "on": on("initialize"), "version": "2025-03-26"})
    answer = fake.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": "2025-11-25", "capabilities": {}}})
    assert answer.json()["result"]["protocolVersion"] == "2025-03-26"


def test_a_cancel_notice_is_journaled_with_whether_it_names_a_request_exactly(fake: Fake) -> None:
    mark = fake.mark()
    fake.post(ping(21))
    for target in (21, "21", 99):
        fake.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": target}})
    known = [r["request_known"] for r in fake.records("recv", mark)
             if r["method"] == "notifications/cancelled"]
    assert known == [True, False, False]


def test_sse_then_stall_sends_headers_and_first_bytes_then_nothing(fake: Fake) -> None:
    fake.arm({"action": "sse", "on": on("ping"), "priming_id": "p1", "keepalives": 1},
             {"action": "stall", "on": on("ping"), "ms": 3000})
    with fake.http.stream("POST", fake.url, content=json.dumps(ping(22)).encode(),
                          timeout=httpx.Timeout(5, read=0.5)) as answer:
        assert answer.headers["content-type"] == "text/event-stream"
        seen: list[str] = []
        with pytest.raises(httpx.ReadTimeout):
            seen.extend(answer.iter_lines())
    assert "id: p1" in seen and ": keepalive" in seen
    assert not any(line.startswith("data: {") for line in seen)
