"""Device provenance, stamped at the edge: who wrote this, so the agent never has to (PROV-*).

Only on a shared palace (both gates: ``MEMPALACE_PI_DEVICE`` and ``MEMPALACE_REMOTE_URL``) is
there a second machine to tell apart; elsewhere the arguments pass through as the very same object.
The writer field per tool follows mempalace 3.11's schemas: ``mempalace_mine`` has no ``added_by``
(it answers -32602 to unknown parameters), its writer is ``agent`` ("Recorded on every drawer").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# tool -> the argument that names the writer
WRITER_FIELDS: dict[str, str] = {
    "mempalace_add_drawer": "added_by",
    "mempalace_checkpoint": "added_by",
    "mempalace_mine": "agent",
    "mempalace_event_append": "from_agent",
    "mempalace_artifact_put": "created_by",
}
DIARY_TOOL = "mempalace_diary_write"
HOST_MARKER = "HOST:"


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


@dataclass(frozen=True)
class Stamper:
    """Fills in the writer on palace writes; ``device=None`` means a gate is missing (inert)."""

    device: str | None
    harness: str = "pi"

    @property
    def active(self) -> bool:
        return bool(self.device)

    @property
    def writer(self) -> str:
        return f"{self.harness}@{self.device}"

    @property
    def diary_prefix(self) -> str:
        return f"{HOST_MARKER}{self.device}|"

    def stamp(self, tool: str, arguments: Any) -> Any:
        """The arguments to send. Unchanged (same object) when inert or the tool is not a write."""
        if not self.active:
            return arguments
        field = WRITER_FIELDS.get(tool)
        if field is not None:
            args = dict(arguments) if isinstance(arguments, dict) else {}
            if not _unset(args.get(field)):
                return arguments  # an explicit writer: filing on behalf of someone, kept
            args[field] = self.writer
            return args
        if tool == DIARY_TOOL and isinstance(arguments, dict):
            # 'entry' wins over its alias 'content' on the server, so stamp whichever it will use
            key = "entry" if isinstance(arguments.get("entry"), str) else "content"
            text = arguments.get(key)
            if not isinstance(text, str) or text.startswith(HOST_MARKER):
                return arguments  # nothing to mark, or the caller already attributed it
            return {**arguments, key: self.diary_prefix + text}
        return arguments


def stamper_for(device: str | None, shared_palace: bool, harness: str = "pi") -> Stamper:
    """The stamper the config calls for: active only when both gates hold."""
    return Stamper(device if (device and shared_palace) else None, harness)
