"""The bridge's own stderr: a few plain lines a person can act on, debug detail only on request.

``MEMPALACE_EXT_DEBUG=1`` turns on debug lines (and forwarding of the child's stderr). A secret
(the remote token) given to :class:`Log` is replaced in everything it writes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

#: where lines go: a text stream, or a callable taking one line (a host's ``stderr(line)``)
Sink = TextIO | Callable[[str], None]

REDACTED = "<redacted>"


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
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def line(self, text: str) -> None:
        """One line, always shown (fail-soft notices, warnings)."""
        self._write(self.redact(" ".join(text.split())) + "\n")

    def debug(self, text: str) -> None:
        if self.debug_enabled:
            self.line(f"mempalace[debug]: {text}")

    def raw(self, text: str) -> None:
        """Forwarded child stderr: written as is (debug mode only)."""
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
