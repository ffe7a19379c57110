"""A server-sent-events decoder without I/O (HTML living standard, "event stream interpretation").

Comments (``: ping``) and fields we do not use are skipped; an event is dispatched on a blank line;
an event left unterminated when the stream ends is dropped, as the standard says.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    data: str
    event: str = "message"
    id: str | None = None
    retry_ms: int | None = None


class SSEDecoder:
    def __init__(self) -> None:
        self._buffer = ""
        self._pending_cr = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._bom_checked = False
        self._decoder_tail = b""
        self._scanned = 0  # a prefix of the buffer known to hold no line end

    def feed(self, chunk: bytes) -> list[Event]:
        data = self._decoder_tail + chunk
        try:
            text = data.decode("utf-8")
            self._decoder_tail = b""
        except UnicodeDecodeError as exc:
            if exc.start >= len(data) - 3:  # a multi-byte character split across chunks
                text = data[: exc.start].decode("utf-8")
                self._decoder_tail = data[exc.start:]
            else:
                text = data.decode("utf-8", errors="replace")
                self._decoder_tail = b""
        if not self._bom_checked and text:
            text = text.removeprefix("\ufeff")
            self._bom_checked = True
        return self._feed_text(text)

    def _feed_text(self, text: str) -> list[Event]:
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = False
        self._buffer += text
        events: list[Event] = []
        while True:
            cut = _line_end(self._buffer, self._scanned)
            if cut is None:
                self._scanned = len(self._buffer)
                break
            self._scanned = 0
            end, width = cut
            if width == 1 and self._buffer[end] == "\r" and end + 1 == len(self._buffer):
                # a lone CR at the end may be the first half of CRLF
                self._pending_cr = True
            line = self._buffer[:end]
            self._buffer = self._buffer[end + width:]
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> Event | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> Event | None:
        if not self._data:
            self._event = ""
            return None
        event = Event("\n".join(self._data), self._event or "message", self._id, self._retry)
        self._data = []
        self._event = ""
        return event


def _line_end(buffer: str, start: int) -> tuple[int, int] | None:
    """Index and width of the first CRLF, LF or CR at or after ``start``."""
    lf = buffer.find("\n", start)
    cr = buffer.find("\r", start, lf if lf >= 0 else len(buffer))
    if cr >= 0:
        return (cr, 2) if buffer.startswith("\r\n", cr) else (cr, 1)
    if lf >= 0:
        return lf, 1
    return None
