"""When a response stream that closed early is resumed (MCP Streamable HTTP, "Resumability and
Redelivery"); plain code over a :class:`~.deadlines.Deadline`, no I/O.

A server may end the SSE stream of a POST before it sent the response (SEP-1699 polling: it
primes the stream with an event ``id`` and a ``retry``, then closes it). The spec says the client
resumes: after the ``retry`` delay it sends ``GET`` with ``Last-Event-ID: <the last id seen>``,
and the server replays what came after on that GET's stream. This module decides whether and when
to send that GET; :mod:`.http` sends it.

* A stream that carried no event id cannot be resumed: the call fails at once, as before.
* The wait is the server's ``retry``; choice: ``DEFAULT_RETRY_MS`` when it gave none.
* The wait and the GET stay inside the call's deadline: a wait that would end at or past the
  deadline is not started (the call fails now instead of timing out later for nothing).
* choice: at most ``MAX_RESUMES`` GETs per call, so a server that keeps closing streams without
  ever answering cannot hold a call forever when timeouts are disabled (``0``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .deadlines import Deadline

#: GETs sent for one call before it fails (choice: the seed is silent)
MAX_RESUMES = 3
#: the wait before a GET when the server sent no ``retry`` (choice: the EventSource default
#: reconnection time browsers use is a few seconds; one second keeps a tool call responsive)
DEFAULT_RETRY_MS = 1000


@dataclass(frozen=True)
class Resume:
    """Send ``GET`` with ``Last-Event-ID: last_event_id`` after ``delay_ms``."""

    last_event_id: str
    delay_ms: int


@dataclass(frozen=True)
class GiveUp:
    """Fail the call now; ``reason`` completes "SSE stream ended without a response (...)"."""

    reason: str


class StreamResume:
    """One call's resumption budget: how many GETs it has sent and when it must be done."""

    def __init__(self, deadline: Deadline, *, max_resumes: int = MAX_RESUMES,
                 default_retry_ms: int = DEFAULT_RETRY_MS) -> None:
        self.deadline = deadline
        self.max_resumes = max_resumes
        self.default_retry_ms = default_retry_ms
        self.resumes = 0  # GETs decided so far

    def on_stream_end(self, last_event_id: str | None, retry_ms: int | None) -> Resume | GiveUp:
        """A stream of this call ended without its response: resume it, or give up now."""
        if not last_event_id:
            return GiveUp("it carried no event id to resume from")
        if self.resumes >= self.max_resumes:
            return GiveUp(f"still none after {self.resumes} resumed streams")
        delay = self.default_retry_ms if retry_ms is None else retry_ms
        left = self.deadline.remaining_ms()
        if left is not None and delay >= left:
            return GiveUp(f"the server's retry of {delay} ms does not fit in the "
                          f"{int(left)} ms left before the call's deadline")
        self.resumes += 1
        return Resume(last_event_id, delay)
