"""MAIL-01, 05, 06: fetching, the poll floor, once-per-session delivery, fail-silence."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from palace_bridge.clock import FakeClock
from palace_bridge.errors import PalaceTimeout, PalaceUnavailable
from palace_bridge.features.mailbox import FETCH_LIMIT, Mailbox
from palace_bridge.host import RecordingHost

from .fakes import FakeClient, result

ME = "pi@tor-ms22"


def ask(id_: str, seq: int, body: str = "please review") -> dict[str, Any]:
    return {"id": id_, "seq": seq, "type": "task.request", "stream": "project/x",
            "room": "delegation", "from_agent": "pi@laptop", "to_agent": ME, "status": "open",
            "correlation_id": f"c-{id_}", "body": body, "metadata": {}}


class Log:
    """A tiny event log answering event_list the way 3.11 does (to_agent matches '*' too)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def __call__(self, args: dict[str, Any]) -> dict[str, Any]:
        out = [e for e in self.events
               if ("to_agent" not in args or e["to_agent"] in (args["to_agent"], "*"))
               and ("status" not in args or e["status"] == args["status"])
               and ("writer" not in args or e["from_agent"] == args["writer"])]
        return {"events": out, "count": len(out)}


def make(events: list[dict[str, Any]] | None = None,
         poll_ms: int = 300000) -> tuple[Mailbox, RecordingHost, FakeClient, FakeClock]:
    log = Log(events if events is not None else [ask("e1", 1)])
    client = FakeClient(handlers={"mempalace_event_list": log})
    host = RecordingHost()
    clock = FakeClock()
    return Mailbox(client, host, ME, poll_ms, clock), host, client, clock


def test_the_two_event_list_calls() -> None:
    mailbox, _, client, _ = make()
    asyncio.run(mailbox.poll())
    assert client.calls == [
        ("mempalace_event_list", {"to_agent": ME, "status": "open", "limit": FETCH_LIMIT}, None),
        ("mempalace_event_list", {"writer": ME, "limit": FETCH_LIMIT}, None),
    ]


def test_poll_delivers_as_steer_without_a_turn() -> None:
    mailbox, host, _, _ = make([ask("e1", 1, body="rebase branch feat/x")])
    asyncio.run(mailbox.poll())
    [message] = host.of_kind("message")
    assert message["custom_type"] == "mempalace-mailbox"
    assert message["deliver_as"] == "steer" and message["trigger_turn"] is False
    assert "e1" in message["content"] and "rebase branch feat/x" in message["content"]
    assert message["details"]["event_ids"] == ["e1"]


def test_poll_floor() -> None:
    mailbox, _, client, clock = make(poll_ms=300000)

    async def scenario() -> None:
        await mailbox.poll()
        assert len(client.calls) == 2
        clock.advance(299999)
        assert not mailbox.due()
        await mailbox.poll()
        assert len(client.calls) == 2  # floored: no call at all
        clock.advance(1)
        assert mailbox.due()
        await mailbox.poll()
        assert len(client.calls) == 4

    asyncio.run(scenario())


def test_each_item_is_delivered_once_per_session() -> None:
    events = [ask("e1", 1)]
    mailbox, host, _, clock = make(events, poll_ms=0)

    async def scenario() -> None:
        await mailbox.poll()
        clock.advance(1)
        await mailbox.poll()  # still owed, already delivered
        events.append(ask("e2", 2))
        clock.advance(1)
        await mailbox.poll()

    asyncio.run(scenario())
    messages = host.of_kind("message")
    assert [m["details"]["event_ids"] for m in messages] == [["e1"], ["e2"]]


def test_wakeup_section_marks_items_delivered() -> None:
    mailbox, host, _, clock = make([ask("e1", 1)], poll_ms=0)

    async def scenario() -> str | None:
        section = await mailbox.wakeup_section()
        clock.advance(1)
        await mailbox.poll()
        return section

    section = asyncio.run(scenario())
    assert section is not None and "e1" in section and ME in section
    assert host.of_kind("message") == []


def test_wakeup_counts_as_a_poll_for_the_floor() -> None:
    mailbox, _, client, clock = make(poll_ms=1000)

    async def scenario() -> None:
        await mailbox.wakeup_section()
        clock.advance(999)
        assert not mailbox.due()

    asyncio.run(scenario())
    assert len(client.calls) == 2


def test_nothing_owed_sends_nothing() -> None:
    answered = [ask("e1", 1), {"id": "r1", "seq": 2, "from_agent": ME, "to_agent": "pi@laptop",
                               "status": "applied", "correlation_id": None,
                               "metadata": {"ack_of": "e1"}},
                {**ask("b1", 3), "to_agent": "*"}]
    mailbox, host, _, _ = make(answered)

    async def scenario() -> str | None:
        await mailbox.poll()
        return await mailbox.wakeup_section()

    assert asyncio.run(scenario()) is None
    assert host.of_kind("message") == []


@pytest.mark.parametrize("failure", [
    PalaceTimeout("tools/call", 100),
    PalaceUnavailable("stopped"),
    result("boom", is_error=True),
    result("not json"),
    result({"success": False, "error": "bad"}),
    result({"count": 0}),
])
def test_failures_are_silent(failure: Any) -> None:
    def answer(args: dict[str, Any]) -> Any:
        if isinstance(failure, Exception):
            raise failure
        return failure

    client = FakeClient(handlers={"mempalace_event_list": answer})
    host = RecordingHost()
    mailbox = Mailbox(client, host, ME, 0, FakeClock())

    async def scenario() -> str | None:
        await mailbox.poll()
        return await mailbox.wakeup_section()

    assert asyncio.run(scenario()) is None
    assert host.effects == []


def test_a_failed_poll_still_counts_for_the_floor() -> None:
    calls = []

    def down(args: dict[str, Any]) -> Any:
        calls.append(args)
        raise PalaceUnavailable("down")

    mailbox = Mailbox(FakeClient(handlers={"mempalace_event_list": down}), RecordingHost(), ME,
                      1000, FakeClock())

    async def scenario() -> None:
        await mailbox.poll()
        await mailbox.poll()

    asyncio.run(scenario())
    assert len(calls) == 1  # a down palace is not hammered on every settle
