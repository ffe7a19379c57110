"""FAKE-01, FAKE-02, FAKE-04 over stdio: the fake answers exactly as mempalace 3.11.0 did.

Where a capture exists (``data/``), replies are compared byte for byte, which also pins the
framing: ``json.dumps`` default separators and raw UTF-8.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .stdio_harness import DATA, STDIN_EOF_LINE, FakeProcess, payload, rpc

CAPTURED = json.loads((DATA / "captured_stdio_exchanges.json").read_text(encoding="utf-8"))
TOOLS_LIST = json.loads((DATA / "mempalace-3.11-tools_list.json").read_text(encoding="utf-8"))
SUPPORTED = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeProcess]:
    with FakeProcess(tmp_path_factory.mktemp("protocol")) as proc:
        yield proc


@pytest.fixture
def fake(shared: FakeProcess) -> Iterator[FakeProcess]:
    """One process for the stateless checks; each must leave nothing unread behind it."""
    yield shared
    assert shared.alive() and shared.sync() == []


@pytest.fixture
def own(tmp_path: Path) -> Iterator[FakeProcess]:
    """A process of its own, for tests that end it or read its stderr."""
    with FakeProcess(tmp_path) as proc:
        yield proc


# -- FAKE-01: the catalogue -------------------------------------------------------------------


def test_tools_list_is_the_captured_catalogue_byte_for_byte(fake: FakeProcess) -> None:
    fake.send(rpc("tools/list", None, 2))
    line = fake.recv_line().decode()
    expected = {"jsonrpc": "2.0", "id": 2, "result": TOOLS_LIST["result"]}
    assert line == json.dumps(expected, ensure_ascii=False) + "\n"
    tools = json.loads(line)["result"]["tools"]
    assert len(tools) == 47
    assert "nextCursor" not in json.loads(line)["result"]
    read_only = [t["name"] for t in tools if t.get("annotations") == {"readOnlyHint": True}]
    assert "mempalace_status" in read_only and "mempalace_diary_write" not in read_only
    assert all(set(t) <= {"name", "description", "inputSchema", "annotations"} for t in tools)


def test_tools_list_ignores_params_and_pagination(fake: FakeProcess) -> None:
    reply = fake.request("tools/list", {"cursor": "page-2"})
    assert reply["result"] == TOOLS_LIST["result"]


# -- replays of captured exchanges -------------------------------------------------------------


@pytest.mark.parametrize("session", CAPTURED["sessions"], ids=lambda s: s["session"])
def test_replay_captured_session(tmp_path: Path, session: dict[str, Any]) -> None:
    state = None
    if "palace" in session:  # what the real palace already held when the session ran
        state = tmp_path / "state.json"
        events = session["palace"]["events"]
        state.write_text(json.dumps({"events": events,
                                     "replica": events[0]["origin_replica"]}), encoding="utf-8")
    with FakeProcess(tmp_path, state=state) as fake:
        for step in session["steps"]:
            fake.send(step["send"])
            for expected in step["expect"]:
                assert fake.recv_line().decode() == expected + "\n", step["send"]
        fake.send(rpc("ping", None, "sentinel"))  # nothing else may be in the pipe before it
        assert fake.recv() == {"jsonrpc": "2.0", "id": "sentinel", "result": {}}


# -- FAKE-02: initialize, ping, notifications --------------------------------------------------


@pytest.mark.parametrize("version", SUPPORTED)
def test_initialize_echoes_a_supported_version(fake: FakeProcess, version: str) -> None:
    reply = fake.request("initialize", {"protocolVersion": version, "capabilities": {}})
    assert reply["result"] == {"protocolVersion": version, "capabilities": {"tools": {}},
                               "serverInfo": {"name": "mempalace", "version": "3.11.0"}}


@pytest.mark.parametrize(("params", "expected"), [
    ({"protocolVersion": "1999-01-01"}, "2025-11-25"),  # unknown: the newest
    ({"protocolVersion": "2026-07-28"}, "2025-11-25"),
    ({}, "2024-11-05"),                                 # missing: the oldest (3.11 quirk)
    (None, "2024-11-05"),                               # no params at all
    ([], "2024-11-05"),                                 # by-position params read as {}
    ({"protocolVersion": None}, "2025-11-25"),          # present but null: not supported
])
def test_initialize_version_negotiation(fake: FakeProcess, params: Any, expected: str) -> None:
    reply = fake.request("initialize", params)
    assert list(reply) == ["jsonrpc", "id", "result"]
    assert list(reply["result"]) == ["protocolVersion", "capabilities", "serverInfo"]
    assert reply["result"]["protocolVersion"] == expected


def test_handshake_holds_no_state(fake: FakeProcess) -> None:
    assert len(fake.request("tools/list")["result"]["tools"]) == 47  # before initialize
    assert "total_drawers" in payload(fake.call("mempalace_status"))
    first = fake.request("initialize", {"protocolVersion": "2025-06-18"})
    again = fake.request("initialize", {"protocolVersion": "2025-03-26"})
    assert first["result"]["protocolVersion"] == "2025-06-18"
    assert again["result"]["protocolVersion"] == "2025-03-26"


def test_ping_is_an_empty_result(fake: FakeProcess) -> None:
    fake.send(rpc("ping", None, 5))
    assert fake.recv_line() == b'{"jsonrpc": "2.0", "id": 5, "result": {}}\n'


def test_notifications_are_silent(fake: FakeProcess) -> None:
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "method": "notifications/anything-at-all", "params": []},
        {"jsonrpc": "2.0", "id": 77, "method": "notifications/with-an-id"},
    ):
        fake.send(message)
    fake.send(rpc("ping", None, "after"))
    assert fake.recv()["id"] == "after"
    fake.assert_silent(0.2)


def test_cancel_is_ignored_and_the_call_still_answers(fake: FakeProcess) -> None:
    fake.send(rpc("tools/call", {"name": "mempalace_event_wait",
                                 "arguments": {"stream": "nothing", "timeout_ms": 300}}, 3))
    fake.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": 3, "reason": "test"}})
    fake.send(rpc("ping", None, 4))
    first, second = fake.recv(), fake.recv()
    assert first["id"] == 3 and payload(first) == {"timed_out": True, "events": [], "count": 0}
    assert second == {"jsonrpc": "2.0", "id": 4, "result": {}}


@pytest.mark.parametrize("method", ["ping", "initialize", "tools/list", "tools/call"])
@pytest.mark.parametrize("explicit_null", [False, True])
def test_idless_served_methods_answer_with_null_id(fake: FakeProcess, method: str,
                                                   explicit_null: bool) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if explicit_null:
        message["id"] = None
    if method == "tools/call":
        message["params"] = {"name": "mempalace_kg_stats", "arguments": {}}
    fake.send(message)
    reply = fake.recv()
    assert reply["id"] is None and "result" in reply


def test_unknown_methods(fake: FakeProcess) -> None:
    fake.send(rpc("resources/list", None, 10))
    assert fake.recv_line() == (b'{"jsonrpc": "2.0", "id": 10, "error": {"code": -32601, '
                                b'"message": "Unknown method: resources/list"}}\n')
    # server/discover (the mcp 2.x probe) must be refused at once so the client falls back
    reply = fake.request("server/discover", {})
    assert reply["error"] == {"code": -32601, "message": "Unknown method: server/discover"}
    fake.send({"jsonrpc": "2.0", "method": "resources/list"})   # no id: silence
    fake.send({"jsonrpc": "2.0", "id": None, "method": "prompts/list"})  # null id: silence too
    fake.send({"jsonrpc": "2.0"})                                # no method, no id: silence
    fake.ping()
    fake.assert_silent(0.2)


@pytest.mark.parametrize(("method", "type_name"), [(None, "NoneType"), (7, "int"),
                                                   (["ping"], "list"), ({}, "dict")])
def test_method_that_is_not_a_string(fake: FakeProcess, method: Any, type_name: str) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 6}
    if method is not None:
        message["method"] = method
    fake.send(message)
    assert fake.recv()["error"] == {
        "code": -32601, "message": f"Unknown method: expected a string, got {type_name}"}


def test_stray_response_is_treated_like_a_request_without_method(fake: FakeProcess) -> None:
    # mempalace never sends requests, so a "response" is just a message with no method
    fake.send({"jsonrpc": "2.0", "id": 12, "result": {}})
    assert fake.recv()["error"]["message"] == "Unknown method: expected a string, got NoneType"


@pytest.mark.parametrize("line", ["{not json", "Content-Length: 52", '{"jsonrpc": "2.0", "id": 1',
                                  "\x00", "nul", b"\xff\xfe{}"])
def test_bad_json_is_a_parse_error_with_null_id(fake: FakeProcess, line: str | bytes) -> None:
    fake.send(line)
    assert fake.recv_line() == (b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, '
                                b'"message": "Parse error"}}\n')


def test_parse_errors_are_logged_like_mempalace(own: FakeProcess) -> None:
    own.send("Content-Length: 52")
    own.recv()
    own.send("[]")
    own.recv()
    own.close_stdin()
    assert own.finish() == 0
    lines = own.stderr_text().splitlines()
    assert lines[0] == "MemPalace MCP Server starting..."
    assert "Server error: JSONDecodeError: Expecting value: line 1 column 1 (char 0)" in lines
    assert sum(line.startswith("Server error") for line in lines) == 1  # not for the batch


@pytest.mark.parametrize("value", ["[]", '[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]',
                                   "1", '"ping"', "null", "true", "3.5"])
def test_batches_and_other_json_values_are_invalid_requests(fake: FakeProcess,
                                                            value: str) -> None:
    fake.send(value)
    assert fake.recv_line() == (b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32600, '
                                b'"message": "Invalid Request"}}\n')


@pytest.mark.parametrize("request_id", ["str-id", "", 0, -1, 2**53, 1.5, "\u00e9\u2192"])
def test_ids_are_echoed_exactly(fake: FakeProcess, request_id: Any) -> None:
    fake.send(rpc("ping", None, request_id))
    line = fake.recv_line()
    assert line == json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}},
                              ensure_ascii=False).encode() + b"\n"


# -- framing --------------------------------------------------------------------------------


def test_non_ascii_is_written_raw(fake: FakeProcess) -> None:
    fake.send(rpc("tools/call", {"name": "mempalace_kg_add", "arguments": {
        "subject": "caf\u00e9", "predicate": "is", "object": "\u65e5\u672c"}}, 1))
    line = fake.recv_line()
    assert "\u2192".encode() in line and b"\\u2192" not in line
    assert "caf\u00e9".encode() in line and "\u65e5\u672c".encode() in line
    assert payload(json.loads(line))["fact"] == "caf\u00e9 \u2192 is \u2192 \u65e5\u672c"


def test_whitespace_cr_and_blank_lines_are_tolerated(fake: FakeProcess) -> None:
    fake.send(b"")
    fake.send(b"   \t ")
    fake.send(b"\r")
    fake.send(b'  {"jsonrpc":"2.0","id":1,"method":"ping"}  \r')
    fake.send(b'{"jsonrpc":"2.0","id":2,"method":"ping"}', end=b"\r\n")
    assert fake.recv()["id"] == 1
    assert fake.recv()["id"] == 2
    fake.assert_silent(0.2)


def test_one_message_per_line_only(fake: FakeProcess) -> None:
    # two objects on one line are not a stream of messages: json.loads rejects the line
    fake.send('{"jsonrpc":"2.0","id":1,"method":"ping"} {"jsonrpc":"2.0","id":2,"method":"ping"}')
    assert fake.recv()["error"]["code"] == -32700
    # a message split across writes is one line once the newline arrives
    fake.send(b'{"jsonrpc":"2.0",', end=b"")
    fake.assert_silent(0.2)
    fake.send(b'"id":3,"method":"ping"}')
    assert fake.recv()["id"] == 3


def test_every_output_line_is_one_json_object(fake: FakeProcess) -> None:
    fake.send("\n".join(['{"jsonrpc":"2.0","id":1,"method":"ping"}', "{oops",
                         '{"jsonrpc":"2.0","id":2,"method":"tools/list"}']))
    lines = [fake.recv_line() for _ in range(3)]
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    assert [json.loads(line)["id"] for line in lines] == [1, None, 2]


# -- FAKE-04: ordering and shutdown ----------------------------------------------------------


def test_requests_are_answered_strictly_in_order(fake: FakeProcess) -> None:
    """mempalace's loop is sequential: a ping behind a 500 ms event_wait waits for it."""
    sent = time.monotonic()
    fake.send(rpc("tools/call", {"name": "mempalace_event_wait",
                                 "arguments": {"stream": "s", "timeout_ms": 500}}, 1))
    fake.send(rpc("ping", None, 2))
    (t1, first), (t2, second) = fake.recv_timed(), fake.recv_timed()
    assert [first["id"], second["id"]] == [1, 2]
    assert t1 - sent >= 0.5 and t2 - sent >= 0.5


