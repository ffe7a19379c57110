"""Errors a bridge surfaces as ``isError: true`` results: read as the error they report, judged
at core by what they tell, held to thrown errors at seed or when the profile says ``throw``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from palace_conformance.runner.results import CORE, SEED, StepRecord, scenario_status
from palace_conformance.runner.verdict.judge import Observation, judge
from palace_conformance.runner.verdict.surfaced import NO_DATA, surfaced_error
from palace_conformance.scenarios.model import Scenario


def is_error(text: str, **details: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "is_error": True}
    if details:
        result["details"] = details
    return result


@pytest.mark.parametrize(("result", "kind", "told_by"), [
    (is_error("MemPalace error -32602: Unknown parameter 'agent'"), "tool_error", "text"),
    (is_error("failed", error={"code": -32001, "message": "Peer MCP writer active"}),
     "tool_error", "details"),
    (is_error("failed", error={"kind": "session_lost"}), "session_lost", "details"),
    (is_error("failed", error={"status": 401}), "auth", "details"),
    (is_error("failed", error={"status": 503}), "http_error", "details"),
    (is_error("call failed: MemPalace tools/call timed out after 300 ms"), "timeout", "text"),
    (is_error("call failed: connection closed: mempalace-mcp exited (code 1)"),
     "connection_closed", "text"),
    (is_error("the palace answered HTTP 500"), "http_error", "text"),
    (is_error("MemPalace is not running; restart pi"), None, ""),
])
def test_the_kind_is_told_by_details_first_then_by_the_text(result: dict[str, Any],
                                                            kind: str | None,
                                                            told_by: str) -> None:
    error = surfaced_error(result)
    assert error is not None
    assert (error.kind, error.told_by) == (kind, told_by)


def test_code_message_and_data_come_from_details_else_from_the_text() -> None:
    detailed = surfaced_error(is_error("MemPalace error", error={
        "code": -32000, "message": "Internal tool error", "data": {"error_class": "ValueError"}}))
    assert detailed is not None
    assert detailed.code == -32000 and detailed.data == {"error_class": "ValueError"}
    assert "MemPalace error" in detailed.message and "Internal tool error" in detailed.message
    texted = surfaced_error(is_error('error -32001: Peer MCP writer active {"holder": "pid 7"}'))
    assert texted is not None
    assert texted.code == -32001 and texted.data == {"holder": "pid 7"}
    bare = surfaced_error(is_error("something broke"))
    assert bare is not None and bare.code is None and bare.data is NO_DATA


def test_only_an_is_error_result_is_an_error() -> None:
    assert surfaced_error({"content": [{"type": "text", "text": "timed out"}],
                           "is_error": False}) is None
    assert surfaced_error(None) is None and surfaced_error("text") is None


def scenario(expect: dict[str, Any]) -> Scenario:
    data = {"schema_version": 1, "id": "tool.surfaced.case", "title": "t", "covers": ["TOOL-04"],
            "transports": ["stdio"], "steps": [
                {"op": "load"},
                {"op": "call_tool", "name": "mempalace_diary_read", "args": {}, "expect": expect}]}
    return Scenario.from_json(data, Path("tool.surfaced.case.json"))


def observe(case: Scenario, result: dict[str, Any],
            channel: str | None = None) -> dict[str, tuple[str, str]]:
    steps = [StepRecord(0, "0", "load", ran=True, ok=True),
             StepRecord(1, "1", "call_tool", ran=True, ok=True, result=result)]
    records = judge(Observation(case, "stdio", steps, [], errors_channel=channel))
    return {c.pointer: (c.status, c.level) for c in records}


TOOL_ERROR = {"error": {"kind": "tool_error", "code": -32602,
                        "message_contains": "Unknown parameter 'agent'",
                        "data": {"$eq": {"field": "agent"}}}}
RESULT = is_error("MemPalace error -32602: Unknown parameter 'agent' for tool diary_read",
                  error={"code": -32602, "message": "Unknown parameter 'agent'",
                         "data": {"field": "agent"}})


def test_a_palace_error_surfaced_as_is_error_passes_at_core_and_fails_at_seed() -> None:
    found = observe(scenario(TOOL_ERROR), RESULT)
    assert found["/steps/1/expect/ok"] == ("fail", SEED)  # the seed throws
    for part in ("kind", "code", "message_contains", "data"):
        assert found[f"/steps/1/expect/error/{part}"] == ("pass", CORE), part
    records = judge(Observation(scenario(TOOL_ERROR), "stdio", [
        StepRecord(0, "0", "load", ran=True, ok=True),
        StepRecord(1, "1", "call_tool", ran=True, ok=True, result=RESULT)], []))
    assert scenario_status(records, CORE) == "passed"
    assert scenario_status(records, SEED) == "failed"


def test_what_the_result_tells_is_judged_at_core() -> None:
    wrong = is_error("MemPalace error -32603: Internal error", error={"code": -32603,
                                                                     "message": "Internal error"})
    found = observe(scenario(TOOL_ERROR), wrong)
    assert found["/steps/1/expect/error/kind"] == ("pass", CORE)
    assert found["/steps/1/expect/error/code"] == ("fail", CORE)
    assert found["/steps/1/expect/error/message_contains"] == ("fail", CORE)
    assert found["/steps/1/expect/error/data"] == ("fail", CORE)  # the palace's data was lost
    timeout = observe(scenario({"error": {"kind": "connection_closed"}}),
                      is_error("call failed: tools/call timed out after 5000 ms"))
    assert timeout["/steps/1/expect/error/kind"] == ("fail", CORE)


def test_a_kind_the_result_cannot_tell_is_a_seed_note() -> None:
    found = observe(scenario({"error": {"kind": "unavailable"}}),
                    is_error("MemPalace is not running; restart pi"))
    assert found["/steps/1/expect/error/kind"] == ("fail", SEED)
    assert found["/steps/1/expect/ok"] == ("fail", SEED)


def test_a_bridge_whose_profile_says_throw_is_held_to_thrown_errors() -> None:
    found = observe(scenario(TOOL_ERROR), RESULT, channel="throw")
    assert found["/steps/1/expect/ok"] == ("fail", CORE)
    assert found["/steps/1/expect/error/kind"] == ("fail", CORE)


def test_an_expected_is_error_result_is_still_a_result() -> None:
    found = observe(scenario({"ok": True, "result": {"is_error": True}}),
                    is_error("no such room"))
    assert found["/steps/1/expect/ok"] == ("pass", CORE)
    assert found["/steps/1/expect/result"] == ("pass", CORE)


def test_the_wording_rules_are_the_node_hosts_own() -> None:
    """A thrown error's message and an isError result's text are read by the same rules."""
    import re

    from palace_conformance.runner.verdict import surfaced

    source = (Path(surfaced.__file__).resolve().parents[2] / "hosts" / "pi" / "lib"
              / "errors.mjs").read_text()
    table = source.split("const BY_MESSAGE = [", 1)[1].split("\n];", 1)[0]
    node = re.findall(r'\[/(.+?)/i,\s*"([a-z_]+)"\]', table, re.DOTALL)
    assert node and [(p.pattern, k) for p, k in surfaced.WORDING_RULES] == node


def test_a_server_process_that_exited_is_a_closed_connection() -> None:
    """"MCP server process exited" (pi-mcp-adapter's words for a dead child) is the connection
    closing, not an unknown exception; so are the child's and the server's own wordings."""
    from palace_conformance.runner.verdict import surfaced

    def kind(text: str) -> str | None:
        return next((k for p, k in surfaced.WORDING_RULES if p.search(text)), None)

    for text in ("MCP server process exited (code 1)", "server exited unexpectedly",
                 "child process exited with signal SIGKILL"):
        assert kind(text) == "connection_closed", text
    assert kind("the process exits cleanly") is None
