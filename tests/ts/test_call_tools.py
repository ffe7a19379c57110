"""The Node hosts' ``call_tools`` op: every call at once, through the host's ``call_tool`` path.

The fake holds the status 1.5 s; a host that ran the calls one after the other would send the
search only after the status's answer. The journal's order is the evidence, never wall time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import EXTENSIONS, host, palace, payload

MIRROR = f"pi-extension:{EXTENSIONS / 'mirror.ts'}?capabilities=stdio,http,wakeup"


@pytest.mark.parametrize("spec", [MIRROR, "pi-mcp"], ids=["extension-host", "mcp-host"])
def test_call_tools_starts_every_call_at_once_and_answers_in_order(tmp_path: Path,
                                                                   spec: str) -> None:
    with palace(tmp_path / "palace", "http", faults=("delay@mempalace_status,ms=1500",)) as fake, \
            host(spec, tmp_path / "host") as h:
        h.start_session(fake.bridge_env(), tmp_path)
        mark = fake.mark()
        reply = h.ok("call_tools", calls=[
            {"name": "mempalace_status", "args": {}},
            {"name": "mempalace_search", "args": {"query": "x"}},
            {"name": "mempalace_nope", "args": {}}])
        status, search, missing = reply.result["calls"]
        assert status["ok"] and status["result"]["is_error"] is False
        assert "total_drawers" in status["result"]["content"][0]["text"]
        assert search["ok"] and payload(search["result"])["query"] == "x"
        assert missing["ok"] is False and missing["error"]["kind"] == "no_such_tool"
        assert all(isinstance(call["ms"], int | float) for call in (status, search, missing))
        records = fake.records(since=mark)
        [status_recv] = [i for i, r in enumerate(records)
                         if r["kind"] == "recv" and r.get("tool") == "mempalace_status"]
        [search_recv] = [i for i, r in enumerate(records)
                         if r["kind"] == "recv" and r.get("tool") == "mempalace_search"]
        [status_answer] = [i for i, r in enumerate(records) if r["kind"] == "http_response"
                           and r.get("conn") == records[status_recv]["conn"]]
        assert search_recv < status_answer  # the search went out while the status was held


def test_call_tools_needs_two_to_eight_calls(tmp_path: Path) -> None:
    with host("pi-mcp", tmp_path / "host") as h:
        h.ok("hello")
        refused = h.op("call_tools", calls=[{"name": "mempalace_status"}])
        assert not refused.ok and refused.error["kind"] == "bad_request"
        assert "2 to 8" in refused.error["message"]