def test_stdin_eof_exits_zero_with_mempalace_log_line(own: FakeProcess) -> None:
    own.ping()
    own.close_stdin()
    assert own.finish() == 0
    assert own.stderr_text().splitlines()[-1] == STDIN_EOF_LINE
    assert own.records("process_exit")[-1]["reason"] == "stdin EOF"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_exit_zero(own: FakeProcess, signum: int) -> None:
    own.ping()
    started = time.monotonic()
    own.signal(signum)
    assert own.wait() == 0
    assert time.monotonic() - started < 5
    assert own.records("signal")[-1]["signal"] == signal.Signals(signum).name


def test_sigterm_while_a_request_is_in_flight_still_exits_zero(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["stall@mempalace_search"]) as fake:
        fake.call("mempalace_diary_write", {"agent_name": "a", "entry": "takes the lease"})
        fake.send(rpc("tools/call", {"name": "mempalace_search", "arguments": {"query": "x"}}, 9))
        fake.assert_silent(0.3)
        fake.signal(signal.SIGTERM)
        assert fake.wait() == 0


def test_stdout_carries_only_json_and_logs_go_to_stderr(own: FakeProcess) -> None:
    own.call("mempalace_diary_write", {"agent_name": "a", "entry": "x"})
    own.close_stdin()
    assert own.finish() == 0
    assert own.lines.empty()
    assert own.stderr_text().startswith("MemPalace MCP Server starting...\n")
