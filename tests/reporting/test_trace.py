"""The trace normaliser: two runs that differ only in volatile values give identical traces, and
a real behaviour change still shows."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from palace_conformance.runner.reports.trace import build_trace, dumps
from palace_conformance.runner.results import ScenarioResult, StepRecord

TOOL = {"name": "mempalace_status", "description": "Palace overview",
        "inputSchema": {"type": "object", "properties": {}}}


def fake_run(*, tmp: str, port: int, pids: tuple[int, int], session: str, t0: float,
             stamp: str, token: str = "tok-abc123", error_kind: str = "timeout",
             schema_type: str = "object") -> ScenarioResult:
    """One HTTP run's record with its volatile values chosen by the caller."""
    url = f"http://127.0.0.1:{port}/mcp"
    tool = copy.deepcopy(TOOL)
    tool["inputSchema"]["type"] = schema_type
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    journal: list[dict[str, Any]] = [
        {"t": t0, "pid": pids[0], "transport": "http", "kind": "process_start",
         "argv": ["-c", "fake", "http", "--journal", f"{tmp}/journal.jsonl"]},
        {"t": t0 + 0.1, "pid": pids[0], "transport": "http", "kind": "http_request",
         "method": "POST", "path": "/mcp", "conn": 1,
         "headers": {"host": f"127.0.0.1:{port}", "user-agent": "x/1", "mcp-session-id": session,
                     "authorization": "Bearer <redacted>"}},
        {"t": t0 + 0.2, "pid": pids[0], "transport": "http", "kind": "session",
         "event": "opened", "session": session},
        {"t": t0 + 0.3, "pid": pids[0], "transport": "http", "kind": "send", "id": 7,
         "message": {"jsonrpc": "2.0", "id": 7, "result": {"tools": [tool]}}},
        {"t": t0 + 0.4, "pid": pids[1], "transport": "http", "kind": "fault",
         "fault_id": "stall-search", "action": "stall"},
        {"t": t0 + 0.5, "pid": pids[1], "transport": "http", "kind": "send", "id": 8,
         "message": {"jsonrpc": "2.0", "id": 8, "result": {"content": [
             {"type": "text", "text": f'{{"drawer_id": "drawer_{stamp}_9f", "when": "{today}", '
                                      f'"filed": "{today}T10:00:00Z", "fixture": "2026-08-06"}}'}
         ]}}},
    ]
    steps = [
        StepRecord(index=0, key="0", op="load", ran=True, ok=True,
                   request={"op": "load", "timeout_ms": 15000, "cwd": tmp,
                            "env": {"HOME": f"{tmp}/home", "MEMPALACE_REMOTE_URL": url}},
                   result={"tools": ["mempalace_status"]}, elapsed_ms=12.5, host_ms=3.0,
                   effects=[{"kind": "tool_registered", **copy.deepcopy(tool)}]),
        StepRecord(index=1, key="slow", op="call_tool", ran=True, ok=False,
                   request={"op": "call_tool", "name": "mempalace_search",
                            "args": {"query": "q"}, "timeout_ms": 300},
                   error={"kind": error_kind, "message": f"request to {url} timed out; "
                          f"child {pids[1]} killed; session {session}; token {token}"},
                   effects=[{"kind": "stderr", "line": f"[{stamp[:8]}T{stamp[9:]}] retry "
                             f"127.0.0.1:{port + 1}"}]),
        StepRecord(index=2, key="never", op="settle", ran=False, failure="not run: host died"),
    ]
    return ScenarioResult(scenario="http.x.y", transport="http", status="failed",
                          env={"HOME": f"{tmp}/home", "MEMPALACE_REMOTE_URL": url},
                          steps=steps, journal=journal)


FIRST = {"tmp": "/tmp/pc-run-aaaa", "port": 41000, "pids": (1234, 5678),
         "session": "5f1c0a9e2b7d4c3e8a6b1d0f9e8c7b6a", "t0": 100.0, "stamp": "20261130_065702"}
