"""The features end to end: the real client, the real fake (stdio and HTTP), the real stand-in.

Assertions read the fake's journal (what went over the wire) and the stand-in's ``feed_prepare``
records in the same file, plus the recording host's effects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from palace_bridge.extension import Bridge, activate
from palace_bridge.host import InjectedMessage, RecordingHost
from palace_conformance.fake.journal import read_journal
from palace_conformance.fake.shims import install_shim

ME = "pi@int-box"


@dataclass
class Scene:
    """One scenario's private world: shim dir, HOME, journal, optional palace state."""

    root: Path

    @property
    def journal(self) -> Path:
        return self.root / "journal.jsonl"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def env(self, **knobs: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("PALACE_FAKE_", "PALACE_FEED_", "MEMPALACE_"))}
        base.update(PATH=f"{self.root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                    HOME=str(self.home), PALACE_FAKE_JOURNAL=str(self.journal),
                    PALACE_FAKE_STATE=str(self.root / "palace-state.json"),  # initialised
                    PALACE_FEED_OUTDIR=str(self.root / "staged"))
        base.update(knobs)
        return base

    def records(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in read_journal(self.journal) if r.get("kind") == kind]

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """Arguments of every ``tools/call`` the fake received (optionally of one tool)."""
        out = []
        for record in self.records("recv"):
            message = record.get("message") or {}
            if message.get("method") == "tools/call" and tool in (None, record.get("tool")):
                out.append({"tool": record.get("tool"),
                            "arguments": message.get("params", {}).get("arguments")})
        return out

    def seed(self, state: dict[str, Any]) -> Path:
        path = self.root / "palace-state.json"
        path.write_text(json.dumps(state))
        return path


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    install_shim(tmp_path / "bin")
    (tmp_path / "home").mkdir()
    return Scene(tmp_path)


@contextlib.contextmanager
def http_fake(scene: Scene, state: Path | None = None,
              faults: tuple[str, ...] = ()) -> Iterator[str]:
    """A ``palace-conformance fake http`` on an ephemeral loopback port; yields its /mcp URL."""
    ready = scene.root / "ready.json"
    args = [sys.executable, "-c", "from palace_conformance.cli import main; main()", "fake",
            "http", "--port", "0", "--ready-file", str(ready), "--journal", str(scene.journal)]
    if state is not None:
        args += ["--state", str(state)]
    for fault in faults:
        args += ["--fault", fault]
    env = {k: v for k, v in scene.env().items() if k != "PALACE_FAKE_JOURNAL"}
    with open(scene.root / "fake-stderr.txt", "wb") as err:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, env=env)
    try:
        deadline = time.monotonic() + 15
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, \
                (scene.root / "fake-stderr.txt").read_text()
            time.sleep(0.02)
        time.sleep(0.02)  # the ready file is written whole, but be kind to slow writers
        yield f"http://127.0.0.1:{json.loads(ready.read_text())['port']}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def load(env: dict[str, str]) -> tuple[Bridge, RecordingHost]:
    host = RecordingHost()
    bridge = await activate(host, env)
    assert bridge.available, host.effects
    return bridge, host


def stderr_lines(host: RecordingHost) -> list[str]:
    return [e["line"] for e in host.of_kind("stderr")]


# --- wake-up (stdio) ----------------------------------------------------------------------------


def test_wakeup_calls_status_and_diary_on_the_wire(scene: Scene) -> None:
    state = scene.seed({"diary": [{"agent_name": "pi-int", "entry": "SESSION:fixed.the.lease",
                                   "topic": "general"}]})
    env = scene.env(MEMPALACE_AGENT_NAME="pi-int", MEMPALACE_FEED="0",
                    PALACE_FAKE_STATE=str(state))

    async def session() -> tuple[list[Any], list[Any]]:
        _, host = await load(env)
        await host.emit("session_start", {"reason": "startup"})
        first = await host.emit("before_agent_start", {"prompt": "hello"})
        second = await host.emit("before_agent_start", {"prompt": "again"})
        await host.emit("session_shutdown", {"reason": "quit"})
        return first, second

    first, second = asyncio.run(session())
    assert second == []
    [message] = first
    assert isinstance(message, InjectedMessage) and message.custom_type == "mempalace-wakeup"
    assert "SESSION:fixed.the.lease" in message.content
    assert scene.calls() == [{"tool": "mempalace_status", "arguments": {}},
                             {"tool": "mempalace_diary_read",
                              "arguments": {"agent_name": "pi-int"}}]
    methods = [r["method"] for r in scene.records("recv")]
    assert methods.index("notifications/initialized") < methods.index("tools/call")


