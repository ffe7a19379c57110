"""The fidelity script covers what the issue asks for: at least 150 points, every tool's
validation and empty answers, and each section on its transport."""

from __future__ import annotations

from collections import Counter

import pytest

from palace_conformance.fidelity.script import ScriptError, load_script, parse_script
from palace_conformance.resources import tool_catalogue

SCRIPT = load_script()


def test_at_least_150_points_with_unique_ids() -> None:
    ids = SCRIPT.point_ids()
    assert len(ids) >= 150 and len(set(ids)) == len(ids)


def test_every_tool_gets_no_args_wrong_type_fresh_and_initialised_calls() -> None:
    names = [tool["name"].removeprefix("mempalace_") for tool in tool_catalogue()["tools"]]
    assert len(names) == 47
    ids = set(SCRIPT.point_ids())
    for name in names:
        for kind in ("wrong-type", "fresh", "initialised"):
            assert f"tools.{name}.{kind}" in ids, (name, kind)
    no_args = {name for name in names if f"tools.{name}.no-args" in ids}
    assert set(names) - no_args == {"event_wait"}  # the table says why: a 60 s default wait


def test_sections_and_transports() -> None:
    sections = Counter(step.section for s in SCRIPT.sessions for step in s.steps if step.id)
    for section in ("handshake", "protocol", "arguments", "business", "tools", "http", "auth",
                    "lock", "shutdown"):
        assert sections[section] > 0, section
    transports = {s.transport for s in SCRIPT.sessions}
    assert transports == {"stdio", "http"}
    lock = next(s for s in SCRIPT.sessions if s.id == "lock")
    assert {step.action for step in lock.steps} >= {"send", "cli", "http_start", "kill", "eof"}
    assert {step.proc for step in lock.steps if step.action == "send"} == {"A", "B"}
    ends = {step.action for s in SCRIPT.sessions for step in s.steps if step.section == "shutdown"}
    assert ends == {"eof", "term", "http_stop"}


def test_initialised_sessions_start_with_the_setup_writes() -> None:
    session = next(s for s in SCRIPT.sessions if s.palace == "initialised")
    first = [step.id for step in session.steps[:2]]
    assert first == [f"{session.id}.setup.diary-write", f"{session.id}.setup.add-drawer"]


def test_fresh_valid_calls_put_writes_last() -> None:
    session = next(s for s in SCRIPT.sessions if s.id == "stdio-tools-fresh")
    fresh = [step.id for step in session.steps if step.id and step.id.endswith(".fresh")]
    assert fresh.index("tools.status.fresh") < fresh.index("tools.add_drawer.fresh")
    assert fresh.index("tools.diary_read.fresh") < fresh.index("tools.diary_write.fresh")


def test_quick_is_a_subset_of_every_kind_but_the_tool_matrix() -> None:
    quick = SCRIPT.quick()
    ids = set(quick.point_ids())
    assert ids < set(SCRIPT.point_ids()) and len(ids) >= 100
    assert not any(point.startswith("tools.") for point in ids)
    assert {"lock.cli-mine-refused", "auth.host-before-auth", "http.oversize-413"} <= ids
    assert "lock.cli-mine-refused-by-new-holder" not in ids  # full_only


@pytest.mark.parametrize(("data", "problem"), [
    ({"sessions": [{"id": "s", "transport": "pigeon"}]}, "transport must be"),
    ({"sessions": [{"id": "s", "transport": "stdio", "steps": [{"id": "a"}]}]},
     "exactly one of"),
    ({"sessions": [{"id": "s", "transport": "stdio", "steps": [
        {"id": "a", "send": {}}, {"id": "a", "send": {}}]}]}, "repeated: a"),
    ({"sessions": [{"id": "s", "transport": "stdio", "tool_matrix": ["sideways"]}]},
     "tool_matrix kind"),
    ({"sessions": [{"id": "s", "transport": "stdio", "steps": [{"id": "a", "rpc": {}}]}]},
     "a needs the session's HTTP server"),
])
def test_a_bad_script_is_one_line(data: dict[str, object], problem: str) -> None:
    with pytest.raises(ScriptError) as exc:
        parse_script(data)
    assert problem in str(exc.value) and "\n" not in str(exc.value)


def test_a_tool_that_changes_the_palace_for_later_calls_gets_a_fresh_session_of_its_own() -> None:
    tools = {"mempalace_status": {"minimal": {}},
             "mempalace_sync": {"minimal": {}, "own_session": "breaks later reads"}}
    sessions = [
        {"id": "shared", "transport": "stdio", "palace": "fresh", "tool_matrix": ["fresh"]},
        {"id": "alone", "transport": "stdio", "palace": "fresh", "tool_matrix": ["no-args"],
         "tool_matrix_tools": ["mempalace_sync"]},
        {"id": "later", "transport": "stdio", "palace": "initialised",
         "tool_matrix": ["initialised"]},
    ]
    script = parse_script({"tools": tools, "sessions": sessions, "initialise": []})
    by_session = {s.id: [step.id for step in s.steps] for s in script.sessions}
    assert by_session["shared"] == ["tools.status.fresh"]
    assert by_session["alone"] == ["tools.sync.no-args"]
    assert by_session["later"] == ["tools.status.initialised", "tools.sync.initialised"]
    sessions[1]["tool_matrix_tools"] = ["mempalace_snyc"]
    with pytest.raises(ScriptError, match="names no tool of the table: mempalace_snyc"):
        parse_script({"tools": tools, "sessions": sessions, "initialise": []})
