"""The judge on hand-made observations: nothing unjudged passes, records say expected vs got."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from palace_conformance.runner.results import StepRecord
from palace_conformance.runner.verdict.judge import Observation, judge
from palace_conformance.scenarios.model import Scenario


def scenario(steps: list[dict[str, Any]], expect: dict[str, Any] | None = None) -> Scenario:
    data = {"schema_version": 1, "id": "tool.judge.case", "title": "t", "covers": ["TOOL-03"],
            "transports": ["stdio"], "steps": steps, "expect": expect or {}}
    return Scenario.from_json(data, Path("tool.judge.case.json"))


def ran(index: int, op: str, **fields: Any) -> StepRecord:
    return StepRecord(**{"index": index, "key": str(index), "op": op, "ran": True, "ok": True,
                         "elapsed_ms": 5.0, **fields})


def verdicts(observation: Observation) -> dict[str, tuple[str, str]]:
    return {c.pointer: (c.status, c.message) for c in judge(observation)}


CALL = {"op": "call_tool", "name": "mempalace_search", "args": {"query": "q"}}


def test_expectations_of_a_step_that_never_ran_all_fail() -> None:
    case = scenario([{"op": "load"}, {**CALL, "expect": {
        "error": {"kind": "timeout", "code": 1}, "elapsed_ms": {"at_least": 300},
        "journal": [{"check": "count", "match": {"kind": "recv"}, "equals": 1}]}}])
    steps = [ran(0, "load"), StepRecord(1, "1", "call_tool",
                                        failure="not run: host exited during 'load'")]
    found = verdicts(Observation(case, "stdio", steps, journal=[]))
    for pointer in ("/steps/1", "/steps/1/expect/error/kind", "/steps/1/expect/error/code",
                    "/steps/1/expect/elapsed_ms", "/steps/1/expect/journal/0"):
        assert found[pointer][0] == "fail", pointer
    assert "host exited during 'load'" in found["/steps/1/expect/error/kind"][1]


def test_an_expected_error_on_a_successful_op_fails_and_shows_the_result() -> None:
    case = scenario([{"op": "load"}, {**CALL, "expect": {"error": {"kind": "timeout"}}}])
    result = {"content": [{"type": "text", "text": "{\"hits\": 0}"}], "is_error": False}
    found = verdicts(Observation(case, "stdio", [ran(0, "load"), ran(1, "call_tool",
                                                                    result=result)], []))
    status, message = found["/steps/1/expect/error/kind"]
    assert status == "fail" and message.startswith("expected an error, but the op succeeded")
    assert "hits" in message


def test_host_level_errors_fail_the_step_even_without_expectations() -> None:
    case = scenario([{"op": "load"}, {"op": "settle"}, CALL])
    steps = [ran(0, "load"),
             ran(1, "settle", ok=False, error={"kind": "host_timeout", "message": "slow"}),
             ran(2, "call_tool", ok=False, error={"kind": "timeout", "message": "bridge"})]
    found = verdicts(Observation(case, "stdio", steps, []))
    assert found["/steps/1"][0] == "fail" and "host_timeout: slow" in found["/steps/1"][1]
    assert found["/steps/2"] == ("pass", "call_tool completed: ok: false (timeout)")


def test_a_settle_the_host_could_not_keep_fails_whatever_its_kind() -> None:
    """A settle is the host's own wait: an exception there means its window was not kept."""
    case = scenario([{"op": "load"}, {"op": "settle"}, {"op": "settle"}])
    steps = [ran(0, "load"),
             ran(1, "settle", ok=False, error={"kind": "exception", "message": "TypeError: x"}),
             ran(2, "settle")]
    found = verdicts(Observation(case, "stdio", steps, []))
    assert found["/steps/1"][0] == "fail" and "exception: TypeError: x" in found["/steps/1"][1]
    assert found["/steps/2"] == ("pass", "settle completed: ok")


