"""A profile applied at the run's edges: tool names both ways, extra tools set aside, channels
turned into what the scenarios look for, and scenarios a curated bridge cannot be given."""

from __future__ import annotations

import json
from pathlib import Path

from palace_conformance.runner.execution import profile_edges
from palace_conformance.runner.profile import Profile, load_profile
from palace_conformance.scenarios.loader import load_scenario, scenarios_dir


def profile(tmp_path: Path, **extra: object) -> Profile:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"schema_version": 1, "name": "p", "entry": "reference", **extra}))
    return load_profile(path)


def shipped(sid: str):  # type: ignore[no-untyped-def]
    return load_scenario(scenarios_dir() / sid.split(".", 1)[0] / f"{sid}.json")


CURATED = {"tools": {"map": {"palace_search": "mempalace_search",
                             "palace_status": "mempalace_status"}, "extra_allowed": True}}


def test_tool_names_go_out_as_the_bridges_and_come_back_as_the_catalogues(tmp_path: Path) -> None:
    p = profile(tmp_path, **CURATED)
    assert profile_edges.outgoing_tool(p, "mempalace_search") == "palace_search"
    assert profile_edges.outgoing_tool(p, "mempalace_kg_query") == "mempalace_kg_query"
    tools, extras = profile_edges.incoming_tools(
        p, [{"name": "palace_search", "parameters": {}}, {"name": "palace_where"}])
    assert [t["name"] for t in tools] == ["mempalace_search"] and extras == ["palace_where"]
    effects = profile_edges.incoming_effects(p, [
        {"kind": "tool_registered", "name": "palace_status"},
        {"kind": "tool_registered", "name": "palace_where"}])
    assert effects == [{"kind": "tool_registered", "name": "mempalace_status"}]


def test_every_call_of_a_request_goes_out_in_the_bridges_names(tmp_path: Path) -> None:
    p = profile(tmp_path, **CURATED)
    assert profile_edges.outgoing_request(p, "call_tool", {"name": "mempalace_search"}) == {
        "name": "palace_search"}
    sent = profile_edges.outgoing_request(p, "call_tools", {"calls": [
        {"name": "mempalace_status", "args": {}}, {"name": "mempalace_kg_query", "args": {}},
        {"name": "mempalace_search", "args": {"query": "q"}, "timeout_ms": 900}]})
    assert sent == {"calls": [
        {"name": "palace_status", "args": {}}, {"name": "mempalace_kg_query", "args": {}},
        {"name": "palace_search", "args": {"query": "q"}, "timeout_ms": 900}]}
    assert profile_edges.outgoing_request(p, "event", {"name": "mempalace_search"}) == {
        "name": "mempalace_search"}


def test_a_curated_bridge_is_not_asked_for_a_call_of_call_tools_it_does_not_offer(
        tmp_path: Path) -> None:
    p = profile(tmp_path, **CURATED)
    assert "no tool for mempalace_kg_stats" in str(profile_edges.inapplicable(
        p, shipped("http.session.stale-404-keeps-renewed-session"), "http"))
    assert profile_edges.inapplicable(p, shipped(
        "http.session.404-two-in-flight-renewed-once"), "http") is None


def test_without_extra_allowed_an_extra_tool_stays_visible(tmp_path: Path) -> None:
    p = profile(tmp_path, tools={"map": {"palace_search": "mempalace_search"}})
    tools, extras = profile_edges.incoming_tools(p, [{"name": "palace_where"}])
    assert tools == [{"name": "palace_where"}] and extras == []


def test_a_curated_bridge_is_not_asked_for_tools_it_does_not_offer(tmp_path: Path) -> None:
    p = profile(tmp_path, **CURATED)
    assert "no tool for mempalace_list_wings" in str(profile_edges.inapplicable(
        p, shipped("tool.errors.codes-and-data-kept"), "stdio"))
    # a registered list naming a tool outside the map (mempalace_kg_add)
    assert "curated tool set" in str(profile_edges.inapplicable(
        p, shipped("tool.register.rich-schemas-kept"), "stdio"))
    assert profile_edges.inapplicable(profile(tmp_path), shipped(
        "tool.register.rich-schemas-kept"), "stdio") is None