def test_resumed_session_calls_nothing(scene: Scene) -> None:
    async def session() -> list[Any]:
        _, host = await load(scene.env(MEMPALACE_FEED="0"))
        await host.emit("session_start", {"reason": "resume"})
        injected = await host.emit("before_agent_start", {"prompt": "hello"})
        await host.emit("session_shutdown", {"reason": "quit"})
        return injected

    assert asyncio.run(session()) == []
    assert scene.calls() == []


# --- feeding (stdio) ----------------------------------------------------------------------------


def test_shutdown_feeds_one_prepare_one_mine(scene: Scene) -> None:
    env = scene.env(MEMPALACE_FEED_WING="wing_int")

    async def session() -> RecordingHost:
        _, host = await load(env)
        await host.emit("session_shutdown", {"reason": "quit"})
        return host

    host = asyncio.run(session())
    [prepare] = scene.records("feed_prepare")
    assert prepare["argv"][1:] == ["--prepare", "--reason", "session_shutdown", "--wing",
                                   "wing_int"]
    assert prepare["env"]["HOME"] == str(scene.home)
    [mine] = scene.calls("mempalace_mine")
    source = mine["arguments"]["source"]
    assert mine["arguments"] == {"source": source, "wing": "wing_int"}
    assert Path(source).is_dir() and Path(source).parent == scene.root / "staged"
    assert [e["argv"][0] for e in host.of_kind("exec")] == ["mempalace-pi-session"]
    assert scene.records("cli_run") == []  # the mempalace CLI (shimmed on PATH) never ran
    assert stderr_lines(host) == []


def test_overlapping_triggers_coalesce_on_the_wire(scene: Scene) -> None:
    env = scene.env(PALACE_FEED_DELAY_MS="400")

    async def session() -> None:
        bridge, host = await load(env)
        await host.emit("agent_settled", {})
        await asyncio.sleep(0.1)  # the prepare is running
        await host.emit("agent_settled", {})
        await host.emit("session_shutdown", {"reason": "quit"})
        await bridge.drain()

    asyncio.run(session())
    assert [r["argv"][3] for r in scene.records("feed_prepare")] == ["agent_settled"]
    assert len(scene.calls("mempalace_mine")) == 1


def test_a_wedged_prepare_is_killed_and_the_next_trigger_feeds(scene: Scene) -> None:
    plan = scene.root / "feed-plan.json"
    plan.write_text(json.dumps(["hang", "source"]))
    env = scene.env(PALACE_FEED_PLAN=str(plan), MEMPALACE_FEED_PREPARE_TIMEOUT_MS="1500")

    async def session() -> tuple[RecordingHost, float]:
        bridge, host = await load(env)
        started = time.monotonic()
        await host.emit("agent_settled", {})
        await bridge.drain()
        waited = time.monotonic() - started
        assert scene.calls("mempalace_mine") == []
        await host.emit("agent_settled", {})
        await bridge.drain()
        assert len(scene.calls("mempalace_mine")) == 1
        await host.emit("session_shutdown", {"reason": "quit"})
        return host, waited

    host, waited = asyncio.run(session())
    assert waited >= 1.5
    assert [e["timed_out"] for e in host.of_kind("exec")] == [True, False, False]
    assert len(scene.records("feed_prepare")) == 3  # the wedged one, the retry, the shutdown
    assert len(scene.calls("mempalace_mine")) == 2
    assert any("killed after 1500 ms" in line for line in stderr_lines(host))


def test_a_refused_mine_is_reported_and_retried(scene: Scene) -> None:
    env = scene.env(PALACE_FAKE_FAULT="lock_held@mempalace_mine")

    async def session() -> RecordingHost:
        bridge, host = await load(env)
        await host.emit("agent_settled", {})
        await bridge.drain()
        await host.emit("agent_settled", {})  # inside the debounce window: a retry anyway
        await bridge.drain()
        await host.emit("agent_settled", {})  # fed now: the window applies
        await bridge.drain()
        return host

    host = asyncio.run(session())
    assert len(scene.records("feed_prepare")) == 2
    assert len(scene.calls("mempalace_mine")) == 2
    [line] = stderr_lines(host)
    assert "-32001" in line


