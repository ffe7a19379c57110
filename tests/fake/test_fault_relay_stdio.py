"""The stdio fault relay (``relay/fault_stdio.py``) in front of a stand-in upstream (the fake
itself, with a journal of its own, so what reached the upstream is on record): the answers of
messages no fault touches come back byte for byte, a swallowing fault never reaches the
upstream, and the fake's plan fires in the relay with the fake's journal records. Against the
real mempalace: ``tests/real/test_fault_relay_verdicts.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .stdio_harness import FakeProcess, payload

KIT = Path(__file__).resolve().parents[2] / "conformance"
UPSTREAM = [sys.executable, "-c", f"import sys; sys.path[:0] = [{str(KIT)!r}]; "
            "from palace_conformance.fake.cli import fake_mcp_main; fake_mcp_main()"]


def relay(tmp_path: Path, faults: list[dict[str, Any]]) -> tuple[FakeProcess, Path]:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schema_version": 1, "faults": faults}))
    upstream_journal = tmp_path / "upstream.jsonl"
    config = tmp_path / "relay.json"
    config.write_text(json.dumps({
        "journal": str(tmp_path / "journal.jsonl"), "palace": str(tmp_path / "palace"),
        "plan": str(plan), "command": UPSTREAM,
        "env": {"PALACE_FAKE_JOURNAL": str(upstream_journal),
                "PALACE_FAKE_STATE": str(tmp_path / "upstream-state.json")}}))
    command = [sys.executable, "-c", f"import sys; sys.path[:0] = [{str(KIT)!r}]; "
               f"from palace_conformance.relay.fault_stdio import main; main({str(config)!r})"]
    return FakeProcess(tmp_path, command=command, palace_arg=False), upstream_journal


def upstream_tools(journal: Path) -> list[str | None]:
    """The tools the upstream was called with (none when it never journaled: killed while it
    was still starting)."""
    text = journal.read_text() if journal.exists() else ""
    records = [json.loads(line) for line in text.splitlines() if line]
    return [r.get("tool") for r in records if r.get("kind") == "recv"
            and r.get("method") == "tools/call"]


def test_untouched_answers_pass_byte_for_byte_and_a_stall_never_reaches_upstream(
        tmp_path: Path) -> None:
    faults = [{"id": "hold", "on": {"tool": "mempalace_list_wings"}, "action": "stall",
               "ms": 300},
              {"id": "older", "on": {"method": "initialize"}, "action": "negotiate_version",
               "version": "2025-03-26"}]
    proc, upstream = relay(tmp_path, faults)
    with proc:
        init = proc.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "t", "version": "1"}})
        assert init["result"]["protocolVersion"] == "2025-03-26"  # rewritten by the fault
        assert init["result"]["serverInfo"]["name"]  # the rest is the upstream's
        proc.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": "mempalace_status", "arguments": {}}})
        line = proc.recv_line()
        assert json.loads(line)["id"] == 7 and payload(json.loads(line))["total_drawers"] == 0
        assert line == (json.dumps(json.loads(line), ensure_ascii=False) + "\n").encode()
        proc.send({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                   "params": {"name": "mempalace_list_wings", "arguments": {}}})
        proc.assert_silent(0.2)  # held, then dropped: no answer at all
        proc.ping()  # one at a time: answered only once the stall has passed
        assert upstream_tools(upstream) == ["mempalace_status"]  # the stalled one never went up
        faults_fired = proc.records("fault")
        assert {f["fault_id"] for f in faults_fired} == {"hold", "older"}
        assert proc.records("stall_end")
        # how long the initialize waited on the upstream's start, once (the judge's allowance)
        started = proc.records("server_start")
        assert len(started) == 1 and isinstance(started[0]["ms"], int) and started[0]["ms"] >= 0


def test_a_crash_ends_the_relay_and_the_upstream_with_the_faults_code(tmp_path: Path) -> None:
    faults = [{"id": "die", "on": {"tool": "mempalace_status"}, "action": "exit", "code": 75},
              {"id": "held", "on": {"tool": "mempalace_add_drawer"}, "action": "lock_held",
               "pid": 99}]
    proc, upstream = relay(tmp_path, faults)
    with proc:
        refused = proc.call("mempalace_add_drawer", {"wing": "w", "room": "r", "content": "c"})
        assert refused["error"]["code"] == -32001 and "99" in refused["error"]["data"]["reason"]
        proc.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                   "params": {"name": "mempalace_status", "arguments": {}}})
        assert proc.wait() == 75
        assert upstream_tools(upstream) == []  # neither the refusal nor the crash asked it
        exits = proc.records("process_exit")
        assert exits and exits[-1]["code"] == 75
