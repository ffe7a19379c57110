"""The loader: broken scenario files each fail with the expected one-line problem."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake.faults import FaultPlan
from palace_conformance.scenarios.loader import (
    ScenarioError,
    load_catalogue,
    load_scenario,
)
from palace_conformance.scenarios.model import Scenario

BASE: dict[str, Any] = {
    "schema_version": 1,
    "id": "tool.sample.search-works",
    "title": "A search goes through",
    "covers": ["TOOL-02"],
    "transports": ["stdio", "http"],
    "steps": [
        {"op": "load"},
        {"op": "event", "name": "session_start", "payload": {"reason": "startup"}},
        {"op": "settle"},
        {"op": "call_tool", "as": "search", "name": "mempalace_search", "args": {"query": "x"},
         "expect": {"ok": True, "result": {"json": {"query": "x"}}}},
        {"op": "shutdown"},
    ],
    "expect": {"journal": [{"check": "count", "match": {"kind": "recv", "tool": "mempalace_search"},
                            "equals": 1}]},
}


def write(root: Path, data: Any, name: str | None = None, area: str | None = None) -> Path:
    sid = data["id"] if isinstance(data, dict) and "id" in data else "tool.sample.x"
    path = root / (area or sid.split(".")[0]) / f"{name or sid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def scenario(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def problems_for(tmp_path: Path, data: Any, **kw: Any) -> list[str]:
    write(tmp_path, data, **kw)
    catalogue = load_catalogue([tmp_path])
    lines = [str(p) for p in catalogue.problems]
    assert all("\n" not in line for line in lines)
    return lines


def test_the_base_scenario_is_valid_and_typed(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    loaded = load_scenario(path)
    assert isinstance(loaded, Scenario)
    assert loaded.area == "tool" and loaded.transports == ("stdio", "http")
    assert loaded.parity.enabled and loaded.subject == "bridge"
    assert isinstance(loaded.faults, FaultPlan)
    step = loaded.steps[3]
    assert step.key == "search" and step.expect is not None and step.expect.ok is True
    assert loaded.steps[2].driver_request() == {"op": "settle", "quiet_ms": 200, "max_ms": 5000}
    assert loaded.steps[4].driver_request() == {"op": "shutdown", "reason": "quit"}
    assert all(s.host_op for s in loaded.steps)
    assert loaded.expect.journal[0].bounds.admits(1)


def test_newer_schema_version_is_refused_with_an_upgrade_hint(tmp_path: Path) -> None:
    lines = problems_for(tmp_path, scenario(schema_version=2))
    assert len(lines) == 1
    assert ("scenario tool.sample.search-works uses schema_version 2; this palace-conformance "
            "understands 1: upgrade") in lines[0]
    assert lines[0].startswith(f"{tmp_path}/tool/tool.sample.search-works.json: scenario ")
    assert lines[0].endswith("(pip install --upgrade palace-conformance)")


@pytest.mark.parametrize(("version", "fragment"), [
    (None, "missing schema_version"), ("1", 'schema_version "1" is not a format version'),
    (0, "schema_version 0 is not a format version"),
])
def test_bad_schema_versions(tmp_path: Path, version: Any, fragment: str) -> None:
    data = scenario(schema_version=version)
    if version is None:
        del data["schema_version"]
    lines = problems_for(tmp_path, data)
    assert len(lines) == 1 and fragment in lines[0]


def test_unknown_behaviour_id_with_suggestion(tmp_path: Path) -> None:
    lines = problems_for(tmp_path, scenario(covers=["TOOL-02", "STDIO-99", "TOOL-21"]))
    assert len(lines) == 2
    assert lines[0].endswith("/covers/1: unknown behaviour ID 'STDIO-99' (use an ID from "
                             "fixtures/behaviours.json; did you mean STDIO-09?)")
    assert "/covers/2: unknown behaviour ID 'TOOL-21'" in lines[1]


def test_malformed_behaviour_id_is_a_schema_problem(tmp_path: Path) -> None:
    lines = problems_for(tmp_path, scenario(covers=["TOOL-2O"]))
    assert len(lines) == 1 and "/covers/0: \"TOOL-2O\" does not have the expected form" in lines[0]


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    write(tmp_path / "a", BASE)
    write(tmp_path / "b", BASE)
    catalogue = load_catalogue([tmp_path])
    lines = [str(p) for p in catalogue.problems]
    assert len(lines) == 1
    assert "duplicate id 'tool.sample.search-works', already used by" in lines[0]
    assert len(catalogue.scenarios) == 1


def test_id_must_equal_the_file_stem(tmp_path: Path) -> None:
    lines = problems_for(tmp_path, BASE, name="tool.sample.other")
    assert lines == [f"{tmp_path}/tool/tool.sample.other.json: /id: id 'tool.sample.search-works' "
                     "does not match the file name 'tool.sample.other.json' (rename the file to "
                     "tool.sample.search-works.json or change the id)"]


def test_area_directory_must_match_the_id(tmp_path: Path) -> None:
    lines = problems_for(tmp_path, BASE, area="stdio")
    assert len(lines) == 1 and "file is in stdio/ but its id says area 'tool'" in lines[0]


def test_bad_matcher_operator(tmp_path: Path) -> None:
    data = scenario()
    data["expect"]["journal"][0]["match"] = {"kind": "recv", "tool": {"$startswith": "mem"}}
    lines = problems_for(tmp_path, data)
    assert len(lines) == 1
    assert '/expect/journal/0/match/tool: unknown matcher operator "$startswith" (use one of: $eq' \
        in lines[0]


def test_bad_regex(tmp_path: Path) -> None:
    data = scenario()
    data["expect"]["journal"][0]["match"] = {"tool": {"$regex": "mempalace_(search"}}
    lines = problems_for(tmp_path, data)
    assert len(lines) == 1 and "/expect/journal/0/match/tool/$regex: bad $regex" in lines[0]


@pytest.mark.parametrize(("faults", "fragment"), [
    ([{"action": "explode"}], '/faults/0/action: unknown fault action "explode"'),
    ([{"action": "stall", "ms": -1}], "/faults/0/ms: -1 is less than the minimum of 0"),
    ([{"action": "stall", "seconds": 1}],
     '/faults/0: "seconds" is not a parameter of action stall'),
    ([{"action": "http_status"}], "/faults/0: missing required field 'status'"),
    ([{"action": "startup_fail", "on": {"method": "initialize"}}], "/faults/0/on/method"),
    ([{"id": "a", "action": "stall"}, {"id": "a", "action": "delay"}],
     "/faults: duplicate fault id(s) ['a']; give each fault its own id"),
    ([{"action": "error", "code": True}], "/faults/0/code: expected integer, got true"),
    ([{"action": "stall", "on": {"tool": "mempalace_serch"}}],
     "unknown tool 'mempalace_serch': this fault would never fire (use a tool of the mempalace "
     "3.11.0 catalogue; did you mean mempalace_search?)"),
])
def test_bad_faults(tmp_path: Path, faults: list[Any], fragment: str) -> None:
    lines = problems_for(tmp_path, scenario(faults=faults))
    assert any(fragment in line for line in lines), lines


def test_http_only_fault_on_a_stdio_scenario(tmp_path: Path) -> None:
    data = scenario(transports=["stdio"],
                    faults=[{"id": "gone", "action": "http_status", "status": 404}])
    lines = problems_for(tmp_path, data)
    assert len(lines) == 1
    assert "action 'http_status' applies to http only, but this runs on stdio" in lines[0]


def test_malformed_json_gives_line_and_column(tmp_path: Path) -> None:
    text = '{\n  "schema_version": 1,\n  "id": "tool.sample.x",\n  oops\n}\n'
    lines = problems_for(tmp_path, text, name="tool.sample.x", area="tool")
    assert len(lines) == 1
    assert "tool.sample.x.json: malformed JSON at line 4, column 3" in lines[0]
    assert lines[0].endswith("(fix the JSON syntax)")


def test_unknown_tool_in_a_call(tmp_path: Path) -> None:
    data = scenario()
    data["steps"][3]["name"] = "mempalace_serch"
    lines = problems_for(tmp_path, data)
    assert len(lines) == 1 and "/steps/3/name: unknown tool 'mempalace_serch'" in lines[0]
    assert "did you mean mempalace_search?" in lines[0]
    # calling a missing tool on purpose is allowed when the step expects exactly that
    data["steps"][3]["expect"] = {"error": {"kind": "no_such_tool"}}
    assert problems_for(tmp_path, data) == []


def test_call_tools_names_known_tools_and_one_expectation_per_call(tmp_path: Path) -> None:
    data = scenario()
    data["steps"][3] = {"op": "call_tools", "calls": [
        {"name": "mempalace_status"}, {"name": "mempalace_serch", "args": {"query": "q"}}],
        "expect": {"calls": [{"ok": True}]}}
    lines = problems_for(tmp_path, data)
    assert any("/steps/3/calls/1/name: unknown tool 'mempalace_serch'" in line
               for line in lines), lines
    assert any("/steps/3/expect/calls: 1 expectation(s) for 2 call(s)" in line
               for line in lines), lines
    data["steps"][3]["expect"] = {"calls": [{"ok": True}, {"error": {"kind": "no_such_tool"}}]}
    assert problems_for(tmp_path, data) == []
    data["steps"][3]["calls"] = data["steps"][3]["calls"][:1]
    assert any("/steps/3/calls: a call_tools step makes 2 to 8 calls (add calls, or use "
               "call_tool for one)" in line for line in problems_for(tmp_path, data))


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda d: d["steps"].insert(0, {"op": "settle"}), "a bridge scenario starts with 'load'"),
    (lambda d: d["steps"].append({"op": "rpc", "message": {}}), "op 'rpc' is not available"),
    (lambda d: d["steps"][2].update({"as": "search"}), "label 'search' already names step 2"),
    (lambda d: d["steps"][3]["expect"].update({"error": {"kind": "timeout"}}),
     "expects ok: true and an error at once"),
    (lambda d: d["steps"].append({"op": "fly"}), '/steps/5/op: unknown op "fly"'),
    (lambda d: d["steps"][3].update({"arguments": {}}), "/steps/3: unknown field 'arguments'"),
    (lambda d: d.update({"env": {"MEMPALACE_REMOTE_URL": "${FAKE_URL}"}}),
     "/env/MEMPALACE_REMOTE_URL: ${FAKE_URL} has no value on stdio runs"),
    (lambda d: d.update({"env": {"X": "${NOPE}"}}), "unknown placeholder ${NOPE}"),
    (lambda d: d["steps"].insert(4, {"op": "server", "action": "forget_sessions"}),
     "needs the HTTP fake's control API"),
    (lambda d: d.update({"transports": ["stdio"], "http": {"sessions": True}}),
     "'http' options given but the scenario does not run on http"),
    (lambda d: d["expect"]["journal"][0].pop("equals"), "/expect/journal/0: no bound given"),
    (lambda d: d["expect"].update({"wire_secrets": ["tok-\u00e9"]}),
     '/expect/wire_secrets/0: secret "tok-\u00e9" is not printable ASCII'),
    (lambda d: d["expect"].update({"effects": [{"check": "gap", "from": {}, "to": {},
                                                "ms": {"at_least": 1}}]}),
     "gap needs timestamped records"),
])
def test_semantic_and_schema_rules(tmp_path: Path, mutate: Any, fragment: str) -> None:
    data = scenario()
    mutate(data)
    lines = problems_for(tmp_path, data)
    assert any(fragment in line for line in lines), lines


def test_an_exit_step_ends_the_run_on_its_transports(tmp_path: Path) -> None:
    data = scenario()
    data["steps"].insert(4, {"op": "exit"})
    assert any("/steps/5: step after an 'exit' on http, stdio (the host is gone) (make 'exit' "
               "the last step)" in line for line in problems_for(tmp_path, data))
    data = scenario()
    data["steps"][4:] = [{"op": "exit", "transport": "stdio"},
                         {"op": "shutdown", "transport": "http"}]
    assert problems_for(tmp_path, data) == []
    data["expect"]["tools"] = {"includes": ["mempalace_search"]}
    assert any("/expect/tools: the tools are listed at the end of the run, but an 'exit' step "
               "ended the host" in line for line in problems_for(tmp_path, data))
    data = scenario()
    data["steps"][4] = {"op": "exit", "grace_ms": 10}
    assert any("/steps/4: unknown field 'grace_ms'" in line
               for line in problems_for(tmp_path, data))


def test_step_journal_checks_are_typed_and_checked(tmp_path: Path) -> None:
    data = scenario()
    data["steps"][3]["expect"]["journal"] = [
        {"check": "gap", "from": {"kind": "recv"}, "to": {"kind": "send"},
         "ms": {"at_least": 0, "slack_ms": 100}}]
    loaded = load_scenario(write(tmp_path, data))
    expect = loaded.steps[3].expect
    assert expect is not None and [c.kind for c in expect.journal] == ["gap"]
    data["steps"][3]["expect"]["journal"][0]["to"] = {"kind": {"$nope": 1}}
    assert any("/steps/3/expect/journal/0/to/kind: unknown matcher operator" in line
               for line in problems_for(tmp_path, data))


def test_placeholders_allowed_where_only_http_runs(tmp_path: Path) -> None:
    data = scenario(transports=["http"], http={"token": "t0k"},
                    env={"MEMPALACE_REMOTE_TOKEN": "${FAKE_TOKEN}"},
                    expect={"wire_secrets": ["${FAKE_TOKEN}"]})
    assert problems_for(tmp_path, data) == []
    data["http"] = {"token": None}
    assert any("${FAKE_TOKEN} used but the fake has no token" in line
               for line in problems_for(tmp_path, data))


def test_load_scenario_raises_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, scenario(covers=["NOPE-01"], transports=["tcp"]))
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    message = str(raised.value)
    assert "\n" not in message and "tool.sample.search-works.json" in message


def test_missing_path_is_a_problem(tmp_path: Path) -> None:
    catalogue = load_catalogue([tmp_path / "nowhere"])
    assert [str(p) for p in catalogue.problems] == [
        f"{tmp_path}/nowhere: no such file or directory "
        "(give a scenario file or a directory of them)"]


# -- subject fake: http steps and the fake-only server actions -------------------------------

FAKE: dict[str, Any] = {
    "schema_version": 1,
    "id": "fake.sample.raw-http",
    "title": "A raw request",
    "covers": ["FAKE-05"],
    "subject": "fake",
    "transports": ["http"],
    "steps": [{"op": "http", "method": "GET", "path": "/healthz",
               "expect": {"result": {"status": 200}}}],
}


def fake_scenario(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(FAKE)
    data.update(changes)
    return data


def test_an_http_step_is_typed_with_its_fields(tmp_path: Path) -> None:
    data = fake_scenario()
    data["steps"].append({"op": "http", "method": "POST", "headers": {"Host": "evil.example"},
                          "body_size": 17, "auth": False})
    loaded = load_scenario(write(tmp_path, data))
    step = loaded.steps[1]
    assert step.op == "http" and not step.host_op
    assert dict(step.params) == {"method": "POST", "headers": {"Host": "evil.example"},
                                 "body_size": 17, "auth": False}


@pytest.mark.parametrize(("data", "expected"), [
    (scenario(steps=[*BASE["steps"], {"op": "http", "method": "GET"}]),
     "/steps/5/op: op 'http' is not available to subject 'bridge' (use one of: call_tool, "),
    (fake_scenario(transports=["stdio", "http"]),
     "/steps/0/op: op 'http' needs the HTTP fake but this step also runs on stdio "
     '(add "transport": "http" to the step or run the scenario on http only)'),
    (fake_scenario(steps=[{"op": "http", "method": "POST", "body": "{}", "body_size": 3}]),
     "/steps/0: an http step takes 'body' or 'body_size', not both (keep one of them)"),
    (fake_scenario(steps=[{"op": "http", "method": "PATCH"}]),
     '/steps/0/method: "PATCH" is not allowed here (use one of: "GET", "POST", "DELETE", '),
    (fake_scenario(steps=[{"op": "http", "method": "GET", "headers": {"X-Count": 3}}]),
     "/steps/0/headers/X-Count: expected string, got 3 (write a JSON string)"),
    (fake_scenario(steps=[{"op": "http", "method": "GET", "path": "healthz"}]),
     '/steps/0/path: "healthz" does not have the expected form'),
    (scenario(steps=[*BASE["steps"][:4], {"op": "server", "action": "close_stdin"}]),
     "/steps/4/action: server action 'close_stdin' is for subject 'fake' only (a bridge owns its "
     'children and its lock) (use "subject": "fake", or another action)'),
    (scenario(steps=[*BASE["steps"][:4], {"op": "server", "action": "kill_lock_holder"}],
              palace={"lock": {"held": True}}),
     "/steps/4/action: server action 'kill_lock_holder' is for subject 'fake' only"),
    (fake_scenario(steps=[{"op": "server", "action": "close_stdin"}]),
     "/steps/0/action: server action 'close_stdin' needs the stdio fake but this step also runs "
     'on http (add "transport": "stdio" to the step)'),
    (fake_scenario(steps=[{"op": "server", "action": "kill_lock_holder"}]),
     "/steps/0/action: server action 'kill_lock_holder' but no process holds the lock "
     '(set "palace": {"lock": {"held": true}})'),
])
def test_fake_ops_and_actions_are_checked_in_one_line(tmp_path: Path, data: dict[str, Any],
                                                      expected: str) -> None:
    lines = problems_for(tmp_path, data)
    assert len(lines) == 1, lines
    assert expected in lines[0]


def test_fake_only_actions_pass_where_they_fit(tmp_path: Path) -> None:
    stdio = fake_scenario(transports=["stdio"], palace={"lock": {"held": True}}, steps=[
        {"op": "server", "action": "kill_lock_holder", "expect": {"result": {"pid": {"$gt": 0}}}},
        {"op": "server", "action": "close_stdin", "timeout_ms": 2000}])
    assert problems_for(tmp_path, stdio) == []
    both = fake_scenario(transports=["stdio", "http"], steps=[
        {"op": "http", "transport": "http", "method": "HEAD", "path": "/healthz"},
        {"op": "server", "transport": "stdio", "action": "close_stdin"}])
    assert problems_for(tmp_path, both) == []


def test_palace_installed_defaults_true_and_must_be_a_boolean(tmp_path: Path) -> None:
    assert load_scenario(write(tmp_path, BASE)).palace.installed is True
    absent = scenario(id="tool.sample.not-installed", palace={"installed": False})
    assert load_scenario(write(tmp_path, absent)).palace.installed is False
    lines = problems_for(tmp_path / "bad", scenario(palace={"installed": "no"}))
    assert len(lines) == 1 and "/palace/installed" in lines[0], lines


def test_an_unrunnable_palace_needs_installed_false(tmp_path: Path) -> None:
    both = scenario(id="tool.sample.unrunnable",
                    palace={"installed": False, "unrunnable": "not-a-program"})
    assert load_scenario(write(tmp_path, both)).palace.unrunnable == "not-a-program"
    assert load_scenario(write(tmp_path / "d", BASE)).palace.unrunnable is None
    alone = problems_for(tmp_path / "alone", scenario(palace={"unrunnable": "not-a-program"}))
    assert len(alone) == 1 and "installed false" in alone[0], alone
    other = problems_for(tmp_path / "other", scenario(palace={"installed": False,
                                                              "unrunnable": "corrupt"}))
    assert len(other) == 1 and "/palace/unrunnable" in other[0], other


def test_every_duration_of_a_scenario_declares_its_slack(tmp_path: Path) -> None:
    data = scenario()
    data["steps"][3]["expect"]["elapsed_ms"] = {"at_least": 300}
    data["expect"]["journal"].append({"check": "gap", "from": {"kind": "recv"},
                                      "to": {"kind": "send"}, "ms": {"at_least": 0}})
    lines = problems_for(tmp_path, data)
    assert [line.split(": ")[1] for line in lines] == ["/steps/3/expect/elapsed_ms",
                                                       "/expect/journal/1/ms"]
    assert all("without slack_ms has no upper bound" in line for line in lines)
    data["steps"][3]["expect"]["elapsed_ms"]["slack_ms"] = 2000
    data["expect"]["journal"][1]["ms"]["slack_ms"] = 500
    assert problems_for(tmp_path, data) == []


@pytest.mark.parametrize(("text", "fragment"), [
    ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
    ('{"schema_version": ' + "9" * 5000 + "}", "number too long"),
])
def test_json_the_decoder_cannot_take_is_one_problem_line(tmp_path: Path, text: str,
                                                         fragment: str) -> None:
    """Issue 13: a RecursionError / digit-limit ValueError used to escape as a traceback."""
    lines = problems_for(tmp_path, text, name="tool.sample.x", area="tool")
    assert len(lines) == 1
    assert fragment in lines[0] and lines[0].endswith("(fix the JSON syntax)")


def test_env_pace_names_values_env_sets(tmp_path: Path) -> None:
    env = {"MEMPALACE_MCP_TIMEOUT_MS": "300", "MEMPALACE_FEED": "0", "MEMPALACE_PI_DEVICE": None}
    path = write(tmp_path, scenario(env=env, env_pace=["MEMPALACE_MCP_TIMEOUT_MS"]))
    loaded = load_scenario(path)
    assert loaded.env_pace == frozenset({"MEMPALACE_MCP_TIMEOUT_MS"})
    assert load_scenario(write(tmp_path / "old", scenario(env=env))).env_pace == frozenset()
    for name in ("MEMPALACE_MCP_INIT_TIMEOUT_MS", "MEMPALACE_PI_DEVICE"):  # unset; null
        [line] = problems_for(tmp_path / name, scenario(env=env, env_pace=[name]))
        assert f"/env_pace/0: {name} is not set in env" in line and "(list only" in line
    [line] = problems_for(tmp_path / "dup", scenario(env=env, env_pace=["MEMPALACE_FEED"] * 2))
    assert "/env_pace" in line