def test_feeding_off_runs_nothing(scene: Scene) -> None:
    async def session() -> None:
        bridge, host = await load(scene.env(MEMPALACE_FEED="0"))
        await host.emit("agent_settled", {})
        await bridge.drain()
        await host.emit("session_shutdown", {"reason": "quit"})

    asyncio.run(session())
    assert scene.records("feed_prepare") == [] and scene.calls("mempalace_mine") == []


# --- provenance and mailbox (HTTP: both gates need a shared palace) -----------------------------

WRITES = [
    ("mempalace_add_drawer", {"wing": "w", "room": "r", "content": "drawer text"}, "added_by"),
    ("mempalace_checkpoint", {"items": [{"wing": "w", "room": "r", "content": "cp"}]},
     "added_by"),
    ("mempalace_event_append", {"type": "note", "stream": "s", "room": "r", "body": "b"},
     "from_agent"),
    ("mempalace_artifact_put", {"kind": "note", "content": "artifact"}, "created_by"),
]


def test_provenance_is_on_the_wire_with_both_gates(scene: Scene) -> None:
    with http_fake(scene) as url:
        env = scene.env(MEMPALACE_REMOTE_URL=url, MEMPALACE_PI_DEVICE="int-box",
                        MEMPALACE_PI_SSH_TARGET="palace@host", MEMPALACE_MAILBOX="0")

        async def session() -> RecordingHost:
            _, host = await load(env)
            for tool, args, _ in WRITES:
                outcome = await host.call_tool(tool, args)
                assert not outcome.is_error, outcome
            await host.call_tool("mempalace_diary_write", {"agent_name": "pi", "entry": "E1"})
            await host.call_tool("mempalace_add_drawer", {"wing": "w", "room": "r",
                                                          "content": "mine", "added_by": "x@y"})
            await host.emit("session_shutdown", {"reason": "quit"})
            return host

        host = asyncio.run(session())
    sent = scene.calls()
    assert len(sent) >= len(WRITES) + 2
    for index, (tool, args, field) in enumerate(WRITES):
        assert sent[index] == {"tool": tool, "arguments": {**args, field: ME}}
    assert sent[4]["arguments"] == {"agent_name": "pi", "entry": "HOST:int-box|E1"}
    assert sent[5]["arguments"]["added_by"] == "x@y"  # explicit writer kept
    [mine] = scene.calls("mempalace_mine")  # the feed's own mine is stamped (with 'agent')
    assert mine["arguments"]["agent"] == ME and "added_by" not in mine["arguments"]
    [prepare] = scene.records("feed_prepare")
    assert prepare["env"]["MEMPALACE_PI_SSH_TARGET"] == "palace@host"
    assert host.of_kind("error") == []


def test_without_the_device_gate_arguments_are_unchanged(scene: Scene) -> None:
    with http_fake(scene) as url:
        env = scene.env(MEMPALACE_REMOTE_URL=url, MEMPALACE_FEED="0")

        async def session() -> None:
            _, host = await load(env)
            for tool, args, _ in WRITES:
                await host.call_tool(tool, {**args, **({"from_agent": "pi"}
                                     if tool == "mempalace_event_append" else {}),
                                     **({"created_by": "pi"}
                                        if tool == "mempalace_artifact_put" else {})})
            await host.call_tool("mempalace_diary_write", {"agent_name": "pi", "entry": "E1"})
            await host.emit("session_start", {"reason": "startup"})
            await host.emit("before_agent_start", {"prompt": "hi"})
            await host.emit("session_shutdown", {"reason": "quit"})

        asyncio.run(session())
    sent = scene.calls()
    assert sent[0]["arguments"] == WRITES[0][1] and sent[1]["arguments"] == WRITES[1][1]
    assert sent[2]["arguments"]["from_agent"] == "pi"
    assert sent[3]["arguments"]["created_by"] == "pi"
    assert sent[4]["arguments"] == {"agent_name": "pi", "entry": "E1"}
    assert "mempalace_event_list" not in [c["tool"] for c in sent]  # no mailbox either


