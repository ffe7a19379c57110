"""Wake-up injection: orient the agent at the start of a fresh session (WAKE-*).

The first ``before_agent_start`` after ``session_start`` with reason ``startup`` or ``new`` calls
``mempalace_status`` and ``mempalace_diary_read`` and injects one ``mempalace-wakeup`` message
holding both (plus the mailbox section when there is one). A resumed, forked or reloaded session
already has that context in its thread, so nothing is injected. Any failure means no injection
and nothing reaching the host: a missing wake-up is better than a broken turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PalaceError
from ..host import InjectedMessage
from .mailbox import Mailbox
from .ports import PalaceCaller, ToolResultLike, failed

WAKEUP_TYPE = "mempalace-wakeup"
FRESH_REASONS = frozenset({"startup", "new"})


@dataclass
class WakeUp:
    """One-shot per fresh session; armed by ``session_start``, spent by the first prompt."""

    caller: PalaceCaller
    agent_name: str
    mailbox: Mailbox | None = None
    armed: bool = False

    def session_start(self, reason: object) -> None:
        self.armed = reason in FRESH_REASONS

    async def before_agent_start(self) -> InjectedMessage | None:
        if not self.armed:
            return None
        self.armed = False  # spent before any await: a second prompt never waits on the first
        try:
            status = await self.caller.call_tool("mempalace_status", {})
            diary = await self.caller.call_tool("mempalace_diary_read",
                                                {"agent_name": self.agent_name})
        except (PalaceError, TimeoutError):
            return None
        if failed(status) or failed(diary):
            return None
        mailbox = await self.mailbox.wakeup_section() if self.mailbox is not None else None
        return InjectedMessage(WAKEUP_TYPE, self._content(status, diary, mailbox), display=True,
                               details={"agent_name": self.agent_name,
                                        "mailbox": mailbox is not None})

    def _content(self, status: ToolResultLike, diary: ToolResultLike, mailbox: str | None) -> str:
        parts = [
            "MemPalace wake-up: your long-term memory for this session. Orient yourself from the "
            "palace status and your recent diary below before you answer.",
            f"## Palace status (mempalace_status)\n{status.text}",
            f"## Your diary (mempalace_diary_read, agent_name={self.agent_name})\n{diary.text}",
        ]
        if mailbox:
            parts.append(f"## Mailbox\n{mailbox}")
        return "\n\n".join(parts)
