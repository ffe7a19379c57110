"""Shipped scenarios against the real fake: they pass with a correct peer and fail with a wrong one.

A fixture that cannot fail proves nothing, so each check here runs twice: once against behaviour
the scenario demands, once against a deliberate mutation of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake.faults import FaultPlan
from palace_conformance.fake.journal import read_journal
from palace_conformance.scenarios.checks import evaluate_processes, process_facts

from .live import HttpFake, StdioFake, journal_verdicts, play_fake_scenario
from .shipped import scenario as shipped

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "scripted-bridge", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def search(request_id: int, query: str = "anything") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "mempalace_search", "arguments": {"query": query}}}


def write_plan(root: Path, plan: FaultPlan | list[dict[str, Any]]) -> Path:
    path = root / "plan.json"
    data = plan.to_json() if isinstance(plan, FaultPlan) else {"schema_version": 1, "faults": plan}
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_fake_fidelity_scenario_passes_against_the_fake(tmp_path: Path, transport: str) -> None:
    scenario = shipped("fake.handshake.catalogue-and-versions")
    verdicts = play_fake_scenario(scenario, transport, tmp_path)
    assert len(verdicts) >= 8
    assert [v.detail for v in verdicts if not v.passed] == []


def test_fake_fidelity_scenario_catches_a_drifted_catalogue(tmp_path: Path) -> None:
    scenario = shipped("fake.handshake.catalogue-and-versions")
    status_only = {"tools": [{"name": "mempalace_status", "inputSchema": {"type": "object"}}]}
    drifted = [{"id": "lost-a-tool", "on": {"method": "tools/list"}, "action": "result",
                "result": status_only}]
    verdicts = play_fake_scenario(scenario, "stdio", tmp_path, write_plan(tmp_path, drifted))
    failed = [v.detail for v in verdicts if not v.passed]
    assert any("missing" in d for d in failed) and any("schemas differ" in d for d in failed)


def _handshake(fake: StdioFake, calls_before_initialized: bool = False) -> None:
    assert fake.send(INIT) is not None
    if calls_before_initialized:
        assert fake.send(search(3)) is not None
    fake.send(INITIALIZED)
    assert fake.send(TOOLS_LIST) is not None


def test_handshake_scenario_judges_the_wire(tmp_path: Path) -> None:
    scenario = shipped("life.handshake.initialize-first")
    good = tmp_path / "good.jsonl"
    fake = StdioFake(tmp_path / "good", good)
    _handshake(fake)
    assert fake.send(search(4, "fixture loader")) is not None
    fake.close()
    assert [v.detail for v in journal_verdicts(scenario, good, "stdio") if not v.passed] == []

    hasty = tmp_path / "hasty.jsonl"
    fake = StdioFake(tmp_path / "hasty", hasty)
    _handshake(fake, calls_before_initialized=True)
    fake.close()
    failed = [v.detail for v in journal_verdicts(scenario, hasty, "stdio") if not v.passed]
    assert any("comes before 'first'" in d for d in failed)


def test_respawn_scenario_judges_a_respawning_and_a_giving_up_client(tmp_path: Path) -> None:
    scenario = shipped("stdio.respawn.after-crash")
    plan = write_plan(tmp_path, scenario.faults)

    def client(name: str, respawn: bool) -> list[str]:
        journal = tmp_path / f"{name}.jsonl"
        first = StdioFake(tmp_path / name, journal, plan)
        _handshake(first)
        assert first.send(search(3)) is None  # the fault: the child exits before replying
        assert first.close() == 1
        if respawn:
            second = StdioFake(tmp_path / name, journal, plan)
            _handshake(second)
            reply = second.send(search(3))
            assert reply is not None and "result" in reply
            second.close()
        verdicts = journal_verdicts(scenario, journal, "stdio")
        processes = scenario.expect.processes
        assert processes is not None
        facts = process_facts(read_journal(journal), alive=lambda pid: False)
        verdicts += evaluate_processes(processes, facts)
        return [v.detail for v in verdicts if not v.passed]

    assert client("healer", respawn=True) == []
    failed = client("quitter", respawn=False)
    assert any("distinct value" in d for d in failed)
    assert any("stdio child(ren) spawned" in d for d in failed)


def test_404_scenario_judges_http_clients(tmp_path: Path) -> None:
    scenario = shipped("http.session.404-reinit-and-retry-once")
    version = {"MCP_Protocol_Version": "2025-06-18"}
    journal = tmp_path / "journal.jsonl"
    fake = HttpFake(tmp_path, journal, None, "--sessions")

    def client(reinitialize: bool) -> list[str]:
        fake.control("POST", "faults", scenario.faults.to_json())
        mark = len(read_journal(journal))
        sid = fake.post(INIT).headers["mcp-session-id"]
        fake.post(INITIALIZED, Mcp_Session_Id=sid, **version)
        fake.post(TOOLS_LIST, Mcp_Session_Id=sid, **version)
        assert fake.post(search(3), Mcp_Session_Id=sid, **version).status_code == 404
        if reinitialize:
            sid = fake.post(INIT).headers["mcp-session-id"]
            fake.post(INITIALIZED, Mcp_Session_Id=sid, **version)
        fake.post(search(3), Mcp_Session_Id=sid, **version)
        fake.control("DELETE", "faults")
        return [v.detail for v in journal_verdicts(scenario, journal, "http", mark) if not v.passed]

    try:
        assert client(reinitialize=True) == []
        assert any("not found after the earlier" in d for d in client(reinitialize=False))
    finally:
        fake.close()


def test_bearer_scenario_judges_http_clients(tmp_path: Path) -> None:
    scenario = shipped("http.auth.bearer-on-every-request")
    token = scenario.http.token
    assert token is not None
    journal = tmp_path / "journal.jsonl"
    fake = HttpFake(tmp_path, journal, None, "--token", token)
    bearer = {"Authorization": f"Bearer {token}"}

    def client(on_notifications: bool) -> list[str]:
        mark = len(read_journal(journal))
        fake.post(INIT, **bearer)
        fake.post(INITIALIZED, **(bearer if on_notifications else {}))
        fake.post(TOOLS_LIST, **bearer)
        fake.post(search(3), **bearer)
        return [v.detail for v in journal_verdicts(scenario, journal, "http", mark) if not v.passed]

    try:
        assert client(on_notifications=True) == []
        assert len(client(on_notifications=False)) == 2  # the bare request and its 401
    finally:
        fake.close()
    assert token not in journal.read_text()  # what wire_secrets will check
