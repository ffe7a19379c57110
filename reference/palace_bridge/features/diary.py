"""``/mempalace-diary [topic]``: ask the model to write its diary entry (DIARY-01).

The entry has to be composed by the LLM, so this stays a manual command that starts a turn; it
cannot run at ``session_shutdown``, which fires too late to drive another turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..host import CommandDefinition, Host

COMMAND = "mempalace-diary"
DESCRIPTION = "Write this session's MemPalace diary entry (AAAK). Usage: /mempalace-diary [topic]"


def diary_prompt(agent_name: str, topic: str | None) -> str:
    """The user message that asks for one ``mempalace_diary_write`` call."""
    lines = [
        "Please write your MemPalace diary entry for this session now.",
        f'Call the mempalace_diary_write tool once, with agent_name="{agent_name}" and an entry '
        "in AAAK format (compressed, entity-coded, emotion-marked; call "
        "mempalace_get_aaak_spec first if you need the dialect) that summarises this session: "
        "what was worked on, the decisions made and why, and what is still open.",
    ]
    if topic:
        lines.append(f'Focus the entry on this topic: {topic}. Pass topic="{topic}" as well.')
    return "\n".join(lines)


@dataclass
class DiaryCommand:
    host: Host
    agent_name: str

    def definition(self) -> CommandDefinition:
        return CommandDefinition(COMMAND, DESCRIPTION, self.run)

    async def run(self, args: str) -> None:
        topic = " ".join((args or "").split()) or None
        self.host.send_user_message(diary_prompt(self.agent_name, topic))
