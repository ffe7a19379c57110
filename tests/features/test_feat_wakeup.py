"""WAKE-*: one injection per fresh session, holding status and diary; silent on failure."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from palace_bridge.clock import FakeClock
from palace_bridge.errors import PalaceTimeout, PalaceToolError
from palace_bridge.features.mailbox import Mailbox
from palace_bridge.features.wakeup import WakeUp
from palace_bridge.host import InjectedMessage, RecordingHost

from .fakes import FakeClient, result


def first_prompt(wakeup: WakeUp, reason: str | None) -> InjectedMessage | None:
    async def scenario() -> InjectedMessage | None:
        if reason is not None:
            wakeup.session_start(reason)
        return await wakeup.before_agent_start()

    return asyncio.run(scenario())


@pytest.mark.parametrize("reason", ["startup", "new"])
def test_fresh_session_injects_status_and_diary(reason: str) -> None:
    client = FakeClient()
    message = first_prompt(WakeUp(client, "pi-laptop"), reason)
    assert client.calls == [("mempalace_status", {}, None),
                            ("mempalace_diary_read", {"agent_name": "pi-laptop"}, None)]
    assert message is not None and message.custom_type == "mempalace-wakeup"
    assert "PROTOCOL-TEXT" in message.content and "DIARY-ENTRY-TEXT" in message.content


@pytest.mark.parametrize("reason", ["resume", "fork", "reload", None])
def test_not_fresh_no_calls_no_injection(reason: str | None) -> None:
    client = FakeClient()
    assert first_prompt(WakeUp(client, "pi"), reason) is None
    assert client.calls == []


def test_one_shot() -> None:
    client = FakeClient()
    wakeup = WakeUp(client, "pi")

    async def scenario() -> list[Any]:
        wakeup.session_start("startup")
        return [await wakeup.before_agent_start() for _ in range(3)]

    first, *rest = asyncio.run(scenario())
    assert first is not None and rest == [None, None]
    assert len(client.calls) == 2


def test_a_new_session_rearms_it() -> None:
    client = FakeClient()
    wakeup = WakeUp(client, "pi")

    async def scenario() -> list[Any]:
        out = []
        for reason in ("startup", "resume", "new"):
            wakeup.session_start(reason)
            out.append(await wakeup.before_agent_start())
        return out

    startup, resumed, new = asyncio.run(scenario())
    assert startup is not None and resumed is None and new is not None


@pytest.mark.parametrize(("tool", "failure"), [
    ("mempalace_status", PalaceTimeout("tools/call", 100)),
    ("mempalace_diary_read", PalaceToolError(-32602, "Missing required parameter")),
    ("mempalace_status", result({"error": "Backend open failed"}, is_error=True)),
    ("mempalace_diary_read", result({"success": False, "error": "agent_name must be ..."})),
    # a fresh palace (mempalace 3.11, no chroma database yet): errors without success or isError
    ("mempalace_status", result({"error": "Chroma database missing", "backend": "chroma"})),
    ("mempalace_diary_read", result({"error": "Chroma database missing", "backend": "chroma"})),
])
def test_failures_are_silent(tool: str, failure: Any) -> None:
    def answer(args: dict[str, Any]) -> Any:
        if isinstance(failure, Exception):
            raise failure
        return failure

    client = FakeClient(handlers={tool: answer})
    assert first_prompt(WakeUp(client, "pi"), "startup") is None


def test_mailbox_section_is_part_of_the_single_message() -> None:
    owed = {"id": "evt_1", "seq": 4, "from_agent": "pi@laptop", "to_agent": "pi@box",
            "status": "open", "type": "task.request", "body": "REVIEW-PLEASE"}
    client = FakeClient(handlers={"mempalace_event_list": lambda a: {
        "events": [owed] if "to_agent" in a else [], "count": 1}})
    mailbox = Mailbox(client, RecordingHost(), "pi@box", 300000, FakeClock())
    message = first_prompt(WakeUp(client, "pi", mailbox), "startup")
    assert message is not None
    assert "PROTOCOL-TEXT" in message.content and "REVIEW-PLEASE" in message.content
    assert [c[0] for c in client.calls] == ["mempalace_status", "mempalace_diary_read",
                                            "mempalace_event_list", "mempalace_event_list"]


def test_a_failing_mailbox_leaves_the_wakeup_intact() -> None:
    def down(args: dict[str, Any]) -> Any:
        raise PalaceTimeout("tools/call", 10)

    client = FakeClient(handlers={"mempalace_event_list": down})
    mailbox = Mailbox(client, RecordingHost(), "pi@box", 300000, FakeClock())
    message = first_prompt(WakeUp(client, "pi", mailbox), "startup")
    assert message is not None and "Mailbox" not in message.content