SECOND = {"tmp": "/var/folders/pc-run-zzzz", "port": 52999, "pids": (98765, 43210),
          "session": "0b9e4f2d7a1c4e6b8d3f5a2c9e7b1d40", "t0": 9999.5, "stamp": "20270101_235959"}


def test_volatile_values_do_not_change_the_trace() -> None:
    one = build_trace(fake_run(**FIRST), secrets=["tok-abc123"])
    two = build_trace(fake_run(**SECOND), secrets=["tok-abc123"])
    assert dumps(one) == dumps(two)


def test_behaviour_changes_do_change_the_trace() -> None:
    base = dumps(build_trace(fake_run(**FIRST)))
    assert dumps(build_trace(fake_run(**FIRST, error_kind="unavailable"))) != base
    assert dumps(build_trace(fake_run(**FIRST, schema_type="array"))) != base


def test_what_the_canonical_trace_looks_like() -> None:
    trace = build_trace(fake_run(**FIRST), secrets=["tok-abc123"])
    assert (trace["format"], trace["scenario"], trace["transport"], trace["status"]) == (
        1, "http.x.y", "http", "failed")
    load, slow, never = trace["steps"]
    assert "request" not in load  # only the runner's budget, env and cwd: dropped
    assert "elapsed_ms" not in load and "host_ms" not in load
    assert load["effects"][0]["kind"] == "tool_registered"
    assert load["effects"][0]["digest"].startswith("sha256:")
    assert "inputSchema" not in load["effects"][0]
    assert slow["request"] == {"name": "mempalace_search", "args": {"query": "q"}}
    assert slow["error"]["message"] == ("request to ${FAKE_URL} timed out; child <pid-2> "
                                        "killed; session <session-1>; token <secret>")
    assert slow["effects"] == [{"kind": "stderr", "line": "[<time>] retry 127.0.0.1:<port>"}]
    assert never == {"key": "never", "op": "settle", "ran": False,
                     "failure": "not run: host died"}

    start, request, session, tools, fault, reply = trace["journal"]
    assert "t" not in start and start["pid"] == "<pid-1>" and fault["pid"] == "<pid-2>"
    assert start["argv"][-1] == "${TMP}/journal.jsonl"
    assert request["headers"] == {"mcp-session-id": "<session-1>",
                                  "authorization": "Bearer <redacted>"}
    assert session["session"] == "<session-1>"
    assert tools["id"] == tools["message"]["id"] == "<id-1>"
    assert tools["message"]["result"]["tools"][0] == {
        "name": "mempalace_status", "digest": load["effects"][0]["digest"]}
    assert fault["fault_id"] == "stall-search"  # the fixture's own name stays
    text = reply["message"]["result"]["content"][0]
    assert text["type"] == "text" and text["json"] == {
        "drawer_id": "<id-3>", "when": "<date>", "filed": "<time>", "fixture": "2026-08-06"}


def test_same_tool_same_digest_everywhere() -> None:
    trace = build_trace(fake_run(**FIRST))
    effect_digest = trace["steps"][0]["effects"][0]["digest"]
    listed = trace["journal"][3]["message"]["result"]["tools"][0]["digest"]
    # the effect carries the bridge's view (no annotations here), the list the server's: the
    # same definition gives the same digest
    assert effect_digest == listed


def test_the_file_form_is_stable_json() -> None:
    text = dumps(build_trace(fake_run(**FIRST)))
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert "\\u" not in text  # non-ASCII kept readable


def test_a_date_the_fixture_states_is_kept_even_on_that_day() -> None:
    """The fixture's own dates are data, not the clock: kept even when they equal today."""
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    run = fake_run(**FIRST)
    masked = build_trace(run)["journal"][5]["message"]["result"]["content"][0]["json"]
    kept = build_trace(run, fixture={"palace": {"diary": [{"entry": f"SESSION:{today}"}]}})
    assert masked["when"] == "<date>"
    assert kept["journal"][5]["message"]["result"]["content"][0]["json"]["when"] == today