def test_for_a_curated_bridge_the_catalogue_is_the_set_it_offers(tmp_path: Path) -> None:
    p = profile(tmp_path, **CURATED)
    # "registered: catalogue" is judged against the mapped tools, so the scenario runs
    assert profile_edges.inapplicable(
        p, shipped("diary.command.topic-on-both-transports"), "stdio") is None
    offered = profile_edges.offered_catalogue(p)
    assert offered is not None
    # in catalogue order
    assert [t["name"] for t in offered] == ["mempalace_status", "mempalace_search"]
    assert all("inputSchema" in t for t in offered)
    assert profile_edges.offered_catalogue(profile(tmp_path)) is None


def test_notify_diagnostics_and_a_system_prompt_wakeup_become_what_scenarios_look_for(
        tmp_path: Path) -> None:
    p = profile(tmp_path, channels={"wakeup": "system_prompt", "diagnostics": "notify"})
    effects = profile_edges.incoming_effects(
        p, [{"kind": "notify", "level": "info", "message": "palace ready"},
            {"kind": "notify", "level": "warning", "message": "palace unavailable"}],
        ("You are pi.", "You are pi.\n\n# Memory\nwake text"))
    assert {"kind": "stderr", "line": "palace unavailable", "via": "notify"} in effects
    assert not any(e["kind"] == "stderr" and e["line"] == "palace ready" for e in effects)
    injected = [e for e in effects if e["kind"] == "injected"]
    assert injected == [{"kind": "injected", "custom_type": "mempalace-wakeup",
                         "content": "# Memory\nwake text", "via": "system_prompt"}]
    seed = profile(tmp_path)  # the seed's channels: nothing is translated
    assert profile_edges.incoming_effects(
        seed, [{"kind": "notify", "level": "error", "message": "x"}],
        ("a", "a b")) == [{"kind": "notify", "level": "error", "message": "x"}]


DIARY = {"tools": {"map": {
    "palace_search": {"tool": "mempalace_search"},
    "palace_diary": [{"tool": "mempalace_diary_read", "when": {"action": "read"}},
                     {"tool": "mempalace_diary_write", "when": {"action": "write"}}]},
    "static": True}, "results": {"path": "/data"}}


def test_a_multiplexing_tool_is_called_with_its_fixed_arguments(tmp_path: Path) -> None:
    p = profile(tmp_path, **DIARY)
    sent = profile_edges.outgoing_request(p, "call_tool", {
        "name": "mempalace_diary_write", "args": {"agent_name": "a", "entry": "e"}})
    assert sent == {"name": "palace_diary",
                    "args": {"agent_name": "a", "entry": "e", "action": "write"}}
    assert profile_edges.outgoing_request(p, "call_tool", {"name": "mempalace_search"}) == {
        "name": "palace_search"}


def test_a_multiplexing_tool_registers_as_each_catalogue_tool_it_stands_for(
        tmp_path: Path) -> None:
    p = profile(tmp_path, **DIARY)
    union = {"type": "object", "required": ["action", "agent_name"], "properties": {
        "action": {"type": "string", "enum": ["read", "write"]},
        "agent_name": {"type": "string"}, "last_n": {"type": "integer"},
        "wing": {"type": "string"}, "entry": {"type": "string"}, "topic": {"type": "string"},
        "content": {"type": "string"}}}
    tools, _ = profile_edges.incoming_tools(p, [{"name": "palace_diary", "parameters": union}])
    catalogue = {t["name"]: t["inputSchema"] for t in profile_edges.offered_catalogue(p) or []}
    assert [t["name"] for t in tools] == ["mempalace_diary_read", "mempalace_diary_write"]
    assert all(t["parameters"] == catalogue[t["name"]] for t in tools)
    # a parameter dropped (last_n) is not hidden: the read's schema is the bridge's own
    dropped = {**union, "properties": {k: v for k, v in union["properties"].items()
                                       if k != "last_n"}}
    tools, _ = profile_edges.incoming_tools(p, [{"name": "palace_diary", "parameters": dropped}])
    assert tools[0]["parameters"] != catalogue["mempalace_diary_read"]
    assert "action" not in tools[0]["parameters"]["properties"]
    assert tools[1]["parameters"] == catalogue["mempalace_diary_write"]
    effects = profile_edges.incoming_effects(p, [{"kind": "tool_registered",
                                                  "name": "palace_diary"}])
    assert [e["name"] for e in effects] == ["mempalace_diary_read", "mempalace_diary_write"]


