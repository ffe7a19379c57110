"""The auto-delivered mailbox: what this device owes, derived from the event log (MAIL-*).

Owed-ness is derived, never read off a field: ``event_ack`` appends and ``status`` is written once,
so a directed open event matches the mailbox query forever, answered or not. :func:`owed` is the
whole rule as a pure function; :class:`Mailbox` fetches, formats and delivers, fail-silent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock
from ..errors import PalaceError
from ..host import Host
from .ports import PalaceCaller, failed, parse_json_text

TERMINAL = frozenset({"applied", "superseded", "failed", "blocked"})
MAILBOX_TYPE = "mempalace-mailbox"
LIST_TOOL = "mempalace_event_list"
FETCH_LIMIT = 200  # choice: per call; the server's default (50) is easily outgrown by own replies
BODY_PREVIEW = 400


def _seq(event: dict[str, Any]) -> int | None:
    seq = event.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _answers(reply: dict[str, Any], ask: dict[str, Any]) -> bool:
    reply_seq, ask_seq = _seq(reply), _seq(ask)
    if reply_seq is None or ask_seq is None or reply_seq <= ask_seq:
        return False
    if reply.get("status") not in TERMINAL:
        return False
    metadata = reply.get("metadata")
    ack_of = metadata.get("ack_of") if isinstance(metadata, dict) else None
    if _text(ack_of) is not None and ack_of == ask.get("id"):
        return True
    correlation = _text(ask.get("correlation_id"))
    return correlation is not None and reply.get("correlation_id") == correlation


def owed(me: str, inbox: Iterable[Any], mine: Iterable[Any]) -> list[dict[str, Any]]:
    """Events addressed to ``me`` that are open and that none of my events has closed yet.

    ``inbox`` is the answer to ``event_list {to_agent: me, status: open}``, ``mine`` the answer to
    ``event_list {writer: me}``; both are only trusted by their fields (the server's ``to_agent``
    filter also returns broadcasts). A candidate is answered by an event of mine with a strictly
    higher ``seq``, joined by ``metadata.ack_of == candidate.id`` or a shared non-empty
    ``correlation_id``, carrying a terminal status. Result: by ``seq`` then ``id``, no duplicates.
    """
    known: dict[Any, dict[str, Any]] = {}
    for event in [*inbox, *mine]:
        if isinstance(event, dict) and _text(event.get("id")) is not None:
            known.setdefault(event["id"], event)
    events = list(known.values())
    replies = [e for e in events if e.get("from_agent") == me]
    result = [
        e for e in events
        if e.get("to_agent") == me and e.get("status") == "open"
        and not any(_answers(r, e) for r in replies)
    ]
    return sorted(result, key=lambda e: (_seq(e) is None, _seq(e) or 0, e["id"]))


def format_items(me: str, items: list[dict[str, Any]]) -> str:
    """A readable list of owed events, one paragraph each."""
    lines = [f"{len(items)} event(s) addressed to {me} are open with no terminal reply from you "
             "yet (reply with mempalace_event_append or mempalace_event_ack; only applied, "
             "superseded, failed or blocked closes a thread):"]
    for event in items:
        where = "/".join(str(event.get(k)) for k in ("stream", "room") if event.get(k))
        head = (f"- {event['id']} (seq {event.get('seq')}) {event.get('type') or 'event'} "
                f"from {event.get('from_agent') or '?'}")
        if where:
            head += f" in {where}"
        if event.get("correlation_id"):
            head += f", correlation {event['correlation_id']}"
        lines.append(head)
        body = event.get("body")
        if isinstance(body, str) and body.strip():
            preview = body.strip()
            if len(preview) > BODY_PREVIEW:
                preview = preview[:BODY_PREVIEW] + " [...]"
            lines.append("  " + preview.replace("\n", "\n  "))
    return "\n".join(lines)


@dataclass
class Mailbox:
    """Fetches the owed set and delivers each item once per session; every failure is silent."""

    caller: PalaceCaller
    host: Host
    me: str  # this device's address (pi@<device>); no Mailbox exists while a gate is missing
    poll_ms: int
    clock: Clock
    delivered: set[str] = field(default_factory=set)
    last_poll: float | None = None

    async def fetch(self) -> list[dict[str, Any]] | None:
        """The current owed set, or None when the palace did not answer properly."""
        self.last_poll = self.clock.now_ms()
        try:
            inbox = await self.caller.call_tool(
                LIST_TOOL, {"to_agent": self.me, "status": "open", "limit": FETCH_LIMIT})
            mine = await self.caller.call_tool(LIST_TOOL, {"writer": self.me, "limit": FETCH_LIMIT})
        except (PalaceError, TimeoutError):
            return None
        lists = []
        for result in (inbox, mine):
            body = parse_json_text(result)
            events = body.get("events") if isinstance(body, dict) else None
            if failed(result) or not isinstance(events, list):
                return None
            lists.append(events)
        return owed(self.me, lists[0], lists[1])

    def _undelivered(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        fresh = [e for e in items if e["id"] not in self.delivered]
        self.delivered.update(e["id"] for e in fresh)
        return fresh

    async def wakeup_section(self) -> str | None:
        """The mailbox part of the wake-up message, or None (failed, nothing owed)."""
        items = await self.fetch()
        if not items:
            return None
        fresh = self._undelivered(items)
        return format_items(self.me, fresh) if fresh else None

    def due(self) -> bool:
        """Whether the poll floor has passed since the last fetch (the wake-up's counts)."""
        return self.last_poll is None or self.clock.now_ms() - self.last_poll >= self.poll_ms

    async def poll(self) -> None:
        """One ``agent_settled`` poll: steer new owed items into the next turn, no new turn."""
        if not self.due():
            return
        items = await self.fetch()
        if not items:
            return
        fresh = self._undelivered(items)
        if not fresh:
            return
        self.host.send_message(MAILBOX_TYPE, format_items(self.me, fresh), display=True,
                               details={"to_agent": self.me, "event_ids": [e["id"] for e in fresh],
                                        "events": json.loads(json.dumps(fresh, default=str))},
                               deliver_as="steer", trigger_turn=False)
