"""The remote session's rules as a state machine over HTTP outcomes (no I/O here).

* A session id the server issued rides on every request except ``initialize`` (HTTP-03); so does
  the negotiated ``MCP-Protocol-Version``.
* 404 on a request that carried an id: the server forgot the session. Drop the id, initialize afresh
  and retry that call exactly once; a second 404 fails the call, with no loop (HTTP-04, ADR-044). A
  404 without an id is just an HTTP error (wrong URL), never a session loss.
* 401 is an auth error: no re-initialize, no loop (HTTP-08).
* 5xx or a broken connection fails that request and keeps the session; nothing is replayed, least of
  all a ``tools/call`` (HTTP-09).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"


class Verdict(enum.Enum):
    OK = "ok"
    RENEW_AND_RETRY = "renew_and_retry"  # this request found the session dead: renew, retry once
    RETRY_ON_CURRENT = "retry_on_current"  # someone already renewed it: retry once, no new init
    SESSION_LOST = "session_lost"  # 404 again on the retry: fail the call
    AUTH = "auth"  # 401: fail, no re-init
    HTTP_ERROR = "http_error"  # any other status: fail, keep the session


@dataclass(frozen=True)
class Sent:
    """What a request carried, so its outcome is judged against the session it used."""

    method: str
    session_id: str | None
    generation: int


class HttpSession:
    """Holds the session id and protocol version, and judges every HTTP outcome."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.generation = 0          # bumps on every completed initialize
        self.needs_init = True       # no session yet, or the last one was forgotten

    def headers(self, method: str) -> dict[str, str]:
        """Session headers for a request of ``method``: none at all on ``initialize``."""
        if method == "initialize":
            return {}
        headers: dict[str, str] = {}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[VERSION_HEADER] = self.protocol_version
        return headers

    def sent(self, method: str) -> Sent:
        sid = None if method == "initialize" else self.session_id
        return Sent(method, sid, self.generation)

    def begin_initialize(self) -> None:
        """A fresh ``initialize`` is about to go out: it must carry no old id (MCP: a
        new session starts without one)."""
        self.session_id = None
        self.protocol_version = None

    def on_initialized(self, session_id: str | None, protocol_version: str) -> None:
        """``initialize`` succeeded; a missing id means a stateless server (LIFE-05)."""
        self.session_id = session_id or None
        self.protocol_version = protocol_version
        self.generation += 1
        self.needs_init = False

    def judge(self, status: int, sent: Sent, attempt: int) -> Verdict:
        """Outcome of one HTTP exchange; ``attempt`` is 0 for the first try, 1 for the retry."""
        if 200 <= status < 300:
            return Verdict.OK
        if status == 401:
            return Verdict.AUTH
        if status == 404 and sent.session_id is not None:
            if attempt >= 1:
                self._forget(sent)
                return Verdict.SESSION_LOST
            if sent.generation != self.generation:
                return Verdict.RETRY_ON_CURRENT
            self._forget(sent)
            return Verdict.RENEW_AND_RETRY
        return Verdict.HTTP_ERROR

    def on_ping_not_found(self, sent: Sent) -> bool:
        """A keep-alive ping got 404: the session must be replaced before the next call."""
        if sent.session_id is None or sent.generation != self.generation or self.needs_init:
            return False
        self._forget(sent)
        return True

    def _forget(self, sent: Sent) -> None:
        if sent.generation == self.generation:
            self.session_id = None
            self.needs_init = True
