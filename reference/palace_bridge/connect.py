"""Bounded connect retries for the remote palace (HTTP-02): unreachable, DNS, 401, a bad start.

After the last retry the client gives up for good, prints the one seed line and runs without palace
tools; it never falls back to a local child (fail-closed, LIFE-02).
"""

from __future__ import annotations

from .backoff import exponential_delay_ms

UNAVAILABLE_LINE = "mempalace-mcp unavailable after retries; continuing without palace tools"


class ConnectRetries:
    """``retries`` more tries after the first, ``backoff_ms`` doubled between them."""

    def __init__(self, retries: int, backoff_ms: int) -> None:
        if retries < 0 or backoff_ms < 0:
            raise ValueError("retries and backoff_ms must be >= 0")
        self.retries = retries
        self.backoff_ms = backoff_ms
        self.failures = 0
        self.last_failure = ""

    def on_failure(self, why: str) -> int | None:
        """Record a failed try; the delay before the next one, or ``None`` when spent."""
        self.failures += 1
        self.last_failure = why
        if self.failures > self.retries:
            return None
        return exponential_delay_ms(self.backoff_ms, self.failures)

    @property
    def attempts(self) -> int:
        return self.failures
