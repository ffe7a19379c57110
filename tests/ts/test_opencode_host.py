"""The OpenCode plugin host drives any OpenCode server plugin through the driver protocol, and the
OpenCode copy of the bridge (reference/opencode) is judged by the catalogue through it.

``plugins/echo.ts`` is a small plugin with one tool and every hook the host maps: each test
below watches one mapping (tool registry and ``tool.definition``, zod argument check,
``tool.execute.before``/``after``, ``chat.message`` and the system transform, bus events,
``dispose``) and what OpenCode cannot do (commands, reload).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.cli import main
from palace_conformance.hosts.node import HostSpecError, host_command

from .support import CATALOGUE_TOOLS, clean_env, host, of_kind, palace, payload

HERE = Path(__file__).resolve().parent
ECHO = f"opencode-plugin:{HERE / 'plugins' / 'echo.ts'}"
COPY = HERE.parents[1] / "reference" / "opencode" / "mempalace.ts"
# every stdio.* and http.* scenario at seed level passes: the child leads its own process group
# (swept at its end), and the answer streams the official SDK does not read alone are guarded
# (docs/choices.md, "The OpenCode plugin copy"); the session preamble is there, so none is
# not applicable, and none fails
#: a plugin has no command-line program of its own (the `cli` capability): its scenarios are
#: not applicable, with that reason, never failed
NOT_APPLICABLE: set[tuple[str, str]] = {("http.cli.palace-down-exits-three", "http"),
                                        ("http.cli.refused-token-exits-six", "http"),
                                        ("stdio.cli.palace-missing-exits-three", "stdio")}
#: what the copy does of the seed (what a run without a profile detects by observation)
OPENCODE_CLAIMS = ["stdio", "http", "wakeup", "feeding", "diary_command", "provenance", "mailbox",
                   "session_preamble", "keepalive"]


def test_loads_the_plugin_and_records_its_tool_as_opencode_shows_it(tmp_path: Path) -> None:
    with host(ECHO, tmp_path) as h:
        hello = h.ok("hello").result
        assert hello["capabilities_source"] == "default"
        # commands come from OpenCode's config (a plugin adds one in its `config` hook); a tool
        # result is one string, so its content parts are not kept apart
        assert "diary_command" in hello["capabilities"]
        assert "result_parts" not in hello["capabilities"]
        loaded = h.ok("load", env=clean_env(tmp_path), cwd=str(tmp_path))
        assert loaded.result["tools"] == ["echo"] and loaded.result["commands"] == []
        [registered] = of_kind(loaded.effects, "tool_registered")
        assert registered["description"] == "Echo the text back (rewritten)"  # tool.definition
        assert registered["parameters"] == {
            "type": "object", "required": ["text"],
            "properties": {"text": {"type": "string"}, "times": {"type": "number"}}}
        assert [e["line"] for e in of_kind(loaded.effects, "stderr")] == [
            f"[echo] info: loaded in {tmp_path}"]  # client.app.log


def test_tool_calls_run_opencode_s_pipeline(tmp_path: Path) -> None:
    with host(ECHO, tmp_path) as h:
        h.ok("load", env=clean_env(tmp_path), cwd=str(tmp_path))
        done = h.ok("call_tool", name="echo", args={"text": "ab", "times": 2}).result
        assert done == {"content": [{"type": "text", "text": "abab!"}], "is_error": False}
        invalid = h.ok("call_tool", name="echo", args={"text": "ab", "times": "x"}).result
        assert invalid["is_error"] is True and invalid["validation"][0].startswith("times:")
        blocked = h.ok("call_tool", name="echo", args={"text": "blocked"}).result
        assert blocked["is_error"] is True and blocked["blocked"] is True
        relayed = h.ok("call_tool", name="echo", args={"text": "bad"}).result
        assert relayed == {"content": [{"type": "text", "text": "palace said no!"}],
                           "is_error": True}
        thrown = h.op("call_tool", name="echo", args={"text": "boom"})
        assert not thrown.ok and thrown.error["kind"] == "connection_closed"
        missing = h.op("call_tool", name="nope", args={})
        assert not missing.ok and missing.error["kind"] == "no_such_tool"


def test_pi_events_map_onto_opencode_hooks(tmp_path: Path) -> None:
    with host(ECHO, tmp_path) as h:
        h.ok("load", env=clean_env(tmp_path), cwd=str(tmp_path))
        h.ok("event", name="session_start", payload={"reason": "startup"})
        h.ok("settle", quiet_ms=50, max_ms=2000)
        prompt = h.ok("event", name="before_agent_start",
                      payload={"prompt": "hi", "systemPrompt": "base"})
        assert prompt.result == {
            "messages": [{"custom_type": "echo-wakeup", "content": "seen: session.created"}],
            "system_prompt": "base\necho system line"}
        assert of_kind(prompt.effects, "injected") == [
            {"kind": "injected", "custom_type": "echo-wakeup", "content": "seen: session.created"}]
        # OpenCode goes idle once, when nothing more is queued (pi's agent_settled): agent_end
        # announces nothing, so a plugin acting on session.idle acts once for the pair
        ended = h.ok("event", name="agent_end", payload={}).effects
        ended += h.ok("settle", quiet_ms=50, max_ms=2000).effects
        assert of_kind(ended, "notify") == []
        # session.idle, on the bus
        settled = h.ok("event", name="agent_settled", payload={}).effects
        settled += h.ok("settle", quiet_ms=50, max_ms=2000).effects
        assert of_kind(settled, "notify") == [
            {"kind": "notify", "level": "info", "message": "idle"}]
        command = h.op("command", name="mempalace-diary", args="")
        assert not command.ok and command.error["kind"] == "no_such_command"
        reload = h.op("reload")
        assert not reload.ok and reload.error["kind"] == "bad_request"
        down = h.ok("shutdown", reason="quit")
        assert [e["line"] for e in of_kind(down.effects, "stderr")] == ["[echo] info: disposed"]
        touched = h.ok("introspect").result["api_touched"]
        assert "client.app.log" in touched and "client.tui.showToast" in touched


def test_session_status_idle_comes_before_session_idle_once(tmp_path: Path) -> None:
    with host(ECHO, tmp_path) as h:
        h.ok("load", env=clean_env(tmp_path), cwd=str(tmp_path))
        h.ok("event", name="session_start", payload={"reason": "startup"})
        h.ok("event", name="agent_end", payload={})
        h.ok("event", name="agent_settled", payload={})
        h.ok("settle", quiet_ms=50, max_ms=2000)
        prompt = h.ok("event", name="before_agent_start", payload={"prompt": "hi"})
        # the bus events the plugin saw, in order (OpenCode's SessionStatus.set(idle))
        [seen] = [m["content"] for m in prompt.result["messages"]]
        assert seen == "seen: session.created,session.status,session.idle"


def test_a_program_the_plugin_runs_is_recorded_as_pi_s_exec_records_it(tmp_path: Path) -> None:
    with host(ECHO, tmp_path) as h:
        h.ok("load", env=clean_env(tmp_path), cwd=str(tmp_path))
        ran = h.ok("call_tool", name="echo", args={"text": "run"})
        assert of_kind(ran.effects, "exec") == [
            {"kind": "exec", "argv": ["sh", "-c", "exit 3"], "exit_code": 3, "timed_out": False}]
        stalled = h.ok("call_tool", name="echo", args={"text": "run-stalled"})
        # the plugin's own kill is its timeout: 128 + SIGTERM, timed out
        assert of_kind(stalled.effects, "exec") == [
            {"kind": "exec", "argv": ["sleep", "30"], "exit_code": 143, "timed_out": True}]
        # a program run is not a bridge child (as pi's exec runs are not)
        assert h.ok("introspect").result["children"] == []


def test_a_bad_spec_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(HostSpecError, match=r"^opencode-plugin: no such file"):
        host_command(f"opencode-plugin:{tmp_path / 'missing.ts'}")
    with pytest.raises(HostSpecError, match=r"unknown option 'x'"):
        host_command(f"{ECHO}?x=1")


def test_the_copy_serves_the_palace_over_stdio(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(f"opencode-plugin:{COPY}", tmp_path / "host") as h:
        effects = h.start_session(fake.bridge_env(), tmp_path)
        registered = of_kind(effects, "tool_registered")
        assert len(registered) == CATALOGUE_TOOLS
        assert [e["name"] for e in of_kind(effects, "command_registered")] == ["mempalace-diary"]
        result = h.ok("call_tool", name="mempalace_search", args={"query": "x"}).result
        assert result["is_error"] is False and payload(result)["query"] == "x"
        # the config command's template, rewritten by the copy's command.execute.before
        diary = h.ok("command", name="mempalace-diary", args="  sprint   review ").effects
        [sent] = of_kind(diary, "user_message")
        assert "mempalace_diary_write" in sent["content"]
        assert 'topic="sprint review"' in sent["content"]
        missing = h.op("command", name="nope", args="")
        assert not missing.ok and missing.error["kind"] == "no_such_command"
        assert h.ok("shutdown", reason="quit").result == {"children_alive": 0}


@pytest.mark.timeout(900)  # 88 results at --jobs 4: minutes on a loaded machine, not 120 s
def test_the_catalogue_passes_the_copy_on_its_transport_scenarios(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "run"
    # a profile, so the scenarios alone judge it at the seed level (the whole-copy run with the
    # golden traces is measured in docs/choices.md, "The OpenCode copy's feeding and diary command")
    profile = tmp_path / "opencode-copy.json"
    profile.write_text(json.dumps({
        "schema_version": 1, "name": "opencode-copy", "entry": f"opencode-plugin:{COPY}",
        "claims": {"capabilities": OPENCODE_CLAIMS, "seed_copy": True}}))
    with pytest.raises(SystemExit):
        main(["run", "--profile", str(profile), "--level", "seed",
              "--select", "stdio.*", "--select", "http.*", "--jobs", "4",
              "--report-dir", str(out)])
    capsys.readouterr()
    results: list[dict[str, Any]] = json.loads((out / "results.json").read_text())["results"]
    status = {(r["scenario"], r["transport"]): r["status"] for r in results}
    from palace_conformance.scenarios.loader import load_catalogue, shipped_roots

    chosen = [s for s in load_catalogue(shipped_roots(slow=False)).scenarios
              if s.subject != "fake" and s.id.startswith(("stdio.", "http."))]
    for transport in ("stdio", "http"):  # every selected scenario got a result on its transport
        owed = sum(transport in s.transports for s in chosen)
        assert sum(t == transport for _, t in status) == owed > 0
    failed = {key for key, verdict in status.items() if verdict in ("failed", "not_testable")}
    assert not failed, "failed: " + "; ".join(
        f"{r['scenario']}[{r['transport']}]: {r['reason']}" for r in results
        if (r["scenario"], r["transport"]) in failed)
    assert {key for key, verdict in status.items() if verdict == "not_applicable"} == NOT_APPLICABLE
    passed = {key for key, verdict in status.items() if verdict == "passed"}
    assert len(passed) == len(status) - len(failed) - len(NOT_APPLICABLE)
