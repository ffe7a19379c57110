"""pi's ``/reload`` under the Node hosts: the extension host re-imports the extension as a new
instance and keeps the old one's children in view; pi's MCP client host has nothing to reload.

``reloadable.ts`` closes its client at every ``session_shutdown``; ``reload-leak.ts`` is the same
bridge ignoring one whose reason is ``reload``: the shipped reload scenario must fail it, on the
first child still alive, and pass the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from palace_conformance.runner.execution.execute import RunOptions, run_scenario
from palace_conformance.runner.results import CORE
from palace_conformance.runner.selection import host_argv
from palace_conformance.scenarios.loader import load_scenario, scenarios_dir
from palace_conformance.scenarios.model import Scenario

from .support import CATALOGUE_TOOLS, host, of_kind, palace

RELOADABLE = f"pi-extension:{Path(__file__).resolve().parent / 'extensions' / 'reloadable.ts'}"
LEAKY = f"pi-extension:{Path(__file__).resolve().parent / 'extensions' / 'reload-leak.ts'}"
STDIO_RELOAD = "life.reload.stdio-old-child-exits"
HTTP_RELOAD = "life.reload.http-keeps-working"


def shipped(sid: str) -> Scenario:
    return load_scenario(scenarios_dir() / "life" / f"{sid}.json")


def stderr_lines(effects: list[dict[str, Any]]) -> list[str]:
    return [e["line"] for e in of_kind(effects, "stderr") if e["line"].startswith("reloadable:")]


def test_reload_imports_a_new_instance_and_keeps_the_old_child_in_view(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, host(RELOADABLE, tmp_path / "host") as h:
        effects = h.start_session(fake.bridge_env(), tmp_path)
        assert stderr_lines(effects) == ["reloadable: module loads 1, process loads 1"]
        assert len(of_kind(effects, "tool_registered")) == CATALOGUE_TOOLS
        assert h.ok("call_tool", name="mempalace_status", args={}).result["is_error"] is False
        [first] = h.ok("introspect").result["children"]

        reloaded = h.ok("reload")
        # a fresh module (its counter starts over) in the same process; the old ctx's signal
        # was aborted; nothing is registered before the new session_start
        assert stderr_lines(reloaded.effects) == ["reloadable: signal aborted (startup)",
                                                  "reloadable: module loads 1, process loads 2"]
        assert reloaded.result == {"tools": [], "commands": [],
                                   "events": ["session_start", "session_shutdown"]}
        missing = h.op("call_tool", name="mempalace_status", args={})
        assert not missing.ok and missing.error["kind"] == "no_such_tool"

        h.ok("event", name="session_start", payload={"reason": "reload"})
        h.ok("settle", quiet_ms=200, max_ms=15000)
        assert h.ok("call_tool", name="mempalace_status", args={}).result["is_error"] is False
        children = h.ok("introspect").result["children"]
        assert len(children) == 2 and children[0]["pid"] == first["pid"]
        assert [c["alive"] for c in children] == [False, True]
        assert h.ok("shutdown", reason="quit").result == {"children_alive": 0}
    calls = [c["pid"] for c in fake.calls("mempalace_status")]
    assert calls == [first["pid"], children[1]["pid"]]


def test_the_reload_scenario_fails_a_bridge_that_leaks_its_child_on_reload(
        tmp_path: Path) -> None:
    scenario = shipped(STDIO_RELOAD)
    good = run_scenario(scenario, "stdio", _options(RELOADABLE, tmp_path / "good"))
    assert good.status == "passed", good.reason
    leaky = run_scenario(scenario, "stdio", _options(LEAKY, tmp_path / "leaky"))
    assert leaky.status == "failed"
    failed = {c.pointer for c in leaky.checks if not c.passed}
    # the leaked child is caught on the wire at the reload step; at the end the host's own exit
    # sweep ends it, and a child that does not outlive the host is no orphan (docs/choices.md)
    assert "/steps/5/expect/journal/0" in failed
    assert all(c.level == CORE for c in leaky.checks if not c.passed)


def test_pi_mcp_has_nothing_to_reload_and_the_scenarios_are_not_applicable(
        tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, host("pi-mcp", tmp_path / "host") as h:
        h.start_session(fake.bridge_env(), tmp_path)
        refused = h.op("reload")
        assert not refused.ok and refused.error["kind"] == "bad_request"
        assert "not a pi extension" in refused.error["message"]
        assert h.ok("list_tools").result  # still loaded, still answering
    for sid, transport in ((STDIO_RELOAD, "stdio"), (HTTP_RELOAD, "http")):
        result = run_scenario(shipped(sid), transport, _options("pi-mcp", tmp_path / sid))
        assert result.status == "not_applicable", result.reason
        assert result.reason.startswith("Not applicable: the host cannot reload its bridge: "
                                        "pi's MCP client is not a pi extension")


def _options(spec: str, work: Path) -> RunOptions:
    work.mkdir(parents=True)
    return RunOptions(host_argv=host_argv(spec), level=CORE, work_root=work)
