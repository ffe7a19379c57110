"""The full observation's pieces: header normalisation, unpaced requests, references, the
first divergence in words."""

from __future__ import annotations

from palace_conformance.runner.compare import golden
from palace_conformance.runner.compare.observed import (
    LIBRARY_HEADERS,
    normalised_headers,
    requests,
    unpaced,
    whole_run,
    with_late_calls,
)
from palace_conformance.runner.compare.volatile import Masker
from palace_conformance.runner.results import ScenarioResult, StepRecord


def test_headers_are_normalised_and_the_librarys_own_left_out() -> None:
    got = normalised_headers({"Host": "127.0.0.1:4242", "User-Agent": "node", "Accept":
                              "text/event-stream,  application/json", "Content-Type":
                              "Application/JSON; charset=utf-8", "MCP-Protocol-Version":
                              "2025-11-25", "Mcp-Session-Id": "abc", "X-Own": "kept"})
    assert got == {"accept": ["application/json", "text/event-stream"],
                   "content-type": "application/json;charset=utf-8",
                   "mcp-protocol-version": "2025-11-25", "mcp-session-id": "abc",
                   "x-own": "kept"}
    assert {"host", "user-agent", "content-length"} <= set(LIBRARY_HEADERS)


def test_every_request_kind_is_observed_with_its_session_and_masked() -> None:
    session = "9f2c0d5e1b7a4c3d8e6f0a1b2c3d4e5f"
    records = [
        {"kind": "http_request", "method": "POST", "path": "/mcp", "conn": 1,
         "headers": {"mcp-session-id": session, "content-type": "application/json"}},
        {"kind": "recv", "conn": 1, "http": {}, "message": {"jsonrpc": "2.0",
                                                            "method": "notifications/initialized"}},
        {"kind": "http_request", "method": "DELETE", "path": "/mcp", "conn": 2,
         "headers": {"mcp-session-id": session}},
        {"kind": "http_request", "method": "GET", "path": "/mcp", "conn": 3,
         "headers": {"last-event-id": "7", "accept": "text/event-stream"}},
        {"kind": "recv", "message": {"jsonrpc": "2.0", "id": 9, "method": "ping"}},
    ]
    seen = requests({"step": records}, Masker())["step"]
    assert {"method": "DELETE", "path": "/mcp",
            "headers": {"mcp-session-id": "<session>"}} in seen
    assert {"method": "GET", "path": "/mcp", "headers": {
        "accept": ["text/event-stream"], "last-event-id": "7"}} in seen
    posted = next(r for r in seen if r.get("method") == "POST")
    assert posted["body"] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert posted["headers"]["mcp-session-id"] == "<session>"
    assert {"body": {"jsonrpc": "2.0", "id": "<id>", "method": "ping"}} in seen
    assert [unpaced(r) for r in seen].count(None) == 2  # the DELETE and the GET
    run = whole_run([seen, seen])
    assert len(run["notifications"]) == 2 and len(run["pings"]) == 1  # pings: distinct only


def test_registrations_are_kept_by_reference_and_expand_back() -> None:
    whole = {"name": "t", "description": "d" * 600, "parameters": {"type": "object"}}
    trace = {"registrations": {"steps": {"(start-up)": {"tools": {"t": whole}}}},
             "wire": {"steps": {}}}
    registry: dict[str, object] = {}
    compacted = golden.compact(trace, registry)
    ref = compacted["registrations"]["steps"]["(start-up)"]["tools"]["t"]
    assert ref == {"name": "t", golden.REF_KEY: golden._digest(whole)}
    assert golden.expand(compacted, registry) == trace


def test_the_first_divergence_walks_steps_in_run_order() -> None:
    result = ScenarioResult("s", "stdio", "passed", steps=[
        StepRecord(0, "0", "load"), StepRecord(1, "zeta", "call_tool"),
        StepRecord(2, "alpha", "call_tool")])
    expected = {"tool_results": {"steps": {"alpha": {"result": 1}, "zeta": {"result": 1}}}}
    got = {"tool_results": {"steps": {"alpha": {"result": 2}, "zeta": {"result": 2}}}}
    found = golden.first_divergence(expected, got, result)
    assert found is not None
    assert (found.category, found.step, found.field) == ("tool_results",
                                                         'step #1 call_tool "zeta"', "/result")
    assert "expected 1 | got 2" in found.message()
    assert golden.first_divergence(expected, expected, result) is None


def test_a_head_and_its_body_in_two_windows_are_one_request_of_the_heads() -> None:
    head = {"kind": "http_request", "method": "POST", "path": "/mcp", "conn": 4,
            "headers": {"content-type": "application/json"}}
    body = {"kind": "recv", "conn": 4, "http": {},
            "message": {"jsonrpc": "2.0", "method": "notifications/cancelled"}}
    refused = {"kind": "http_request", "method": "POST", "path": "/mcp", "conn": 5,
               "headers": {}}
    seen = requests({"a": [head, refused], "b": [body, {"kind": "http_response", "conn": 5,
                                                        "status": 404}]}, Masker())
    assert seen == {"a": [{"method": "POST", "path": "/mcp",
                           "headers": {"content-type": "application/json"},
                           "body": {"jsonrpc": "2.0", "method": "notifications/cancelled"}}],
                    "b": []}