def test_timing_results_effects_and_step_journal_windows() -> None:
    case = scenario([{"op": "load"}, {**CALL, "expect": {
        "ok": True, "elapsed_ms": {"at_least": 300, "slack_ms": 100},
        "result": {"json": {"hits": {"$gte": 1}}},
        "effects": [{"check": "absent", "match": {"kind": "stderr"}}],
        "journal": [{"check": "count", "match": {"kind": "recv"}, "equals": 1}]}}])
    result = {"content": [{"type": "text", "text": "{\"hits\": 0}"}], "is_error": False}
    call = ran(1, "call_tool", result=result, effects=[{"kind": "stderr", "line": "x"}],
               journal_start=1, journal_end=2)
    call.elapsed_ms = 650.0
    journal = [{"kind": "recv"}, {"kind": "recv"}, {"kind": "recv"}]
    found = verdicts(Observation(case, "stdio", [ran(0, "load"), call], journal))
    assert found["/steps/1/expect/ok"][0] == "pass"
    assert found["/steps/1/expect/elapsed_ms"] == (
        "fail", "took 650 ms; expected 300..400 ms (300 + 100 slack)")
    assert found["/steps/1/expect/result"] == (
        "fail", "result: at /json/hits: expected {\"$gte\": 1}, got 0")
    assert found["/steps/1/expect/effects/0"][0] == "fail"
    assert found["/steps/1/expect/journal/0"][0] == "pass"  # only record #1 is in the window


def test_scenario_tools_processes_and_secrets() -> None:
    case = scenario([{"op": "load"}], {
        "tools": {"registered": "none"},
        "processes": {"spawned": 1, "signals": {"SIGKILL": 0}, "alive_after_shutdown": 0},
        "wire_secrets": ["tok-secret-123", "tok-unused-999"]})
    facts = {"spawned": 1, "signals": {"SIGKILL": 1}, "alive": 0}
    observation = Observation(case, "stdio", [ran(0, "load")], [], final_tools=None,
                              facts=facts, secret_texts=["...Bearer tok-secret-123..."])
    found = verdicts(observation)
    assert found["/expect/tools/registered"][0] == "fail"
    assert found["/expect/processes/spawned"][0] == "pass"
    assert found["/expect/processes/signals/SIGKILL"] == (
        "fail", "processes: SIGKILL x1; expected exactly 0")
    assert found["/expect/processes/alive_after_shutdown"][0] == "pass"
    assert found["/expect/wire_secrets/0"][0] == "fail"
    assert "tok-secret-123" not in found["/expect/wire_secrets/0"][1]  # never repeat a secret
    assert found["/expect/wire_secrets/1"][0] == "pass"


def test_a_settle_window_includes_the_work_of_the_step_it_settles() -> None:
    """A poll an ``agent_settled`` starts may land in that event's window or the settle's, as
    the machine's load decides; the settle after it sees it either way (and only then)."""
    poll = {"check": "count", "match": {"kind": "recv", "tool": "poll"}, "at_least": 1}
    steer = {"check": "count", "match": {"kind": "message"}, "equals": 1}
    case = scenario([{"op": "load"}, {"op": "event", "name": "agent_settled", "payload": {}},
                     {"op": "settle", "expect": {"journal": [poll], "effects": [steer]}},
                     {"op": "sleep", "ms": 1},
                     {"op": "settle", "expect": {"journal": [poll]}}])
    journal = [{"kind": "recv", "tool": "init"}, {"kind": "recv", "tool": "poll"}]
    event = ran(1, "event", journal_start=1, journal_end=2, effects=[{"kind": "message"}])
    steps = [ran(0, "load", journal_end=1), event, ran(2, "settle", journal_start=2,
             journal_end=2), ran(3, "sleep", journal_start=2, journal_end=2),
             ran(4, "settle", journal_start=2, journal_end=2)]
    found = verdicts(Observation(case, "stdio", steps, journal))
    assert found["/steps/2/expect/journal/0"][0] == "pass"  # the event's poll counts
    assert found["/steps/2/expect/effects/0"][0] == "pass"  # and so does its message
    assert found["/steps/4/expect/journal/0"][0] == "fail"  # a settle after a sleep: its own only


CALLS = {"op": "call_tools", "calls": [
    {"name": "mempalace_status"}, {"name": "mempalace_search", "args": {"query": "q"}}]}
