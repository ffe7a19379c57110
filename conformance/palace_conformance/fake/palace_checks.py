"""What the fake palace's tool handlers share (:mod:`.palace`, :mod:`.palace_graph`,
:mod:`.palace_records`): mempalace 3.11's argument checks and their wording, its answer for a
chroma database that does not exist yet, and the short stable digests that make ids."""

from __future__ import annotations

import hashlib
import re
from typing import Any

NAME_MAX = 128
_SAFE_NAME = re.compile(r"^(?:[^\W_]|[^\W_][\w .'-]{0,126}[^\W_])$")


def argument_problem(field: str, value: Any, rule: str) -> str | None:
    """What 3.11 says of one argument, checked on its stripped value, or None when it passes.

    ``rule`` is ``text`` (content: any non-blank string), ``value`` (a knowledge-graph subject or
    object: also at most 128 characters, no NUL) or ``name`` (wing, room, topic, agent_name, a
    predicate: also no path characters, and letters or digits at both ends with only word
    characters, space, ``.``, ``'`` and ``-`` between)."""
    if not isinstance(value, str) or not value.strip():
        return f"{field} must be a non-empty string"
    value = value.strip()
    if rule == "text":
        return None
    if len(value) > NAME_MAX:
        return f"{field} exceeds maximum length of {NAME_MAX} characters"
    if rule == "name" and (".." in value or "/" in value or "\\" in value):
        return f"{field} contains invalid path characters"
    if "\x00" in value:
        return f"{field} contains null bytes"
    if rule == "name" and not _SAFE_NAME.match(value):
        return f"{field} contains invalid characters"
    return None


def refusal(*checks: tuple[str, Any, str]) -> dict[str, Any] | None:
    """The first failing ``(field, value, rule)`` check as 3.11's result, or None."""
    for field, value, rule in checks:
        if (problem := argument_problem(field, value, rule)) is not None:
            return {"success": False, "error": problem}
    return None


def chroma_missing(palace: str) -> dict[str, Any]:
    """What 3.11 answers a read that opens the chroma database before any vector write."""
    return {"error": "Chroma database missing",
            "details": f"Could not open missing database at {palace}/chroma.sqlite3.",
            "hint": "Run: mempalace status or mempalace repair-status for diagnostics.",
            "backend": "chroma"}


def digest(*parts: str, size: int = 12) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:size]