def test_accept_on_a_delete_is_the_librarys_but_every_other_delete_header_is_observed() -> None:
    records = [{"kind": "http_request", "method": "DELETE", "path": "/mcp", "conn": 1,
                "headers": {"accept": "*/*", "mcp-session-id": "s", "mcp-protocol-version": "v"}},
               {"kind": "http_request", "method": "GET", "path": "/mcp", "conn": 2,
                "headers": {"accept": "*/*"}}]
    seen = {r["method"]: r for r in requests({"step": records}, Masker())["step"]}
    assert seen["DELETE"]["headers"] == {"mcp-session-id": "<session>",
                                         "mcp-protocol-version": "v"}
    assert seen["GET"]["headers"]["accept"] == ["*/*"]  # a GET's Accept is governed: observed


def test_a_timed_out_calls_request_is_its_steps_even_when_read_after_the_next_began() -> None:
    call = {"kind": "recv", "method": "tools/call", "tool": "mempalace_status",
            "message": {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                        "params": {"name": "mempalace_status", "arguments": {}}}}
    on_time = {"call": [call], "shutdown": []}
    read_late = {"call": [], "shutdown": [call]}
    never_read = {"call": [], "shutdown": []}
    moved = with_late_calls(read_late, {"call": "mempalace_status"})
    # over stdio one timed-out call is left out wherever, or whether, the child read it
    assert moved == never_read == with_late_calls(on_time, {"call": "mempalace_status"})
    assert with_late_calls(never_read, {"call": "mempalace_status"}) == never_read
    assert requests(moved, Masker()) == requests(
        with_late_calls(never_read, {"call": "mempalace_status"}), Masker())
    twice = {"call": [call, dict(call)], "shutdown": []}
    assert with_late_calls(twice, {"call": "mempalace_status"}) == on_time  # still extra
    # only a call that timed out, and only its own tool: anything else keeps its window
    assert with_late_calls(read_late, {}) == read_late
    assert with_late_calls(read_late, {"call": "mempalace_search"}) == read_late


def test_a_late_http_call_moves_with_its_head_and_only_the_first_one() -> None:
    def posted(conn: int) -> list[dict[str, object]]:
        return [{"kind": "http_request", "method": "POST", "path": "/mcp", "conn": conn,
                 "headers": {}},
                {"kind": "recv", "conn": conn, "http": {}, "method": "tools/call",
                 "tool": "t", "message": {"jsonrpc": "2.0", "id": conn,
                                          "method": "tools/call"}}]

    first, second = posted(1), posted(2)
    moved = with_late_calls({"call": [], "next": first + second}, {"call": "t"})
    assert moved == {"call": first, "next": second}  # a second call is still the next's


def test_a_stdio_cancel_is_the_timings_but_an_http_cancel_is_observed() -> None:
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": 4, "reason": "timeout"}}
    stdio = [{"body": cancel}]
    http = [{"method": "POST", "path": "/mcp", "headers": {}, "body": cancel}]
    assert whole_run([stdio])["notifications"] == []
    assert whole_run([http])["notifications"] == http


def test_a_cancels_request_id_is_masked_only_when_it_names_a_sent_request() -> None:
    """Which number a client library gives a request is the library's (the official SDK counts
    from 0, the reference from 1); naming the request it cancels, JSON type and all, is the
    bridge's: the fake's ``request_known`` says which, and an id naming nothing stays."""
    def cancel(request_id: object, known: bool) -> dict[str, object]:
        return {"kind": "recv", "known": known, "request_known": known, "message": {
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "Request timed out"}}}

    seen = requests({"0": [cancel(2, True), cancel(3, True), cancel("3", False)]}, Masker())["0"]
    ids = sorted((r["body"]["params"]["requestId"] for r in seen), key=str)
    assert ids == ["3", "<sent request id>", "<sent request id>"]
    # any other message keeps its fields, whatever the flag
    other = {"kind": "recv", "request_known": True, "message": {
        "jsonrpc": "2.0", "method": "notifications/progress", "params": {"requestId": 2}}}
    [kept] = requests({"0": [other]}, Masker())["0"]
    assert kept["body"]["params"]["requestId"] == 2


def test_a_post_the_bridge_hung_up_on_inside_its_body_is_the_timings_but_a_silent_one_is_not(
        ) -> None:
    # a keep-alive ping cut off by shutdown (headers sent, the body never): the palace answers
    # 400 to nobody; whether a ping was in flight at that moment is the clock's
    def post(conn: int) -> dict[str, object]:
        return {"kind": "http_request", "method": "POST", "path": "/mcp", "conn": conn,
                "headers": {}}

    seen = requests({"a": [
        post(7), {"kind": "http_body_unread", "conn": 7, "peer_closed": True},
        {"kind": "http_response", "conn": 7, "status": 400},
        # a bridge that sends a head and never its body, without hanging up, is still seen
        post(8), {"kind": "http_body_unread", "conn": 8, "peer_closed": False},
        {"kind": "http_response", "conn": 8, "status": 400}]}, Masker())
    assert seen == {"a": [{"method": "POST", "path": "/mcp", "headers": {}}]}


def test_a_sigterm_a_killed_deaf_child_journalled_is_the_clocks_one_that_exited_is_not() -> None:
    from palace_conformance.runner.compare.drift_trace import _killed_unheard

    journal = [{"kind": "process_start", "pid": 1}, {"kind": "process_start", "pid": 2},
               {"kind": "signal", "pid": 1, "signal": "SIGTERM", "action": "ignored"},
               {"kind": "signal", "pid": 2, "signal": "SIGTERM", "action": "ignored"},
               {"kind": "process_exit", "pid": 2, "code": 0}]
    # pid 1 was SIGKILLed (no exit of its own): had the kill come 1 ms sooner, the record
    # would not be there; pid 2 lived on and exited, so its ignoring is observed
    assert _killed_unheard(journal) == {1}
