"""The compact ``--fault`` syntax and fault-plan files: what parses, one-line errors otherwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake.faults import (
    ACTIONS,
    PLAN_SCHEMA_VERSION,
    SHOWN_SPEC,
    STARTUP,
    Fault,
    FaultPlanError,
    Match,
    load_plan,
    parse_compact,
    plan_from_json,
)

from .stdio_harness import FakeProcess, run_cli


@pytest.mark.parametrize(("spec", "on", "times", "action", "params"), [
    ("stall", {"nth": 1}, 1, "stall", {}),
    ("stall@mempalace_search", {"method": "tools/call", "tool": "mempalace_search", "nth": 1},
     1, "stall", {}),
    ("stall@mempalace_search#2,ms=500",
     {"method": "tools/call", "tool": "mempalace_search", "nth": 2}, 1, "stall", {"ms": 500}),
    ("delay@initialize,ms=2000", {"method": "initialize", "nth": 1}, 1, "delay", {"ms": 2000}),
    ("error@ping#2x2,code=-32000,message=x", {"method": "ping", "nth": 2}, 2, "error",
     {"code": -32000, "message": "x"}),
    ("error@pingx*,code=1", {"method": "ping", "nth": 1}, None, "error", {"code": 1}),
    ("stallx3", {"nth": 1}, 3, "stall", {}),
    ("exit@tools/call,code=75,when=before_reply", {"method": "tools/call", "nth": 1}, 1, "exit",
     {"code": 75, "when": "before_reply"}),
    ("startup_fail@$startupx2,code=1,stderr=palace is held by PID 42, or so",
     {"method": STARTUP, "nth": 1}, 2, "startup_fail",
     {"code": 1, "stderr": "palace is held by PID 42, or so"}),
    ('result@ping,result={"a": [1, 2]}', {"method": "ping", "nth": 1}, 1, "result",
     {"result": {"a": [1, 2]}}),
    ("notify@*,method=notifications/message", {"method": "*", "nth": 1}, 1, "notify",
     {"method": "notifications/message"}),
    ("wrong_id@ping, reply_id = 7", {"method": "ping", "nth": 1}, 1, "wrong_id",
     {"reply_id": 7}),
    # every=N is not a parameter: it goes to on.every and makes the default times forever
    ("forget_session@tools/call,every=5", {"method": "tools/call", "nth": 1, "every": 5}, None,
     "forget_session", {}),
    ("exit@mempalace_search#4x2,every=3,code=1",
     {"method": "tools/call", "tool": "mempalace_search", "nth": 4, "every": 3}, 2, "exit",
     {"code": 1}),
    ("startup_fail@$startup,stderr=held, for now,every=2", {"method": STARTUP, "nth": 1,
                                                            "every": 2}, None, "startup_fail",
     {"stderr": "held, for now"}),
])
def test_compact_specs_parse(spec: str, on: dict[str, Any], times: int | None, action: str,
                             params: dict[str, Any]) -> None:
    data = parse_compact(spec).to_json()
    expected_on = {"method": "*", **on}
    assert data["on"] == expected_on
    assert (data["times"], data["action"]) == (times, action)
    assert {k: v for k, v in data.items() if k not in {"id", "on", "times", "action"}} == params


@pytest.mark.parametrize(("spec", "fragment"), [
    ("bogus@x", "unknown action 'bogus'; use one of: "),
    ("", "unknown action ''"),
    ("stall@ping#0", "'#' must be followed by a number >= 1"),
    ("stall@ping#two", "'#' must be followed by a number >= 1"),
    ("stall@pingx0", "'x' must be followed by a number >= 1 or '*'"),
    ("stall@ping,foo=1", "action 'stall' takes ['ms'], not ['foo']"),
    ("stall@ping,ms=soon", "'ms' must be an integer >= 0"),
    ("stall@ping,500", "expected key=value after ',', got '500'"),
    ("error@ping", "error needs an integer 'code'"),
    ("error@ping,code=true", "error needs an integer 'code' (e.g. -32001), not true"),
    ("exit@ping,code=300", "'code' is a process exit status, 0 to 255"),
    ("exit@ping,when=later", "exit 'when' must be before_reply or after_reply"),
    ("stall@$startup", "action 'stall' cannot fire at $startup"),
    ("startup_fail@ping", "'startup_fail' fires only with on.method '$startup'"),
    ("notify@ping", "notify needs a 'method' string"),
    ("stall@ping,id=mine", "id cannot be set with key=value"),
    ("stall@ping,every=0", "'every' must be an integer >= 1 (5: the 5th, 10th, 15th... "
                           "matching message), not 0"),
    ("stall@ping,every=often", "'every' must be an integer >= 1"),
    ("stall@ping,every=2.5", "'every' must be an integer >= 1"),
    # a typo'd target is refused, never armed to fire on nothing
    ("stall@mempalace_serch", "no tool 'mempalace_serch' in mempalace 3.11.0's catalogue (did "
                              "you mean 'mempalace_search'?); a fault on it would never fire"),
    ("stall@tool/call", "the fake serves no method 'tool/call' (did you mean 'tools/call'?)"),
    ("stall@resources/list", "the fake serves no method 'resources/list'"),
])
def test_bad_compact_specs_give_one_clear_line(spec: str, fragment: str) -> None:
    with pytest.raises(FaultPlanError) as caught:
        parse_compact(spec)
    message = str(caught.value)
    assert message.startswith(f"--fault {spec!r}: ")
    assert fragment in message
    assert ": :" not in message and "\n" not in message


@pytest.mark.parametrize(("nth", "times", "fires_on"), [
    (1, 1, [1]), (2, 2, [2, 3]), (3, None, [3, 4, 5, 6, 7, 8]), (1, 3, [1, 2, 3])])
def test_fires_at_is_nth_through_nth_plus_times(nth: int, times: int | None,
                                                fires_on: list[int]) -> None:
    fault = Fault("f", Match(method="ping", nth=nth), "stall", times)
    assert [n for n in range(1, 9) if fault.fires_at(n)] == fires_on


@pytest.mark.parametrize(("nth", "every", "times", "fires_on"), [
    (1, 3, None, [3, 6, 9, 12, 15, 18]),  # every=N: exactly N, 2N, 3N...
    (1, 5, None, [5, 10, 15, 20]),
    (1, 3, 2, [3, 6]),  # times counts firings, not messages
    (4, 3, None, [6, 9, 12, 15, 18]),  # nth says from which one on
    (3, 3, 1, [3]),
    (2, 1, 2, [2, 3]),  # every=1 is the plain in-a-row rule
])
def test_every_n_fires_on_exactly_the_multiples_of_n(nth: int, every: int, times: int | None,
                                                       fires_on: list[int]) -> None:
    fault = Fault("f", Match(method="ping", nth=nth, every=every), "stall", times)
    assert [n for n in range(1, 21) if fault.fires_at(n)] == fires_on


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_every_n_is_accepted_for_every_action_on_both_transports(action: str) -> None:
    required = {"error": {"code": -1}, "http_status": {"status": 404},
                "answer_status": {"status": 203},
                "server_request": {"method": "roots/list"}, "notify": {"method": "n/x"},
                "negotiate_version": {"version": "2025-03-26"}, "rotate_token": {"token": "t"},
                "write_stderr": {"pieces": ["x"]}}
    on = {"method": STARTUP} if action in {"startup_fail", "ignore_sigterm",
                                           "spawn_grandchild"} else {"method": "ping"}
    fault = plan_from_json([{"action": action, "on": {**on, "every": 4},
                             **required.get(action, {})}]).faults[0]
    assert fault.on.every == 4 and fault.times is None
    assert [n for n in range(1, 13) if fault.fires_at(n)] == [4, 8, 12]
    for transport in ACTIONS[action][0]:
        assert plan_from_json([fault.to_json()]).for_transport(transport).faults == [fault]


@pytest.mark.parametrize(("data", "fragment"), [
    ({"faults": [{"action": "stall", "on": {"every": 0}}]}, "fault #1 (fault-1): 'on.every' "
                                                            "must be an integer >= 1"),
    ({"faults": [{"action": "stall", "on": {"every": True}}]}, "'on.every' must be an integer"),
    ({"faults": [{"action": "stall", "every": 5}]}, "'every' says which messages, so it goes in "
                                                    "'on'"),
    ({"schema_version": PLAN_SCHEMA_VERSION + 1, "faults": []},
     f"schema_version {PLAN_SCHEMA_VERSION + 1} is newer than this fake understands"),
    ({"faults": {"id": "x"}}, "'faults' must be a list"),
    ({"faults": [{"action": "stall", "on": {"nth": "2"}}]}, "'on.nth' must be an integer >= 1"),
    ({"faults": [{"action": "stall", "on": {"when": 1}}]}, "unknown key(s) in 'on'"),
    ({"faults": [{"id": "a", "action": "stall"}, {"id": "a", "action": "delay"}]},
     "duplicate fault id(s) ['a']"),
    ({"faults": [{"id": "t", "action": "stall", "times": 0}]}, "fault #1 (t): 'times'"),
    ("faults", "expected an object with 'faults'"),
    ({"faults": [{"action": "sse", "decoy_event": "message"}]},
     "sse 'decoy_event' must be an SSE event type other than message"),
    ({"faults": [{"action": "sse", "decoy_event": "err\nor"}]}, "'decoy_event' must be"),
    ({"faults": [{"action": "sse", "decoy_event": ""}]}, "'decoy_event' must be"),
    ({"faults": [{"action": "sse", "decoy_event": 3}]}, "'decoy_event' must be"),
    ({"faults": [{"action": "sse", "garbage_event": "{}"}]}, "'garbage_event' must be text"),
    ({"faults": [{"action": "sse", "garbage_event": "  "}]}, "'garbage_event' must be text"),
    ({"faults": [{"action": "sse", "garbage_event": 7}]}, "'garbage_event' must be text"),
    ({"faults": [{"action": "sse", "line_ending": "CRLF"}]}, "'line_ending' must be lf, crlf"),
    ({"faults": [{"action": "sse", "line_ending": 1}]},
     "'line_ending' must be lf, crlf, cr or mixed"),
    ({"faults": [{"action": "sse", "chunk_bytes": 0}]}, "'chunk_bytes' must be an integer >= 1"),
    ({"faults": [{"action": "sse", "chunk_bytes": -1}]}, "'chunk_bytes' must be an integer >= 1"),
    ({"faults": [{"action": "sse", "chunk_bytes": "2"}]}, "'chunk_bytes' must be an integer"),
    ({"faults": [{"action": "sse", "unknown_fields": "yes"}]}, "'unknown_fields' must be true"),
    ({"faults": [{"action": "sse", "no_retry": 1}]}, "'no_retry' must be true"),
    ({"faults": [{"action": "sse", "no_retry": True}]}, "'no_retry' leaves the retry field out"),
    ({"faults": [{"action": "sse", "no_retry": True, "priming_id": "e", "retry_ms": 300}]},
     "needs a 'priming_id' and no 'retry_ms'"),
    ({"faults": [{"action": "sse", "invalid_utf8": "no"}]}, "'invalid_utf8' must be true"),
])
def test_bad_plans_are_refused_with_one_line(data: Any, fragment: str) -> None:
    with pytest.raises(FaultPlanError) as caught:
        plan_from_json(data, source="plan.json")
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_plan_round_trips_through_json(tmp_path: Path) -> None:
    plan = plan_from_json({"faults": [parse_compact("error@ping#2x3,code=-1,message=m").to_json(),
                                      {"id": "s", "on": {"tool": "mempalace_search"},
                                       "action": "stall", "times": None}]})
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.to_json()))
    again = load_plan(path)
    assert again == plan
    assert again.faults[1].on == Match(method="tools/call", tool="mempalace_search")


def plan_file(tmp_path: Path, content: bytes | None) -> Path:
    path = tmp_path / "plan.json"
    if content is not None:
        path.write_bytes(content)
    return path


@pytest.mark.parametrize(("content", "fragment"), [
    (None, "cannot read fault plan"),
    (b"{not json", "is not JSON (line 1: "),
    (b'{"schema_version": 99, "faults": []}', "schema_version 99 is newer"),
    (b"\xff\xfe\x00", "is not UTF-8 text"),
])
def test_plan_errors_exit_2_with_one_line(tmp_path: Path, content: bytes | None,
                                          fragment: str) -> None:
    path = plan_file(tmp_path, content)
    with FakeProcess(tmp_path, plan=path) as fake:  # palace-fake-mcp, plan from the env
        assert fake.finish() == 2
        lines = fake.stderr_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("palace-fake-mcp: ") and fragment in lines[0]


def test_plan_errors_from_the_command_line_exit_2_with_one_line(tmp_path: Path) -> None:
    path = plan_file(tmp_path, b'{"schema_version": 99, "faults": []}')
    result = run_cli(["fake", "stdio", "--plan", str(path)], tmp_path)
    assert result.returncode == 2
    assert result.stderr == (f"palace-conformance fake stdio: fault plan {path}: schema_version "
                             "99 is newer than this fake understands (1); upgrade "
                             "palace-conformance\n")


def test_bad_fault_flag_exits_2_with_one_line(tmp_path: Path) -> None:
    result = run_cli(["fake", "stdio", "--fault", "stall@ping#0"], tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("palace-conformance fake stdio: --fault 'stall@ping#0': '#' must be "
                             "followed by a number >= 1\n")


def test_bad_state_file_exits_2_with_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("[1, 2]")
    with FakeProcess(tmp_path, state=state) as fake:
        assert fake.finish() == 2
        assert fake.stderr_text() == (f"palace-fake-mcp: cannot use palace state file {state}: "
                                      "expected a JSON object, got list; fix or delete it\n")


def test_faults_help_lists_every_action(tmp_path: Path) -> None:
    result = run_cli(["fake", "faults"], tmp_path)
    assert result.returncode == 0
    assert "ACTION[@TARGET][#NTH][xTIMES]" in result.stdout
    for action in ("stall", "drip_progress", "startup_fail", "lock_held", "wrong_id"):
        assert action in result.stdout


def test_a_fault_typed_for_the_other_transport_is_refused_at_start(tmp_path: Path) -> None:
    """``http_status`` cannot fire on a stdio fake: one line, exit 2, nothing started."""
    done = run_cli(["fake", "stdio", "--fault", "http_status@mempalace_search,status=500"],
                   tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "action 'http_status' fires only over http, and this fake serves stdio" in line


def test_a_plan_file_with_a_typo_d_tool_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"faults": [{"id": "s", "on": {"tool": "mempalace_serch"},
                                            "action": "stall"}]}))
    with pytest.raises(FaultPlanError, match=r"\(s\): no tool 'mempalace_serch'.*did you mean"):
        load_plan(path)



@pytest.mark.parametrize("spec", [
    "delay@initialize,ms=100000000000000000000000000",  # an int, so it passed the type check
    "stall@mempalace_search,ms=86400001",
    "flood_stderr@initialize,bytes=2147483649",
])
def test_a_value_that_could_never_fire_within_a_run_is_refused(spec: str) -> None:
    with pytest.raises(FaultPlanError, match="over its limit"):
        parse_compact(spec)


def test_the_limits_themselves_still_parse() -> None:
    assert parse_compact("stall@mempalace_search,ms=86400000").params["ms"] == 86_400_000


@pytest.mark.parametrize("spec", [
    "delay@initialize,ms=" + "x" * 5000,
    "bogus@initialize",
    "z" * 5000 + "@initialize",
    "stall@initialize," + "y" * 5000,
    "stall@mempalace_" + "q" * 5000,
])
def test_a_refused_spec_is_quoted_short_whatever_its_length(spec: str, tmp_path: Path) -> None:
    done = run_cli(["fake", "stdio", "--fault", spec], tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    for filler in "xyzq":  # the long part is cut, whatever the rest of the message lists
        assert filler * (SHOWN_SPEC + 1) not in line, line[:300]
    assert len(line) < 1000