def test_an_enveloped_result_is_judged_unwrapped_and_keeps_its_envelope(tmp_path: Path) -> None:
    p = profile(tmp_path, **DIARY)
    envelope = json.dumps({"trust": "untrusted-data", "data": '{"total_drawers": 3}'})
    result = {"content": [{"type": "text", "text": envelope}], "details": {"raw": 1}}
    shown = profile_edges.incoming_result(p, "call_tool", result)
    assert shown["content"][0]["text"] == '{"total_drawers": 3}'
    assert shown["envelope"] == envelope and shown["details"] == {"raw": 1}
    calls = profile_edges.incoming_result(p, "call_tools", {"calls": [
        {"ok": True, "result": result}, {"ok": False, "error": {"message": "x"}}]})
    assert calls["calls"][0]["result"] == shown and calls["calls"][1] == {
        "ok": False, "error": {"message": "x"}}
    plain = {"content": [{"type": "text", "text": "not json"}]}
    assert profile_edges.incoming_result(p, "call_tool", plain) == plain
    assert profile_edges.incoming_result(profile(tmp_path, **CURATED), "call_tool",
                                         result) == result


def test_static_tools_stand_for_none_and_tools_list_is_not_looked_for(tmp_path: Path) -> None:
    p = profile(tmp_path, **DIARY)
    down, why = profile_edges.adapt(p, shipped("tool.unavailable.host-keeps-working"), "stdio")
    assert why is None
    registered = [s.expect.tools.registered for s in down.steps
                  if s.expect is not None and s.expect.tools is not None]
    registered.append(down.expect.tools.registered if down.expect.tools else None)
    assert ("mempalace_diary_read", "mempalace_diary_write", "mempalace_search") in registered
    assert "none" not in registered
    listed, why = profile_edges.adapt(p, shipped("life.handshake.initialize-first"), "stdio")
    lists = '"method": "tools/list"'
    assert why is None and lists not in json.dumps([listed.raw["steps"], listed.raw["expect"]])
    original = shipped("life.handshake.initialize-first").raw
    assert lists in json.dumps([original["steps"], original["expect"]])
    assert "tools/list" in str(profile_edges.inapplicable(
        p, shipped("life.handshake.tools-list-pages"), "stdio"))


def test_an_incidental_read_of_an_unmapped_tool_is_made_with_a_mapped_one(
        tmp_path: Path) -> None:
    p = profile(tmp_path, **CURATED)
    original = shipped("http.session.stateful-id-on-every-request")
    adapted, why = profile_edges.adapt(p, original, "http")
    assert why is None and "mempalace_list_wings" in json.dumps(original.raw)
    assert "mempalace_list_wings" not in json.dumps(adapted.raw)
    assert {n for s in adapted.steps for n in s.tool_names} <= {"mempalace_search",
                                                                "mempalace_status"}
    # its results looked into, or written: the tool itself is needed
    assert "no tool for mempalace_list_wings" in str(profile_edges.inapplicable(
        p, shipped("http.sse.cr-line-endings"), "http"))
    assert "no tool for mempalace_add_drawer" in str(profile_edges.inapplicable(
        p, shipped("prov.shared-palace.stamps-writers"), "stdio"))


def test_a_crashed_read_retried_on_a_new_child_is_judged_as_the_crash(tmp_path: Path) -> None:
    from palace_conformance.runner.results import StepRecord

    p = profile(tmp_path, claims={"read_retry": True}, **CURATED)
    scenario = shipped("stdio.respawn.after-crash")
    crashed = next(s for s in scenario.steps if s.key == "crashed")
    call = {"kind": "recv", "method": "tools/call", "tool": "mempalace_search"}
    records = [{"kind": "process_start", "pid": 1}, {**call, "pid": 1, "id": 3},
               {"kind": "process_exit", "pid": 1}, {"kind": "process_start", "pid": 2},
               {**call, "pid": 2, "id": 5}, {"kind": "send", "pid": 2, "id": 5}]
    offsets = [0, 10, 20, 30, 40, 50]
    record = StepRecord(index=crashed.index, key="crashed", op="call_tool", ok=True,
                        result={"content": []}, journal_start=10, journal_end=60)
    notes = profile_edges.set_aside_read_retries(p, scenario, "stdio", [record], records,
                                                 offsets)
    assert len(notes) == 1 and "retried once on a new child (pid 2" in notes[0]
    assert [r.get("id") for r in records] == [None, 3, None, None] and offsets == [0, 10, 20, 30]
    assert record.ok is False and record.error is not None
    assert record.error["kind"] == "connection_closed"
    # a retry on the same child, or without the claim, is left to be judged
    again = [dict(r, pid=1) for r in records]
    same = StepRecord(index=crashed.index, key="crashed", op="call_tool", ok=True,
                      journal_start=10, journal_end=60)
    assert profile_edges.set_aside_read_retries(p, scenario, "stdio", [same], again,
                                                [0, 10, 20, 30]) == []
    assert profile_edges.set_aside_read_retries(profile(tmp_path), scenario, "stdio",
                                                [same], again, [0, 10, 20, 30]) == []


