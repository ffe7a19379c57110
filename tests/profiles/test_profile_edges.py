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
