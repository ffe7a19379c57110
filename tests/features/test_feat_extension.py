"""The plugin wiring: tools with schemas unchanged, stamped execute, events onto the features."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from palace_bridge.clock import FakeClock
from palace_bridge.errors import PalaceToolError
from palace_bridge.extension import Bridge, activate
from palace_bridge.host import RecordingHost
from palace_conformance.resources import tool_catalogue

from .fakes import FakeClient, FakeSpec, ScriptedExec

SHARED = {"MEMPALACE_PI_DEVICE": "tor-ms22", "MEMPALACE_REMOTE_URL": "https://palace.test/mcp",
          "MEMPALACE_PI_SSH_TARGET": "palace@host"}


def catalogue_specs() -> list[FakeSpec]:
    return [FakeSpec(t["name"], t["description"], t["inputSchema"], t.get("annotations"))
            for t in tool_catalogue()["tools"]]


def load(env: dict[str, str], client: FakeClient | None = None,
         scripted: ScriptedExec | None = None) -> tuple[Bridge, RecordingHost, FakeClient,
                                                        ScriptedExec, FakeClock]:
    client = client or FakeClient(specs=catalogue_specs())
    scripted = scripted or ScriptedExec()
    host = RecordingHost(exec_impl=scripted)
    clock = FakeClock()
    bridge = asyncio.run(activate(host, env, client=client, clock=clock))
    return bridge, host, client, scripted, clock


def test_every_tool_is_registered_with_its_schema_unchanged() -> None:
    specs = catalogue_specs()
    pristine = copy.deepcopy([s.input_schema for s in specs])
    _, host, _, _, _ = load({}, FakeClient(specs=specs))
    registered = host.of_kind("tool_registered")
    assert [r["name"] for r in registered] == [s.name for s in specs]
    assert len(registered) == 47
    for reg, spec, schema in zip(registered, specs, pristine, strict=True):
        assert reg["parameters"] is spec.input_schema and reg["parameters"] == schema
        assert reg["description"] == spec.description
    assert host.of_kind("command_registered")[0]["name"] == "mempalace-diary"
    assert set(host.handlers) == {"session_start", "before_agent_start", "agent_settled",
                                  "session_shutdown"}


def test_unavailable_palace_registers_nothing_and_the_host_goes_on() -> None:
    client = FakeClient(specs=catalogue_specs(), start_ok=False)
    bridge, host, _, scripted, _ = load({}, client)

    async def session() -> list[Any]:
        await host.emit("session_start", {"reason": "startup"})
        injected = await host.emit("before_agent_start", {"prompt": "hi"})
        await host.emit("agent_settled", {})
        await host.emit("session_shutdown", {"reason": "quit"})
        return injected

    assert asyncio.run(session()) == []
    assert not bridge.available
    assert host.of_kind("tool_registered") == [] and host.of_kind("command_registered") == []
    assert host.of_kind("error") == [] and scripted.calls == [] and client.calls == []
    assert client.stopped == 1


def test_execute_passes_arguments_unchanged_without_the_gates() -> None:
    _, host, client, _, _ = load({"MEMPALACE_PI_DEVICE": "tor-ms22"})
    args = {"wing": "w", "room": "r", "content": "c", "n": [1, 2.5, {"x": None}]}
    asyncio.run(host.call_tool("mempalace_add_drawer", args))
    [(name, sent, _)] = client.calls
    assert name == "mempalace_add_drawer" and json.dumps(sent) == json.dumps(args)


def test_execute_stamps_with_both_gates() -> None:
    _, host, client, _, _ = load(SHARED)

    async def calls() -> None:
        await host.call_tool("mempalace_add_drawer", {"wing": "w", "room": "r", "content": "c"})
        await host.call_tool("mempalace_diary_write", {"agent_name": "pi", "entry": "E"})
        await host.call_tool("mempalace_search", {"query": "q"})

    asyncio.run(calls())
    assert client.calls[0][1]["added_by"] == "pi@tor-ms22"
    assert client.calls[1][1]["entry"] == "HOST:tor-ms22|E"
    assert client.calls[2][1] == {"query": "q"}


def test_execute_returns_the_tool_result_and_raises_palace_errors() -> None:
    def broken(args: dict) -> Any:
        raise PalaceToolError(-32602, "Unknown parameter 'agent' for tool mempalace_diary_read")

    client = FakeClient(specs=catalogue_specs(), handlers={"mempalace_diary_read": broken})
    _, host, _, _, _ = load({}, client)
    outcome = asyncio.run(host.call_tool("mempalace_status", {}))
    assert not outcome.is_error and "PROTOCOL-TEXT" in outcome.text
    with pytest.raises(PalaceToolError) as caught:
        asyncio.run(host.call_tool("mempalace_diary_read", {"agent": "pi"}))
    assert caught.value.code == -32602


def test_a_whole_session_over_the_host() -> None:
    env = {**SHARED, "MEMPALACE_AGENT_NAME": "pi-box", "MEMPALACE_MAILBOX_POLL_MS": "1000"}
    owed = {"id": "evt_1", "seq": 3, "from_agent": "pi@laptop", "to_agent": "pi@tor-ms22",
            "status": "open", "type": "task.request", "body": "OWED-BODY"}
    inbox: list[dict] = []
    client = FakeClient(specs=catalogue_specs(), handlers={"mempalace_event_list": lambda a: {
        "events": inbox if "to_agent" in a else [], "count": len(inbox)}})
    bridge, host, client, scripted, clock = load(env, client)

    async def session() -> list[Any]:
        await host.emit("session_start", {"reason": "startup"})
        injected = await host.emit("before_agent_start", {"prompt": "hi"})
        inbox.append(owed)
        clock.advance(1000)
        await host.emit("agent_settled", {})
        await bridge.drain()
        await host.emit("session_shutdown", {"reason": "quit"})
        return injected

    [wakeup] = asyncio.run(session())
    assert wakeup.custom_type == "mempalace-wakeup"
    assert ("mempalace_diary_read", {"agent_name": "pi-box"}, None) in client.calls
    [steer] = host.of_kind("message")
    assert steer["custom_type"] == "mempalace-mailbox" and "OWED-BODY" in steer["content"]
    assert [c["argv"][3] for c in scripted.calls] == ["agent_settled", "session_shutdown"]
    mines = client.called("mempalace_mine")
    assert len(mines) == 2 and all(m["agent"] == "pi@tor-ms22" for m in mines)
    assert client.stopped == 1
    kinds = [e["kind"] for e in host.effects]
    assert kinds.index("injected") < kinds.index("message")
    assert host.of_kind("error") == []


def test_shutdown_joins_the_in_flight_settled_feed_then_stops_the_client() -> None:
    scripted = ScriptedExec()
    _, host, client, scripted, _ = load({}, scripted=scripted)

    async def session() -> None:
        scripted.gate = asyncio.Event()
        await host.emit("agent_settled", {})
        await asyncio.sleep(0.01)
        shutdown = asyncio.ensure_future(host.emit("session_shutdown", {"reason": "quit"}))
        await asyncio.sleep(0.01)
        assert client.stopped == 0  # the stop waits for the feed
        scripted.gate.set()
        await shutdown

    asyncio.run(session())
    assert len(scripted.calls) == 1 and len(client.called("mempalace_mine")) == 1
    assert client.stopped == 1


def first_turn(bridge: Any, host: Any, *, then_shutdown: bool) -> None:
    """session_start, a prompt and one settle whose background work is drained; then, if asked,
    session_shutdown."""

    async def session() -> None:
        await host.emit("session_start", {"reason": "startup"})
        await host.emit("before_agent_start", {"prompt": "hi"})
        await host.emit("agent_settled", {})
        await bridge.drain()
        if then_shutdown:
            await host.emit("session_shutdown", {"reason": "quit"})

    asyncio.run(session())


def test_config_warnings_reach_stderr() -> None:
    _, host, _, _, _ = load({"MEMPALACE_FEED_DEBOUNCE_MS": "soon"})
    [line] = host.of_kind("stderr")
    assert "MEMPALACE_FEED_DEBOUNCE_MS" in line["line"]


def test_feed_and_mailbox_knobs_off() -> None:
    env = {**SHARED, "MEMPALACE_FEED": "0", "MEMPALACE_MAILBOX": "0"}
    bridge, host, client, scripted, _ = load(env)
    first_turn(bridge, host, then_shutdown=True)
    assert scripted.calls == []
    assert [c[0] for c in client.calls] == ["mempalace_status", "mempalace_diary_read"]


@pytest.mark.parametrize(("dropped", "has_mailbox"), [
    (None, True),  # control: both gates hold
    ("MEMPALACE_PI_DEVICE", False),
    ("MEMPALACE_REMOTE_URL", False),
])
def test_a_missing_gate_leaves_no_mailbox_and_no_mailbox_call(dropped: str | None,
                                                              has_mailbox: bool) -> None:
    """MAIL-01: a Mailbox always has an address; without a gate there is none, so no call."""
    env = {k: v for k, v in {**SHARED, "MEMPALACE_FEED": "0",
                             "MEMPALACE_MAILBOX_POLL_MS": "0"}.items() if k != dropped}
    bridge, host, client, _, _ = load(env)
    first_turn(bridge, host, then_shutdown=False)
    assert (bridge.mailbox is not None) is has_mailbox
    assert ("mempalace_event_list" in [c[0] for c in client.calls]) is has_mailbox
    assert host.of_kind("message") == []


def test_the_client_is_created_once_at_load_from_a_snapshot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import palace_bridge.client

    made: list[dict[str, str]] = []
    client = FakeClient(specs=catalogue_specs())

    def create_client(env: Any, *, stderr: Any = None) -> FakeClient:
        made.append(dict(env))
        return client

    monkeypatch.setattr(palace_bridge.client, "create_client", create_client)
    scripted = ScriptedExec()
    host = RecordingHost(exec_impl=scripted)
    env = {"MEMPALACE_AGENT_NAME": "pi-one"}

    async def session() -> None:
        bridge = await activate(host, env, clock=FakeClock())
        env["MEMPALACE_AGENT_NAME"] = "pi-two"  # too late: read at load
        env["MEMPALACE_REMOTE_URL"] = "https://elsewhere/mcp"
        await host.emit("session_start", {"reason": "startup"})
        await host.emit("before_agent_start", {"prompt": "hi"})
        await host.emit("agent_settled", {})
        await bridge.drain()
        await host.emit("session_shutdown", {"reason": "quit"})

    asyncio.run(session())
    assert made == [{"MEMPALACE_AGENT_NAME": "pi-one"}]
    assert client.called("mempalace_diary_read") == [{"agent_name": "pi-one"}]
    assert "MEMPALACE_REMOTE_URL" not in scripted.calls[0]["env"]


def test_a_bug_in_background_work_becomes_one_stderr_line() -> None:
    """The guard around background work: a bug is one stderr line, never an escaped exception,
    and a cancelled task (shutdown abandoning a poll) is left cancelled, with nothing logged."""
    bridge, host, _, _, _ = load({})

    async def broken() -> None:
        raise KeyError("oops")

    async def run() -> tuple[Any, asyncio.Future[Any]]:
        failed = bridge.background("feed", broken())
        stalled = bridge.background("mailbox", asyncio.sleep(60))
        await asyncio.sleep(0)
        stalled.cancel()
        await bridge.drain()
        return failed.result(), stalled

    result, stalled = asyncio.run(run())
    assert result is None and stalled.cancelled()
    [line] = host.of_kind("stderr")
    assert line["line"].startswith("mempalace: feed: internal error")
    assert host.of_kind("error") == []
