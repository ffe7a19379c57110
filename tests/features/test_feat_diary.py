"""DIARY-01: the /mempalace-diary command asks the model for one AAAK diary_write."""

from __future__ import annotations

import asyncio

from palace_bridge.features.diary import COMMAND, DiaryCommand
from palace_bridge.host import RecordingHost


def run_command(agent: str, args: str) -> str:
    host = RecordingHost()
    host.register_command(DiaryCommand(host, agent).definition())
    asyncio.run(host.run_command(COMMAND, args))
    [sent] = host.of_kind("user_message")
    return sent["content"]


def test_prompt_names_the_tool_the_agent_and_aaak() -> None:
    prompt = run_command("pi-laptop", "")
    assert "mempalace_diary_write" in prompt
    assert 'agent_name="pi-laptop"' in prompt
    assert "AAAK" in prompt
    assert "topic" not in prompt.lower().split("summarises")[0]  # no topic line without a topic
    assert "Focus the entry" not in prompt


def test_topic_is_in_the_prompt() -> None:
    prompt = run_command("pi", "  auth   refactor ")
    assert "auth refactor" in prompt and 'topic="auth refactor"' in prompt


def test_command_is_registered_under_its_name() -> None:
    host = RecordingHost()
    host.register_command(DiaryCommand(host, "pi").definition())
    assert host.of_kind("command_registered")[0]["name"] == "mempalace-diary"
