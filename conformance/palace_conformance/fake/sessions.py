"""Stateful-session mode of the fake HTTP server (``--sessions``, FAKE-07).

mempalace 3.11 has no sessions; SDK servers and ADR-044's daemon do. In this mode ``initialize``
without ``Mcp-Session-Id`` opens a session, every other POST must carry a known id (400 without
one, 404 for an unknown or forgotten one), and DELETE ends a session. Sessions live in memory for
the life of the process. Status codes and bodies follow the Python SDK's session manager.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

SESSION_HEADER = "Mcp-Session-Id"


@dataclass(frozen=True)
class Refusal:
    """A request the session layer turns away before the palace sees it."""

    status: int
    message: str

    def body(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": self.message}}


MISSING = Refusal(400, "Bad Request: Missing session ID")
UNKNOWN = Refusal(404, "Session not found")


def opens_session(body: bytes) -> bool:
    """Whether a POST body is an ``initialize`` request, the only message that opens a session."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, nested too deeply or too long a number
        return False
    return isinstance(message, dict) and message.get("method") == "initialize" and "id" in message


class SessionTable:
    """The live session ids of this process."""

    def __init__(self) -> None:
        self._ids: list[str] = []

    def open(self) -> str:
        session_id = uuid.uuid4().hex  # 32 visible ASCII characters
        self._ids.append(session_id)
        return session_id

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._ids

    def ids(self) -> list[str]:
        return list(self._ids)

    def forget(self, session_id: str) -> bool:
        if session_id not in self._ids:
            return False
        self._ids.remove(session_id)
        return True

    def forget_all(self) -> list[str]:
        gone, self._ids = self._ids, []
        return gone

    def admit(self, header: str | None, body: bytes | None) -> tuple[str | None, Refusal | None]:
        """The session a request belongs to (opened here for a fresh ``initialize``), or a refusal.

        ``body`` is None for requests without one (GET, DELETE), which can never open a session.
        """
        if header is None:
            if body is not None and opens_session(body):
                return self.open(), None
            return None, MISSING
        if header not in self._ids:
            return None, UNKNOWN
        return header, None