def test_faults_after_a_crashed_read_move_on_by_one_per_retry(tmp_path: Path) -> None:
    p = profile(tmp_path, claims={"read_retry": True}, tools={"map": {
        "palace_search": "mempalace_search"}})
    adapted, why = profile_edges.adapt(p, shipped("stdio.respawn.budget-resets-on-success"),
                                       "stdio")
    assert why is None
    assert [f["on"]["nth"] for f in adapted.raw["faults"]] == [1, 4]  # was 1 and 3
    write, _ = profile_edges.adapt(p, shipped("stdio.exit.crashed-write-never-replayed"),
                                   "stdio")
    assert [f["on"]["nth"] for f in write.raw["faults"]] == [1]  # a write: nothing moves


def test_the_light_servers_children_are_set_aside_from_the_counts(tmp_path: Path) -> None:
    p = profile(tmp_path, servers={"full": "mempalace-mcp", "light": "mempalace-light-mcp"})
    records = [{"kind": "process_start", "pid": 1, "argv": ["/run/bin/mempalace-mcp"]},
               {"kind": "process_start", "pid": 2, "argv": ["/run/bin/mempalace-light-mcp"]},
               {"kind": "recv", "pid": 2, "method": "initialize"},
               {"kind": "recv", "pid": 1, "method": "initialize"},
               {"kind": "process_exit", "pid": 2}]
    offsets = [0, 1, 2, 3, 4]
    aside = profile_edges.other_servers(p, records, offsets)
    assert [r["pid"] for r in aside] == [2, 2, 2] and [r["pid"] for r in records] == [1, 1]
    assert offsets == [0, 3]
    note = profile_edges.servers_note(p, aside, 0)
    assert "light (mempalace-light-mcp): 1 child(ren) started, 1 initialize, 0 alive" in note
    one = profile(tmp_path)
    kept = [dict(r) for r in records]
    assert profile_edges.other_servers(one, kept) == [] and len(kept) == 2


def test_a_budget_per_call_is_judged_on_the_per_call_rule(tmp_path: Path) -> None:
    """No latch to expect: the call the seed fails at once as unavailable must fail and start at
    most the budget's children (every call must), and the start counts become floors."""
    per_call = profile(tmp_path, claims={"respawn_budget": "call"})
    for sid in ("stdio.respawn.cap-with-backoff", "stdio.respawn.single-attempt-then-latch"):
        assert profile_edges.inapplicable(per_call, shipped(sid), "stdio") is None
        assert profile_edges.adapt(profile(tmp_path), shipped(sid), "stdio")[0].raw == \
            shipped(sid).raw
    cap, _ = profile_edges.adapt(per_call, shipped("stdio.respawn.cap-with-backoff"), "stdio")
    spent = cap.raw["steps"][6]["expect"]
    assert "error" not in spent and spent["ok"] is False
    # 700 + 1400 ms of its own backoff and two starts, with the declared slack
    assert spent["elapsed_ms"] == {"at_least": 0, "slack_ms": 650 + 5125 + 1000}
    for index in (3, 4, 5, 6):
        assert cap.raw["steps"][index]["expect"]["journal"][-1] == {
            "check": "count", "match": {"kind": "process_start"}, "at_most": 2,
            "comment": "a per-call respawn budget (claims.respawn_budget)"}
    assert cap.raw["expect"]["journal"][0] == {"check": "count",
                                               "match": {"kind": "process_start"}, "at_least": 3}
    assert cap.raw["expect"]["processes"]["spawned"] == {"at_least": 3}
    assert cap.raw["expect"]["journal"][3]["equals"] == 1  # not a budget count: as written
    # a step that said "no start" now says "at most the budget's"
    alone, _ = profile_edges.adapt(per_call,
                                   shipped("stdio.respawn.initialize-answer-alone-keeps-budget"),
                                   "stdio")
    latched = alone.raw["steps"][5]["expect"]["journal"]
    assert [c["check"] for c in latched] == ["count"] and latched[0]["at_most"] == 1
    # the respawns themselves are judged as for any bridge
    for sid in ("stdio.respawn.after-crash", "stdio.respawn.backoff-zero-respawns-at-once"):
        assert profile_edges.adapt(per_call, shipped(sid), "stdio")[0].raw == shipped(sid).raw