def _event(seq: int, id_: str, **fields: Any) -> dict[str, Any]:
    base = {"id": id_, "seq": seq, "origin_replica": "rep_x", "origin_seq": seq, "hlc": str(seq),
            "type": "task.request", "stream": "project/x", "room": "delegation", "topic": None,
            "from_agent": "pi@laptop", "to_agent": ME, "correlation_id": None, "branch": None,
            "base_commit": None, "status": "open", "artifact_ids": [], "body": None,
            "created_at": "2026-11-30T00:00:00Z", "metadata": {}}
    base.update(fields)
    return base


def test_mailbox_reads_the_log_and_steers_new_items(scene: Scene) -> None:
    state = scene.seed({"events": [
        _event(1, "evt_owed", body="OWED-ONE please rebase", correlation_id="t1"),
        _event(2, "evt_done", body="ANSWERED-ONE", correlation_id="t2"),
        _event(3, "evt_reply", from_agent=ME, to_agent="pi@laptop", status="applied",
               correlation_id="t2", type="task.reply"),
        _event(4, "evt_bcast", to_agent="*", body="BROADCAST-ONE"),
    ]})
    with http_fake(scene, state=state) as url:
        env = scene.env(MEMPALACE_REMOTE_URL=url, MEMPALACE_PI_DEVICE="int-box",
                        MEMPALACE_FEED="0", MEMPALACE_MAILBOX_POLL_MS="0")

        async def session() -> tuple[list[Any], RecordingHost]:
            bridge, host = await load(env)
            await host.emit("session_start", {"reason": "startup"})
            injected = await host.emit("before_agent_start", {"prompt": "hi"})
            await host.call_tool("mempalace_event_append", {
                "type": "task.request", "stream": "project/x", "room": "delegation",
                "from_agent": "pi@laptop", "to_agent": ME, "status": "open",
                "body": "OWED-TWO after start"})
            await host.emit("agent_settled", {})
            await bridge.drain()
            await host.emit("agent_settled", {})  # nothing new: no second message
            await bridge.drain()
            await host.emit("session_shutdown", {"reason": "quit"})
            return injected, host

        injected, host = asyncio.run(session())
    [wakeup] = injected
    assert "OWED-ONE" in wakeup.content
    assert "ANSWERED-ONE" not in wakeup.content and "BROADCAST-ONE" not in wakeup.content
    lists = [c["arguments"] for c in scene.calls("mempalace_event_list")]
    assert lists[:2] == [{"to_agent": ME, "status": "open", "limit": 200},
                         {"writer": ME, "limit": 200}]
    [steer] = host.of_kind("message")
    assert steer["custom_type"] == "mempalace-mailbox"
    assert steer["deliver_as"] == "steer" and steer["trigger_turn"] is False
    assert "OWED-TWO" in steer["content"] and "OWED-ONE" not in steer["content"]
    assert host.of_kind("error") == [] and stderr_lines(host) == []


def test_mailbox_failure_is_silent(scene: Scene) -> None:
    with http_fake(scene, faults=("error@mempalace_event_listx*,code=-32000,"
                                  "message=Internal tool error",)) as url:
        env = scene.env(MEMPALACE_REMOTE_URL=url, MEMPALACE_PI_DEVICE="int-box",
                        MEMPALACE_FEED="0", MEMPALACE_MAILBOX_POLL_MS="0")

        async def session() -> tuple[list[Any], RecordingHost]:
            bridge, host = await load(env)
            await host.emit("session_start", {"reason": "startup"})
            injected = await host.emit("before_agent_start", {"prompt": "hi"})
            await host.emit("agent_settled", {})
            await bridge.drain()
            await host.emit("session_shutdown", {"reason": "quit"})
            return injected, host

        injected, host = asyncio.run(session())
    [wakeup] = injected  # the wake-up itself survives without its mailbox section
    assert "Mailbox" not in wakeup.content
    assert len(scene.calls("mempalace_event_list")) >= 2
    assert host.of_kind("message") == [] and host.of_kind("error") == []
    assert stderr_lines(host) == []
