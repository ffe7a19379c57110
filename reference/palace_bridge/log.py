"""The bridge's own stderr: a few plain lines a person can act on, debug detail only on request.

``MEMPALACE_EXT_DEBUG=1`` turns on debug lines (and forwarding of the child's stderr). A secret
(the remote token) given to :class:`Log` is replaced in everything it writes; a stream forwarded
in chunks goes through a :class:`SplitSecretGuard` first, so a secret cut in two by a chunk
boundary is still whole when it is redacted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from .errors import REDACTED, redact_text

__all__ = ["REDACTED", "Log", "Sink", "SplitSecretGuard"]

#: where lines go: a text stream, or a callable taking one line (a host's ``stderr(line)``)
Sink = TextIO | Callable[[str], None]


class SplitSecretGuard:
    """Holds back the end of a chunk while it could be the start of a secret, and lets it go
    with the next chunk (or at :meth:`flush`), so redaction always sees secrets whole."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = tuple(s for s in secrets if s)
        self._held = ""

    def feed(self, text: str) -> str:
        """What of ``self._held + text`` can go now: redacted first, so no cut splits a secret."""
        text = redact_text(self._held + text, self.secrets)
        keep = self._secret_prefix_at_end(text)
        self._held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep]

    def flush(self) -> str:
        """The stream ended: whatever is held can no longer become a secret."""
        held, self._held = self._held, ""
        return held

    def _secret_prefix_at_end(self, text: str) -> int:
        """The length of the longest end of ``text`` that a secret starts with (shorter than it)."""
        longest = 0
        for secret in self.secrets:
            for size in range(min(len(secret) - 1, len(text)), longest, -1):
                if secret.startswith(text[len(text) - size:]):
                    longest = size
                    break
        return longest


class Log:
    def __init__(self, stream: Sink | None = None, *, debug: bool = False,
                 secrets: tuple[str, ...] = ()) -> None:
        self._stream = stream
        self.debug_enabled = debug
        self.secrets = tuple(s for s in secrets if s)
        self.lines: list[str] = []  # what was written, for introspection

    @property
    def stream(self) -> Sink:
        return self._stream if self._stream is not None else sys.stderr

    def redact(self, text: str) -> str:
        return redact_text(text, self.secrets)

    def line(self, text: str) -> None:
        """One line, always shown (fail-soft notices, warnings)."""
        self._write(self.redact(" ".join(text.split())) + "\n")

    def debug(self, text: str) -> None:
        if self.debug_enabled:
            self.line(f"mempalace[debug]: {text}")

    def raw(self, text: str) -> None:
        """Forwarded child stderr: written as is, secrets redacted (debug mode only). A stream
        read in chunks passes each through a :class:`SplitSecretGuard` on the way here."""
        if self.debug_enabled and text:
            self._write(self.redact(text))

    def _write(self, text: str) -> None:
        self.lines.append(text)
        if len(self.lines) > 1000:
            del self.lines[:500]
        sink = self.stream
        try:
            if callable(sink):  # a line sink (a host's notify, a test's list.append)
                for line in text.splitlines():
                    sink(line)
            else:
                sink.write(text)
                sink.flush()
        except (OSError, ValueError):
            pass
