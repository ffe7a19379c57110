"""The pi extension host end to end: a TypeScript bridge under the real driver protocol.

``mirror.ts`` mirrors the reference bridge (tools passed through, wake-up at the start of a
fresh session) but injects its wake-up on every prompt: the second prompt showing a second
injection is the departure a conformance run must be able to see.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from palace_conformance import contract
from palace_conformance import processes as procs
from palace_conformance.resources import tool_catalogue

from .support import CATALOGUE_TOOLS, EXTENSIONS, host, of_kind, palace, payload

MIRROR = f"pi-extension:{EXTENSIONS / 'mirror.ts'}?capabilities=stdio,http,wakeup"
PROBE = f"pi-extension:{EXTENSIONS / 'probe.ts'}"


def catalogue_schemas() -> dict[str, Any]:
    return {t["name"]: t["inputSchema"] for t in tool_catalogue()["tools"]}


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mirror_end_to_end(tmp_path: Path, transport: str) -> None:
    token = "s3cret-token" if transport == "http" else None
    with palace(tmp_path / "palace", transport, token=token) as fake, \
            host(MIRROR, tmp_path / "host") as h:
        hello = h.ok("hello").result
        assert hello["protocol"] == 1 and hello["bridge"] == "pi-extension mirror.ts"
        assert hello["capabilities"] == ["stdio", "http", "wakeup", "result_parts"]
        assert "capabilities_source" not in hello  # given with ?capabilities=: authoritative
        assert hello["runtime"].startswith("node 22.")

        loaded = h.ok("load", env=fake.bridge_env(), cwd=str(tmp_path)).result
        assert loaded == {"tools": [], "commands": [],
                          "events": ["session_start", "before_agent_start", "session_shutdown"]}
        effects = h.ok("event", name="session_start", payload={"reason": "startup"}).effects
        effects += h.ok("settle", quiet_ms=200, max_ms=10000).effects
        registered = of_kind(effects, "tool_registered")
        assert len(registered) == CATALOGUE_TOOLS
        assert {e["name"]: e["parameters"] for e in registered} == catalogue_schemas()
        listed = h.ok("list_tools").result
        assert [t["name"] for t in listed] == [e["name"] for e in registered]

        first = h.ok("event", name="before_agent_start", payload={"prompt": "hi"})
        [message] = first.result["messages"]
        assert message["custom_type"] == "mempalace-wakeup"
        assert "total_drawers" in message["content"]
        assert of_kind(first.effects, "injected") == [{"kind": "injected", **message}]
        mark = fake.mark()
        second = h.ok("event", name="before_agent_start", payload={"prompt": "again"})
        assert len(second.result["messages"]) == 1  # the mirror's one departure (WAKE-02)
        assert [c["tool"] for c in fake.calls(since=mark)] == ["mempalace_status",
                                                                "mempalace_diary_read"]

        mark = fake.mark()
        found = h.ok("call_tool", name="mempalace_search", args={"query": "x", "limit": "3"})
        assert found.result["is_error"] is False
        assert payload(found.result)["query"] == "x"
        [call] = fake.calls("mempalace_search", since=mark)
        assert call["message"]["params"]["arguments"] == {"query": "x", "limit": 3}  # coerced

        invalid = h.ok("call_tool", name="mempalace_search", args={"query": "x", "limit": 1000})
        assert invalid.result["is_error"] is True
        assert invalid.result["validation"] == ["limit: expected <= 100"]
        assert len(fake.calls("mempalace_search")) == 1  # never reached the palace

        rpc = h.op("call_tool", name="mempalace_diary_read", args={}, validate=False)
        assert not rpc.ok and rpc.error["kind"] == "tool_error" and rpc.error["code"] == -32602
        missing = h.op("call_tool", name="mempalace_nope", args={})
        assert not missing.ok and missing.error["kind"] == "no_such_tool"

        seen = h.ok("introspect").result
        assert {"on", "registerTool"} <= set(seen["api_touched"])
        if transport == "stdio":
            [child] = seen["children"]
            assert child["alive"] and child["argv"][0].endswith("mempalace-mcp")
        else:
            assert seen["children"] == []
            requests = fake.records("http_request")
            assert requests and all(r["headers"].get("authorization") == "Bearer <redacted>"
                                    for r in requests)
        assert h.ok("shutdown", reason="quit").result == {"children_alive": 0}
        assert h.ok("exit").result is None
    if transport == "stdio":
        assert [r["code"] for r in fake.records("process_exit")] == [0]


def test_broken_extension_fails_load_and_keeps_stdout_clean(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(f"pi-extension:{EXTENSIONS / 'broken-load.ts'}", tmp_path / "host") as h:
        failed = h.op("load", env=fake.bridge_env(), cwd=str(tmp_path))
        assert not failed.ok and failed.error["kind"] == "exception"
        assert "broken-load: refusing to load" in failed.error["message"]
        assert {"kind": "stderr", "line": "broken-load: about to fail"} in failed.effects
        # the host survived, stays usable, and knows nothing was loaded
        assert h.ok("hello").result["protocol"] == 1
        later = h.op("list_tools")
        assert not later.ok and later.error["kind"] == "bad_request"
        unknown = h.op("teleport")
        assert not unknown.ok and unknown.error["kind"] == "bad_request"
        assert h.client.dead is None


def test_stdout_writes_by_the_extension_become_stderr_effects(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(f"pi-extension:{EXTENSIONS / 'noisy.ts'}", tmp_path / "host") as h:
        loaded = h.ok("load", env=fake.bridge_env(), cwd=str(tmp_path))
        lines = [e["line"] for e in of_kind(loaded.effects, "stderr")]
        assert lines == ["noisy: console.log at load", "noisy: stdout.write at load",
                         "noisy: console.error at load"]
        [tool] = of_kind(loaded.effects, "tool_registered")
        assert tool["parameters"]["properties"]["times"] == {"type": "integer", "minimum": 1}
        echoed = h.ok("call_tool", name="noisy_echo", args={"text": "ab", "times": 2})
        assert echoed.result == {"content": [{"type": "text", "text": "abab"}],
                                 "is_error": False, "details": {"times": 2}}
        assert of_kind(echoed.effects, "stderr") == [{"kind": "stderr", "line": "noisy: echo ab"}]
        assert h.ok("exit").result is None
        # a stray stdout line would have killed the client with a protocol violation
        assert h.client.dead is None
        stderr = h.client.stderr_text()
        assert "noisy: child inherited stdout" in stderr
        assert "noisy: async child stdout" in stderr


def test_probe_effects_error_kinds_and_deadlines(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, host(PROBE, tmp_path / "host") as h:
        hello = h.ok("hello").result
        assert hello["capabilities"][:2] == ["stdio", "http"]
        # nobody said what probe.ts can do: all of them are a placeholder the runner replaces
        assert hello["capabilities"] == list(contract.CAPABILITIES)
        assert hello["capabilities_source"] == "default"
        h.ok("load", env=fake.bridge_env(PROBE_KEY="one"), cwd=str(tmp_path))
        started = h.ok("event", name="session_start", payload={"reason": "startup"})
        assert of_kind(started.effects, "tool_registered") == []
        late = h.ok("settle", quiet_ms=500, max_ms=5000)  # collects the late registration
        assert [e["name"] for e in of_kind(late.effects, "tool_registered")] == ["probe_late"]
        assert late.host_ms is not None and late.host_ms >= 500
        assert payload_text(h.ok("call_tool", name="probe_late", args={})) == str(tmp_path)

        ran = h.ok("command", name="probe", args="tidy up")
        kinds = [e["kind"] for e in ran.effects]
        assert kinds == ["message", "user_message", "notify", "exec", "exec"]
        message, user, notify, failed, slow = ran.effects
        assert message == {"kind": "message", "custom_type": "probe-note",
                           "content": "note tidy up", "display": False, "details": None,
                           "deliver_as": "steer", "trigger_turn": False}
        assert user == {"kind": "user_message", "content": "please tidy up",
                        "deliver_as": "followUp"}
        assert notify == {"kind": "notify", "level": "warning", "message": "probed tidy up"}
        assert failed == {"kind": "exec", "argv": ["sh", "-c", "exit 3"], "exit_code": 3,
                          "timed_out": False}
        assert slow["argv"] == ["sleep", "5"] and slow["timed_out"] is True
        assert slow["exit_code"] == 143  # SIGTERM, as pi reports it
        assert ran.host_ms is not None and ran.host_ms < 4000  # the 5 s sleep was cut short

        settled = h.ok("event", name="agent_settled", payload={})
        assert settled.effects == [{"kind": "error", "where": "agent_settled",
                                    "message": "Error: agent_settled handler exploded"}]
        assert h.op("command", name="nope").error["kind"] == "no_such_command"

        assert payload_text(h.ok("call_tool", name="probe_env", args={"key": "PROBE_KEY"})) == "one"
        assert h.ok("set_env", env={"PROBE_KEY": "two"}).result is None
        assert payload_text(h.ok("call_tool", name="probe_env", args={"key": "PROBE_KEY"})) == "two"
        h.ok("set_env", env={"PROBE_KEY": None})
        assert payload_text(h.ok("call_tool", name="probe_env",
                                 args={"key": "PROBE_KEY"})) == "<unset>"

        hung = h.op("call_tool", name="probe_hang", args={}, timeout_ms=300, deadline_ms=300)
        assert not hung.ok and hung.error["kind"] == "host_timeout"
        assert 299 <= hung.host_ms < 2000  # the host's own clock may read 299.97 at 300 ms
        expected = {"probe_timeout": "timeout", "probe_rpc_error": "tool_error",
                    "probe_crash": "exception"}
        for tool, kind in expected.items():
            reply = h.op("call_tool", name=tool, args={})
            assert not reply.ok and reply.error["kind"] == kind, (tool, reply.error)
        rpc = h.op("call_tool", name="probe_rpc_error", args={})
        assert rpc.error["code"] == -32602 and rpc.error["data"] == {"tool": "x"}

        seen = h.ok("introspect").result["api_touched"]
        assert {"registerCommand", "sendMessage", "sendUserMessage", "exec", "ctx.ui.notify",
                "ctx.cwd", "on", "registerTool"} <= set(seen)
        assert h.ok("shutdown").result == {"children_alive": 0}


def payload_text(reply: Any) -> str:
    return reply.result["content"][0]["text"]


def test_a_child_with_inherited_stderr_is_recorded_as_the_bridges_stderr(tmp_path: Path) -> None:
    """``stdio: "inherit"`` (the official SDK's default for its child) would write past the
    host's recorder: the host pipes it and records each line, at load and in a tool call, for
    ``spawn``, ``spawnSync``, ``execFileSync`` and ``execSync`` children alike (a failing
    ``execFileSync`` still throws its exit status)."""
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(f"pi-extension:{EXTENSIONS / 'inherit-stderr.ts'}", tmp_path / "host") as h:
        loaded = h.ok("load", env=fake.bridge_env(), cwd=str(tmp_path))
        assert [e["line"] for e in of_kind(loaded.effects, "stderr")] == [
            "child: first line", "child: no newline", "sync child: one", "sync child: two",
            "execFileSync child: one", "execSync child: one", "execFileSync child: failing"]
        echoed = h.ok("call_tool", name="inherit_echo", args={"text": "hello"})
        assert [e["line"] for e in of_kind(echoed.effects, "stderr")] == [
            "child: hello", "sync child: hello", "execSync child: hello"]
        observed = h.ok("introspect").result["observed"]["spawned"]
        assert {"argv": ["true"]} in observed  # spawnSync(file, options) still counted
        assert h.ok("exit").result is None
        assert h.client.dead is None
        assert "child: first line" in h.client.stderr_text()  # still on the host's stderr


def test_a_child_the_spawn_hook_missed_is_found_and_ended(tmp_path: Path) -> None:
    """A child started past ``child_process`` (a native addon's) is still one of the bridge's
    children: listed by ``introspect`` and SIGKILLed by the host's last resort at exit."""
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(f"pi-extension:{EXTENSIONS / 'unhooked-child.ts'}", tmp_path / "host") as h:
        h.ok("load", env=fake.bridge_env(), cwd=str(tmp_path))
        started = payload(h.ok("call_tool", name="start_unhooked", args={}).result)
        assert started["code"] == 0
        pid = started["pid"]
        assert procs.alive(pid)
        children = h.ok("introspect").result["children"]
        assert {"pid": pid, "argv": ["sleep", "60"], "alive": True} in children
        assert h.ok("exit").result is None
        deadline = time.monotonic() + 10
        while procs.alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not procs.alive(pid)