def test_a_crashed_read_in_a_call_tools_step_is_judged_as_the_crash(tmp_path: Path) -> None:
    """``claims.read_retry`` in a ``call_tools`` step: the crashed read's retry on a new child is
    set aside and that call reads as connection closed; a write sent again is left to be
    judged (never a retry the kit accepts)."""
    from palace_conformance.runner.results import StepRecord
    from palace_conformance.scenarios.model import Scenario

    p = profile(tmp_path, claims={"read_retry": True})
    crash = {"error": {"kind": "connection_closed"}}
    raw = {"id": "stdio.x.y", "title": "t", "covers": ["STDIO-12"], "transports": ["stdio"],
           "steps": [{"op": "load"}, {"op": "call_tools", "as": "both", "calls": [
               {"name": "mempalace_search", "args": {"query": "q"}},
               {"name": "mempalace_diary_write", "args": {"agent_name": "a", "entry": "e"}}],
               "expect": {"calls": [crash, crash]}}]}
    scenario = Scenario.from_json(raw, tmp_path / "x.json")

    def recv(tool: str, pid: int, rid: int) -> dict[str, object]:
        return {"kind": "recv", "method": "tools/call", "tool": tool, "pid": pid, "id": rid}

    def run() -> tuple[list[str], StepRecord, list[dict[str, object]]]:
        records = [recv("mempalace_search", 1, 3), recv("mempalace_diary_write", 1, 4),
                   {"kind": "process_exit", "pid": 1}, {"kind": "process_start", "pid": 2},
                   recv("mempalace_search", 2, 5), {"kind": "send", "pid": 2, "id": 5},
                   recv("mempalace_diary_write", 2, 6), {"kind": "send", "pid": 2, "id": 6}]
        offsets = [10 * i for i in range(len(records))]
        answered = {"ok": True, "result": {"content": [{"type": "text", "text": "{}"}]}}
        record = StepRecord(index=1, key="both", op="call_tools", ok=True,
                            result={"calls": [dict(answered), dict(answered)]},
                            journal_start=0, journal_end=100)
        notes = profile_edges.set_aside_read_retries(p, scenario, "stdio", [record], records,
                                                     offsets)
        assert len(offsets) == len(records)
        return notes, record, records

    notes, record, records = run()
    assert len(notes) == 1 and notes[0].startswith("step both, call mempalace_search: ")
    read, write = record.result["calls"]
    assert read["ok"] is False and read["error"]["kind"] == "connection_closed"
    assert "result" not in read
    assert write["ok"] is True  # the replayed write: judged as it is
    assert [(r.get("tool"), r.get("pid")) for r in records if r["kind"] == "recv"] == [
        ("mempalace_search", 1), ("mempalace_diary_write", 1), ("mempalace_diary_write", 2)]
    # without the claim nothing is set aside
    p = profile(tmp_path)
    notes, record, records = run()
    assert notes == [] and record.result["calls"][0]["ok"] is True and len(records) == 8


def test_faults_move_on_after_a_retried_read_without_a_tool_map(tmp_path: Path) -> None:
    p = profile(tmp_path, claims={"read_retry": True})
    adapted, why = profile_edges.adapt(p, shipped("stdio.respawn.budget-resets-on-success"),
                                       "stdio")
    assert why is None and [f["on"]["nth"] for f in adapted.raw["faults"]] == [1, 4]
    plain, _ = profile_edges.adapt(profile(tmp_path),
                                   shipped("stdio.respawn.budget-resets-on-success"), "stdio")
    assert [f["on"]["nth"] for f in plain.raw["faults"]] == [1, 3]


def test_a_dropped_check_keeps_the_pointers_of_the_checks_after_it() -> None:
    """A static-tools profile drops a check; a seed-only or cited check after it keeps its mark
    (else a seed-only wording check would be judged at the core level as the bridge's defect)."""
    expect = {"effects": ["a", "b", "c", "d"], "seed_only": ["/effects/3", "/effects/1"],
              "cites": {"/effects/3/match": ["X-01"], "/effects/1": ["X-02"], "/journal": ["Y"]}}
    profile_edges._keep_checks(expect, "effects", ["a", None, "c", "d"])
    assert expect["effects"] == ["a", "c", "d"]
    assert expect["seed_only"] == ["/effects/2"]
    assert expect["cites"] == {"/effects/2/match": ["X-01"], "/journal": ["Y"]}