FOUND = {"content": [{"type": "text", "text": "{\"query\": \"q\"}"}], "is_error": False}


def test_call_tools_judges_each_call_like_a_call_tool_step() -> None:
    case = scenario([{"op": "load"}, {**CALLS, "expect": {"ok": True, "calls": [
        {"error": {"kind": "session_lost"}},
        {"ok": True, "result": {"is_error": False, "json": {"query": "q"}}}]}}])
    answered = {"calls": [
        {"ok": False, "error": {"kind": "session_lost", "message": "gone"}, "ms": 3.0},
        {"ok": True, "result": FOUND, "ms": 4.0}]}
    found = verdicts(Observation(case, "stdio", [ran(0, "load"),
                                                 ran(1, "call_tools", result=answered)], []))
    for pointer in ("/steps/1", "/steps/1/expect/ok", "/steps/1/expect/calls/0/ok",
                    "/steps/1/expect/calls/0/error/kind", "/steps/1/expect/calls/1/ok",
                    "/steps/1/expect/calls/1/result"):
        assert found[pointer][0] == "pass", (pointer, found.get(pointer))


def test_call_tools_failures_point_at_the_call_and_say_expected_versus_got() -> None:
    case = scenario([{"op": "load"}, {**CALLS, "expect": {"calls": [
        {"ok": True}, {"error": {"kind": "timeout"}, "result": {"json": {"query": "other"}}}]}}])
    answered = {"calls": [
        {"ok": False, "error": {"kind": "session_lost", "message": "gone"}, "ms": 3.0},
        {"ok": True, "result": FOUND, "ms": 4.0}]}
    found = verdicts(Observation(case, "stdio", [ran(0, "load"),
                                                 ran(1, "call_tools", result=answered)], []))
    assert found["/steps/1/expect/calls/0/ok"] == (
        "fail", "expected ok true, got false (session_lost: gone)")
    status, message = found["/steps/1/expect/calls/1/error/kind"]
    assert status == "fail" and message.startswith("expected an error, but the op succeeded")
    assert found["/steps/1/expect/calls/1/result"] == (
        "fail", "result: at /json/query: expected \"other\", got \"q\"")


def test_call_tools_with_a_missing_answer_or_a_host_error_fails_loudly() -> None:
    case = scenario([{"op": "load"}, {**CALLS, "expect": {"calls": [{"ok": True},
                                                                     {"ok": True}]}},
                     {**CALLS, "as": "slow"}])
    short = {"calls": [{"ok": True, "result": FOUND, "ms": 1.0}]}
    slow = {"calls": [{"ok": True, "result": FOUND, "ms": 1.0},
                      {"ok": False, "error": {"kind": "host_timeout", "message": "late"}}]}
    steps = [ran(0, "load"), ran(1, "call_tools", result=short),
             StepRecord(2, "slow", "call_tools", ran=True, ok=True, result=slow)]
    found = verdicts(Observation(case, "stdio", steps, []))
    assert found["/steps/1/calls"] == ("fail", "call_tools: 2 calls, but the host sent 1 "
                                               "answer(s)")
    for pointer in ("/steps/1/expect/calls/0/ok", "/steps/1/expect/calls/1/ok"):
        assert found[pointer] == ("fail", "not judged: the host's answer does not hold one "
                                          "outcome per call")
    assert found["/steps/2/calls/1"] == (
        "fail", "call 1: the host could not complete it: host_timeout: late")


def test_call_tools_expectations_of_a_refused_op_are_not_judged_as_passes() -> None:
    case = scenario([{"op": "load"}, {**CALLS, "expect": {"calls": [{"ok": True},
                                                                     {"ok": True}]}}])
    refused = ran(1, "call_tools", ok=False, error={"kind": "bad_request",
                                                    "message": "unknown op 'call_tools'"})
    found = verdicts(Observation(case, "stdio", [ran(0, "load"), refused], []))
    assert found["/steps/1"][0] == "fail"
    assert found["/steps/1/expect/calls/0/ok"][0] == "fail"
    assert "not judged: the op failed" in found["/steps/1/expect/calls/0/ok"][1]
